//! Stateful moves on two sandbox clusters whose kubelets run workloads
//! realistically (StatefulSet pods by ordinal, claims that bind, Jobs that
//! end or fail by image rule), with RBAC as the chart renders it:
//! - a StatefulSet moves with claims created empty in the target, its
//!   export hook run in the source before the request is sent and its
//!   import hook run in the target before the StatefulSet is created;
//! - a failing import hook rolls everything back, claims included, and the
//!   source keeps serving; a failing export hook ends the move before the
//!   target hears of it;
//! - a stateful move needs both sides' consent: the sender's policy and
//!   the receiver's `admission.claims`;
//! - a peer cannot make the receiver mount, or take over, a claim of the
//!   target cluster.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{
    DataHook, DataHooks, HookKind, HookState, MigrationPhase, StatefulMoves, WorkloadMigration,
};
use ferry::migration::{MigrationRequest, start_migration};
use ferry::sandbox::{Exit, ImageRule, KubeletRules};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support_cluster::world::*;

const KUBELET: Duration = Duration::from_millis(30);
const DB: &str = "db";
const HOOK_IMAGE: &str = "registry.example/backup:1";
const FAILING_IMAGE: &str = "registry.example/backup-fails:1";
const SLOW_IMAGE: &str = "registry.example/backup-slow:1";

/// The kubelet rules of both clusters: hooks of `FAILING_IMAGE` fail, and
/// those of `SLOW_IMAGE` run for an hour (unless `slow` is off).
fn rules(slow: bool) -> KubeletRules {
    let mut failing = ImageRule::new(FAILING_IMAGE);
    failing.exit = Exit::Fail;
    let mut rules = vec![failing];
    if slow {
        let mut slow = ImageRule::new(SLOW_IMAGE);
        slow.start_delay = Some(Duration::from_secs(3600));
        rules.push(slow);
    }
    KubeletRules { rules }
}

/// Both clusters run realistically, b takes claims from a, and `apps/db`
/// (two replicas, one 1Gi claim each, StorageClass `fast`) serves in a.
async fn stateful_world(allow_claims: bool) -> World {
    let world = World::start(KUBELET).await;
    for cluster in [&world.a, &world.b] {
        cluster.sandbox.kubelet().set_realistic(rules(true));
    }
    if allow_claims {
        allow_claims_from_a(&world).await;
    }
    let set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": DB, "namespace": NS, "labels": {"app": DB}},
        "spec": {
            "replicas": 2, "serviceName": DB,
            "selector": {"matchLabels": {"app": DB}},
            "template": {"metadata": {"labels": {"app": DB}},
                "spec": support_cluster::restricted(json!({"containers": [{"name": "db", "image": "postgres:17",
                    "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"}]}]}))},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                    "resources": {"requests": {"storage": "1Gi"}}}}],
        },
    }))
    .unwrap();
    sets(&world.a.client)
        .create(&PostParams::default(), &set)
        .await
        .expect("create the StatefulSet");
    support_cluster::eventually("db to be ready in a", WAIT, || {
        let sets = sets(&world.a.client);
        async move {
            let set = sets.get(DB).await.ok()?;
            (set.status?.ready_replicas == Some(2)).then_some(())
        }
    })
    .await;
    world
}

async fn allow_claims_from_a(world: &World) {
    let patch = json!({"spec": {"admission": {"claims": {"allow": true, "maxStorage": "10Gi"}}}});
    Api::<ferry::crd::ClusterPeer>::all(world.b.client.clone())
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch ClusterPeer a in b");
    let peers = world.peers_b.clone();
    support_cluster::eventually("b to take claims from a", WAIT, || {
        let allowed = peers
            .get("a")
            .is_some_and(|p| p.spec.admission.claims.allow);
        async move { allowed.then_some(()) }
    })
    .await;
}

fn sets(client: &Client) -> Api<StatefulSet> {
    Api::namespaced(client.clone(), NS)
}

fn claims(client: &Client) -> Api<PersistentVolumeClaim> {
    Api::namespaced(client.clone(), NS)
}

fn jobs(client: &Client) -> Api<Job> {
    Api::namespaced(client.clone(), NS)
}

fn hook(image: &str) -> Option<DataHook> {
    Some(DataHook {
        image: image.into(),
        command: vec!["/bin/sync-claims".into()],
        ..DataHook::default()
    })
}

