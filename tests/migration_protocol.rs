//! The migration protocol end to end on two sandbox API servers, with the
//! real peer, sender and receiver controllers.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{MigrationPhase, MigrationRole, WorkloadMigration, is_condition_true};
use ferry::migration::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_FROM, ANNOTATION_MIGRATED_TO,
    ANNOTATION_ORIGINAL_REPLICAS, Error, StartOutcome, conditions, count_in_flight,
    last_migration_time, start_migration,
};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use support_cluster::world::*;

const KUBELET: Duration = Duration::from_millis(30);

fn created(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Created { name } => name,
        other => panic!("expected a new migration, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_migration_moves_a_deployment_from_a_to_b() {
    let mut world = World::start(KUBELET).await;
    world.start_sender();
    world.start_receiver();
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);

    let name = created(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    assert_eq!(count_in_flight(&world.a.client).await.unwrap(), 1);
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    checker.finish().await;

    // B serves the workload, A keeps a scaled-to-zero manifest.
    let in_b = get_deployment(&world.b.client, WORKLOAD)
        .await
        .expect("copy in b");
    assert!(
        in_b.status
            .as_ref()
            .unwrap()
            .available_replicas
            .unwrap_or(0)
            >= REPLICAS
    );
    assert_eq!(
        in_b.annotations()
            .get(ANNOTATION_MIGRATED_FROM)
            .map(String::as_str),
        Some("a")
    );
    assert!(last_migration_time(&in_b.metadata).is_some());
    let in_a = get_deployment(&world.a.client, WORKLOAD)
        .await
        .expect("source kept");
    assert_eq!(in_a.spec.replicas, Some(0));
    let notes = in_a.annotations();
    assert_eq!(
        notes.get(ANNOTATION_MIGRATED_TO).map(String::as_str),
        Some("b")
    );
    assert_eq!(
        notes.get(ANNOTATION_ORIGINAL_REPLICAS).map(String::as_str),
        Some("3")
    );
    assert!(notes.contains_key(ANNOTATION_LAST_MIGRATION));
    assert!(last_migration_time(&in_a.metadata).is_some());
    assert_eq!(serving_copies(&world).await, 1);

    // Both sides recorded every step.
    let status = target.status.unwrap();
    assert!(status.accepted_time.is_some() && status.progressing_time.is_some());
    assert!(status.ready_time.is_some() && status.completed_time.is_some());
    let status = mirror.status.unwrap();
    assert!(
        status.ready_time.is_some()
            && status.completed_time.is_some()
            && status.finished_time.is_some()
    );
    assert_eq!(mirror.spec.role, MigrationRole::Source);
    assert_eq!(target.spec.role, MigrationRole::Target);
    assert_eq!(count_in_flight(&world.a.client).await.unwrap(), 0);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_decision_is_one_migration_and_a_second_active_one_is_refused() {
    let mut world = World::start(KUBELET).await;
    // No receiver: the first migration stays active.
    world.start_sender();
    let request = world.request();
    let name = created(
        start_migration(&world.sender_ctx, request.clone())
            .await
            .unwrap(),
    );
    let again = start_migration(&world.sender_ctx, request.clone())
        .await
        .unwrap();
    assert_eq!(again, StartOutcome::AlreadyExists { name: name.clone() });

    // A decision in another time bucket is another request: refused while the first is active.
    let mut later = request.clone();
    later.decided_at = request.decided_at + jiff::SignedDuration::from_hours(2);
    match start_migration(&world.sender_ctx, later).await {
        Err(Error::ActiveMigration { existing, .. }) => assert_eq!(existing, name),
        other => panic!("expected ActiveMigration, got {other:?}"),
    }
    let mirrors = world.mirrors().list(&ListParams::default()).await.unwrap();
    assert_eq!(mirrors.items.len(), 1);
    let targets = world.targets().list(&ListParams::default()).await.unwrap();
    assert_eq!(targets.items.len(), 1);
    assert_eq!(count_in_flight(&world.a.client).await.unwrap(), 1);

    world.start_receiver();
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    // Repeating the finished decision changes nothing.
    assert_eq!(
        start_migration(&world.sender_ctx, request).await.unwrap(),
        StartOutcome::AlreadyExists { name }
    );
    world.shutdown().await;
}

/// One forbidden request placed straight in an inbox of B, as a
/// misbehaving or misconfigured sender would.
struct Forbidden {
    case: &'static str,
    /// The peer whose inbox holds it.
    inbox: &'static str,
    /// What `spec.sourceCluster` claims.
    source: &'static str,
    namespace: &'static str,
    workload: serde_json::Value,
    secrets: serde_json::Value,
    /// Whose keys sign it (`a`, `b`), if anyone's.
    signer: Option<&'static str>,
    /// Change the workload after signing.
    tamper: bool,
    reason: &'static str,
}

fn deployment_manifest(namespace: &str, pod_extra: serde_json::Value) -> serde_json::Value {
    let mut d = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "bad"}},
            "template": {"metadata": {"labels": {"app": "bad"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    });
    d["spec"]["template"]["spec"] =
        support_cluster::restricted(d["spec"]["template"]["spec"].take());
    for (k, v) in pod_extra.as_object().unwrap() {
        d["spec"]["template"]["spec"][k] = v.clone();
    }
    d
}

fn forbidden(
    case: &'static str,
    namespace: &'static str,
    pod_extra: serde_json::Value,
    reason: &'static str,
) -> Forbidden {
    Forbidden {
        case,
        inbox: "a",
        source: "a",
        namespace,
        workload: deployment_manifest(namespace, pod_extra),
        secrets: serde_json::json!([]),
        signer: Some("a"),
        tamper: false,
        reason,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receiver_rejects_every_forbidden_request_and_creates_nothing() {
    let mut world = World::start(KUBELET).await;
    // A peer B knows but does not accept from, with an inbox.
    support_cluster::add_peer(
        &world.b.client,
        "c",
        &world.a.peer_kubeconfig("b"),
        support_cluster::peer_spec("c", false),
    )
    .await;
    for inbox in ["ferry-inbox-c", "ferry-inbox-nobody"] {
        support_cluster::ensure_namespace(&world.b.client, inbox).await;
    }
    let peers = world.peers_b.clone();
    support_cluster::eventually("peer c known", WAIT, || {
        let ok = peers.get("c").is_some();
        async move { ok.then_some(()) }
    })
    .await;
    world.start_receiver();
    use serde_json::json;
    let mut daemonset = forbidden("daemonset", NS, json!({}), "UnsupportedKind");
    daemonset.workload["kind"] = "DaemonSet".into();
    // A StatefulSet creates storage: only from a peer allowed to.
    let mut statefulset = forbidden("statefulset", NS, json!({}), "ClaimsNotAllowed");
    statefulset.workload["kind"] = "StatefulSet".into();
    let mut token_secret = forbidden("token-secret", NS, json!({}), "SecretTypeNotAllowed");
    token_secret.secrets = json!([{"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "token"}, "type": "kubernetes.io/service-account-token"}]);
    let cases = [
        Forbidden {
            inbox: "nobody",
            source: "nobody",
            ..forbidden("unknown-peer", NS, json!({}), "UnknownPeer")
        },
        Forbidden {
            inbox: "c",
            source: "c",
            ..forbidden("no-accept-from", NS, json!({}), "PeerNotAccepted")
        },
        Forbidden {
            source: "c",
            ..forbidden("claims-another-peer", NS, json!({}), "SourceMismatch")
        },
        forbidden(
            "kube-system",
            "kube-system",
            json!({}),
            "NamespaceNotAllowed",
        ),
        forbidden(
            "own-namespace",
            support_cluster::FERRY_NAMESPACE,
            json!({}),
            "NamespaceNotAllowed",
        ),
        forbidden("an-inbox", INBOX_A, json!({}), "NamespaceNotAllowed"),
        forbidden(
            "missing-namespace",
            "nowhere",
            json!({}),
            "TargetNamespaceMissing",
        ),
        forbidden(
            "privileged",
            NS,
            json!({"containers": [{"name": "app", "image": "nginx", "securityContext": {"privileged": true}}]}),
            "PodSecurityBaseline",
        ),
        forbidden(
            "host-network",
            NS,
            json!({"hostNetwork": true}),
            "PodSecurityBaseline",
        ),
        forbidden(
            "host-path",
            NS,
            json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
            "PodSecurityBaseline",
        ),
        daemonset,
        statefulset,
        token_secret,
        forbidden(
            "powerful-service-account",
            NS,
            json!({"serviceAccountName": "admin"}),
            "ServiceAccountNotAllowed",
        ),
        forbidden(
            "pinned-node",
            NS,
            json!({"nodeName": "node-1"}),
            "SchedulingNotAllowed",
        ),
        forbidden(
            "existing-claim",
            NS,
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}]}),
            "VolumeNotAllowed",
        ),
        forbidden(
            "sys-admin",
            NS,
            json!({"containers": [{"name": "app", "image": "nginx", "securityContext":
                {"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}}]}),
            "PodSecurityBaseline",
        ),
    ];
    // A request outside any inbox is never acted on, whatever it says.
    let outside = request_object(
        "outside",
        "a",
        NS,
        deployment_manifest(NS, json!({})),
        json!([]),
        Some(&world.keys_a),
    );
    Api::<WorkloadMigration>::namespaced(world.b.client.clone(), NS)
        .create(&Default::default(), &outside)
        .await
        .unwrap();
    for case in &cases {
        let mut wm = request_object(
            case.case,
            case.source,
            case.namespace,
            case.workload.clone(),
            case.secrets.clone(),
            case.signer.map(|c| {
                if c == "a" {
                    &world.keys_a
                } else {
                    &world.keys_b
                }
            }),
        );
        if case.tamper {
            // Changed after signing: the image the sender never asked for.
            wm.spec.workload["spec"]["template"]["spec"]["containers"][0]["image"] =
                "evil:1".into();
        }
        let api: Api<WorkloadMigration> = Api::namespaced(
            world.b.client.clone(),
            &format!("ferry-inbox-{}", case.inbox),
        );
        api.create(&Default::default(), &wm).await.unwrap();
    }
    for case in &cases {
        let api: Api<WorkloadMigration> = Api::namespaced(
            world.b.client.clone(),
            &format!("ferry-inbox-{}", case.inbox),
        );
        let wm = wait_phase(&api, case.case, MigrationPhase::Rejected).await;
        let status = wm.status.unwrap();
        assert_eq!(
            status.reason.as_deref(),
            Some(case.reason),
            "{}: {:?}",
            case.case,
            status.message
        );
        assert!(status.finished_time.is_some(), "{}", case.case);
        assert!(
            world.receiver_ctx.metrics.refusals(case.inbox, case.reason) >= 1,
            "{}: the refusal is counted",
            case.case
        );
        wait_event(
            &world.b.client,
            &format!("ferry-inbox-{}", case.inbox),
            case.case,
            case.reason,
        )
        .await;
    }
    let outside = Api::<WorkloadMigration>::namespaced(world.b.client.clone(), NS)
        .get("outside")
        .await
        .unwrap();
    assert!(
        outside.status.is_none(),
        "a request outside an inbox was acted on"
    );
    for namespace in [NS, "kube-system", support_cluster::FERRY_NAMESPACE, INBOX_A] {
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(world.b.client.clone(), namespace);
        assert!(
            deployments
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "something was created in {namespace}"
        );
    }
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_move_rolls_back_and_leaves_the_source_alone() {
    let mut world = World::start(KUBELET).await;
    create_deployment(
        &world.a.client,
        NS,
        "priv",
        2,
        serde_json::json!({"hostPID": true}),
    )
    .await;
    wait_available(&world.a.client, "priv", 2).await;
    world.start_sender();
    world.start_receiver();
    let mut request = world.request();
    request.name = "priv".into();
    let name = created(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    assert_eq!(
        mirror.status.unwrap().reason.as_deref(),
        Some("PodSecurityBaseline")
    );
    assert_eq!(
        phase(&world.targets().get(&name).await.unwrap()),
        MigrationPhase::Rejected
    );
    let source = get_deployment(&world.a.client, "priv").await.unwrap();
    assert_eq!(source.spec.replicas, Some(2));
    assert!(source.annotations().get(ANNOTATION_MIGRATED_TO).is_none());
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_never_becomes_ready_is_rolled_back_at_the_deadline() {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_receiver();
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);
    let mut request = world.request();
    request.timeout = Duration::from_secs(2);
    let name = created(start_migration(&world.sender_ctx, request).await.unwrap());
    wait_phase(&world.targets(), &name, MigrationPhase::Progressing).await;
    assert!(
        get_deployment(&world.b.client, WORKLOAD).await.is_some(),
        "the copy was applied"
    );
    // The sender, which enforces the deadline, starts only once the copy is
    // applied: however slow the machine, the deadline is what ends the move.
    world.start_sender();
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    checker.finish().await;
    let status = mirror.status.unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some(conditions::DEADLINE_EXCEEDED)
    );
    assert_eq!(
        phase(&world.targets().get(&name).await.unwrap()),
        MigrationPhase::RolledBack
    );
    assert!(
        get_deployment(&world.b.client, WORKLOAD).await.is_none(),
        "the target copy is removed"
    );
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    assert!(source.annotations().get(ANNOTATION_MIGRATED_TO).is_none());
    assert_eq!(serving_copies(&world).await, 1);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_request_is_checked_and_nothing_is_applied() {
    let mut world = World::start(KUBELET).await;
    world.start_sender();
    world.start_receiver();
    let mut request = world.request();
    request.dry_run = true;
    let name = created(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    assert_eq!(
        mirror.status.unwrap().reason.as_deref(),
        Some(conditions::DRY_RUN_PASSED)
    );
    let target = world.targets().get(&name).await.unwrap();
    assert_eq!(
        target.status.unwrap().reason.as_deref(),
        Some(conditions::DRY_RUN_PASSED)
    );
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_none());
    assert_eq!(
        get_deployment(&world.a.client, WORKLOAD)
            .await
            .unwrap()
            .spec
            .replicas,
        Some(REPLICAS)
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_outage_during_progressing_resumes_and_completes() {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_sender();
    world.start_receiver();
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);
    let name = created(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    wait_phase(&world.mirrors(), &name, MigrationPhase::Progressing).await;

    world.b.sandbox.stop().await;
    let mirrors = world.mirrors();
    support_cluster::eventually("PeerUnreachable on the mirror", WAIT, || {
        let mirrors = mirrors.clone();
        let name = name.clone();
        async move {
            let wm = mirrors.get(&name).await.ok()?;
            is_condition_true(&wm.status?.conditions, conditions::PEER_UNREACHABLE).then_some(())
        }
    })
    .await;
    // Nothing happened to the source meanwhile.
    assert_eq!(
        get_deployment(&world.a.client, WORKLOAD)
            .await
            .unwrap()
            .spec
            .replicas,
        Some(REPLICAS)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    world.b.sandbox.restart().await.unwrap();
    world.b.sandbox.kubelet().set_rollouts_ready(true);

    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    checker.finish().await;
    assert!(!is_condition_true(
        &mirror.status.unwrap().conditions,
        conditions::PEER_UNREACHABLE
    ));
    assert_eq!(serving_copies(&world).await, 1);
    assert_eq!(
        get_deployment(&world.a.client, WORKLOAD)
            .await
            .unwrap()
            .spec
            .replicas,
        Some(0)
    );
    world.shutdown().await;
}

/// Sets a request's status phase by hand, as a controller that crashed
/// right after writing it would have left it.
async fn force_phase(api: &Api<WorkloadMigration>, name: &str, phase: MigrationPhase) {
    let patch = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "WorkloadMigration",
        "metadata": {"name": name}, "status": {"phase": phase},
    });
    api.patch_status(
        name,
        &PatchParams::apply("crash-test").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_the_sender_and_the_receiver_in_every_phase_neither_duplicates_nor_loses() {
    let mut world = World::start(KUBELET).await;
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);

    // Pending: only the sender's fast path ran; restart the sender.
    world.start_sender();
    let name = created(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    world.stop_sender().await;
    assert_eq!(
        phase(&world.targets().get(&name).await.unwrap()),
        MigrationPhase::Pending
    );
    world.start_sender();
    tokio::time::sleep(Duration::from_millis(100)).await;
    world.stop_sender().await;

    // Accepted: the receiver crashed after writing Accepted, before applying.
    force_phase(&world.targets(), &name, MigrationPhase::Accepted).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_receiver();
    wait_phase(&world.targets(), &name, MigrationPhase::Progressing).await;

    // Progressing: restart the receiver and start the sender, then restart it.
    world.stop_receiver().await;
    world.start_receiver();
    world.start_sender();
    wait_phase(&world.mirrors(), &name, MigrationPhase::Progressing).await;
    world.stop_sender().await;
    world.start_sender();
    world.stop_sender().await;

    // Ready: the target becomes ready with the sender down; restart the receiver.
    world.b.sandbox.kubelet().set_rollouts_ready(true);
    wait_phase(&world.targets(), &name, MigrationPhase::Ready).await;
    world.stop_receiver().await;
    world.start_receiver();
    assert_eq!(
        get_deployment(&world.a.client, WORKLOAD)
            .await
            .unwrap()
            .spec
            .replicas,
        Some(REPLICAS)
    );

    // Mirror Ready: the sender crashed after persisting Ready, before the source action.
    force_phase(&world.mirrors(), &name, MigrationPhase::Ready).await;
    world.start_sender();
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;

    // Completed: restarting both changes nothing.
    world.stop_sender().await;
    world.stop_receiver().await;
    world.start_sender();
    world.start_receiver();
    tokio::time::sleep(Duration::from_millis(200)).await;
    checker.finish().await;

    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(0));
    assert_eq!(
        source
            .annotations()
            .get(ANNOTATION_ORIGINAL_REPLICAS)
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(serving_copies(&world).await, 1);
    assert_eq!(
        world
            .mirrors()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        world
            .targets()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        phase(&world.mirrors().get(&name).await.unwrap()),
        MigrationPhase::Completed
    );
    assert_eq!(
        phase(&world.targets().get(&name).await.unwrap()),
        MigrationPhase::Completed
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_conflicts_and_server_errors_on_both_sides_still_complete() {
    let mut world = World::start(KUBELET).await;
    world.start_sender();
    world.start_receiver();
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);
    for cluster in [&world.a, &world.b] {
        cluster.sandbox.faults().set_error_rate(0.2);
        cluster.sandbox.faults().set_conflict_rate(0.2);
    }
    let mut outcome = None;
    for _ in 0..50 {
        match start_migration(&world.sender_ctx, world.request()).await {
            Ok(o) => {
                outcome = Some(o);
                break;
            }
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let name = match outcome.expect("start_migration eventually succeeds") {
        StartOutcome::Created { name } | StartOutcome::AlreadyExists { name } => name,
    };
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    for cluster in [&world.a, &world.b] {
        cluster.sandbox.faults().clear();
    }
    checker.finish().await;
    assert_eq!(serving_copies(&world).await, 1);
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(
        source
            .annotations()
            .get(ANNOTATION_ORIGINAL_REPLICAS)
            .map(String::as_str),
        Some("3")
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_requests_and_mirrors_are_deleted_after_their_ttl_and_the_move_stays() {
    let mut world = World::start(KUBELET).await;
    world.sender_ctx.config.finished_ttl = Duration::from_millis(100);
    world.receiver_ctx.config.finished_ttl = Duration::from_millis(100);
    world.start_sender();
    world.start_receiver();
    let name = created(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    support_cluster::until("the mirror and the request to be collected", WAIT, || {
        let (mirrors, targets, name) = (world.mirrors(), world.targets(), name.clone());
        async move {
            mirrors.get_opt(&name).await.unwrap().is_none()
                && targets.get_opt(&name).await.unwrap().is_none()
        }
    })
    .await;
    // Collecting the records undoes nothing: b serves, a is scaled to zero.
    wait_available(&world.b.client, WORKLOAD, REPLICAS).await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(0));
    assert_eq!(serving_copies(&world).await, 1);
    world.shutdown().await;
}
