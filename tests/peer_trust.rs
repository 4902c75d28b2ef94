//! Attacks on the migration protocol, each tried as the issue describes it,
//! with the least-privilege peer credential the chart renders. Each test
//! asserts the refusal (RBAC's 403, or the receiver's `Rejected` with a
//! reason, an Event and the refusal counter) and that nothing else changed.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{IntentAction, MigrationPhase, WorkloadMigration};
use ferry::migration::{signed_intent, start_migration, verify_request};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support_cluster::inventory::{assert_unchanged, inventory};
use support_cluster::world::*;

const KUBELET: Duration = Duration::from_millis(30);

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_credential_reaches_only_its_own_requests_in_its_own_inbox() {
    let world = World::start(KUBELET).await;
    support_cluster::ensure_namespace(&world.b.client, "ferry-inbox-c").await;
    let before = inventory(&world.b.client).await;
    let peer = world.peer_a_in_b().await;

    // Another peer's inbox, or any other namespace: no requests.
    for namespace in ["ferry-inbox-c", NS, support_cluster::FERRY_NAMESPACE] {
        let api: Api<WorkloadMigration> = Api::namespaced(peer.clone(), namespace);
        forbidden(
            api.create(&PostParams::default(), &world.signed_request("web", "a"))
                .await,
            &format!("a request in {namespace}"),
        );
        forbidden(
            api.list(&Default::default()).await,
            &format!("listing {namespace}"),
        );
    }
    // Workloads, ConfigMaps, Secrets and namespaces: nothing, even in the inbox.
    for namespace in [NS, INBOX_A] {
        let deployments: Api<Deployment> = Api::namespaced(peer.clone(), namespace);
        forbidden(
            deployments.list(&Default::default()).await,
            "listing Deployments",
        );
        forbidden(
            deployments.delete(WORKLOAD, &DeleteParams::default()).await,
            "deleting a Deployment",
        );
        let secrets: Api<Secret> = Api::namespaced(peer.clone(), namespace);
        forbidden(secrets.list(&Default::default()).await, "listing Secrets");
        let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        forbidden(
            secrets.create(&PostParams::default(), &secret).await,
            "creating a Secret",
        );
        let config_maps: Api<ConfigMap> = Api::namespaced(peer.clone(), namespace);
        forbidden(
            config_maps.list(&Default::default()).await,
            "listing ConfigMaps",
        );
    }
    let namespaces: Api<Namespace> = Api::all(peer.clone());
    forbidden(namespaces.get(NS).await, "reading a namespace");

    // In its own inbox it may create its request, but never write a status.
    let inbox: Api<WorkloadMigration> = Api::namespaced(peer.clone(), INBOX_A);
    inbox
        .create(&PostParams::default(), &world.signed_request("web", "a"))
        .await
        .expect("a request in its own inbox");
    let status = json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "WorkloadMigration",
        "metadata": {"name": "web"}, "status": {"phase": "RolledBack"},
    });
    forbidden(
        inbox
            .patch_status(
                "web",
                &PatchParams::apply("attacker").force(),
                &Patch::Apply(&status),
            )
            .await,
        "patching a status",
    );
    forbidden(
        inbox
            .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
            .await,
        "merge-patching a status",
    );
    let after = inventory(&world.b.client).await;
    assert_unchanged(
        "cluster b",
        &before,
        &after,
        &["WorkloadMigration/ferry-inbox-a/web"],
    );
    let stored = inbox.get("web").await.unwrap();
    assert!(
        stored.status.is_none(),
        "the status was written: {:?}",
        stored.status
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_claiming_to_be_another_peer_is_refused_and_nothing_changes() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    let before_a = inventory(&world.a.client).await;
    let before_b = inventory(&world.b.client).await;
    let peer = world.peer_a_in_b().await;
    let inbox: Api<WorkloadMigration> = Api::namespaced(peer, INBOX_A);
    inbox
        .create(
            &PostParams::default(),
            &world.signed_request("impostor", "c"),
        )
        .await
        .unwrap();
    let wm = wait_phase(&world.targets(), "impostor", MigrationPhase::Rejected).await;
    assert_eq!(wm.status.unwrap().reason.as_deref(), Some("SourceMismatch"));
    wait_event(&world.b.client, INBOX_A, "impostor", "SourceMismatch").await;
    assert_eq!(
        world.receiver_ctx.metrics.refusals("a", "SourceMismatch"),
        1
    );
    assert_unchanged(
        "cluster a",
        &before_a,
        &inventory(&world.a.client).await,
        &[],
    );
    assert_unchanged(
        "cluster b",
        &before_b,
        &inventory(&world.b.client).await,
        &["WorkloadMigration/ferry-inbox-a/impostor"],
    );
    world.shutdown().await;
}

