//! `ferry peer rotate`: new keys for this cluster and a new token for each
//! peer holding a grant here, delivered to the peers' clusters directly or
//! as grant files. Everything is checked before the keys rotate, so a
//! missing kubeconfig or output directory changes nothing.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use ferry::peers::join::{self, AcceptOptions, GrantRequest};

use super::peer::RotateArgs;
use super::peer_admin::{admin, print_changes, write_grant};

pub async fn run(args: RotateArgs) -> anyhow::Result<ExitCode> {
    let install = args.common.install()?;
    let dry_run = args.common.dry_run;
    join::check_peer_name("--cluster-name", &args.cluster_name)?;
    let path = args
        .kube
        .kubeconfig
        .clone()
        .context("--kubeconfig is required: the admin kubeconfig of the cluster to rotate")?;
    let home = admin(&path, args.kube.context.as_deref()).await?;
    join::check_installed(&home.client, &install, &args.cluster_name).await?;
    let peers = join::inbox_peers(&home.client, &args.cluster_name).await?;
    let kubeconfigs: BTreeMap<String, std::path::PathBuf> =
        args.peer_kubeconfigs.iter().cloned().collect();
    for name in kubeconfigs.keys() {
        anyhow::ensure!(
            peers.contains(name),
            "--peer-kubeconfig {name}: {name} holds no grant in {} (its peers: {peers:?})",
            args.cluster_name
        );
    }
    let unreachable: Vec<&String> = peers
        .iter()
        .filter(|p| !kubeconfigs.contains_key(*p))
        .collect();
    if !unreachable.is_empty() && args.out_dir.is_none() {
        anyhow::bail!(
            "no --peer-kubeconfig for {unreachable:?}: pass one per peer, or --out-dir to write \
             grant files for their operators to accept"
        );
    }
    // Reach every peer before rotating, so a wrong kubeconfig changes nothing.
    let mut clients = BTreeMap::new();
    for (name, path) in &kubeconfigs {
        clients.insert(name.clone(), admin(path, None).await?.client);
    }

    let mut changes =
        vec![join::rotate_keys(&home.client, &install, &args.cluster_name, dry_run).await?];
    for peer in &peers {
        let request = GrantRequest {
            cluster: args.cluster_name.clone(),
            peer: peer.clone(),
            server: args.server.clone().unwrap_or_else(|| home.server.clone()),
            certificate_authority_data: home.ca_data.clone(),
            token_ttl: args.common.token_ttl,
            region: None,
            labels: BTreeMap::new(),
            prometheus: None,
        };
        let (grant, granted) = join::grant(&home.client, &install, &request, dry_run).await?;
        changes.extend(granted);
        match (clients.get(peer), &args.out_dir) {
            (Some(client), _) => {
                let options = AcceptOptions {
                    cluster: peer.clone(),
                    allow_insecure: args.common.allow_insecure,
                    ..AcceptOptions::default()
                };
                changes.extend(join::accept(client, &install, &grant, &options, dry_run).await?);
            }
            (None, Some(dir)) if !dry_run => {
                let file = dir.join(format!("{}-for-{peer}.grant.yaml", args.cluster_name));
                write_grant(&file, &grant, args.common.output.output)?;
            }
            (None, _) => {}
        }
    }
    print_changes(&changes, &args.common)?;
    Ok(ExitCode::SUCCESS)
}
