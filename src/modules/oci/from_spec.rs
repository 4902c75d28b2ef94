//! An OCI module as `spec.module.oci` names it: the registry's credentials,
//! CA and the signature key come from Secrets in the operator's namespace;
//! the tag is resolved to a manifest digest, the signature (when required)
//! is checked on that digest BEFORE the module is downloaded, and the module
//! is then pulled by that digest.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::{ClientOptions, OciError, Reference, RegistryClient};
use crate::crd::{LocalKeyRef, OciModuleSource};
use crate::modules::source::{Fetched, SourceError, get};

/// The Secret type of registry credentials, and its key.
const DOCKER_CONFIG_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

pub(crate) async fn fetch(
    client: &kube::Client,
    operator_namespace: &str,
    source: &OciModuleSource,
    max_bytes: usize,
) -> Result<Fetched, SourceError> {
    let reference = Reference::parse(&source.reference).map_err(OciError::from)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), operator_namespace);
    let credentials = match &source.pull_secret_name {
        Some(name) => {
            let config = docker_config(&secrets, operator_namespace, name).await?;
            super::credentials_for(&config, &reference.registry).map_err(OciError::from)?
        }
        None => None,
    };
    let ca_pem = match &source.ca_secret_ref {
        Some(key_ref) => Some(secret_key(&secrets, operator_namespace, key_ref).await?),
        None => None,
    };
    let key = match &source.verify {
        Some(verify) => {
            let pem =
                secret_key(&secrets, operator_namespace, &verify.public_key_secret_ref).await?;
            let key = super::signature::PublicKey::from_pem(&pem).map_err(|err| {
                OciError::Key(format!(
                    "Secret {operator_namespace}/{} key {}: {err}",
                    verify.public_key_secret_ref.name, verify.public_key_secret_ref.key
                ))
            })?;
            Some(key)
        }
        None => None,
    };
    let registry = RegistryClient::new(
        &reference.registry,
        ClientOptions {
            ca_pem,
            credentials,
            ..ClientOptions::default()
        },
    )?;
    let digest = super::resolve(&registry, &reference).await?;
    let pinned = reference.pinned(&digest);
    if let Some(key) = &key {
        super::verify(&registry, &pinned, key).await?;
    }
    let pulled = super::pull_module(&registry, &pinned, max_bytes as u64).await?;
    Ok(Fetched {
        bytes: pulled.module,
        pinned: Some(pulled.pinned.to_string()),
        sha256: Some(pulled.layer_digest.trim_start_matches("sha256:").to_owned()),
    })
}

/// The config.json of a `kubernetes.io/dockerconfigjson` Secret: a Secret
/// of another type (a kubeconfig, a key) is never read as credentials.
async fn docker_config(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
) -> Result<Vec<u8>, SourceError> {
    let secret = get(secrets, "Secret", namespace, name).await?;
    let found = secret.type_.clone().unwrap_or_default();
    if found != DOCKER_CONFIG_TYPE {
        return Err(SourceError::WrongSecretType {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            found,
            expected: DOCKER_CONFIG_TYPE,
        });
    }
    secret
        .data
        .and_then(|mut data| data.remove(DOCKER_CONFIG_KEY))
        .map(|bytes| bytes.0)
        .ok_or_else(|| SourceError::MissingKey {
            kind: "Secret",
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            key: DOCKER_CONFIG_KEY.to_owned(),
            hint: "",
        })
}

async fn secret_key(
    secrets: &Api<Secret>,
    namespace: &str,
    key_ref: &LocalKeyRef,
) -> Result<Vec<u8>, SourceError> {
    let secret = get(secrets, "Secret", namespace, &key_ref.name).await?;
    secret
        .data
        .and_then(|mut data| data.remove(&key_ref.key))
        .map(|bytes| bytes.0)
        .ok_or_else(|| SourceError::MissingKey {
            kind: "Secret",
            namespace: namespace.to_owned(),
            name: key_ref.name.clone(),
            key: key_ref.key.clone(),
            hint: "",
        })
}
