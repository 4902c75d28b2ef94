//! `ferry policy push|pull|sign|verify`: policy modules in OCI registries,
//! pinned by digest, with cosign-compatible key-based signatures.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use ferry::modules::oci::{
    self, ClientOptions, ComponentInfo, Reference, RegistryClient, signature,
};
use ferry::policy::{Engine, EngineConfig};

use super::exit::{POLICY_FAILED as EXIT_NOT_VERIFIED, USAGE as EXIT_BAD_INPUT, fail};

/// How to reach the registry, shared by the four commands.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Docker config with registry credentials (`auths`); the default is
    /// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json` when present.
    #[arg(long, env = "FERRY_REGISTRY_CONFIG", value_name = "PATH")]
    registry_config: Option<PathBuf>,
    /// PEM CA bundle to trust instead of the system's roots.
    #[arg(long, env = "FERRY_CA_FILE", value_name = "PATH")]
    ca_file: Option<PathBuf>,
    /// Talk plain http to the registry (never the default).
    #[arg(long, env = "FERRY_PLAIN_HTTP")]
    plain_http: bool,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// Where to push: `oci://registry[:port]/repository:tag`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to pull: `oci://registry[:port]/repository:tag` or `…@sha256:…`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    /// Where to write the module.
    #[arg(long, env = "FERRY_OUT", value_name = "FILE")]
    out: PathBuf,
    /// Largest module accepted, for example `64Mi`.
    #[arg(long, env = "FERRY_MAX_SIZE", value_name = "BYTES", value_parser = ferry::units::quantity::whole_bytes, default_value = "256Mi")]
    max_size: u64,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// What to sign, by digest: `oci://registry[:port]/repository@sha256:…`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    /// PEM PKCS#8 ECDSA P-256 private key (`PRIVATE KEY`).
    #[arg(long, env = "FERRY_KEY", value_name = "PATH")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// What to verify: a tag is resolved to its digest first.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    /// PEM ECDSA P-256 public key (`PUBLIC KEY`), as cosign writes `cosign.pub`.
    #[arg(long, env = "FERRY_KEY", value_name = "PATH")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn parse(reference: &str) -> Result<Reference, ExitCode> {
    Reference::parse(reference).map_err(|err| fail(EXIT_BAD_INPUT, &err.to_string()))
}

/// The docker config to read: the flag's, else the usual places.
fn docker_config_path(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = flag {
        return Some(path.to_owned());
    }
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))?;
    Some(dir.join("config.json")).filter(|path| path.is_file())
}

fn client(args: &RegistryArgs, reference: &Reference) -> anyhow::Result<RegistryClient> {
    let credentials = match docker_config_path(args.registry_config.as_deref()) {
        Some(path) => {
            let json = std::fs::read(&path)
                .with_context(|| format!("reading the docker config {}", path.display()))?;
            oci::credentials_for(&json, &reference.registry)
                .with_context(|| format!("reading the docker config {}", path.display()))?
        }
        None => None,
    };
    let ca_pem = match &args.ca_file {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("reading the CA file {}", path.display()))?,
        ),
        None => None,
    };
    let options = ClientOptions {
        ca_pem,
        plain_http: args.plain_http,
        credentials,
        ..ClientOptions::default()
    };
    Ok(RegistryClient::new(&reference.registry, options)?)
}

