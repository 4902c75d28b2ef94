//! Metrics for the live operator: this cluster's Prometheus from the command
//! line, each peer's from its `ClusterPeer` (`spec.prometheus`, with the
//! bearer token and CA read from Secrets), and a peer without one read from
//! the shared Prometheus by its cluster label.
//!
//! A peer's Secrets are read only after `peers::check_prometheus` passed:
//! never outside the operator's namespace, never a token bound for plain
//! http without the peer's explicit switches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::crd::SecretKeyRef;
use crate::metrics::{
    ClusterMetrics, Error, MetricsSource, PrometheusConfig, PrometheusEndpoint, PrometheusSource,
    Result, WorkloadMap,
};
use crate::peers::{PeerSet, check_prometheus, token_over_plain_http};

type EndpointKey = (
    String,
    String,
    Option<String>,
    Option<Vec<u8>>,
    Option<String>,
    bool,
);

pub struct ClusterPrometheus {
    client: kube::Client,
    /// The operator's namespace: the only one a peer's Secrets are read from.
    namespace: String,
    own_name: String,
    own: PrometheusEndpoint,
    peers: PeerSet,
    config: PrometheusConfig,
    sources: Mutex<HashMap<EndpointKey, Arc<PrometheusSource>>>,
}

impl ClusterPrometheus {
    /// `namespace` is the operator's: a peer's token and CA Secrets are
    /// read only from there.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        own_name: impl Into<String>,
        own: PrometheusEndpoint,
        peers: PeerSet,
        config: PrometheusConfig,
    ) -> Self {
        ClusterPrometheus {
            client,
            namespace: namespace.into(),
            own_name: own_name.into(),
            own,
            peers,
            config,
            sources: Mutex::new(HashMap::new()),
        }
    }

    async fn endpoint(&self, cluster: &str) -> Result<PrometheusEndpoint> {
        if cluster == self.own_name {
            return Ok(self.own.clone());
        }
        let peer = self
            .peers
            .get(cluster)
            .ok_or_else(|| Error::UnknownCluster(cluster.to_owned()))?;
        let Some(spec) = &peer.spec.prometheus else {
            // No Prometheus of its own: the shared one, by cluster label.
            return Ok(self.own.clone());
        };
        let invalid = |reason: String| Error::InvalidEndpoint {
            url: spec.url.clone(),
            reason,
        };
        // Before any Secret is read.
        check_prometheus(&peer.spec, &self.namespace).map_err(|r| invalid(r.to_string()))?;
        let bearer_token = match &spec.bearer_token_secret_ref {
            Some(key) => Some(
                String::from_utf8(self.secret(key).await.map_err(invalid)?).map_err(|_| {
                    invalid(format!(
                        "the token in Secret {}/{} is not text",
                        key.namespace, key.name
                    ))
                })?,
            ),
            None => None,
        };
        let ca_pem = match &spec.ca_secret_ref {
            Some(key) => Some(self.secret(key).await.map_err(invalid)?),
            None => None,
        };
        Ok(PrometheusEndpoint {
            url: spec.url.clone(),
            bearer_token,
            ca_pem,
            cluster_label: spec.cluster_label.clone(),
            allow_token_over_plain_http: token_over_plain_http(&peer.spec),
        })
    }

    async fn secret(&self, key: &SecretKeyRef) -> std::result::Result<Vec<u8>, String> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &key.namespace);
        let secret = secrets
            .get(&key.name)
            .await
            .map_err(|err| format!("reading Secret {}/{}: {err}", key.namespace, key.name))?;
        secret
            .data
            .and_then(|mut data| data.remove(&key.key))
            .map(|bytes| bytes.0)
            .ok_or_else(|| {
                format!(
                    "Secret {}/{} has no key {}",
                    key.namespace, key.name, key.key
                )
            })
    }

    async fn source(&self, cluster: &str) -> Result<Arc<PrometheusSource>> {
        let endpoint = self.endpoint(cluster).await?;
        let key = (
            cluster.to_owned(),
            endpoint.url.clone(),
            endpoint.bearer_token.clone(),
            endpoint.ca_pem.clone(),
            endpoint.cluster_label.clone(),
            endpoint.allow_token_over_plain_http,
        );
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(source) = sources.get(&key) {
            return Ok(source.clone());
        }
        let source = Arc::new(PrometheusSource::new(
            self.config.clone(),
            [(cluster.to_owned(), endpoint)],
        )?);
        sources.insert(key, source.clone());
        Ok(source)
    }
}

impl MetricsSource for ClusterPrometheus {
    fn cluster<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ClusterMetrics>> {
        Box::pin(async move { self.source(cluster).await?.cluster(cluster, at).await })
    }

    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>> {
        Box::pin(async move { self.source(cluster).await?.workloads(cluster, at).await })
    }

    fn instant_values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> BoxFuture<'a, Result<Vec<f64>>> {
        Box::pin(async move {
            self.source(cluster)
                .await?
                .instant_values(cluster, query)
                .await
        })
    }
}
