//! Policy modules in OCI registries: push and pull a component as a wasm
//! artifact, always pinned by digest, and cosign-compatible signatures
//! (tag-based discovery, key-based, offline). The client is a small one over
//! the workspace's reqwest, so no second HTTP or TLS stack is built.
//!
//! What is read from a registry is hostile until checked: every manifest
//! and blob is checked against its digest and capped in size while it
//! streams in, and a signature counts only if it verifies with the given
//! key AND names the very manifest digest that was pulled.

mod answer;
pub mod artifact;
pub mod auth;
pub mod client;
mod error;
pub(crate) mod from_spec;
pub mod reference;
pub mod signature;

use std::collections::BTreeMap;

use bytes::Bytes;

pub use artifact::ComponentInfo;
pub use auth::{Credentials, credentials_for};
pub use client::{ClientOptions, RegistryClient, sha256_digest};
pub use error::OciError;
pub use reference::Reference;
use signature::{PublicKey, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, SigningKey};

/// Largest signature payload read: a simple-signing payload is a few hundred bytes.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// Most signatures of one module looked at: a registry cannot make the
/// check download without end.
pub const MAX_SIGNATURES: usize = 32;

/// What a push stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The repository at the manifest's digest.
    pub pinned: Reference,
    pub manifest_digest: String,
    /// The digest of the component bytes (the layer), as `sha256:…`.
    pub layer_digest: String,
}

/// What a pull fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    pub pinned: Reference,
    pub manifest_digest: String,
    pub layer_digest: String,
    pub module: Vec<u8>,
}

/// Pushes `module` as a wasm artifact under the tag of `reference`.
/// `created` (RFC 3339) goes into the config blob.
pub async fn push_module(
    client: &RegistryClient,
    reference: &Reference,
    module: &[u8],
    component: ComponentInfo,
    created: &str,
) -> Result<Pushed, OciError> {
    let Some(tag) = reference
        .tag
        .as_deref()
        .filter(|_| reference.digest.is_none())
    else {
        return Err(OciError::Key(format!(
            "push to {reference}: name a tag to push to, not a digest"
        )));
    };
    let repository = &reference.repository;
    let layer_digest = client
        .push_blob(repository, Bytes::copy_from_slice(module))
        .await?;
    let config = artifact::wasm_config(&layer_digest, created, component);
    let config = Bytes::from(serde_json::to_vec(&config).unwrap_or_default());
    let config_len = config.len();
    let config_digest = client.push_blob(repository, config).await?;
    let manifest = artifact::wasm_manifest(
        artifact::Descriptor::new(artifact::WASM_CONFIG_MEDIA_TYPE, config_digest, config_len),
        artifact::Descriptor::new(
            artifact::WASM_LAYER_MEDIA_TYPE,
            layer_digest.clone(),
            module.len(),
        ),
    );
    let manifest = Bytes::from(serde_json::to_vec(&manifest).unwrap_or_default());
    let manifest_digest = client
        .put_manifest(repository, tag, artifact::OCI_MANIFEST_MEDIA_TYPE, manifest)
        .await?;
    Ok(Pushed {
        pinned: reference.pinned(&manifest_digest),
        manifest_digest,
        layer_digest,
    })
}

/// Resolves `reference` to its manifest digest (a tag is looked up; a
/// digest is checked).
pub async fn resolve(client: &RegistryClient, reference: &Reference) -> Result<String, OciError> {
    let manifest = client
        .manifest(&reference.repository, reference.manifest_ref())
        .await?;
    Ok(manifest.digest)
}

/// Pulls the component `reference` names, refusing more than `max_bytes`
/// before and while it downloads.
pub async fn pull_module(
    client: &RegistryClient,
    reference: &Reference,
    max_bytes: u64,
) -> Result<Pulled, OciError> {
    let manifest = client
        .manifest(&reference.repository, reference.manifest_ref())
        .await?;
    let pinned = reference.pinned(&manifest.digest);
    let (_, layer) =
        artifact::parse_wasm_manifest(&manifest.bytes).map_err(|e| OciError::NotWasmArtifact {
            reference: pinned.to_string(),
            detail: e.0,
        })?;
    if layer.size > max_bytes {
        return Err(OciError::TooLarge {
            what: format!("the module of {pinned} ({} bytes)", layer.size),
            limit: max_bytes,
        });
    }
    let module = client
        .blob(&reference.repository, &layer.digest, max_bytes)
        .await?;
    Ok(Pulled {
        pinned,
        manifest_digest: manifest.digest,
        layer_digest: layer.digest,
        module,
    })
}