/// A request to move `apps/db` to b with the given hooks.
fn move_db(export: Option<DataHook>, import: Option<DataHook>) -> MigrationRequest {
    MigrationRequest {
        kind: "StatefulSet".into(),
        stateful: Some(StatefulMoves {
            enabled: true,
            hooks: DataHooks { export, import },
        }),
        ..MigrationRequest::deployment(NS, DB, "b")
    }
}

async fn claim_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = claims(client)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .filter(|n| n.starts_with("data-db-"))
        .collect();
    names.sort();
    names
}

/// Waits until b holds none of what the move `name` created there: its
/// claims, its import Job, the StatefulSet.
async fn wait_until_b_holds_nothing_of(world: &World, name: &str) {
    support_cluster::eventually("b to hold nothing of the move", WAIT, || {
        let client = world.b.client.clone();
        let job = format!("{name}-import");
        async move {
            let none = claim_names(&client).await.is_empty()
                && jobs(&client).get_opt(&job).await.ok()?.is_none()
                && sets(&client).get_opt(DB).await.ok()?.is_none();
            none.then_some(())
        }
    })
    .await;
}

fn hook_state(wm: &WorkloadMigration, kind: HookKind) -> Option<HookState> {
    wm.status
        .as_ref()?
        .hooks
        .iter()
        .find(|h| h.hook == kind)
        .map(|h| h.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_set_moves_with_fresh_claims_and_its_data_hooks() {
    let mut world = stateful_world(true).await;
    world.start_sender();
    world.start_receiver();
    let request = move_db(hook(HOOK_IMAGE), hook(SLOW_IMAGE));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());

    // The export ran in a, over a's own claims, read only, before b heard
    // of the move.
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Accepted).await;
    assert_eq!(
        hook_state(&mirror, HookKind::Export),
        Some(HookState::Succeeded)
    );
    let export = jobs(&world.a.client)
        .get(&format!("{name}-export"))
        .await
        .unwrap();
    assert_eq!(export.owner_references()[0].uid, mirror.uid().unwrap());
    let pod = export.spec.unwrap().template.spec.unwrap();
    let mounted: Vec<(String, bool)> = pod
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| v.persistent_volume_claim.unwrap())
        .map(|c| (c.claim_name, c.read_only.unwrap_or(false)))
        .collect();
    assert_eq!(
        mounted,
        [
            ("data-db-0".to_owned(), true),
            ("data-db-1".to_owned(), true)
        ]
    );

    // In b: the claims exist, empty and with b's default class, and the
    // import runs; the StatefulSet waits for it.
    let import_name = format!("{name}-import");
    support_cluster::eventually("the import Job in b", WAIT, || {
        let jobs = jobs(&world.b.client);
        let import_name = import_name.clone();
        async move { jobs.get_opt(&import_name).await.ok()? }
    })
    .await;
    assert_eq!(
        claim_names(&world.b.client).await,
        ["data-db-0", "data-db-1"]
    );
    let claim = claims(&world.b.client).get("data-db-0").await.unwrap();
    assert_eq!(claim.spec.as_ref().unwrap().storage_class_name, None);
    assert!(
        sets(&world.b.client).get_opt(DB).await.unwrap().is_none(),
        "the StatefulSet is created only once the import has completed"
    );
    let target = world.targets().get(&name).await.unwrap();
    assert_eq!(
        hook_state(&target, HookKind::Import),
        Some(HookState::Running)
    );

    // The import completes: the StatefulSet follows, the move completes,
    // and the source is scaled to zero with its claims left as they were.
    for cluster in [&world.a, &world.b] {
        cluster.sandbox.kubelet().set_realistic(rules(false));
    }
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    assert_eq!(
        hook_state(&target, HookKind::Import),
        Some(HookState::Succeeded)
    );
    let applied: Vec<(String, String)> = target
        .status
        .unwrap()
        .applied
        .into_iter()
        .map(|o| (o.kind, o.name))
        .collect();
    assert_eq!(
        applied,
        [
            ("PersistentVolumeClaim".to_owned(), "data-db-0".to_owned()),
            ("PersistentVolumeClaim".to_owned(), "data-db-1".to_owned()),
            ("Job".to_owned(), import_name.clone()),
            ("StatefulSet".to_owned(), DB.to_owned()),
        ]
    );
    let moved = sets(&world.b.client).get(DB).await.unwrap();
    assert_eq!(moved.status.unwrap().ready_replicas, Some(2));
    let source = sets(&world.a.client).get(DB).await.unwrap();
    assert_eq!(source.spec.replicas, Some(0));
    assert_eq!(
        source
            .annotations()
            .get(ferry::migration::ANNOTATION_MIGRATED_TO),
        Some(&"b".to_owned())
    );
    assert_eq!(
        claim_names(&world.a.client).await,
        ["data-db-0", "data-db-1"]
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_import_rolls_back_the_claims_and_the_source_keeps_serving() {
    let mut world = stateful_world(true).await;
    world.start_sender();
    world.start_receiver();
    let request = move_db(None, hook(FAILING_IMAGE));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Failed).await;
    let status = target.status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("HookFailed"));
    assert!(
        status.message.unwrap().contains("BackoffLimitExceeded"),
        "the Job's own words reach the status"
    );
    assert_eq!(
        hook_state(&target, HookKind::Import),
        Some(HookState::Failed)
    );
    wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    wait_until_b_holds_nothing_of(&world, &name).await;
    let source = sets(&world.a.client).get(DB).await.unwrap();
    assert_eq!(source.spec.replicas, Some(2));
    assert!(
        source
            .annotations()
            .get(ferry::migration::ANNOTATION_MIGRATED_TO)
            .is_none()
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_export_ends_the_move_before_the_target_hears_of_it() {
    let mut world = stateful_world(true).await;
    world.start_sender();
    world.start_receiver();
    let request = move_db(hook(FAILING_IMAGE), hook(HOOK_IMAGE));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Failed).await;
    assert_eq!(
        mirror.status.as_ref().unwrap().reason.as_deref(),
        Some("HookFailed")
    );
    assert_eq!(
        hook_state(&mirror, HookKind::Export),
        Some(HookState::Failed)
    );
    assert!(world.targets().get_opt(&name).await.unwrap().is_none());
    assert!(claim_names(&world.b.client).await.is_empty());
    let source = sets(&world.a.client).get(DB).await.unwrap();
    assert_eq!(source.spec.replicas, Some(2));
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_move_needs_the_policy_and_the_receiver_to_consent() {
    let mut world = stateful_world(false).await;
    world.start_sender();
    world.start_receiver();

    // The policy did not enable stateful moves: nothing is written.
    let mut request = move_db(None, None);
    request.stateful = None;
    let error = start_migration(&world.sender_ctx, request)
        .await
        .unwrap_err();
    let ferry::migration::Error::Refused(objection) = error else {
        panic!("refused with a reason, not {error}");
    };
    assert_eq!(objection.reason, "StatefulNotAllowed");
    assert!(
        objection.message.contains("stateful.enabled"),
        "{objection}"
    );
    assert!(
        world
            .mirrors()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The receiver does not take claims from a: refused before anything
    // is created there.
    let name = started_name(
        start_migration(&world.sender_ctx, move_db(None, None))
            .await
            .unwrap(),
    );
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Rejected).await;
    let status = target.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("ClaimsNotAllowed"));
    assert!(status.applied.is_empty());
    assert!(claim_names(&world.b.client).await.is_empty());
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_can_neither_mount_nor_take_over_a_claim_of_the_target() {
    let mut world = stateful_world(true).await;
    // b's own claim, holding another workload's data.
    let billing: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "billing-data", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    claims(&world.b.client)
        .create(&PostParams::default(), &billing)
        .await
        .unwrap();
    // Read once b's kubelet has bound it, which writes the claim too.
    let before = support_cluster::eventually("billing-data to be bound", WAIT, || {
        let claims = claims(&world.b.client);
        async move {
            let claim = claims.get("billing-data").await.ok()?;
            let bound = claim.status.as_ref()?.phase.as_deref() == Some("Bound");
            bound.then_some(claim)
        }
    })
    .await;
    world.start_receiver();
    let inbox: Api<WorkloadMigration> = Api::namespaced(world.peer_a_in_b().await, INBOX_A);

    // A Deployment that mounts it, without the claim travelling.
    let mut mount = world.signed_request("thief", "a");
    mount.spec.workload["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "d", "persistentVolumeClaim": {"claimName": "billing-data"}}]);
    mount.spec.claims = Vec::new();
    ferry::migration::sign_request(&world.keys_a, &mut mount.spec).unwrap();
    inbox.create(&PostParams::default(), &mount).await.unwrap();
    let refused = wait_phase(&world.targets(), "thief", MigrationPhase::Rejected).await;
    assert_eq!(
        refused.status.as_ref().unwrap().reason.as_deref(),
        Some("VolumeNotAllowed"),
        "{:?}",
        refused.status
    );

    // The same, carrying a claim of that name: b's claim is not taken over.
    let mut take = world.signed_request("taker", "a");
    take.spec.workload["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "d", "persistentVolumeClaim": {"claimName": "billing-data"}}]);
    take.spec.claims = vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "billing-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "dataSource": {"kind": "PersistentVolumeClaim", "name": "billing-data"}}})];
    ferry::migration::sign_request(&world.keys_a, &mut take.spec).unwrap();
    inbox.create(&PostParams::default(), &take).await.unwrap();
    let refused = wait_phase(&world.targets(), "taker", MigrationPhase::Rejected).await;
    assert_eq!(
        refused.status.as_ref().unwrap().reason.as_deref(),
        Some("NameConflict")
    );
    let after = claims(&world.b.client).get("billing-data").await.unwrap();
    assert_eq!(after.uid(), before.uid());
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert_eq!(after.metadata.annotations, before.metadata.annotations);

    // Claims past the receiver's storage cap.
    let mut large = world.signed_request("hoarder", "a");
    large.spec.workload["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "d", "persistentVolumeClaim": {"claimName": "hoard"}}]);
    large.spec.claims = vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "hoard"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Ti"}}}})];
    ferry::migration::sign_request(&world.keys_a, &mut large.spec).unwrap();
    inbox.create(&PostParams::default(), &large).await.unwrap();
    let refused = wait_phase(&world.targets(), "hoarder", MigrationPhase::Rejected).await;
    assert_eq!(
        refused.status.as_ref().unwrap().reason.as_deref(),
        Some("CapExceeded")
    );
    assert!(
        claims(&world.b.client)
            .get_opt("hoard")
            .await
            .unwrap()
            .is_none()
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_with_a_claim_moves_with_a_fresh_one() {
    let mut world = stateful_world(true).await;
    let cache: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "cache", "namespace": NS, "labels": {"app": "cache"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
            "resources": {"requests": {"storage": "2Gi"}}},
    }))
    .unwrap();
    claims(&world.a.client)
        .create(&PostParams::default(), &cache)
        .await
        .unwrap();
    create_deployment(
        &world.a.client,
        NS,
        "cache",
        1,
        json!({"volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": "cache"}}]}),
    )
    .await;
    wait_available(&world.a.client, "cache", 1).await;
    world.start_sender();
    world.start_receiver();
    let request = MigrationRequest {
        stateful: Some(StatefulMoves {
            enabled: true,
            hooks: DataHooks::default(),
        }),
        ..MigrationRequest::deployment(NS, "cache", "b")
    };
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    let copy = claims(&world.b.client).get("cache").await.unwrap();
    let spec = copy.spec.unwrap();
    assert_eq!(spec.storage_class_name, None);
    assert_eq!(
        spec.resources.unwrap().requests.unwrap()["storage"].0,
        "2Gi"
    );
    assert_eq!(copy.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(
        claims(&world.a.client)
            .get_opt("cache")
            .await
            .unwrap()
            .is_some()
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawing_a_stateful_move_removes_the_stateful_set_and_its_claims() {
    let mut world = stateful_world(true).await;
    // In b the database never becomes ready: the move stays in flight.
    let mut never = rules(false);
    let mut stuck = ImageRule::new("postgres:*");
    stuck.readiness = ferry::sandbox::Readiness::Never;
    never.rules.push(stuck);
    world.b.sandbox.kubelet().set_realistic(never);
    world.start_sender();
    world.start_receiver();
    let name = started_name(
        start_migration(&world.sender_ctx, move_db(None, hook(HOOK_IMAGE)))
            .await
            .unwrap(),
    );
    support_cluster::eventually("db to be created in b", WAIT, || {
        let sets = sets(&world.b.client);
        async move { sets.get_opt(DB).await.ok()? }
    })
    .await;
    assert_eq!(
        claim_names(&world.b.client).await,
        ["data-db-0", "data-db-1"]
    );

    // Withdrawn by deleting the mirror: the receiver removes what it made.
    world
        .mirrors()
        .delete(&name, &Default::default())
        .await
        .unwrap();
    wait_until_b_holds_nothing_of(&world, &name).await;
    let source = sets(&world.a.client).get(DB).await.unwrap();
    assert_eq!(source.spec.replicas, Some(2));
    assert_eq!(
        claim_names(&world.a.client).await,
        ["data-db-0", "data-db-1"]
    );
    world.shutdown().await;
}
