//! The receiving half of a join, in cluster X for a sending peer Y: Y's
//! inbox namespace, Y's ServiceAccount in Ferry's namespace, a RoleBinding
//! of the chart's peer ClusterRole in the inbox only, a token for that
//! ServiceAccount, and X's public keys, gathered into a [`Grant`].
//!
//! It must never bind anything but the chart's peer role, never bind it
//! cluster-wide or outside Y's inbox, and never create anything when the
//! chart is missing (it checks first, then writes).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding, RoleRef, Subject};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use super::error::{JoinError, Result};
use super::grant::{GRANT_API_VERSION, GRANT_KIND, Grant};
use super::names::{Install, LABEL_INBOX_OF, check_peer_name, inbox_namespace};
use super::write::{Target, ensure};
use super::{Action, Change};
use crate::peers::keys::{KEY_SECRET_NAME, load_or_create};

/// What cluster X grants its peer Y.
#[derive(Clone, Debug)]
pub struct GrantRequest {
    /// X: the name X's peers give it.
    pub cluster: String,
    /// Y: the name X gives the peer.
    pub peer: String,
    /// X's API server URL as Y must reach it.
    pub server: String,
    /// Base64 of the PEM CA bundle of X's API server; None: system roots.
    pub certificate_authority_data: Option<String>,
    /// The token lifetime asked for; the API server may grant less.
    pub token_ttl: Duration,
    /// X's region, labels and Prometheus URL, for Y's ClusterPeer.
    pub region: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub prometheus: Option<String>,
}

/// Grants `request.peer` access to its inbox in the cluster `client`
/// reaches (the admin's), and returns the grant with every object it
/// touched. A dry run writes nothing and returns a grant without a token.
pub async fn grant(
    client: &Client,
    install: &Install,
    request: &GrantRequest,
    dry_run: bool,
) -> Result<(Grant, Vec<Change>)> {
    check_peer_name("--cluster-name", &request.cluster)?;
    check_peer_name("--peer", &request.peer)?;
    let target = Target {
        cluster: &request.cluster,
        dry_run,
    };
    check_installed(client, install, &request.cluster).await?;
    let peer = request.peer.as_str();
    let mut changes = vec![
        ensure_inbox(client, &target, peer).await?,
        ensure_account(client, install, &target, peer).await?,
        ensure_binding(client, install, &target, peer).await?,
    ];

    // The keys are read (or made once) here; a dry run only reads them.
    let existed = Api::<Secret>::namespaced(client.clone(), &install.namespace)
        .get_opt(KEY_SECRET_NAME)
        .await
        .map_err(target.kube_error(format!("read Secret {KEY_SECRET_NAME}")))?
        .is_some();
    let public_keys = if existed || !dry_run {
        load_or_create(client, &install.namespace, KEY_SECRET_NAME)
            .await
            .map_err(|source| JoinError::Keys {
                cluster: request.cluster.clone(),
                source: Box::new(source),
            })?
            .public_keys()
    } else {
        Vec::new()
    };
    let keys_action = if existed {
        Action::Unchanged
    } else {
        Action::Created
    };
    changes.push(target.change(
        "Secret",
        Some(&install.namespace),
        KEY_SECRET_NAME,
        keys_action,
    ));

    let account = install.peer_account(peer);
    let (token, expires_at) = if dry_run {
        (String::new(), None)
    } else {
        mint_token(client, install, &target, &account, request.token_ttl).await?
    };
    let mut issued = target.change(
        "ServiceAccount",
        Some(&install.namespace),
        &account,
        Action::TokenIssued,
    );
    issued.note = expires_at.as_ref().map(|at| format!("expires {at}"));
    changes.push(issued);

    let grant = Grant {
        api_version: GRANT_API_VERSION.to_owned(),
        kind: GRANT_KIND.to_owned(),
        cluster: request.cluster.clone(),
        peer: peer.to_owned(),
        server: request.server.clone(),
        certificate_authority_data: request.certificate_authority_data.clone(),
        token,
        expires_at,
        public_keys,
        region: request.region.clone(),
        labels: request.labels.clone(),
        prometheus: request.prometheus.clone(),
    };
    Ok((grant, changes))
}

/// Refuses before anything is written when Ferry's chart is not installed
/// in `cluster` (the one `client` reaches): its
/// peer ClusterRole is what the binding grants, and its namespace holds the
/// ServiceAccount and the keys.
pub async fn check_installed(client: &Client, install: &Install, cluster: &str) -> Result<()> {
    let target = &Target {
        cluster,
        dry_run: true,
    };
    let role = install.peer_role();
    let missing = || JoinError::ChartMissing {
        cluster: target.cluster.to_owned(),
        role: role.clone(),
        release: install.release.clone(),
    };
    Api::<ClusterRole>::all(client.clone())
        .get_opt(&role)
        .await
        .map_err(target.kube_error(format!("read ClusterRole {role}")))?
        .ok_or_else(missing)?;
    Api::<Namespace>::all(client.clone())
        .get_opt(&install.namespace)
        .await
        .map_err(target.kube_error(format!("read Namespace {}", install.namespace)))?
        .ok_or_else(|| {
            JoinError::invalid(
                "--ferry-namespace",
                format!(
                    "namespace {} does not exist in cluster {}: pass the namespace Ferry's chart \
                     is installed in",
                    install.namespace, target.cluster
                ),
            )
        })?;
    Ok(())
}

