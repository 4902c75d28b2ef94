//! The layout of a WebAssembly component as an OCI artifact, as the CNCF
//! wasm OCI artifact guidance, `wkg` and `oras` write it: an image manifest
//! whose config has media type `application/vnd.wasm.config.v0+json` and
//! whose one layer, `application/wasm`, is the component. Pure: no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// An OCI image manifest (what Ferry writes and reads; indexes are not
/// understood).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A content descriptor: what a blob is, its digest and size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    pub fn new(media_type: &str, digest: String, size: usize) -> Self {
        Descriptor {
            media_type: media_type.to_owned(),
            digest,
            size: size as u64,
            annotations: BTreeMap::new(),
        }
    }
}

/// The config blob of a component (`application/vnd.wasm.config.v0+json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339.
    pub created: String,
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The digests of the manifest's layers, in order.
    pub layer_digests: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentInfo>,
}

/// The interfaces a component imports and exports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// The config blob for a component whose layer has `layer_digest`.
pub fn wasm_config(layer_digest: &str, created: &str, component: ComponentInfo) -> WasmConfig {
    WasmConfig {
        created: created.to_owned(),
        architecture: "wasm".to_owned(),
        os: "wasip2".to_owned(),
        layer_digests: vec![layer_digest.to_owned()],
        component: Some(component),
    }
}

/// The manifest of a component given its config and layer descriptors.
pub fn wasm_manifest(config: Descriptor, layer: Descriptor) -> Manifest {
    Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST_MEDIA_TYPE.to_owned()),
        config,
        layers: vec![layer],
        annotations: BTreeMap::new(),
    }
}

/// Why a manifest is not one Ferry runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotWasm(pub String);

/// The manifest's component layer: the one `application/wasm` layer.
pub fn parse_wasm_manifest(bytes: &[u8]) -> Result<(Manifest, Descriptor), NotWasm> {
    let manifest: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| NotWasm(format!("the manifest is not an OCI image manifest ({e})")))?;
    if manifest.schema_version != 2 {
        return Err(NotWasm(format!(
            "the manifest has schemaVersion {}, not 2",
            manifest.schema_version
        )));
    }
    let wasm: Vec<&Descriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    match wasm.as_slice() {
        [layer] => {
            let layer = (*layer).clone();
            if !super::reference::is_sha256_digest(&layer.digest) {
                return Err(NotWasm(format!(
                    "the layer digest {:?} is not sha256",
                    layer.digest
                )));
            }
            Ok((manifest, layer))
        }
        [] => Err(NotWasm(format!(
            "no layer has media type {WASM_LAYER_MEDIA_TYPE} (config media type {})",
            manifest.config.media_type
        ))),
        _ => Err(NotWasm(format!(
            "{} layers have media type {WASM_LAYER_MEDIA_TYPE}; Ferry runs one component",
            wasm.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn a_written_manifest_reads_back_with_its_layer() {
        let layer = Descriptor::new(WASM_LAYER_MEDIA_TYPE, digest('a'), 10);
        let config = Descriptor::new(WASM_CONFIG_MEDIA_TYPE, digest('b'), 5);
        let manifest = wasm_manifest(config, layer.clone());
        let bytes = serde_json::to_vec(&manifest).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(json["layers"][0]["mediaType"], "application/wasm");
        assert_eq!(json["mediaType"], OCI_MANIFEST_MEDIA_TYPE);
        assert_eq!(parse_wasm_manifest(&bytes).unwrap(), (manifest, layer));
    }

    #[test]
    fn manifests_without_exactly_one_wasm_layer_are_refused() {
        let config = Descriptor::new("application/vnd.oci.image.config.v1+json", digest('b'), 5);
        let tar = Descriptor::new(
            "application/vnd.oci.image.layer.v1.tar+gzip",
            digest('c'),
            9,
        );
        let mut image = wasm_manifest(config, tar);
        let err = parse_wasm_manifest(&serde_json::to_vec(&image).unwrap()).unwrap_err();
        assert!(
            err.0.contains("no layer has media type application/wasm"),
            "{err:?}"
        );
        let wasm = Descriptor::new(WASM_LAYER_MEDIA_TYPE, digest('a'), 10);
        image.layers = vec![wasm.clone(), wasm];
        let err = parse_wasm_manifest(&serde_json::to_vec(&image).unwrap()).unwrap_err();
        assert!(err.0.contains("2 layers"), "{err:?}");
        assert!(parse_wasm_manifest(b"[]").is_err());
    }
}
