//! The `spec.insecure` switches through the ClusterPeer controller against
//! sandbox API servers: a switch lifts only its own rule, and credential
//! plugins stay refused while the operator does not allow them, whatever
//! the peer says.

mod support;

use std::time::Duration;

use ferry::crd::{ClusterPeer, find_condition, types};
use ferry::peers::{PeerConfig, PeerContext, PeerSet, reasons, run_peer_controller};
use kube::Api;
use support::cluster::world::peer_config;
use support::cluster::*;

/// Waits until peer `name`'s Connected condition has `status` and `reason`,
/// and returns its message.
async fn wait_connected(client: &kube::Client, name: &str, status: &str, reason: &str) -> String {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    eventually(
        &format!("{name} Connected={status} ({reason})"),
        WAIT,
        || {
            let api = api.clone();
            async move {
                let peer = api.get(name).await.ok()?;
                let c = find_condition(&peer.status.as_ref()?.conditions, types::CONNECTED)?;
                (c.status == status && c.reason == reason).then(|| c.message.clone())
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_switch_lifts_only_its_rule_and_plugins_need_the_operator_too() {
    let clusters = start_clusters(&["home", "east"], Duration::from_millis(20)).await;
    let (home, east) = (&clusters[0], &clusters[1]);
    let token_line = format!("    token: {}", east.sandbox.token());
    let exec = east.kubeconfig().replace(
        &token_line,
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true",
    );
    assert_ne!(exec, east.kubeconfig(), "the kubeconfig has a token line");
    // The peer opts in to plugins; this operator does not allow them.
    let mut plugins = peer_spec("plugins", false);
    plugins.insecure.credential_plugins = true;
    add_peer(&home.client, "plugins", &exec, plugins).await;
    // Another switch does not lift the plugin rule.
    let mut wrong_switch = peer_spec("wrong-switch", false);
    wrong_switch.insecure.local_files = true;
    wrong_switch.insecure.skip_tls_verify = true;
    add_peer(&home.client, "wrong-switch", &exec, wrong_switch).await;
    // Plain http with a token: plainHTTP alone does not send the token.
    let plain = east.kubeconfig().replace("https://", "http://");
    let mut plain_only = peer_spec("plain-only", false);
    plain_only.insecure.plain_http = true;
    add_peer(&home.client, "plain-only", &plain, plain_only).await;

    let peers = PeerSet::new();
    let controller = Task::spawn(run_peer_controller(PeerContext {
        client: home.ferry.clone(),
        peers: peers.clone(),
        config: PeerConfig {
            allow_credential_plugins: false,
            ..peer_config()
        },
    }));
    let message = wait_connected(
        &home.client,
        "plugins",
        "False",
        reasons::CREDENTIAL_PLUGINS_DISABLED,
    )
    .await;
    assert!(message.contains("--allow-credential-plugins"), "{message}");
    let message = wait_connected(
        &home.client,
        "wrong-switch",
        "False",
        reasons::INSECURE_KUBECONFIG,
    )
    .await;
    assert!(
        message.contains("spec.insecure.credentialPlugins"),
        "{message}"
    );
    let message = wait_connected(
        &home.client,
        "plain-only",
        "False",
        reasons::INSECURE_KUBECONFIG,
    )
    .await;
    assert!(
        message.contains("spec.insecure.credentialsOverPlainHTTP"),
        "{message}"
    );
    for name in ["plugins", "wrong-switch", "plain-only"] {
        assert!(
            peers.get(name).expect("known").client.is_none(),
            "{name} got a client"
        );
    }
    controller.stop().await;
    for c in clusters {
        c.shutdown().await;
    }
}
