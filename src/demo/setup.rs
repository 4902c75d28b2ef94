//! Standing the demo's clusters up: sandboxes, CRDs, peers, workloads and
//! the uploaded policy. Everything goes through the clusters' API, as a
//! person with kubectl would do it.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::{ClusterPlan, Error, Narrator, Options, POLICY_MODULE, Result};
use crate::crd::{ClusterPeer, ClusterPeerSpec, SecretKeyRef, ThresholdsSpec, Transport};
use crate::sandbox::{Sandbox, SandboxConfig};

const MANAGER: &str = "ferry-demo";
const OPERATOR_NAMESPACE: &str = super::rbac::NAMESPACE;
pub(crate) const WORKLOAD_NAMESPACE: &str = "shop";

pub(crate) struct Cluster {
    pub name: &'static str,
    pub sandbox: Sandbox,
    /// The admin's: for setting the cluster up and narrating.
    pub client: kube::Client,
    /// The `ferry` ServiceAccount's: for the operator.
    pub operator: kube::Client,
}

fn setup_error(cluster: &str, step: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let (cluster, step) = (cluster.to_owned(), step.into());
    move |source| Error::Setup {
        cluster,
        step,
        source,
    }
}

/// Starts one sandbox per plan, with Ferry's CRDs and the namespaces.
pub(crate) async fn clusters(
    plans: &[ClusterPlan],
    narrator: &mut Narrator,
) -> Result<Vec<Cluster>> {
    let mut clusters = Vec::new();
    for plan in plans {
        let config = SandboxConfig {
            kubelet_delay: Duration::from_millis(600),
            ..SandboxConfig::new(plan.name)
        };
        let sandbox = Sandbox::start(config)
            .await
            .map_err(|source| Error::Sandbox {
                name: plan.name.to_owned(),
                source,
            })?;
        let client = crate::peers::client_from_kubeconfig(
            &sandbox.kubeconfig_yaml(),
            crate::peers::Allowances::default(),
            Duration::from_secs(5),
            Duration::from_secs(30),
        )
        .await
        .map_err(|refusal| Error::Client {
            cluster: plan.name.to_owned(),
            reason: refusal.to_string(),
        })?;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crate::crd::all() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            crds.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(setup_error(plan.name, format!("installing CRD {name}")))?;
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for namespace in [OPERATOR_NAMESPACE, WORKLOAD_NAMESPACE] {
            let object = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            namespaces
                .patch(
                    namespace,
                    &PatchParams::apply(MANAGER),
                    &Patch::Apply(&object),
                )
                .await
                .map_err(setup_error(
                    plan.name,
                    format!("creating namespace {namespace}"),
                ))?;
        }
        let peers: Vec<&str> = plans
            .iter()
            .map(|p| p.name)
            .filter(|name| *name != plan.name)
            .collect();
        super::rbac::install(&client, plan.name, &peers).await?;
        let operator = client_for(plan.name, &super::rbac::operator_kubeconfig(&sandbox)?).await?;
        let (core, gib) = (plan.prices[0].core_hour, plan.prices[0].gib_hour);
        narrator.say(&format!(
            "{:<9} {} at {}  {} cores, {} GiB  {:.3}/core-h {:.4}/GiB-h{}",
            plan.name,
            plan.capacity_type,
            sandbox.url(),
            plan.allocatable.cpu_millis / 1000,
            plan.allocatable.memory_bytes >> 30,
            core,
            gib,
            if plan.prices.len() > 1 {
                "  (its price will spike)"
            } else {
                ""
            }
        ));
        clusters.push(Cluster {
            name: plan.name,
            sandbox,
            client,
            operator,
        });
    }
    Ok(clusters)
}

async fn client_for(cluster: &str, kubeconfig: &str) -> Result<kube::Client> {
    crate::peers::client_from_kubeconfig(
        kubeconfig,
        crate::peers::Allowances::default(),
        Duration::from_secs(5),
        Duration::from_secs(30),
    )
    .await
    .map_err(|refusal| Error::Client {
        cluster: cluster.to_owned(),
        reason: refusal.to_string(),
    })
}