/// Signs the manifest `pinned` names (a digest reference) and stores the
/// signature at cosign's `sha256-<hex>.sig` tag, next to any there already.
pub async fn sign(
    client: &RegistryClient,
    pinned: &Reference,
    key: &SigningKey,
) -> Result<Reference, OciError> {
    let digest = pinned
        .digest
        .as_deref()
        .ok_or_else(|| OciError::Key(format!("sign {pinned}: name the manifest by digest")))?;
    // Signing what the registry does not hold would sign nothing.
    client.manifest(&pinned.repository, digest).await?;
    let repository = &pinned.repository;
    let identity = format!("{}/{}", pinned.registry, repository);
    let payload = signature::simple_signing_payload(&identity, digest);
    let signed = key
        .sign(&payload)
        .map_err(|e| OciError::Key(e.to_string()))?;
    let payload_len = payload.len();
    let payload_digest = client.push_blob(repository, Bytes::from(payload)).await?;
    let tag = signature::signature_tag(digest);
    let mut layers = match client.manifest(repository, &tag).await {
        Ok(existing) => serde_json::from_slice::<artifact::Manifest>(&existing.bytes)
            .map(|m| m.layers)
            .unwrap_or_default(),
        Err(OciError::NotFound { .. }) => Vec::new(),
        Err(err) => return Err(err),
    };
    let mut layer =
        artifact::Descriptor::new(SIMPLE_SIGNING_MEDIA_TYPE, payload_digest, payload_len);
    layer.annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), signed)]);
    layers.push(layer);
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let config = serde_json::json!({
        "architecture": "", "os": "", "config": {},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let config = Bytes::from(serde_json::to_vec(&config).unwrap_or_default());
    let config_len = config.len();
    let config_digest = client.push_blob(repository, config).await?;
    let manifest = artifact::Manifest {
        schema_version: 2,
        media_type: Some(artifact::OCI_MANIFEST_MEDIA_TYPE.to_owned()),
        config: artifact::Descriptor::new(
            "application/vnd.oci.image.config.v1+json",
            config_digest,
            config_len,
        ),
        layers,
        annotations: BTreeMap::new(),
    };
    let manifest = Bytes::from(serde_json::to_vec(&manifest).unwrap_or_default());
    client
        .put_manifest(
            repository,
            &tag,
            artifact::OCI_MANIFEST_MEDIA_TYPE,
            manifest,
        )
        .await?;
    Ok(pinned.with_tag(&tag))
}

/// Checks that the manifest `pinned` names (a digest reference) carries a
/// signature by `key` over a payload that names that digest.
pub async fn verify(
    client: &RegistryClient,
    pinned: &Reference,
    key: &PublicKey,
) -> Result<(), OciError> {
    let digest = pinned
        .digest
        .as_deref()
        .ok_or_else(|| OciError::Key(format!("verify {pinned}: resolve it to a digest first")))?;
    let tag = signature::signature_tag(digest);
    let manifest = match client.manifest(&pinned.repository, &tag).await {
        Ok(manifest) => manifest,
        Err(OciError::NotFound { .. }) => {
            return Err(OciError::Unsigned {
                reference: pinned.to_string(),
                tag,
            });
        }
        Err(err) => return Err(err),
    };
    let invalid = |detail: String| OciError::SignatureInvalid {
        reference: pinned.to_string(),
        detail,
    };
    let manifest: artifact::Manifest = serde_json::from_slice(&manifest.bytes).map_err(|e| {
        invalid(format!(
            "the signature manifest is not an image manifest ({e})"
        ))
    })?;
    let mut problems = Vec::new();
    for layer in manifest.layers.iter().take(MAX_SIGNATURES) {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let Some(signed) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
            problems.push(format!("layer {} carries no signature", layer.digest));
            continue;
        };
        let payload = client
            .blob(&pinned.repository, &layer.digest, MAX_PAYLOAD_BYTES)
            .await?;
        if !key.verifies(&payload, signed) {
            problems.push(format!("layer {} is not signed by the key", layer.digest));
            continue;
        }
        match signature::check_payload(&payload, digest) {
            Ok(()) => return Ok(()),
            Err(problem) => problems.push(format!("layer {}: {problem}", layer.digest)),
        }
    }
    if problems.is_empty() {
        problems.push(format!("no {SIMPLE_SIGNING_MEDIA_TYPE} layer at tag {tag}"));
    }
    if manifest.layers.len() > MAX_SIGNATURES {
        problems.push(format!(
            "only the first {MAX_SIGNATURES} of {} signatures were looked at",
            manifest.layers.len()
        ));
    }
    Err(invalid(problems.join("; ")))
}