pub async fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let reference = match parse(&args.reference) {
        Ok(reference) => reference,
        Err(code) => return Ok(code),
    };
    if reference.digest.is_some() || reference.tag.is_none() {
        return Ok(fail(
            EXIT_BAD_INPUT,
            &format!("{reference}: push names a tag (oci://registry/repository:tag), not a digest"),
        ));
    }
    let module = match std::fs::read(&args.module) {
        Ok(bytes) => bytes,
        Err(err) => {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!("cannot read module {}: {err}", args.module.display()),
            ));
        }
    };
    // Registries carry modules too large for a ConfigMap (an embedded
    // interpreter is tens of MiB): check the component whatever its size.
    let config = EngineConfig {
        max_module_bytes: module.len().max(EngineConfig::default().max_module_bytes),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config).context("starting the policy engine")?;
    let info = match engine.inspect(&module) {
        Ok(info) => info,
        Err(err) => {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!("{} is not a policy component: {err}", args.module.display()),
            ));
        }
    };
    let component = ComponentInfo {
        exports: info.exports.clone(),
        imports: info.imports.clone(),
    };
    let client = client(&args.registry, &reference)?;
    let pushed = oci::push_module(&client, &reference, &module, component, &created_time())
        .await
        .with_context(|| format!("pushing {}", args.module.display()))?;
    println!("pushed {reference}");
    println!("digest: {}", pushed.manifest_digest);
    println!(
        "module sha256: {}",
        pushed.layer_digest.trim_start_matches("sha256:")
    );
    println!("reference: oci://{}", pushed.pinned);
    Ok(ExitCode::SUCCESS)
}

/// The config's `created`: `SOURCE_DATE_EPOCH` when set, so that pushing the
/// same module twice gives the same digest; else now.
fn created_time() -> String {
    let now = jiff::Timestamp::now();
    let at = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(now);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub async fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let reference = match parse(&args.reference) {
        Ok(reference) => reference,
        Err(code) => return Ok(code),
    };
    let client = client(&args.registry, &reference)?;
    let pulled = oci::pull_module(&client, &reference, args.max_size)
        .await
        .with_context(|| format!("pulling {reference}"))?;
    let partial = args.out.with_extension("partial");
    std::fs::write(&partial, &pulled.module)
        .and_then(|()| std::fs::rename(&partial, &args.out))
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("pulled {reference} to {}", args.out.display());
    println!("digest: {}", pulled.manifest_digest);
    println!(
        "module sha256: {}",
        pulled.layer_digest.trim_start_matches("sha256:")
    );
    println!("reference: oci://{}", pulled.pinned);
    Ok(ExitCode::SUCCESS)
}

pub async fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let reference = match parse(&args.reference) {
        Ok(reference) => reference,
        Err(code) => return Ok(code),
    };
    if reference.digest.is_none() {
        return Ok(fail(
            EXIT_BAD_INPUT,
            &format!(
                "{reference}: sign names the module by digest (…@sha256:…, as `ferry policy push` prints it), so that what is signed cannot move"
            ),
        ));
    }
    let pem = std::fs::read(&args.key)
        .with_context(|| format!("reading the key {}", args.key.display()))?;
    let key = match signature::SigningKey::from_pem(&pem) {
        Ok(key) => key,
        Err(err) => {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!("{}: {err}", args.key.display()),
            ));
        }
    };
    let client = client(&args.registry, &reference)?;
    let pinned = reference.pinned(reference.manifest_ref());
    let stored = oci::sign(&client, &pinned, &key)
        .await
        .with_context(|| format!("signing {pinned}"))?;
    println!("signed {pinned}");
    println!("signature: oci://{stored}");
    Ok(ExitCode::SUCCESS)
}

pub async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let reference = match parse(&args.reference) {
        Ok(reference) => reference,
        Err(code) => return Ok(code),
    };
    let pem = std::fs::read(&args.key)
        .with_context(|| format!("reading the key {}", args.key.display()))?;
    let key = match signature::PublicKey::from_pem(&pem) {
        Ok(key) => key,
        Err(err) => {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!("{}: {err}", args.key.display()),
            ));
        }
    };
    let client = client(&args.registry, &reference)?;
    let digest = oci::resolve(&client, &reference)
        .await
        .with_context(|| format!("resolving {reference}"))?;
    let pinned = reference.pinned(&digest);
    match oci::verify(&client, &pinned, &key).await {
        Ok(()) => {
            println!("verified {pinned}: signed by {}", args.key.display());
            println!("digest: {digest}");
            Ok(ExitCode::SUCCESS)
        }
        Err(err @ (oci::OciError::Unsigned { .. } | oci::OciError::SignatureInvalid { .. })) => {
            Ok(fail(EXIT_NOT_VERIFIED, &err.to_string()))
        }
        Err(err) => Err(err.into()),
    }
}