/// Creates `kind` `apps/web` in `b` as a local user would, before any move.
async fn pre_existing(world: &World, kind: &str) -> String {
    let client = &world.b.client;
    let params = PostParams::default();
    let object = match kind {
        "Deployment" => {
            create_deployment(client, NS, WORKLOAD, 1, json!({})).await;
            wait_available(client, WORKLOAD, 1).await;
            return get_deployment(client, WORKLOAD)
                .await
                .unwrap()
                .uid()
                .unwrap();
        }
        "ConfigMap" => {
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": "web-config"}, "data": {"owner": "local"}}),
            )
            .unwrap();
            Api::<ConfigMap>::namespaced(client.clone(), NS)
                .create(&params, &cm)
                .await
                .unwrap()
                .uid()
        }
        _ => {
            let secret: Secret = serde_json::from_value(
                json!({"metadata": {"name": "web-secret"}, "stringData": {"owner": "local"}}),
            )
            .unwrap();
            Api::<Secret>::namespaced(client.clone(), NS)
                .create(&params, &secret)
                .await
                .unwrap()
                .uid()
        }
    };
    object.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_object_of_the_same_name_is_a_name_conflict_and_stays_untouched() {
    let mut world = World::start(KUBELET).await;
    // The workload in `a` reads a ConfigMap and a Secret that travel with it.
    for (kind, name) in [("ConfigMap", "web-config"), ("Secret", "web-secret")] {
        let object = json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": NS}, "data": {"k": "dg=="}});
        let api =
            kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("", "v1", kind));
        Api::<kube::api::DynamicObject>::namespaced_with(world.a.client.clone(), NS, &api)
            .patch(name, &PatchParams::apply("test"), &Patch::Apply(&object))
            .await
            .unwrap();
    }
    let pod = support_cluster::restricted(
        json!({"containers": [{"name": "app", "image": "nginx:1.27",
        "envFrom": [{"configMapRef": {"name": "web-config"}}, {"secretRef": {"name": "web-secret"}}]}]}),
    );
    let patch = json!({"spec": {"template": {"spec": pod}}});
    Api::<Deployment>::namespaced(world.a.client.clone(), NS)
        .patch(WORKLOAD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_available(&world.a.client, WORKLOAD, REPLICAS).await;
    world.start_sender();
    world.start_receiver();
    for (round, kind) in ["ConfigMap", "Secret", "Deployment"]
        .into_iter()
        .enumerate()
    {
        let uid = pre_existing(&world, kind).await;
        let before_b = inventory(&world.b.client).await;
        let mut request = world.request();
        request.allow_secret_copy = true;
        // Each round is a new decision (another request id).
        request.decided_at += jiff::SignedDuration::from_hours(2 * round as i64);
        let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
        let target = wait_phase(&world.targets(), &name, MigrationPhase::Rejected).await;
        assert_eq!(
            target.status.unwrap().reason.as_deref(),
            Some("NameConflict"),
            "{kind}"
        );
        let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
        assert_eq!(
            mirror.status.unwrap().reason.as_deref(),
            Some("NameConflict")
        );
        wait_event(&world.b.client, INBOX_A, &name, "NameConflict").await;
        // The original is exactly as it was, uid and resourceVersion.
        let except = format!("WorkloadMigration/{INBOX_A}/{name}");
        assert_unchanged(
            kind,
            &before_b,
            &inventory(&world.b.client).await,
            &[&except],
        );
        let key = format!(
            "{kind}/{NS}/{}",
            match kind {
                "ConfigMap" => "web-config",
                "Secret" => "web-secret",
                _ => WORKLOAD,
            }
        );
        assert!(before_b[&key].starts_with(&uid), "{key}");
        // A later rollback of the refused request (its deletion) leaves it too.
        world
            .targets()
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        support_cluster::until("the refused request to go", WAIT, || {
            let targets = world.targets();
            let name = name.clone();
            async move { targets.get_opt(&name).await.unwrap().is_none() }
        })
        .await;
        assert_unchanged(
            kind,
            &before_b,
            &inventory(&world.b.client).await,
            &[&except],
        );
        // The source never moved.
        let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
        assert_eq!(source.spec.replicas, Some(REPLICAS));
        // Clean up for the next kind: the local object goes, by the admin.
        remove_local(&world.b.client, kind).await;
    }
    assert_eq!(world.receiver_ctx.metrics.refusals("a", "NameConflict"), 3);
    world.shutdown().await;
}

