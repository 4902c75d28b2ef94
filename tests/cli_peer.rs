//! `ferry peer join` and `ferry peer rotate` as processes against sandbox
//! clusters with RBAC on and the chart's RBAC applied (without any `peers`,
//! so every peer object is join's): what join creates on each side, that
//! the credential it mints has exactly the peer role in the peer's inbox,
//! that re-running, the two halves through a file, a missing chart, a dry
//! run and a forged grant behave, and that rotation keeps old signatures
//! verifying.

mod support;
use support::cluster as support_cluster;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferry::crd::ClusterPeer;
use ferry::peers::keys::{KEY_SECRET_NAME, load_or_create};
use ferry::sandbox::{Sandbox, SandboxConfig};
use ferry::trust::{ClusterKeys, context, verify};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, Resource as _};
use support_cluster::{
    FERRY_NAMESPACE, client_for_kubeconfig, ensure_namespace, install_crds, install_rbac,
};

/// One sandbox, its admin client and the admin kubeconfig on disk.
struct Cluster {
    sandbox: Sandbox,
    client: Client,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn name(&self) -> &str {
        self.sandbox.name()
    }
}

/// Sandboxes with Ferry's CRDs and namespace; with `chart`, also the
/// chart's RBAC (its peer ClusterRole), with no peers bound.
async fn start(names: &[&str], chart: bool, dir: &Path) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    for name in names {
        let sandbox = Sandbox::start(SandboxConfig::new(*name))
            .await
            .expect("sandbox starts");
        let client = client_for_kubeconfig(&sandbox.kubeconfig_yaml()).await;
        install_crds(&client).await;
        ensure_namespace(&client, FERRY_NAMESPACE).await;
        if chart {
            install_rbac(&client, &[]).await;
        }
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        sandbox
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        clusters.push(Cluster {
            sandbox,
            client,
            kubeconfig,
        });
    }
    clusters
}

async fn stop(clusters: Vec<Cluster>) {
    for cluster in clusters {
        cluster.sandbox.shutdown().await;
    }
}

/// Runs `ferry peer ARGS -n ferry` to completion.
async fn ferry_peer(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .arg("peer")
            .args(&args)
            .args(["-n", FERRY_NAMESPACE])
            .output()
            .expect("ferry runs")
    })
    .await
    .expect("ferry finishes")
}

fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ferry failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn join_args(from: &Cluster, to: &Cluster) -> Vec<String> {
    let path = |c: &Cluster| c.kubeconfig.display().to_string();
    [
        "join",
        "--from",
        &path(from),
        "--from-name",
        from.name(),
        "--from-region",
        "region-from",
        "--to",
        &path(to),
        "--to-name",
        to.name(),
        "--to-region",
        "region-to",
        "--accept-from",
        "true",
        "--allowed-namespace",
        "apps",
    ]
    .map(String::from)
    .into()
}

async fn cluster_peer(cluster: &Cluster, name: &str) -> ClusterPeer {
    Api::<ClusterPeer>::all(cluster.client.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("ClusterPeer {name} in {}: {e}", cluster.name()))
}

/// The kubeconfig `cluster` reaches `peer` with, as join stored it.
async fn stored_kubeconfig(cluster: &Cluster, peer: &str) -> String {
    let secret = Api::<Secret>::namespaced(cluster.client.clone(), FERRY_NAMESPACE)
        .get(&format!("ferry-peer-{peer}"))
        .await
        .expect("the kubeconfig Secret exists");
    let data = secret.data.expect("data");
    String::from_utf8(data["kubeconfig"].0.clone()).expect("UTF-8")
}

