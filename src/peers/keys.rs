//! This cluster's key Secret: created once, shared by every replica, and
//! rotated in place. The keys themselves are `trust`'s.
//!
//! Creation is create-if-absent: when two replicas start at once, the one
//! whose create loses reads the winner's keys, so the cluster never ends up
//! with two key pairs. Rotation writes with the read `resourceVersion` as a
//! precondition, so two rotations never silently overwrite each other.
//!
//! This file must never log, return or put in an error a private key, and
//! never replace a key Secret it cannot read: a broken Secret is an error
//! for a person to look at, since new keys would cut off every peer.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::error::{Error, Result};
use crate::trust::ClusterKeys;

/// The name of the key Secret in Ferry's namespace.
pub const KEY_SECRET_NAME: &str = "ferry-keys";

/// This cluster's keys from the Secret `namespace/name`, which is created
/// with fresh keys when it does not exist yet.
pub async fn load_or_create(client: &Client, namespace: &str, name: &str) -> Result<ClusterKeys> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = api.get_opt(name).await.map_err(|source| Error::Kube {
        action: "read the key Secret",
        source,
    })?;
    if let Some(secret) = existing {
        return decode(&secret, namespace, name);
    }
    let keys = ClusterKeys::generate().map_err(|source| keys_error(namespace, name, source))?;
    let secret = Secret {
        metadata: metadata(namespace, name, None),
        type_: Some("Opaque".to_owned()),
        data: Some(data(&keys)),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(
                namespace,
                name,
                key_id = keys.key_id(),
                "created the key Secret"
            );
            Ok(keys)
        }
        // Another replica created it first: its keys are the cluster's.
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            let secret = api.get(name).await.map_err(|source| Error::Kube {
                action: "read the key Secret another replica created",
                source,
            })?;
            decode(&secret, namespace, name)
        }
        Err(source) => Err(Error::Kube {
            action: "create the key Secret",
            source,
        }),
    }
}

/// Rotates the keys in the Secret `namespace/name`: a new current
/// generation, the old current kept as previous. Fails with
/// [`Error::KeysChanged`] when the Secret changed since it was read (another
/// rotation), rather than rotating twice.
pub async fn rotate(client: &Client, namespace: &str, name: &str) -> Result<ClusterKeys> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get(name).await.map_err(|source| Error::Kube {
        action: "read the key Secret",
        source,
    })?;
    let mut keys = decode(&secret, namespace, name)?;
    let read_version = secret.metadata.resource_version.clone();
    if read_version.is_none() {
        return Err(Error::InvalidKeys {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source: crate::trust::TrustError::Malformed {
                field: "metadata.resourceVersion".to_owned(),
                reason: "is missing".to_owned(),
            },
        });
    }
    keys.rotate()
        .map_err(|source| keys_error(namespace, name, source))?;
    // A merge patch carrying the resourceVersion it read: the API server
    // refuses it with 409 Conflict if the Secret changed in between. Every
    // data key is rewritten, so nothing of the old layout survives.
    let patch = Secret {
        metadata: metadata(namespace, name, read_version),
        data: Some(data(&keys)),
        ..Secret::default()
    };
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(
                namespace,
                name,
                key_id = keys.key_id(),
                previous = keys.previous_key_id(),
                "rotated the cluster keys"
            );
            Ok(keys)
        }
        Err(kube::Error::Api(status)) if status.is_conflict() => Err(Error::KeysChanged {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
        Err(source) => Err(Error::Kube {
            action: "write the rotated key Secret",
            source,
        }),
    }
}

fn decode(secret: &Secret, namespace: &str, name: &str) -> Result<ClusterKeys> {
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect();
    ClusterKeys::from_secret_data(&data).map_err(|source| keys_error(namespace, name, source))
}

fn data(keys: &ClusterKeys) -> BTreeMap<String, ByteString> {
    keys.to_secret_data()
        .into_iter()
        .map(|(key, value)| (key, ByteString(value)))
        .collect()
}

fn metadata(namespace: &str, name: &str, resource_version: Option<String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from([
            ("app.kubernetes.io/name".to_owned(), "ferry".to_owned()),
            ("app.kubernetes.io/component".to_owned(), "keys".to_owned()),
        ])),
        resource_version,
        ..ObjectMeta::default()
    }
}

fn keys_error(namespace: &str, name: &str, source: crate::trust::TrustError) -> Error {
    Error::InvalidKeys {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    }
}