async fn remove_local(client: &Client, kind: &str) {
    let dp = DeleteParams::default();
    match kind {
        "ConfigMap" => drop(
            Api::<ConfigMap>::namespaced(client.clone(), NS)
                .delete("web-config", &dp)
                .await,
        ),
        "Secret" => drop(
            Api::<Secret>::namespaced(client.clone(), NS)
                .delete("web-secret", &dp)
                .await,
        ),
        _ => drop(
            Api::<Deployment>::namespaced(client.clone(), NS)
                .delete(WORKLOAD, &dp)
                .await,
        ),
    }
}

/// Changes the request's intent with the peer credential, signed by `a`'s
/// keys for the request `signed_for` (itself, or another one to try moving
/// a signature).
async fn set_intent(
    world: &World,
    api: &Api<WorkloadMigration>,
    name: &str,
    signed_for: &WorkloadMigration,
    (action, sequence): (IntentAction, i64),
) {
    let mut wm = api.get(name).await.unwrap();
    let intent = signed_intent(&world.keys_a, &signed_for.spec, action, sequence, None).unwrap();
    wm.spec.intent = Some(intent);
    api.replace(name, &PostParams::default(), &wm)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_intents_are_ignored_and_a_completed_move_is_never_rolled_back() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    let peer = world.peer_a_in_b().await;
    let inbox: Api<WorkloadMigration> = Api::namespaced(peer, INBOX_A);
    inbox
        .create(&PostParams::default(), &world.signed_request("solo", "a"))
        .await
        .unwrap();
    wait_phase(&world.targets(), "solo", MigrationPhase::Ready).await;
    let uid = get_deployment(&world.b.client, "solo").await.unwrap().uid();

    let solo = inbox.get("solo").await.unwrap();
    // A RollBack replayed with an old sequence number is ignored.
    set_intent(&world, &inbox, "solo", &solo, (IntentAction::RollBack, 1)).await;
    // A RollBack signed for another request does not verify here: ignored,
    // with a Warning Event and a count.
    let other = world.signed_request("other", "a");
    set_intent(&world, &inbox, "solo", &other, (IntentAction::RollBack, 2)).await;
    wait_event(&world.b.client, INBOX_A, "solo", "BadSignature").await;
    assert_eq!(world.receiver_ctx.metrics.refusals("a", "BadSignature"), 1);
    // The next legitimate intent shows both were seen and skipped.
    set_intent(&world, &inbox, "solo", &solo, (IntentAction::Complete, 3)).await;
    let wm = wait_phase(&world.targets(), "solo", MigrationPhase::Completed).await;
    assert_eq!(wm.status.unwrap().observed_intent, Some(3));
    assert_eq!(
        get_deployment(&world.b.client, "solo").await.unwrap().uid(),
        uid
    );

    // Terminal is final: a RollBack, then the deletion, leave the workload.
    set_intent(&world, &inbox, "solo", &solo, (IntentAction::RollBack, 4)).await;
    inbox
        .delete("solo", &DeleteParams::default())
        .await
        .unwrap();
    support_cluster::until("the completed request to go", WAIT, || {
        let targets = world.targets();
        async move { targets.get_opt("solo").await.unwrap().is_none() }
    })
    .await;
    let copy = get_deployment(&world.b.client, "solo")
        .await
        .expect("the workload stays");
    assert_eq!(copy.uid(), uid);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_changed_after_acceptance_is_refused_and_rolled_back() {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_receiver();
    let peer = world.peer_a_in_b().await;
    let inbox: Api<WorkloadMigration> = Api::namespaced(peer, INBOX_A);
    inbox
        .create(&PostParams::default(), &world.signed_request("swap", "a"))
        .await
        .unwrap();
    wait_phase(&world.targets(), "swap", MigrationPhase::Progressing).await;
    assert!(get_deployment(&world.b.client, "swap").await.is_some());
    // The peer swaps the image after the receiver accepted the request.
    let mut wm = inbox.get("swap").await.unwrap();
    wm.spec.workload["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1".into();
    inbox
        .replace("swap", &PostParams::default(), &wm)
        .await
        .unwrap();
    let wm = wait_phase(&world.targets(), "swap", MigrationPhase::Rejected).await;
    assert_eq!(wm.status.unwrap().reason.as_deref(), Some("SpecChanged"));
    wait_event(&world.b.client, INBOX_A, "swap", "SpecChanged").await;
    assert_eq!(world.receiver_ctx.metrics.refusals("a", "SpecChanged"), 1);
    assert!(
        get_deployment(&world.b.client, "swap").await.is_none(),
        "the copy is removed"
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_request_mid_flight_rolls_it_back_and_the_source_keeps_serving() {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_sender();
    world.start_receiver();
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);
    let name = started_name(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    wait_phase(&world.targets(), &name, MigrationPhase::Progressing).await;
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_some());

    let peer = world.peer_a_in_b().await;
    Api::<WorkloadMigration>::namespaced(peer, INBOX_A)
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    support_cluster::until("the copy in b to go", WAIT, || {
        let b = world.b.client.clone();
        async move { get_deployment(&b, WORKLOAD).await.is_none() }
    })
    .await;
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    checker.finish().await;
    assert!(world.targets().get_opt(&name).await.unwrap().is_none());
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    assert!(mirror.status.unwrap().reason.is_some());
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_mirror_mid_flight_withdraws_the_request() {
    let mut world = World::start(KUBELET).await;
    let name = world.progressing_move().await;
    world
        .mirrors()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    support_cluster::until("the request and the copy in b to go", WAIT, || {
        let (b, targets, name) = (world.b.client.clone(), world.targets(), name.clone());
        async move {
            get_deployment(&b, WORKLOAD).await.is_none()
                && targets.get_opt(&name).await.unwrap().is_none()
        }
    })
    .await;
    support_cluster::until("the mirror to go", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.clone());
        async move { mirrors.get_opt(&name).await.unwrap().is_none() }
    })
    .await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_created_old_mirror_cannot_roll_back_a_completed_move() {
    let mut world = World::start(KUBELET).await;
    world.start_sender();
    world.start_receiver();
    let name = started_name(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    let old = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    let copy_uid = get_deployment(&world.b.client, WORKLOAD)
        .await
        .unwrap()
        .uid();

    // The attacker deletes the finished mirror and re-creates it from its
    // old spec, deadline long past, with no status.
    world
        .mirrors()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    support_cluster::until("the old mirror to go", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.clone());
        async move { mirrors.get_opt(&name).await.unwrap().is_none() }
    })
    .await;
    let mut forged = WorkloadMigration::new(&name, old.spec.clone());
    forged.spec.deadline = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1),
    );
    forged.metadata.labels = old.metadata.labels.clone();
    world
        .mirrors()
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let mirror = support_cluster::eventually("the forged mirror to end", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.clone());
        async move {
            let wm = mirrors.get_opt(&name).await.ok()??;
            wm.status.as_ref()?.phase.is_terminal().then_some(wm)
        }
    })
    .await;
    // Signed once, but not issued when this object was created: refused.
    assert_eq!(phase(&mirror), MigrationPhase::Rejected);
    wait_event(&world.a.client, NS, &name, "BadSignature").await;
    // The move stays done: the request, and the workload in b, untouched.
    assert_eq!(
        phase(&world.targets().get(&name).await.unwrap()),
        MigrationPhase::Completed
    );
    let copy = get_deployment(&world.b.client, WORKLOAD)
        .await
        .expect("the workload stays in b");
    assert_eq!(copy.uid(), copy_uid);
    assert_eq!(serving_copies(&world).await, 1);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_source_mirror_is_rejected_and_nothing_moves() {
    let mut world = World::start(KUBELET).await;
    world.start_sender();
    world.start_receiver();
    let before_a = inventory(&world.a.client).await;
    let before_b = inventory(&world.b.client).await;
    // Someone who may create WorkloadMigrations in `a` writes a mirror for
    // a's Deployment, with an image of their choosing, unsigned.
    let mut forged = world.signed_request("forged", "a");
    forged.spec.role = ferry::crd::MigrationRole::Source;
    forged.spec.signature = None;
    forged.spec.intent = None;
    forged.spec.workload["metadata"]["name"] = WORKLOAD.into();
    forged.spec.workload["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1".into();
    forged.metadata.labels = Some([("ferry.dev/role".to_owned(), "source".to_owned())].into());
    world
        .mirrors()
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let mirror = wait_phase(&world.mirrors(), "forged", MigrationPhase::Rejected).await;
    assert_eq!(mirror.status.unwrap().reason.as_deref(), Some("Unsigned"));
    wait_event(&world.a.client, NS, "forged", "Unsigned").await;
    // Nothing else happened in either cluster: no request, no copy, the
    // source untouched.
    assert!(world.targets().get_opt("forged").await.unwrap().is_none());
    assert_unchanged(
        "cluster a",
        &before_a,
        &inventory(&world.a.client).await,
        &["WorkloadMigration/apps/forged"],
    );
    assert_unchanged(
        "cluster b",
        &before_b,
        &inventory(&world.b.client).await,
        &[],
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_travel_sealed_arrive_whole_and_their_ciphertext_is_cleared_once_applied() {
    let mut world = World::start(KUBELET).await;
    world.mount_a_secret().await;
    // The receiver is not running yet: the request is seen in transit.
    world.start_sender();
    let mut request = world.request();
    request.allow_secret_copy = true;
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let target = support_cluster::eventually("the request in b", WAIT, || {
        let (targets, name) = (world.targets(), name.clone());
        async move { targets.get_opt(&name).await.ok().flatten() }
    })
    .await;
    // In transit: only ciphertext, bound to this request, and its digest.
    let travelled = &target.spec.secrets[0];
    assert!(
        travelled.get("data").is_none(),
        "plaintext in the request: {travelled}"
    );
    assert!(travelled["sealedData"]["ciphertext"].is_string());
    assert!(travelled["sealedDigest"].is_string());

    world.start_receiver();
    wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    // Arrived: the same data, created by the receiver.
    let copy = Api::<Secret>::namespaced(world.b.client.clone(), NS)
        .get("web-secret")
        .await
        .unwrap();
    assert_eq!(
        copy.data.unwrap()["password"].0,
        b"hunter2".to_vec(),
        "the Secret arrived whole"
    );
    // Applied: the ciphertext is gone from the request, which still verifies.
    let target = world.targets().get(&name).await.unwrap();
    let kept = &target.spec.secrets[0];
    assert!(kept.get("sealedData").is_none(), "sealed data kept: {kept}");
    assert_eq!(kept["sealedDigest"], travelled["sealedDigest"]);
    verify_request(&world.keys_a.public_keys(), &target.spec).expect("the request verifies");
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_removes_the_config_map_and_secret_copies_and_leaves_the_originals() {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    let config: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "web-config"}, "data": {"mode": "fast"}}),
    )
    .unwrap();
    Api::<ConfigMap>::namespaced(world.a.client.clone(), NS)
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "web-secret"}, "data": {"password": "aHVudGVyMg=="}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(world.a.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let pod = support_cluster::restricted(
        json!({"containers": [{"name": "app", "image": "nginx:1.27",
        "envFrom": [{"secretRef": {"name": "web-secret"}}, {"configMapRef": {"name": "web-config"}}]}]}),
    );
    Api::<Deployment>::namespaced(world.a.client.clone(), NS)
        .patch(
            WORKLOAD,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"template": {"spec": pod}}})),
        )
        .await
        .unwrap();
    wait_available(&world.a.client, WORKLOAD, REPLICAS).await;
    world.start_sender();
    world.start_receiver();
    let mut request = world.request();
    request.allow_secret_copy = true;
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    wait_phase(&world.targets(), &name, MigrationPhase::Progressing).await;
    // The receiver created both copies with Ferry's own credential.
    let b_config = Api::<ConfigMap>::namespaced(world.b.client.clone(), NS);
    let b_secret = Api::<Secret>::namespaced(world.b.client.clone(), NS);
    assert!(b_config.get_opt("web-config").await.unwrap().is_some());
    assert!(b_secret.get_opt("web-secret").await.unwrap().is_some());

    let peer = world.peer_a_in_b().await;
    Api::<WorkloadMigration>::namespaced(peer, INBOX_A)
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    support_cluster::until("the copies in b to go", WAIT, || {
        let (b_config, b_secret) = (b_config.clone(), b_secret.clone());
        async move {
            b_config.get_opt("web-config").await.unwrap().is_none()
                && b_secret.get_opt("web-secret").await.unwrap().is_none()
        }
    })
    .await;
    // The originals in a are untouched.
    let original = Api::<ConfigMap>::namespaced(world.a.client.clone(), NS)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(original.data.unwrap()["mode"], "fast");
    assert!(
        Api::<Secret>::namespaced(world.a.client.clone(), NS)
            .get_opt("web-secret")
            .await
            .unwrap()
            .is_some()
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_senders_cluster_peer_rolls_its_moves_in_flight_back() {
    let mut world = World::start(KUBELET).await;
    let name = world.progressing_move().await;
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_some());

    // b's administrator stops trusting a.
    Api::<ferry::crd::ClusterPeer>::all(world.b.client.clone())
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let request = wait_phase(&world.targets(), &name, MigrationPhase::RolledBack).await;
    assert_eq!(
        request.status.unwrap().reason.as_deref(),
        Some("PeerRemoved")
    );
    support_cluster::until("the copy in b to go", WAIT, || {
        let b = world.b.client.clone();
        async move { get_deployment(&b, WORKLOAD).await.is_none() }
    })
    .await;
    // The source in a was never touched.
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_the_receiver_did_not_sign_is_never_acted_on() {
    let mut world = World::start(KUBELET).await;
    let name = world.progressing_move().await;
    world.stop_receiver().await;

    // Someone in b other than its Ferry (the peer cannot: 403) claims the
    // move is Ready. The receiver's signature no longer covers the status.
    world
        .targets()
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Ready", "reason": "Available"}})),
        )
        .await
        .unwrap();
    let mirror =
        support_cluster::eventually("the mirror to say the status does not verify", WAIT, || {
            let mirrors = world.mirrors();
            let name = name.clone();
            async move {
                mirrors.get(&name).await.ok().filter(|m| {
                    m.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == "StatusUnverified" && c.status == "True")
                    })
                })
            }
        })
        .await;
    let status = mirror.status.unwrap();
    assert_ne!(
        status.phase,
        MigrationPhase::Ready,
        "a forged Ready is not followed"
    );
    // The source was never touched.
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    world.shutdown().await;
}
