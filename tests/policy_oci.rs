//! `ferry policy push|pull|sign|verify` against a real registry (Debian's
//! `docker-registry`) on a loopback port with TLS, run as a user runs them.

mod support;
use support::modules::module_path;
use support::registry::{Registry, RegistryOptions};

use std::path::Path;
use std::process::{Command, Output};

use bytes::Bytes;
use ferry::modules::oci::artifact::{self, Descriptor};
use ferry::modules::oci::signature::SigningKey;
use ferry::modules::oci::{self, ClientOptions, OciError, Reference, RegistryClient};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .env_remove("FERRY_LOG")
        .env_remove("DOCKER_CONFIG")
        // No user's docker config may leak into a test.
        .env("HOME", "/nonexistent")
        .output()
        .expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The value of the `key: value` line of a command's output.
fn line(out: &Output, key: &str) -> String {
    text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {key:?} line in {}", text(&out.stdout)))
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn push(registry: &Registry, module: &Path, reference: &str) -> Output {
    let ca = registry.ca_file.to_str().unwrap();
    ferry(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        reference,
        "--ca-file",
        ca,
    ])
}

fn client(registry: &Registry) -> RegistryClient {
    RegistryClient::new(
        &registry.host(),
        ClientOptions {
            ca_pem: Some(registry.ca_pem.clone().into_bytes()),
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn push_then_pull_round_trips_the_bytes_by_tag_and_by_digest() {
    let registry = Registry::start(RegistryOptions::default());
    let module = module_path("cheapest_cluster");
    let reference = registry.reference("team/cheapest:v1");
    let pushed = push(&registry, &module, &reference);
    ok(&pushed);
    let digest = line(&pushed, "digest");
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    let bytes = std::fs::read(&module).unwrap();
    assert_eq!(
        line(&pushed, "module sha256"),
        ferry::policy::sha256_hex(&bytes)
    );
    assert_eq!(
        line(&pushed, "reference"),
        format!("{}@{digest}", registry.reference("team/cheapest"))
    );

    let out_dir = tempfile::tempdir().unwrap();
    let ca = registry.ca_file.to_str().unwrap();
    for (source, name) in [
        (reference.clone(), "by-tag.wasm"),
        (line(&pushed, "reference"), "by-digest.wasm"),
    ] {
        let target = out_dir.path().join(name);
        let pulled = ferry(&[
            "policy",
            "pull",
            &source,
            "--out",
            target.to_str().unwrap(),
            "--ca-file",
            ca,
        ]);
        ok(&pulled);
        assert_eq!(line(&pulled, "digest"), digest, "{source}");
        assert_eq!(std::fs::read(&target).unwrap(), bytes, "{source}");
    }

    // The artifact is laid out as wasm OCI tools expect.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let manifest = runtime
        .block_on(client(&registry).manifest("team/cheapest", "v1"))
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&manifest.bytes).unwrap();
    assert_eq!(
        json["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(json["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(json["layers"].as_array().unwrap().len(), 1);
    let config = runtime
        .block_on(client(&registry).blob(
            "team/cheapest",
            json["config"]["digest"].as_str().unwrap(),
            1 << 20,
        ))
        .unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], json["layers"][0]["digest"]);
    assert_eq!(
        config["component"]["exports"],
        serde_json::json!(["decide"])
    );
    assert!(
        config["component"]["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("ferry:policy/types")),
        "{config}"
    );
}

#[test]
fn a_file_that_is_not_a_component_is_not_pushed() {
    let registry = Registry::start(RegistryOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    let out = push(&registry, &junk, &registry.reference("team/junk:v1"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not a policy component"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let err = runtime
        .block_on(client(&registry).manifest("team/junk", "v1"))
        .unwrap_err();
    assert!(matches!(err, OciError::NotFound { .. }), "{err}");
}

#[test]
fn tls_is_checked_and_plain_http_needs_the_switch() {
    let module = module_path("noop");
    let tls = Registry::start(RegistryOptions::default());
    let out = ferry(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        &tls.reference("p:v1"),
    ]);
    assert!(!out.status.success(), "an unknown CA must fail");
    assert!(
        text(&out.stderr).to_lowercase().contains("certificate"),
        "{}",
        text(&out.stderr)
    );

    let plain = Registry::start(RegistryOptions {
        plain_http: true,
        ..RegistryOptions::default()
    });
    let out = ferry(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        &plain.reference("p:v1"),
    ]);
    assert!(
        !out.status.success(),
        "plain http without the switch must fail"
    );
    let out = ferry(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        &plain.reference("p:v1"),
        "--plain-http",
    ]);
    ok(&out);
}

#[test]
fn basic_auth_takes_the_credentials_from_the_docker_config() {
    let registry = Registry::start(RegistryOptions {
        basic_auth: true,
        ..RegistryOptions::default()
    });
    let module = module_path("noop");
    let reference = registry.reference("team/noop:v1");
    let out = push(&registry, &module, &reference);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("none were given"),
        "{}",
        text(&out.stderr)
    );

    let config = registry.write_file("config.json", &registry.docker_config());
    let ca = registry.ca_file.to_str().unwrap();
    let out = ferry(&[
        "policy",
        "push",
        module.to_str().unwrap(),
        &reference,
        "--ca-file",
        ca,
        "--registry-config",
        config.to_str().unwrap(),
    ]);
    ok(&out);
    let wrong = registry.write_file(
        "wrong.json",
        &registry.docker_config().replace(
            &{
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    support::registry::USER,
                    support::registry::PASSWORD
                ))
            },
            "ZmVycnk6d3Jvbmc=",
        ),
    );
    let target = registry.dir.path().join("out.wasm");
    let out = ferry(&[
        "policy",
        "pull",
        &reference,
        "--out",
        target.to_str().unwrap(),
        "--ca-file",
        ca,
        "--registry-config",
        wrong.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("refused the credentials"),
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists(), "nothing is written on failure");
}

#[test]
fn sign_then_verify_and_refuse_the_unsigned_and_the_wrong_key() {
    let registry = Registry::start(RegistryOptions::default());
    let ca = registry.ca_file.to_str().unwrap();
    let (private_pem, key) = SigningKey::generate().unwrap();
    let (_, other) = SigningKey::generate().unwrap();
    let private = registry.write_file("cosign.key", &private_pem);
    let public = registry.write_file("cosign.pub", &key.public_key_pem());
    let other_public = registry.write_file("other.pub", &other.public_key_pem());
    let private = private.to_str().unwrap();
    let public = public.to_str().unwrap();

    let pushed = push(&registry, &module_path("noop"), &registry.reference("p:v1"));
    ok(&pushed);
    let pinned = line(&pushed, "reference");
    let digest = line(&pushed, "digest");

    let verify = |reference: &str, key: &str| {
        ferry(&["policy", "verify", reference, "--key", key, "--ca-file", ca])
    };
    let out = verify(&pinned, public);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("has no signature"),
        "{}",
        text(&out.stderr)
    );

    let out = ferry(&[
        "policy",
        "sign",
        &registry.reference("p:v1"),
        "--key",
        private,
        "--ca-file",
        ca,
    ]);
    assert_eq!(out.status.code(), Some(2), "signing a tag is refused");

    let signed = ferry(&["policy", "sign", &pinned, "--key", private, "--ca-file", ca]);
    ok(&signed);
    assert_eq!(
        line(&signed, "signature"),
        registry.reference(&format!("p:{}.sig", digest.replace(':', "-")))
    );
    for reference in [pinned.clone(), registry.reference("p:v1")] {
        let out = verify(&reference, public);
        ok(&out);
        assert_eq!(line(&out, "digest"), digest);
    }
    let out = verify(&pinned, other_public.to_str().unwrap());
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not signed by the key"),
        "{}",
        text(&out.stderr)
    );

    // The tag moves to another module: its signature does not carry over.
    ok(&push(
        &registry,
        &module_path("cheapest_cluster"),
        &registry.reference("p:v1"),
    ));
    let out = verify(&registry.reference("p:v1"), public);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}

