//! Where a module's bytes come from: a ConfigMap key, a Secret key, an
//! https URL or an OCI registry. The bytes are only fetched here; the engine
//! verifies the digest before compiling anything. An OCI module's Secrets
//! (registry credentials, CA, signature key) are read in the operator's own
//! namespace, never in the policy's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;

use crate::crd::ModuleLocation;
use crate::modules::oci::OciError;

/// How long a module download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{kind} {namespace}/{name} does not exist")]
    NotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} has no key {key:?}{hint}")]
    MissingKey {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
        hint: &'static str,
    },
    #[error("reading {kind} {namespace}/{name}")]
    Api {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("module URL {0} is not https: plain http is refused")]
    NotHttps(String),
    #[error("downloading {url}: {message}")]
    Download { url: String, message: String },
    #[error("the module from {location} is over the {limit}-byte limit")]
    TooLarge { location: String, limit: usize },
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error("Secret {namespace}/{name} is of type {found:?}, not {expected:?}")]
    WrongSecretType {
        namespace: String,
        name: String,
        found: String,
        expected: &'static str,
    },
}

/// Module bytes, and for an OCI module where they were pinned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    /// `registry/repository@sha256:…`: the manifest the bytes came from.
    pub pinned: Option<String>,
    /// The sha256 (hex) the registry's manifest names for the bytes,
    /// already checked while they streamed in.
    pub sha256: Option<String>,
}

impl SourceError {
    /// Whether retrying later may help (the object may appear, the server
    /// may come back), as opposed to a spec that must change.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SourceError::Api { .. } | SourceError::Download { .. } | SourceError::NotFound { .. }
        ) || matches!(self, SourceError::Oci(err) if err.is_transient())
    }

    /// The `ModuleLoaded=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::Oci(err) => err.reason(),
            SourceError::TooLarge { .. } => "TooLarge",
            _ => "FetchFailed",
        }
    }
}

/// Fetches the module bytes from `location`, for a policy in `namespace`,
/// refusing more than `max_bytes`. An OCI module's Secrets are read in
/// `operator_namespace`.
pub async fn fetch(
    client: &kube::Client,
    operator_namespace: &str,
    namespace: &str,
    location: &ModuleLocation,
    max_bytes: usize,
) -> Result<Fetched, SourceError> {
    let bytes = match location {
        ModuleLocation::ConfigMap(key_ref) => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let map = get(&api, "ConfigMap", namespace, &key_ref.name).await?;
            let missing = |hint| SourceError::MissingKey {
                kind: "ConfigMap",
                namespace: namespace.to_owned(),
                name: key_ref.name.clone(),
                key: key_ref.key.clone(),
                hint,
            };
            match map
                .binary_data
                .and_then(|mut data| data.remove(&key_ref.key))
            {
                Some(bytes) => bytes.0,
                None if map.data.is_some_and(|d| d.contains_key(&key_ref.key)) => {
                    return Err(missing(
                        " in binaryData (it is in data, which holds text only)",
                    ));
                }
                None => return Err(missing(" in binaryData")),
            }
        }
        ModuleLocation::Secret(key_ref) => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let secret = get(&api, "Secret", namespace, &key_ref.name).await?;
            match secret.data.and_then(|mut data| data.remove(&key_ref.key)) {
                Some(bytes) => bytes.0,
                None => {
                    return Err(SourceError::MissingKey {
                        kind: "Secret",
                        namespace: namespace.to_owned(),
                        name: key_ref.name.clone(),
                        key: key_ref.key.clone(),
                        hint: "",
                    });
                }
            }
        }
        ModuleLocation::Url(url) => download(url, max_bytes).await?,
        ModuleLocation::Oci(source) => {
            return super::oci::from_spec::fetch(client, operator_namespace, source, max_bytes)
                .await;
        }
    };
    if bytes.len() > max_bytes {
        return Err(SourceError::TooLarge {
            location: location.to_string(),
            limit: max_bytes,
        });
    }
    Ok(Fetched {
        bytes,
        pinned: None,
        sha256: None,
    })
}

pub(crate) async fn get<K>(
    api: &Api<K>,
    kind: &'static str,
    namespace: &str,
    name: &str,
) -> Result<K, SourceError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(SourceError::NotFound {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
        Err(source) => Err(SourceError::Api {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Downloads over https, reading no more than `max_bytes + 1` bytes.
async fn download(url: &str, max_bytes: usize) -> Result<Vec<u8>, SourceError> {
    let failed = |message: String| SourceError::Download {
        url: url.to_owned(),
        message,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| failed(e.to_string()))?;
    if uri.scheme_str() != Some("https") {
        return Err(SourceError::NotHttps(url.to_owned()));
    }
    let client = crate::net::http_client(&uri, None, None, DOWNLOAD_TIMEOUT).map_err(failed)?;
    let mut response = client
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| failed(e.to_string()))?;
    let too_large = || SourceError::TooLarge {
        location: url.to_owned(),
        limit: max_bytes,
    };
    if response
        .content_length()
        .is_some_and(|n| n > max_bytes as u64)
    {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        if bytes.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