/// The uids of everything join made for `peer` in `cluster` (its inbox,
/// account and binding) and for reaching `peer` (Secret and ClusterPeer).
async fn uids(cluster: &Cluster, peer: &str) -> BTreeMap<&'static str, String> {
    let client = &cluster.client;
    let name = format!("ferry-peer-{peer}");
    let inbox = format!("ferry-inbox-{peer}");
    let uid = |meta: &kube::core::ObjectMeta| meta.uid.clone().expect("uid");
    BTreeMap::from([
        (
            "namespace",
            uid(&Api::<Namespace>::all(client.clone())
                .get(&inbox)
                .await
                .expect("inbox")
                .metadata),
        ),
        (
            "account",
            uid(
                &Api::<ServiceAccount>::namespaced(client.clone(), FERRY_NAMESPACE)
                    .get(&name)
                    .await
                    .expect("account")
                    .metadata,
            ),
        ),
        (
            "binding",
            uid(&Api::<RoleBinding>::namespaced(client.clone(), &inbox)
                .get(&name)
                .await
                .expect("binding")
                .metadata),
        ),
        (
            "secret",
            uid(&Api::<Secret>::namespaced(client.clone(), FERRY_NAMESPACE)
                .get(&name)
                .await
                .expect("secret")
                .metadata),
        ),
        ("peer", uid(cluster_peer(cluster, peer).await.meta())),
    ])
}

/// What a finished join must leave, seen from `cluster` towards `peer`.
async fn assert_peered(cluster: &Cluster, peer: &Cluster) {
    let inbox = format!("ferry-inbox-{}", peer.name());
    let namespace = Api::<Namespace>::all(cluster.client.clone())
        .get(&inbox)
        .await
        .expect("inbox");
    assert_eq!(
        namespace.metadata.labels.unwrap()["ferry.dev/inbox-of"],
        peer.name()
    );
    let binding = Api::<RoleBinding>::namespaced(cluster.client.clone(), &inbox)
        .get(&format!("ferry-peer-{}", peer.name()))
        .await
        .expect("binding");
    assert_eq!(binding.role_ref.name, "ferry-peer");
    let subjects = binding.subjects.expect("subjects");
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].name, format!("ferry-peer-{}", peer.name()));
    assert_eq!(subjects[0].namespace.as_deref(), Some(FERRY_NAMESPACE));

    let stored = cluster_peer(cluster, peer.name()).await;
    let keys = load_or_create(&peer.client, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .expect("keys");
    assert_eq!(
        stored.spec.public_keys,
        keys.public_keys(),
        "{}'s keys in {}",
        peer.name(),
        cluster.name()
    );
    assert_eq!(
        stored.spec.kubeconfig_secret_ref.unwrap().name,
        format!("ferry-peer-{}", peer.name())
    );
    assert!(stored.spec.accept_from);
    assert_eq!(stored.spec.allowed_namespaces, ["apps"]);
}

fn workload_migrations(client: Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ferry.dev", "v1alpha1", "WorkloadMigration"),
        "workloadmigrations",
    );
    Api::namespaced_with(client, namespace, &resource)
}

fn request(name: &str, namespace: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "WorkloadMigration",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "requestId": name, "sourceCluster": "west", "targetCluster": "east",
            "targetNamespace": "apps", "role": "Target", "deadline": "2030-01-01T00:00:00Z",
            "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app"}},
        },
    }))
    .expect("request object")
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403, got {other:?}"),
    }
}