#[tokio::test]
async fn a_signature_of_another_manifest_does_not_verify() {
    let registry = Registry::start(RegistryOptions::default());
    let client = client(&registry);
    let component = oci::ComponentInfo::default();
    let first = Reference::parse(&registry.reference("p:first")).unwrap();
    let second = Reference::parse(&registry.reference("p:second")).unwrap();
    let a = oci::push_module(
        &client,
        &first,
        b"module a",
        component.clone(),
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let b = oci::push_module(
        &client,
        &second,
        b"module b",
        component,
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let (_, key) = SigningKey::generate().unwrap();
    let public = oci::signature::PublicKey::from_pem(key.public_key_pem().as_bytes()).unwrap();
    oci::sign(&client, &a.pinned, &key).await.unwrap();
    // Copy a's valid signature manifest to b's signature tag.
    let signatures = client
        .manifest("p", &oci::signature::signature_tag(&a.manifest_digest))
        .await
        .unwrap();
    client
        .put_manifest(
            "p",
            &oci::signature::signature_tag(&b.manifest_digest),
            artifact::OCI_MANIFEST_MEDIA_TYPE,
            Bytes::from(signatures.bytes),
        )
        .await
        .unwrap();
    oci::verify(&client, &a.pinned, &public).await.unwrap();
    let err = oci::verify(&client, &b.pinned, &public).await.unwrap_err();
    assert!(matches!(err, OciError::SignatureInvalid { .. }), "{err}");
    assert!(err.to_string().contains("is for manifest"), "{err}");
}

#[tokio::test]
async fn the_size_limit_holds_whatever_the_manifest_claims() {
    let registry = Registry::start(RegistryOptions::default());
    let client = client(&registry);
    let big = vec![7u8; 64 << 10];
    let reference = Reference::parse(&registry.reference("p:big")).unwrap();
    oci::push_module(
        &client,
        &reference,
        &big,
        Default::default(),
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let err = oci::pull_module(&client, &reference, 1024)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::TooLarge { .. }), "{err}");

    // A manifest that understates the layer's size is caught by the read.
    let layer = client
        .push_blob("p", Bytes::from(big.clone()))
        .await
        .unwrap();
    let config = client
        .push_blob("p", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let manifest = artifact::wasm_manifest(
        Descriptor::new(artifact::WASM_CONFIG_MEDIA_TYPE, config, 2),
        Descriptor::new(artifact::WASM_LAYER_MEDIA_TYPE, layer, 100),
    );
    client
        .put_manifest(
            "p",
            "liar",
            artifact::OCI_MANIFEST_MEDIA_TYPE,
            Bytes::from(serde_json::to_vec(&manifest).unwrap()),
        )
        .await
        .unwrap();
    let liar = Reference::parse(&registry.reference("p:liar")).unwrap();
    let err = oci::pull_module(&client, &liar, 1024).await.unwrap_err();
    assert!(matches!(err, OciError::TooLarge { .. }), "{err}");
    let pulled = oci::pull_module(&client, &liar, 1 << 20).await.unwrap();
    assert_eq!(pulled.module, big);
}

#[tokio::test]
async fn a_digest_reference_that_does_not_match_is_refused() {
    let registry = Registry::start(RegistryOptions::default());
    let client = client(&registry);
    let reference = Reference::parse(&registry.reference("p:v1")).unwrap();
    let pushed = oci::push_module(
        &client,
        &reference,
        b"m",
        Default::default(),
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let missing = reference.pinned(&format!("sha256:{}", "0".repeat(64)));
    let err = oci::pull_module(&client, &missing, 1 << 20)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::NotFound { .. }), "{err}");
    let pulled = oci::pull_module(&client, &pushed.pinned, 1 << 20)
        .await
        .unwrap();
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);
    assert_eq!(pulled.module, b"m");
}

