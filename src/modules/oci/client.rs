//! A small client of the OCI distribution spec over the workspace's
//! reqwest (rustls with ring, as every other outbound connection): manifests
//! and blobs by digest, monolithic blob uploads, and the Basic and Bearer
//! token flows a `401` asks for. Everything read is checked against its
//! digest and capped in size while it streams in.

use std::time::Duration;

use bytes::Bytes;
use http::{StatusCode, header};
use sha2::{Digest as _, Sha256};
use tokio::sync::Mutex;

use super::answer::{
    error_chain, expect_success, location, read_capped, read_capped_as, status_error, with_auth,
};
use super::auth::{Challenge, Credentials, TokenResponse, parse_challenge};
use super::error::OciError;

/// Largest manifest read: far above any artifact's, far below memory.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// The manifest media types asked for; only image manifests are understood.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// How a [`RegistryClient`] reaches its registry.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// PEM CA bundle to trust instead of the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Talk plain http. Never the default: tags resolved over plain http can
    /// be swapped by anyone on the path.
    pub plain_http: bool,
    pub credentials: Option<Credentials>,
    /// Limit of one request, a blob download included.
    pub timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            ca_pem: None,
            plain_http: false,
            credentials: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// A client of one registry.
#[derive(Debug)]
pub struct RegistryClient {
    http: reqwest::Client,
    registry: String,
    base: String,
    plain_http: bool,
    credentials: Option<Credentials>,
    /// The `Authorization` value the last challenge earned.
    authorization: Mutex<Option<String>>,
}

/// What reading a manifest gave: its bytes and their digest.
#[derive(Clone, Debug)]
pub struct FetchedManifest {
    pub digest: String,
    pub bytes: Vec<u8>,
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl RegistryClient {
    /// A client of `registry` (`host[:port]`), https unless `plain_http`.
    pub fn new(registry: &str, options: ClientOptions) -> Result<Self, OciError> {
        let scheme = if options.plain_http { "http" } else { "https" };
        let base = format!("{scheme}://{registry}");
        let fail = |message: String| OciError::Transport {
            action: format!("setting up a client of {registry}"),
            message,
        };
        let uri: http::Uri = base
            .parse()
            .map_err(|e: http::uri::InvalidUri| fail(e.to_string()))?;
        let http = crate::net::http_client(&uri, options.ca_pem.as_deref(), None, options.timeout)
            .map_err(fail)?;
        Ok(RegistryClient {
            http,
            registry: registry.to_owned(),
            base,
            plain_http: options.plain_http,
            credentials: options.credentials,
            authorization: Mutex::new(None),
        })
    }

    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// Sends the request `build` makes, answering one `401` challenge.
    async fn send(
        &self,
        action: &str,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, OciError> {
        let transport = |e: reqwest::Error| OciError::Transport {
            action: action.to_owned(),
            message: error_chain(&e),
        };
        let current = self.authorization.lock().await.clone();
        let response = with_auth(build(&self.http), current.as_deref())
            .send()
            .await
            .map_err(transport)?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge)
            .ok_or_else(|| OciError::Unauthorized {
                action: action.to_owned(),
                status: 401,
                hint: " without a challenge Ferry understands (Basic or Bearer)",
            })?;
        let authorization = self.authorize(action, challenge).await?;
        *self.authorization.lock().await = Some(authorization.clone());
        let response = with_auth(build(&self.http), Some(&authorization))
            .send()
            .await
            .map_err(transport)?;
        if matches!(
            response.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            return Err(OciError::Unauthorized {
                action: action.to_owned(),
                status: response.status().as_u16(),
                hint: self.missing_credentials_hint(),
            });
        }
        Ok(response)
    }

    fn missing_credentials_hint(&self) -> &'static str {
        if self.credentials.is_none() {
            "; no credentials for this registry were given"
        } else {
            ""
        }
    }

    /// The `Authorization` value that answers `challenge`.
    async fn authorize(&self, action: &str, challenge: Challenge) -> Result<String, OciError> {
        match challenge {
            Challenge::Basic => match &self.credentials {
                Some(credentials) => Ok(credentials.basic_header()),
                None => Err(OciError::Unauthorized {
                    action: action.to_owned(),
                    status: 401,
                    hint: "; the registry asks for a user name and password and none were given",
                }),
            },
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => {
                let token_action = format!("{action}: getting a token from {realm}");
                if !realm.starts_with("https://") && !self.plain_http {
                    return Err(OciError::Transport {
                        action: token_action,
                        message: "the token realm is not https".to_owned(),
                    });
                }
                let mut query = Vec::new();
                query.extend(service.map(|s| ("service", s)));
                query.extend(scope.map(|s| ("scope", s)));
                let mut url = reqwest::Url::parse(&realm).map_err(|e| OciError::Transport {
                    action: token_action.clone(),
                    message: e.to_string(),
                })?;
                url.query_pairs_mut().extend_pairs(query);
                let mut request = self.http.get(url);
                if let Some(credentials) = &self.credentials {
                    request = request.header(header::AUTHORIZATION, credentials.basic_header());
                }
                let response = request.send().await.map_err(|e| OciError::Transport {
                    action: token_action.clone(),
                    message: error_chain(&e),
                })?;
                let status = response.status();
                if !status.is_success() {
                    return Err(OciError::Unauthorized {
                        action: token_action,
                        status: status.as_u16(),
                        hint: self.missing_credentials_hint(),
                    });
                }
                let body = read_capped(response, 1 << 20, &token_action).await?;
                let token = serde_json::from_slice::<TokenResponse>(&body)
                    .ok()
                    .and_then(TokenResponse::into_token)
                    .ok_or_else(|| OciError::Transport {
                        action: token_action,
                        message: "the answer holds no token".to_owned(),
                    })?;
                Ok(format!("Bearer {token}"))
            }
        }
    }

