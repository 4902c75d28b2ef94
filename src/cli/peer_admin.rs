//! The local side of the peer commands: an admin kubeconfig read into a
//! client plus the server URL and CA a peer gets, grant files written
//! readable by their owner only, and the list of changes printed.
//!
//! It must never print a token, nor leave a grant file readable by others.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;
use ferry::peers::join::{Action, Change, Grant};
use serde::Serialize;

use super::output::{self, Format};
use super::peer::Common;

/// An admin's cluster: a client, and the server URL and CA its kubeconfig names.
pub(super) struct Admin {
    pub(super) client: kube::Client,
    pub(super) server: String,
    pub(super) ca_data: Option<String>,
}

/// Reads an admin kubeconfig: the client for it, and the server and CA of
/// its chosen context, which peers get unless --server overrides the URL.
pub(super) async fn admin(path: &Path, context: Option<&str>) -> anyhow::Result<Admin> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let context_name = context
        .map(str::to_owned)
        .or_else(|| kubeconfig.current_context.clone())
        .with_context(|| {
            format!(
                "{} names no current context; pass a context",
                path.display()
            )
        })?;
    let cluster_name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .with_context(|| format!("{} has no context {context_name}", path.display()))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .with_context(|| format!("{} has no cluster {cluster_name}", path.display()))?;
    let server = cluster
        .server
        .clone()
        .with_context(|| format!("cluster {cluster_name} in {} has no server", path.display()))?;
    let ca_data = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(data.clone()),
        (None, Some(file)) => {
            let pem = std::fs::read(file).with_context(|| format!("reading the CA file {file}"))?;
            Some(base64::engine::general_purpose::STANDARD.encode(pem))
        }
        (None, None) => None,
    };
    let options = kube::config::KubeConfigOptions {
        context: Some(context_name),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("loading kubeconfig {}", path.display()))?;
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    Ok(Admin {
        client,
        server,
        ca_data,
    })
}

/// Writes a grant file readable by its owner only, and says so (on
/// stderr when stdout carries JSON or YAML).
pub(super) fn write_grant(path: &Path, grant: &Grant, format: Format) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let text = grant.to_file_text()?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing the grant file {}", path.display()))?;
    // An existing file keeps its mode on open: narrow it before the token goes in.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing the grant file {}", path.display()))?;
    let note = format!(
        "wrote {} (mode 0600): it holds a token for {}; give it to {}'s operator privately, \
         run `ferry peer join accept --file ...` there, then delete it",
        path.display(),
        grant.cluster,
        grant.peer
    );
    match format {
        Format::Table => println!("{note}"),
        Format::Json | Format::Yaml => eprintln!("{note}"),
    }
    Ok(())
}

/// The changes, one line each, or as a JSON or YAML list.
pub(super) fn print_changes(changes: &[Change], common: &Common) -> anyhow::Result<()> {
    let printed: Vec<PrintedChange> = changes.iter().map(PrintedChange::from).collect();
    output::print(common.output.output, &printed, || {
        let mut text = String::new();
        for change in changes {
            text.push_str(&format!("{change}\n"));
        }
        if common.dry_run {
            text.push_str("dry run: nothing was written\n");
        }
        text
    })
}

/// A [`Change`] as `-o json|yaml` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrintedChange<'a> {
    cluster: &'a str,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    action: &'static str,
    dry_run: bool,
    note: Option<&'a str>,
}

impl<'a> From<&'a Change> for PrintedChange<'a> {
    fn from(change: &'a Change) -> Self {
        PrintedChange {
            cluster: &change.cluster,
            kind: change.kind,
            namespace: change.namespace.as_deref(),
            name: &change.name,
            action: match change.action {
                Action::Created => "Created",
                Action::Updated => "Updated",
                Action::Unchanged => "Unchanged",
                Action::TokenIssued => "TokenIssued",
                Action::Rotated => "Rotated",
            },
            dry_run: change.dry_run,
            note: change.note.as_deref(),
        }
    }
}