#[test]
fn the_bearer_token_flow_trades_the_credentials_for_a_scoped_token() {
    let registry = Registry::start(RegistryOptions {
        plain_http: true,
        token_auth: true,
        ..RegistryOptions::default()
    });
    let module = module_path("noop");
    let reference = registry.reference("team/noop:v1");
    let push = |config: Option<&Path>| {
        let mut args = vec![
            "policy",
            "push",
            module.to_str().unwrap(),
            &reference,
            "--plain-http",
        ];
        if let Some(config) = config {
            args.extend(["--registry-config", config.to_str().unwrap()]);
        }
        ferry(&args)
    };
    let out = push(None);
    assert!(!out.status.success(), "an anonymous push is refused");
    assert!(
        text(&out.stderr).contains("getting a token"),
        "{}",
        text(&out.stderr)
    );
    let config = registry.write_file("config.json", &registry.docker_config());
    let out = push(Some(&config));
    ok(&out);
    let issued = registry
        .tokens
        .as_ref()
        .unwrap()
        .issued
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(issued >= 1, "the push used tokens");
    let target = registry.dir.path().join("noop.wasm");
    let out = ferry(&[
        "policy",
        "pull",
        &reference,
        "--out",
        target.to_str().unwrap(),
        "--plain-http",
        "--registry-config",
        config.to_str().unwrap(),
    ]);
    ok(&out);
    assert_eq!(
        std::fs::read(&target).unwrap(),
        std::fs::read(&module).unwrap()
    );
}

#[tokio::test]
async fn a_module_with_an_embedded_interpreter_travels_by_registry_within_the_limit() {
    // A componentize-py module embeds CPython: tens of MiB, far beyond a
    // ConfigMap, streamed here within the limit and checked on the way.
    let registry = Registry::start(RegistryOptions::default());
    let client = client(&registry);
    let python = support::modules::component("python", "cheapest-cluster");
    assert!(python.len() > 8 << 20, "{} bytes", python.len());
    let reference = Reference::parse(&registry.reference("team/cheapest-py:v1")).unwrap();
    let pushed = oci::push_module(
        &client,
        &reference,
        &python,
        Default::default(),
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let limit = python.len() as u64 - 1;
    let err = oci::pull_module(&client, &pushed.pinned, limit)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::TooLarge { .. }), "{err}");
    let pulled = oci::pull_module(&client, &pushed.pinned, python.len() as u64)
        .await
        .unwrap();
    assert_eq!(pulled.module.len(), python.len());
    assert!(pulled.module == python, "the bytes round-trip");
    assert_eq!(
        pulled.layer_digest,
        format!("sha256:{}", ferry::policy::sha256_hex(&python))
    );
}