async fn ensure_inbox(client: &Client, target: &Target<'_>, peer: &str) -> Result<Change> {
    let name = inbox_namespace(peer);
    let desired = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels([(LABEL_INBOX_OF, peer)])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let api = Api::<Namespace>::all(client.clone());
    let (action, _) = ensure(
        target,
        &api,
        &name,
        || Ok(desired),
        |existing| {
            let label = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_INBOX_OF));
            match label {
                Some(of) if of == peer => Ok(None),
                // Another peer's inbox under this name would hand Y its requests.
                Some(of) => Err(JoinError::Conflict {
                    cluster: target.cluster.to_owned(),
                    kind: "Namespace",
                    name: name.clone(),
                    reason: format!("it is labelled {LABEL_INBOX_OF}={of}"),
                }),
                None => Ok(Some(
                    serde_json::json!({"metadata": {"labels": {LABEL_INBOX_OF: peer}}}),
                )),
            }
        },
    )
    .await?;
    Ok(target.change("Namespace", None, &name, action))
}

async fn ensure_account(
    client: &Client,
    install: &Install,
    target: &Target<'_>,
    peer: &str,
) -> Result<Change> {
    let name = install.peer_account(peer);
    let desired = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(install.namespace.clone()),
            labels: Some(labels([(super::names::LABEL_PEER, peer)])),
            ..ObjectMeta::default()
        },
        // A peer's token comes from TokenRequest, never from a mounted one.
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    };
    let api = Api::<ServiceAccount>::namespaced(client.clone(), &install.namespace);
    let (action, _) = ensure(target, &api, &name, || Ok(desired), |_| Ok(None)).await?;
    Ok(target.change("ServiceAccount", Some(&install.namespace), &name, action))
}

async fn ensure_binding(
    client: &Client,
    install: &Install,
    target: &Target<'_>,
    peer: &str,
) -> Result<Change> {
    let name = install.peer_account(peer);
    let namespace = inbox_namespace(peer);
    let role_ref = RoleRef {
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        kind: "ClusterRole".to_owned(),
        name: install.peer_role(),
    };
    let subjects = vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: name.clone(),
        namespace: Some(install.namespace.clone()),
        api_group: None,
    }];
    let desired = RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(labels([(super::names::LABEL_PEER, peer)])),
            ..ObjectMeta::default()
        },
        role_ref: role_ref.clone(),
        subjects: Some(subjects.clone()),
    };
    let api = Api::<RoleBinding>::namespaced(client.clone(), &namespace);
    let (action, _) = ensure(
        target,
        &api,
        &name,
        || Ok(desired),
        |existing| {
            // roleRef cannot change; a binding of another role is not ours.
            if existing.role_ref != role_ref {
                return Err(JoinError::Conflict {
                    cluster: target.cluster.to_owned(),
                    kind: "RoleBinding",
                    name: format!("{namespace}/{name}"),
                    reason: format!(
                        "it binds {} {}; delete it and run join again",
                        existing.role_ref.kind, existing.role_ref.name
                    ),
                });
            }
            // Exactly the peer's ServiceAccount: anyone else added here would
            // act as the peer.
            let same = existing.subjects.as_ref().is_some_and(|s| {
                s.len() == 1
                    && s[0].kind == "ServiceAccount"
                    && s[0].name == name
                    && s[0].namespace.as_deref() == Some(install.namespace.as_str())
            });
            Ok((!same).then(|| serde_json::json!({"subjects": subjects})))
        },
    )
    .await?;
    Ok(target.change("RoleBinding", Some(&namespace), &name, action))
}

/// A token of `account`, asking for `ttl`; returns it with the expiry the
/// API server actually granted.
async fn mint_token(
    client: &Client,
    install: &Install,
    target: &Target<'_>,
    account: &str,
    ttl: Duration,
) -> Result<(String, Option<String>)> {
    let seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(seconds),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), &install.namespace)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .map_err(target.kube_error(format!("issue a token for ServiceAccount {account}")))?;
    let status = answer.status.ok_or_else(|| {
        JoinError::invalid(
            "TokenRequest.status",
            format!("cluster {} returned no token", target.cluster),
        )
    })?;
    let token = status.token.filter(|t| !t.is_empty()).ok_or_else(|| {
        JoinError::invalid(
            "TokenRequest.status.token",
            format!("cluster {} returned an empty token", target.cluster),
        )
    })?;
    let expires_at = status.expiration_timestamp.map(|at| at.0.to_string());
    Ok((token, expires_at))
}

fn labels<const N: usize>(extra: [(&str, &str); N]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([("app.kubernetes.io/name".to_owned(), "ferry".to_owned())]);
    labels.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    labels
}