/// The credential join minted for `from` in `to` may create requests in
/// its own inbox and nothing else the peer role does not grant.
async fn assert_peer_role(to: &Cluster, from: &Cluster) {
    let peer = client_for_kubeconfig(&stored_kubeconfig(from, to.name()).await).await;
    let inbox = format!("ferry-inbox-{}", from.name());
    let requests = workload_migrations(peer.clone(), &inbox);
    let created = requests
        .create(&PostParams::default(), &request("req-1", &inbox))
        .await
        .expect("the peer creates a request in its inbox");
    ensure_namespace(&to.client, "apps").await;
    forbidden(
        workload_migrations(peer.clone(), "apps")
            .create(&PostParams::default(), &request("req-2", "apps"))
            .await,
        "a request outside the inbox",
    );
    forbidden(
        requests
            .replace_status("req-1", &PostParams::default(), &created)
            .await,
        "status",
    );
    let secrets = Api::<Secret>::namespaced(peer.clone(), &inbox);
    forbidden(secrets.get("anything").await, "get a Secret");
    let secret: Secret =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "s"}})).unwrap();
    forbidden(
        secrets.create(&PostParams::default(), &secret).await,
        "create a Secret",
    );
    let deployments = Api::<Deployment>::namespaced(peer.clone(), &inbox);
    forbidden(deployments.get("app").await, "get a Deployment");
    let deployment: Deployment =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "d"}})).unwrap();
    forbidden(
        deployments
            .create(&PostParams::default(), &deployment)
            .await,
        "create a Deployment",
    );
    forbidden(
        Api::<Secret>::namespaced(peer.clone(), FERRY_NAMESPACE)
            .get(KEY_SECRET_NAME)
            .await,
        "the key Secret",
    );
    forbidden(
        Api::<ClusterPeer>::all(peer)
            .list(&Default::default())
            .await,
        "ClusterPeers",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_peers_both_ways_with_exactly_the_peer_role_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = start(&["east", "west"], true, dir.path()).await;
    let (east, west) = (&clusters[0], &clusters[1]);

    let out = succeeded(&ferry_peer(join_args(west, east)).await);
    for line in [
        "east: Namespace ferry-inbox-west created",
        "east: ServiceAccount ferry/ferry-peer-west created",
        "east: RoleBinding ferry-inbox-west/ferry-peer-west created",
        "west: Secret ferry/ferry-peer-east created",
        "west: ClusterPeer east created",
        "west: Namespace ferry-inbox-east created",
        "east: ClusterPeer west created",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert!(out.contains("token issued (expires "), "{out}");
    assert_peered(west, east).await;
    assert_peered(east, west).await;
    assert_eq!(cluster_peer(west, "east").await.spec.region, "region-to");
    assert_eq!(cluster_peer(east, "west").await.spec.region, "region-from");
    assert_peer_role(east, west).await;
    assert_peer_role(west, east).await;

    // A user's own settings survive a re-run, which only refreshes tokens.
    let user = serde_json::json!({"spec": {"probeInterval": "5s", "labels": {"team": "platform"}}});
    Api::<ClusterPeer>::all(west.client.clone())
        .patch("east", &PatchParams::default(), &Patch::Merge(&user))
        .await
        .expect("user edit");
    let before = (uids(east, "west").await, uids(west, "east").await);
    let token_before = stored_kubeconfig(west, "east").await;
    let mut again = join_args(west, east);
    again.truncate(again.len() - 4); // no --accept-from, no --allowed-namespace
    again.extend(["-o".to_owned(), "json".to_owned()]);
    let out = succeeded(&ferry_peer(again).await);
    let changes: Vec<serde_json::Value> = serde_json::from_str(&out).expect("a JSON list");
    assert!(
        changes.contains(&serde_json::json!({
            "cluster": "east", "kind": "Namespace", "namespace": null,
            "name": "ferry-inbox-west", "action": "Unchanged", "dryRun": false, "note": null
        })),
        "{out}"
    );
    assert!(changes.iter().all(|c| c["action"] != "Created"), "{out}");
    assert_eq!((uids(east, "west").await, uids(west, "east").await), before);
    assert_ne!(
        stored_kubeconfig(west, "east").await,
        token_before,
        "a new token"
    );
    let stored = cluster_peer(west, "east").await;
    assert_eq!(stored.spec.probe_interval.as_str(), "5s");
    assert_eq!(stored.spec.labels["team"], "platform");
    assert!(stored.spec.accept_from, "acceptFrom kept");
    assert_eq!(stored.spec.allowed_namespaces, ["apps"]);
    // The old token still works until it expires.
    let old = client_for_kubeconfig(&token_before).await;
    workload_migrations(old, "ferry-inbox-west")
        .get("req-1")
        .await
        .expect("the previous token still works");
    stop(clusters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_halves_through_a_0600_file_give_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = start(&["east", "west"], true, dir.path()).await;
    let (east, west) = (&clusters[0], &clusters[1]);

    // A dry run says what it would do and writes nothing.
    let mut dry = join_args(west, east);
    dry.push("--dry-run".into());
    let out = succeeded(&ferry_peer(dry).await);
    assert!(
        out.contains("east: Namespace ferry-inbox-west would be created"),
        "{out}"
    );
    assert!(
        out.contains("west: ClusterPeer east would be created"),
        "{out}"
    );
    assert!(
        Api::<Namespace>::all(east.client.clone())
            .get_opt("ferry-inbox-west")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterPeer>::all(west.client.clone())
            .get_opt("east")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Secret>::namespaced(east.client.clone(), FERRY_NAMESPACE)
            .get_opt(KEY_SECRET_NAME)
            .await
            .unwrap()
            .is_none()
    );

    for (granter, accepter) in [(east, west), (west, east)] {
        let file = dir
            .path()
            .join(format!("{}-for-{}.yaml", granter.name(), accepter.name()));
        let out = succeeded(
            &ferry_peer(
                [
                    "join",
                    "grant",
                    "--to",
                    &granter.kubeconfig.display().to_string(),
                    "--to-name",
                    granter.name(),
                    "--from-name",
                    accepter.name(),
                    "--out",
                    &file.display().to_string(),
                ]
                .map(String::from)
                .into(),
            )
            .await,
        );
        assert!(out.contains("mode 0600"), "{out}");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the grant file holds a token");
        let region = if granter.name() == "east" {
            "region-to"
        } else {
            "region-from"
        };
        succeeded(
            &ferry_peer(
                [
                    "join",
                    "accept",
                    "--kubeconfig",
                    &accepter.kubeconfig.display().to_string(),
                    "--cluster-name",
                    accepter.name(),
                    "--file",
                    &file.display().to_string(),
                    "--region",
                    region,
                    "--accept-from",
                    "true",
                    "--allowed-namespace",
                    "apps",
                ]
                .map(String::from)
                .into(),
            )
            .await,
        );
    }
    assert_peered(west, east).await;
    assert_peered(east, west).await;
    assert_peer_role(east, west).await;

    // The one-command join finds everything in place.
    let before = (uids(east, "west").await, uids(west, "east").await);
    let out = succeeded(&ferry_peer(join_args(west, east)).await);
    assert!(!out.contains("created"), "{out}");
    assert_eq!((uids(east, "west").await, uids(west, "east").await), before);

    // A grant for the wrong cluster, or one carrying unrelated keys (a
    // forged or swapped file), is refused and changes nothing.
    let file = dir.path().join("east-for-west.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let accept = |path: &Path, cluster: &str| -> Vec<String> {
        [
            "join",
            "accept",
            "--kubeconfig",
            &west.kubeconfig.display().to_string(),
            "--cluster-name",
            cluster,
            "--file",
            &path.display().to_string(),
        ]
        .map(String::from)
        .into()
    };
    let out = ferry_peer(accept(&file, "elsewhere")).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is for cluster \"west\""),
        "{out:?}"
    );
    let mut grant: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    grant["publicKeys"] =
        serde_json::to_value(ClusterKeys::generate().unwrap().public_keys()).unwrap();
    let forged = dir.path().join("forged.yaml");
    std::fs::write(&forged, serde_json::to_string(&grant).unwrap()).unwrap();
    let trusted = cluster_peer(west, "east").await;
    let out = ferry_peer(accept(&forged, "west")).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--replace-keys"), "{stderr}");
    assert_eq!(cluster_peer(west, "east").await.spec, trusted.spec);
    stop(clusters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_chart_join_says_what_to_install_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = start(&["east", "west"], false, dir.path()).await;
    let (east, west) = (&clusters[0], &clusters[1]);
    let out = ferry_peer(join_args(west, east)).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("install Ferry's chart in east first"),
        "{stderr}"
    );
    for cluster in [east, west] {
        let client = &cluster.client;
        for inbox in ["ferry-inbox-east", "ferry-inbox-west"] {
            assert!(
                Api::<Namespace>::all(client.clone())
                    .get_opt(inbox)
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        assert!(
            Api::<ClusterPeer>::all(client.clone())
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        let secrets = Api::<Secret>::namespaced(client.clone(), FERRY_NAMESPACE)
            .list(&Default::default())
            .await
            .unwrap();
        assert!(
            secrets.items.is_empty(),
            "{:?}",
            secrets
                .items
                .iter()
                .map(|s| s.metadata.name.clone())
                .collect::<Vec<_>>()
        );
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), FERRY_NAMESPACE)
            .list(&Default::default())
            .await
            .unwrap();
        assert!(
            accounts.items.iter().all(|a| !a
                .metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with("ferry-peer-")),
            "a peer account was created"
        );
    }
    stop(clusters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_keeps_old_signatures_verifying_and_issues_new_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = start(&["east", "west"], true, dir.path()).await;
    let (east, west) = (&clusters[0], &clusters[1]);
    succeeded(&ferry_peer(join_args(west, east)).await);

    // A status east signed before the rotation, still in flight after it.
    let before = load_or_create(&east.client, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .unwrap();
    let content = serde_json::json!({"phase": "Ready", "requestId": "r-1"});
    let signature = before.sign(context::STATUS, &content).unwrap();
    let token_before = stored_kubeconfig(west, "east").await;

    let out = succeeded(
        &ferry_peer(
            [
                "rotate",
                "--kubeconfig",
                &east.kubeconfig.display().to_string(),
                "--cluster-name",
                "east",
                "--peer-kubeconfig",
                &format!("west={}", west.kubeconfig.display()),
            ]
            .map(String::from)
            .into(),
        )
        .await,
    );
    assert!(
        out.contains("east: Secret ferry/ferry-keys rotated"),
        "{out}"
    );
    assert!(out.contains("west: ClusterPeer east updated"), "{out}");

    let after = load_or_create(&east.client, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .unwrap();
    assert_ne!(after.key_id(), before.key_id());
    let trusted = cluster_peer(west, "east").await.spec.public_keys;
    assert_eq!(
        trusted,
        after.public_keys(),
        "west trusts east's new and previous keys"
    );
    assert_eq!(trusted.len(), 2);
    assert_eq!(trusted[1].key_id, before.key_id());
    verify(&trusted, context::STATUS, &content, &signature)
        .expect("a signature from before the rotation verifies");
    let fresh = after.sign(context::STATUS, &content).unwrap();
    verify(&trusted, context::STATUS, &content, &fresh).expect("a new signature verifies");
    assert_ne!(
        stored_kubeconfig(west, "east").await,
        token_before,
        "a new token"
    );

    // Without a peer kubeconfig, rotate writes grant files instead.
    let out_dir = dir.path().join("grants");
    std::fs::create_dir(&out_dir).unwrap();
    succeeded(
        &ferry_peer(
            [
                "rotate",
                "--kubeconfig",
                &east.kubeconfig.display().to_string(),
                "--cluster-name",
                "east",
                "--out-dir",
                &out_dir.display().to_string(),
            ]
            .map(String::from)
            .into(),
        )
        .await,
    );
    let file = out_dir.join("east-for-west.grant.yaml");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    succeeded(
        &ferry_peer(
            [
                "join",
                "accept",
                "--kubeconfig",
                &west.kubeconfig.display().to_string(),
                "--cluster-name",
                "west",
                "--file",
                &file.display().to_string(),
            ]
            .map(String::from)
            .into(),
        )
        .await,
    );
    let third = load_or_create(&east.client, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .unwrap();
    assert_eq!(
        cluster_peer(west, "east").await.spec.public_keys,
        third.public_keys()
    );
    stop(clusters).await;
}