    fn url(&self, repository: &str, kind: &str, reference: &str) -> String {
        format!("{}/v2/{repository}/{kind}/{reference}", self.base)
    }

    /// The manifest `reference` (a tag or digest) names, checked against the
    /// digest when it is one.
    pub async fn manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<FetchedManifest, OciError> {
        let what = format!("manifest {}/{repository}:{reference}", self.registry);
        let action = format!("reading {what}");
        let url = self.url(repository, "manifests", reference);
        let response = self
            .send(&action, |http| {
                http.get(&url).header(header::ACCEPT, MANIFEST_ACCEPT)
            })
            .await?;
        let response = expect_success(response, &action, &what).await?;
        let bytes = read_capped_as(response, MAX_MANIFEST_BYTES, &action, &what).await?;
        let digest = sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(OciError::DigestMismatch {
                what,
                expected: reference.to_owned(),
                actual: digest,
            });
        }
        Ok(FetchedManifest { digest, bytes })
    }

    /// The blob `digest`, at most `max_bytes`, checked against its digest as
    /// it streams in.
    pub async fn blob(
        &self,
        repository: &str,
        digest: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, OciError> {
        let what = format!("blob {}/{repository}@{digest}", self.registry);
        let action = format!("downloading {what}");
        let url = self.url(repository, "blobs", digest);
        let mut response = self.send(&action, |http| http.get(&url)).await?;
        if response.status().is_redirection() {
            // Registries hand blobs to a storage service; the credentials
            // stay with the registry.
            let location = location(response.headers()).ok_or_else(|| OciError::Transport {
                action: action.clone(),
                message: "a redirect without a Location".to_owned(),
            })?;
            let location = self.absolute(&location);
            if !location.starts_with("https://") && !self.plain_http {
                return Err(OciError::Transport {
                    action,
                    message: format!("redirected to {location}, which is not https"),
                });
            }
            response = self
                .http
                .get(&location)
                .send()
                .await
                .map_err(|e| OciError::Transport {
                    action: action.clone(),
                    message: error_chain(&e),
                })?;
        }
        let response = expect_success(response, &action, &what).await?;
        let bytes = read_capped_as(response, max_bytes, &action, &what).await?;
        let actual = sha256_digest(&bytes);
        if actual != digest {
            return Err(OciError::DigestMismatch {
                what,
                expected: digest.to_owned(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Uploads `bytes` as a blob unless the repository has it; its digest.
    pub async fn push_blob(&self, repository: &str, bytes: Bytes) -> Result<String, OciError> {
        let digest = sha256_digest(&bytes);
        let what = format!("blob {}/{repository}@{digest}", self.registry);
        let head_url = self.url(repository, "blobs", &digest);
        let action = format!("checking for {what}");
        let head = self.send(&action, |http| http.head(&head_url)).await?;
        if head.status().is_success() {
            return Ok(digest);
        }
        let action = format!("uploading {what}");
        let start_url = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let started = self.send(&action, |http| http.post(&start_url)).await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(status_error(started, &action).await);
        }
        let upload = location(started.headers()).ok_or_else(|| OciError::Transport {
            action: action.clone(),
            message: "the upload answer has no Location".to_owned(),
        })?;
        let upload = self.absolute(&upload);
        if !upload.starts_with(&format!("{}/", self.base)) {
            return Err(OciError::Transport {
                action,
                message: format!("the upload location {upload} is on another server"),
            });
        }
        let separator = if upload.contains('?') { '&' } else { '?' };
        let put_url = format!("{upload}{separator}digest={}", digest.replace(':', "%3A"));
        let finished = self
            .send(&action, |http| {
                http.put(&put_url)
                    .header(header::CONTENT_TYPE, "application/octet-stream")
                    .body(bytes.clone())
            })
            .await?;
        if finished.status() != StatusCode::CREATED {
            return Err(status_error(finished, &action).await);
        }
        Ok(digest)
    }

    /// Stores a manifest under `reference` (a tag); its digest.
    pub async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        bytes: Bytes,
    ) -> Result<String, OciError> {
        let action = format!(
            "storing manifest {}/{repository}:{reference}",
            self.registry
        );
        let url = self.url(repository, "manifests", reference);
        let response = self
            .send(&action, |http| {
                http.put(&url)
                    .header(header::CONTENT_TYPE, media_type)
                    .body(bytes.clone())
            })
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(status_error(response, &action).await);
        }
        Ok(sha256_digest(&bytes))
    }

    fn absolute(&self, location: &str) -> String {
        if location.starts_with("https://") || location.starts_with("http://") {
            location.to_owned()
        } else {
            format!("{}/{}", self.base, location.trim_start_matches('/'))
        }
    }
}