/// Registers every cluster in every other as a `ClusterPeer` that may send
/// it workloads, with its kubeconfig in a Secret.
pub(crate) async fn peer_up(
    clusters: &[Cluster],
    plans: &[ClusterPlan],
    transport: Transport,
) -> Result<()> {
    for home in clusters {
        let secrets: Api<Secret> = Api::namespaced(home.client.clone(), OPERATOR_NAMESPACE);
        let peers: Api<ClusterPeer> = Api::all(home.client.clone());
        for (peer, plan) in clusters
            .iter()
            .zip(plans)
            .filter(|(c, _)| c.name != home.name)
        {
            let secret_name = format!("peer-{}", peer.name);
            let secret = Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some(secret_name.clone()),
                    namespace: Some(OPERATOR_NAMESPACE.to_owned()),
                    ..Default::default()
                },
                data: Some(
                    [(
                        "kubeconfig".to_owned(),
                        ByteString(
                            super::rbac::peer_kubeconfig(&peer.sandbox, home.name)?.into_bytes(),
                        ),
                    )]
                    .into(),
                ),
                ..Default::default()
            };
            secrets
                .patch(
                    &secret_name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&secret),
                )
                .await
                .map_err(setup_error(
                    home.name,
                    format!("storing the kubeconfig of {}", peer.name),
                ))?;
            // The peer's public keys, as `ferry peer join` exchanges them:
            // its requests and statuses are verified against them.
            let keys = crate::peers::keys::load_or_create(
                &peer.client,
                OPERATOR_NAMESPACE,
                crate::peers::keys::KEY_SECRET_NAME,
            )
            .await
            .map_err(|e| Error::Client {
                cluster: peer.name.to_owned(),
                reason: format!("loading its keys: {e}"),
            })?;
            let spec = ClusterPeerSpec {
                public_keys: keys.public_keys(),
                transport,
                // Over NATS a peer needs no kubeconfig of the other.
                kubeconfig_secret_ref: (transport == Transport::Kube).then(|| SecretKeyRef {
                    namespace: OPERATOR_NAMESPACE.to_owned(),
                    name: secret_name,
                    key: "kubeconfig".to_owned(),
                }),
                region: plan.region.to_owned(),
                labels: [(
                    "ferry.dev/capacity-type".to_owned(),
                    plan.capacity_type.to_owned(),
                )]
                .into(),
                prometheus: None,
                accept_from: true,
                allowed_namespaces: vec![WORKLOAD_NAMESPACE.to_owned()],
                insecure: Default::default(),
                probe_interval: crate::crd::Duration::new("2s"),
                admission: Default::default(),
            };
            let object = ClusterPeer::new(peer.name, spec);
            peers
                .patch(
                    peer.name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&object),
                )
                .await
                .map_err(setup_error(
                    home.name,
                    format!("registering peer {}", peer.name),
                ))?;
        }
    }
    Ok(())
}

/// (name, replicas, CPU millicores per pod, memory MiB per pod, pinned)
const WORKLOADS: &[(&str, i32, u32, u32, bool)] = &[
    ("web", 3, 500, 1024, false),
    ("api", 2, 1000, 2048, false),
    ("worker", 4, 750, 1536, false),
    ("search", 2, 2000, 8192, false),
    ("cache", 1, 500, 4096, false),
    ("payments", 2, 1000, 2048, true),
];

/// The seeded spec of a demo workload, by name.
pub(crate) fn workload_spec(name: &str) -> Option<(&'static str, i32, u32, u32, bool)> {
    WORKLOADS.iter().copied().find(|w| w.0 == name)
}

/// Creates the demo's Deployments on `cluster`; returns how many.
pub(crate) async fn seed_workloads(cluster: &Cluster) -> Result<usize> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
    for &(name, replicas, cpu, memory, pinned) in WORKLOADS {
        let annotations = if pinned {
            serde_json::json!({"ferry.dev/pinned": "true"})
        } else {
            serde_json::json!({})
        };
        let object = serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": WORKLOAD_NAMESPACE, "labels": {"app": name, "tier": "shop"}, "annotations": annotations},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    // Restricted, as receivers admit by default.
                    "spec": {
                        "automountServiceAccountToken": false,
                        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": name,
                            "image": format!("registry.example/shop/{name}:1.0"),
                            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}}
                        }]
                    }
                }
            }
        });
        deployments
            .patch(
                name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(setup_error(
                cluster.name,
                format!("creating Deployment {name}"),
            ))?;
    }
    Ok(WORKLOADS.len())
}

/// Uploads the embedded policy to every cluster in Enforce mode, then sets
/// the demo's short interval and cooldown.
pub(crate) async fn upload_policies(
    clusters: &[Cluster],
    options: &Options,
    narrator: &mut Narrator,
) -> Result<()> {
    let thresholds = ThresholdsSpec {
        min_hourly_savings: 0.01,
        min_savings_percent: 15.0,
        cooldown: crate::crd::Duration::from_std(options.cooldown),
        max_migrations_per_cycle: 2,
        max_in_flight: 3,
        migration_cost: 0.02,
        max_payback_hours: 2.0,
        ..ThresholdsSpec::default()
    };
    let parameters = serde_json::json!({"riskPremiums": {"spot": 0.25}});
    for cluster in clusters {
        let request = crate::modules::upload::UploadRequest {
            namespace: WORKLOAD_NAMESPACE.to_owned(),
            name: "cost".to_owned(),
            module: POLICY_MODULE.to_vec(),
            mode: Some(crate::crd::PolicyMode::Enforce),
            thresholds: Some(thresholds.clone()),
            parameters: parameters.as_object().cloned(),
        };
        let report = crate::modules::upload::upload(&cluster.client, request)
            .await
            .map_err(|source| Error::Upload {
                cluster: cluster.name.to_owned(),
                source,
            })?;
        let policies: Api<crate::crd::MigrationPolicy> =
            Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
        let interval = crate::crd::Duration::from_std(options.interval)
            .as_str()
            .to_owned();
        let patch = serde_json::json!({"spec": {"interval": interval}});
        policies
            .patch("cost", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(setup_error(cluster.name, "setting the policy interval"))?;
        narrator.say(&format!(
            "{:<9} MigrationPolicy shop/cost: spot-aware {} in Enforce mode, every {interval}",
            cluster.name,
            &report.sha256[..12]
        ));
    }
    Ok(())
}
