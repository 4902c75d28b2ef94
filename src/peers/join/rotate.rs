//! The cluster side of `ferry peer rotate`: new keys for this cluster (the
//! previous ones kept, so signatures made before the rotation still
//! verify), and the list of peers that hold a grant here, whose tokens and
//! key lists the command then refreshes with [`super::grant`].
//!
//! It must never drop the previous keys (moves in flight are signed with
//! them) and never revoke a token: old tokens stay valid until they expire.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, Client};

use super::error::{JoinError, Result};
use super::names::{Install, LABEL_INBOX_OF, check_peer_name};
use super::write::Target;
use super::{Action, Change};
use crate::peers::keys::{KEY_SECRET_NAME, rotate};

/// Rotates the keys of `cluster` (the one `client` reaches). A dry run
/// only checks that the key Secret is there.
pub async fn rotate_keys(
    client: &Client,
    install: &Install,
    cluster: &str,
    dry_run: bool,
) -> Result<Change> {
    let target = Target { cluster, dry_run };
    let keys_error = |source| JoinError::Keys {
        cluster: cluster.to_owned(),
        source: Box::new(source),
    };
    let mut change = target.change(
        "Secret",
        Some(&install.namespace),
        KEY_SECRET_NAME,
        Action::Rotated,
    );
    if dry_run {
        let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
            client.clone(),
            &install.namespace,
        );
        secrets
            .get(KEY_SECRET_NAME)
            .await
            .map_err(target.kube_error(format!("read Secret {KEY_SECRET_NAME}")))?;
        return Ok(change);
    }
    let keys = rotate(client, &install.namespace, KEY_SECRET_NAME)
        .await
        .map_err(keys_error)?;
    change.note = Some(format!(
        "now {}, previous {}",
        keys.key_id(),
        keys.previous_key_id().unwrap_or("none")
    ));
    Ok(change)
}

/// The peers that hold a grant in this cluster: the names on its inbox
/// namespaces, sorted. Namespaces whose label is not a valid peer name are
/// skipped, since join never made them.
pub async fn inbox_peers(client: &Client, cluster: &str) -> Result<Vec<String>> {
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(LABEL_INBOX_OF))
        .await
        .map_err(|source| JoinError::Kube {
            cluster: cluster.to_owned(),
            action: "list the inbox namespaces".to_owned(),
            source,
        })?;
    let mut peers: Vec<String> = namespaces
        .items
        .iter()
        .filter_map(|ns| ns.metadata.labels.as_ref()?.get(LABEL_INBOX_OF).cloned())
        .filter(|peer| check_peer_name("label", peer).is_ok())
        .collect();
    peers.sort();
    peers.dedup();
    Ok(peers)
}
