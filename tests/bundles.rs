//! A move carries the workload's dependents: the ServiceAccount its pods
//! run as, and the NetworkPolicies, PodDisruptionBudgets, Services and
//! HorizontalPodAutoscalers that concern only its pods. On two sandbox
//! clusters with RBAC as the chart renders it: each travels and is listed
//! in the receiver's `applied`; each is removed on rollback; an abusive one
//! is refused before anything is created; a foreign object of the same name
//! stays untouched; and one that the API server refuses rolls back all the
//! others.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{AppliedObject, MigrationPhase, WorkloadMigration};
use ferry::migration::start_migration;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use support_cluster::world::*;

const KUBELET: Duration = Duration::from_millis(30);

/// The dependents `apps/web` has in `a`, as `(kind, name)`.
const CARRIED: [(&str, &str); 5] = [
    ("ServiceAccount", "web"),
    ("NetworkPolicy", "web"),
    ("PodDisruptionBudget", "web"),
    ("Service", "web"),
    ("HorizontalPodAutoscaler", "web"),
];

fn resource(kind: &str) -> ApiResource {
    match kind {
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "NetworkPolicy" => ApiResource::erase::<NetworkPolicy>(&()),
        "PodDisruptionBudget" => ApiResource::erase::<PodDisruptionBudget>(&()),
        "Service" => ApiResource::erase::<Service>(&()),
        "HorizontalPodAutoscaler" => ApiResource::erase::<HorizontalPodAutoscaler>(&()),
        other => panic!("no resource for {other}"),
    }
}

fn api(client: &Client, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &resource(kind))
}

async fn get(client: &Client, kind: &str, name: &str) -> Option<DynamicObject> {
    api(client, kind).get_opt(name).await.expect("read")
}

/// Creates `object` (JSON with its apiVersion and kind) in `apps`.
async fn create(client: &Client, object: Value) -> DynamicObject {
    let kind = object["kind"].as_str().unwrap().to_owned();
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api(client, &kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"))
}

/// The dependents of `workload` labelled `app: <workload>`, each named
/// `name` (a ServiceAccount, a NetworkPolicy, a PodDisruptionBudget, a
/// Service and an autoscaler), as a user writes them.
fn dependents_of(workload: &str, name: &str) -> Vec<Value> {
    let pods = json!({"matchLabels": {"app": workload}});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name},
            "spec": {"podSelector": pods, "policyTypes": ["Ingress"],
                "ingress": [{"ports": [{"port": 8080}]}]}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name}, "spec": {"selector": pods, "maxUnavailable": 1}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": workload}, "clusterIP": "10.96.0.10",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
                "minReplicas": 3, "maxReplicas": 6}}),
    ]
}

/// Gives `apps/web` in `a` its dependents, runs its pods as the
/// ServiceAccount `web`, and adds what must stay behind: a namespace-wide
/// default-deny policy and another Deployment's autoscaler.
async fn give_web_its_dependents(world: &World) {
    let a = &world.a.client;
    for object in dependents_of(WORKLOAD, WORKLOAD) {
        create(a, object).await;
    }
    create(
        a,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
    )
    .await;
    create(
        a,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "billing"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "billing"},
                "maxReplicas": 2}}),
    )
    .await;
    let patch = json!({"spec": {"template": {"spec": {"serviceAccountName": WORKLOAD}}}});
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(a.clone(), NS)
        .patch(WORKLOAD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_available(a, WORKLOAD, REPLICAS).await;
}

fn applied(wm: &WorkloadMigration) -> Vec<AppliedObject> {
    wm.status
        .as_ref()
        .map(|s| s.applied.clone())
        .unwrap_or_default()
}

/// Asserts that each of `carried` exists in `b` with the uid `applied`
/// lists for it.
async fn assert_created(world: &World, applied: &[AppliedObject], carried: &[(&str, &str)]) {
    for (kind, name) in carried {
        let object = get(&world.b.client, kind, name)
            .await
            .unwrap_or_else(|| panic!("{kind} {name} is not in b"));
        let record = applied
            .iter()
            .find(|o| o.kind == *kind && o.name == *name)
            .unwrap_or_else(|| panic!("{kind} {name} is not in applied: {applied:?}"));
        assert_eq!(object.uid().as_deref(), Some(record.uid.as_str()), "{kind}");
    }
}

async fn assert_absent(world: &World, carried: &[(&str, &str)]) {
    for (kind, name) in carried {
        assert!(
            get(&world.b.client, kind, name).await.is_none(),
            "{kind} {name} is in b"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dependent_travels_sanitised_and_is_listed_in_applied() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    world.start_sender();
    world.start_receiver();
    let outcome = start_migration(&world.sender_ctx, world.request())
        .await
        .unwrap();
    let name = started_name(outcome);
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;

    // What travelled: exactly the five, sanitised on the wire.
    let carried: Vec<(String, String)> = (target.spec.dependents.iter())
        .map(|d| {
            let kind = d["kind"].as_str().unwrap().to_owned();
            (kind, d["metadata"]["name"].as_str().unwrap().to_owned())
        })
        .collect();
    let expected: Vec<(String, String)> = CARRIED
        .iter()
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect();
    assert_eq!(carried, expected);
    assert_eq!(mirror.spec.dependents, target.spec.dependents);
    let service = &target.spec.dependents[3];
    for field in ["clusterIP", "clusterIPs"] {
        assert!(service["spec"].get(field).is_none(), "{service}");
    }
    for dependent in &target.spec.dependents {
        assert!(dependent.get("status").is_none(), "{dependent}");
        assert!(dependent["metadata"].get("uid").is_none(), "{dependent}");
    }

    // Each is in b, created by this move and recorded with its uid.
    assert_created(&world, &applied(&target), &CARRIED).await;
    let service = get(&world.b.client, "Service", WORKLOAD).await.unwrap();
    assert_eq!(service.data["spec"]["ports"][0]["port"], 80);
    assert_eq!(
        service
            .labels()
            .get("ferry.dev/migration")
            .map(String::as_str),
        Some(name.as_str())
    );
    let copy = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    let pod = copy.spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(WORKLOAD));
    // What belongs to the namespace or to another workload stayed.
    assert_absent(
        &world,
        &[
            ("NetworkPolicy", "default-deny"),
            ("HorizontalPodAutoscaler", "billing"),
        ],
    )
    .await;
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dependent_is_removed_on_rollback() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    let name = world.progressing_move().await;
    let target = world.targets().get(&name).await.unwrap();
    assert_created(&world, &applied(&target), &CARRIED).await;

    // Withdrawing the move rolls it back: the receiver removes all of it.
    world
        .mirrors()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let targets = world.targets();
    support_cluster::until("the request to be withdrawn", WAIT, || {
        let (targets, name) = (targets.clone(), name.clone());
        async move { targets.get_opt(&name).await.unwrap().is_none() }
    })
    .await;
    assert_absent(&world, &CARRIED).await;
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_none());
    // The source keeps its own.
    for (kind, name) in CARRIED {
        assert!(get(&world.a.client, kind, name).await.is_some(), "{kind}");
    }
    world.shutdown().await;
}

/// A request for `apps/<name>` (labelled `app: <name>`) carrying
/// `dependents`, signed by `a`, created in `a`'s inbox with the peer
/// credential.
async fn send(world: &World, name: &str, dependents: Vec<Value>) {
    let mut wm = world.signed_request(name, "a");
    wm.spec.dependents = dependents;
    ferry::migration::sign_request(&world.keys_a, &mut wm.spec).unwrap();
    let inbox: Api<WorkloadMigration> = Api::namespaced(world.peer_a_in_b().await, INBOX_A);
    inbox.create(&PostParams::default(), &wm).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abusive_dependents_are_refused_and_nothing_is_created() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    let cases: [(&str, usize, Value, &str, &str); 5] = [
        (
            "exposed",
            3,
            json!({"externalIPs": ["203.0.113.7"]}),
            "ServiceNotAllowed",
            "spec.dependents[3].spec.externalIPs",
        ),
        (
            "balanced",
            3,
            json!({"type": "LoadBalancer"}),
            "ServiceNotAllowed",
            "spec.dependents[3].spec.type",
        ),
        (
            "hijack",
            4,
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKLOAD}}),
            "DependentNotAllowed",
            "spec.dependents[4].spec.scaleTargetRef",
        ),
        (
            "wide",
            1,
            json!({"podSelector": {}}),
            "SelectorNotAllowed",
            "spec.dependents[1].spec.podSelector",
        ),
        (
            "budget",
            2,
            json!({"selector": {"matchLabels": {"app": WORKLOAD}}}),
            "SelectorNotAllowed",
            "spec.dependents[2].spec.selector",
        ),
    ];
    for (name, index, change, reason, field) in cases {
        let mut dependents = dependents_of(name, name);
        for (key, value) in change.as_object().unwrap() {
            dependents[index]["spec"][key] = value.clone();
        }
        send(&world, name, dependents).await;
        let wm = wait_phase(&world.targets(), name, MigrationPhase::Rejected).await;
        let status = wm.status.unwrap();
        assert_eq!(status.reason.as_deref(), Some(reason), "{name}");
        let message = status.message.unwrap_or_default();
        assert!(
            message.starts_with(&format!("{field}: ")),
            "{name}: {message}"
        );
        assert!(status.applied.is_empty(), "{name}: {:?}", status.applied);
        let kinds: Vec<(&str, &str)> = CARRIED.iter().map(|(k, _)| (*k, name)).collect();
        assert_absent(&world, &kinds).await;
        assert!(get_deployment(&world.b.client, name).await.is_none());
        assert!(
            world.receiver_ctx.metrics.refusals("a", reason) > 0,
            "{name}"
        );
    }
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_already_in_the_target_is_a_name_conflict_and_stays_untouched() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    let local = create(
        &world.b.client,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": WORKLOAD, "labels": {"owner": "local"}},
            "spec": {"selector": {"app": "local"}, "ports": [{"port": 9090}]}}),
    )
    .await;
    world.start_sender();
    world.start_receiver();
    let outcome = start_migration(&world.sender_ctx, world.request())
        .await
        .unwrap();
    let name = started_name(outcome);
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    assert_eq!(
        mirror.status.unwrap().reason.as_deref(),
        Some("NameConflict")
    );
    let after = get(&world.b.client, "Service", WORKLOAD).await.unwrap();
    assert_eq!(after.uid(), local.uid());
    assert_eq!(after.resource_version(), local.resource_version());
    assert_eq!(after.data["spec"]["selector"], json!({"app": "local"}));
    // Refused before anything was created.
    let others: Vec<(&str, &str)> = CARRIED
        .iter()
        .copied()
        .filter(|(k, _)| *k != "Service")
        .collect();
    assert_absent(&world, &others).await;
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_none());
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_the_api_server_refuses_rolls_back_all_the_others() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    // The autoscaler, created last of the dependents, has a name no API
    // server accepts; everything before it is created first.
    let mut dependents = dependents_of("atomic", "atomic");
    dependents[4]["metadata"]["name"] = "Atomic_Scaler".into();
    send(&world, "atomic", dependents).await;
    let wm = wait_phase(&world.targets(), "atomic", MigrationPhase::Failed).await;
    let status = wm.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("ApplyInvalid"));
    let created: Vec<(&str, &str)> = CARRIED[..4].iter().map(|(k, _)| (*k, "atomic")).collect();
    for (kind, name) in &created {
        assert!(
            status
                .applied
                .iter()
                .any(|o| o.kind == *kind && o.name == *name),
            "{kind} {name} was never created: {:?}",
            status.applied
        );
    }
    assert_absent(&world, &created).await;
    assert!(get_deployment(&world.b.client, "atomic").await.is_none());
    world.shutdown().await;
}

/// The reason on the receiver's request, once it is `Progressing` for it.
async fn wait_reason(api: &Api<WorkloadMigration>, name: &str, reason: &str) -> WorkloadMigration {
    support_cluster::eventually(&format!("{name} to say {reason}"), WAIT, || {
        let api = api.clone();
        async move {
            let wm = api.get_opt(name).await.ok().flatten()?;
            (wm.status.as_ref()?.reason.as_deref() == Some(reason)).then_some(wm)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_stays_until_the_moved_service_has_a_ready_endpoint() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    // b's EndpointSlice controller is down: the moved Service routes nowhere.
    world.b.sandbox.kubelet().set_endpoints(false);
    world.start_sender();
    world.start_receiver();
    let name = started_name(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    let target = wait_reason(&world.targets(), &name, "WaitingForEndpoints").await;
    assert_eq!(phase(&target), MigrationPhase::Progressing);
    let message = target.status.unwrap().message.unwrap_or_default();
    assert!(message.contains("Service web"), "{message}");
    let copy = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    assert_eq!(
        copy.status.and_then(|s| s.available_replicas),
        Some(REPLICAS),
        "the replicas are up; only the endpoints are missing"
    );
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(
        source.spec.replicas,
        Some(REPLICAS),
        "the source still serves"
    );
    assert_ne!(
        phase(&world.mirrors().get(&name).await.unwrap()),
        MigrationPhase::Completed
    );

    world.b.sandbox.kubelet().set_endpoints(true);
    wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(0));
    world.shutdown().await;
}

/// The Multi-Cluster Services API's ServiceExport, as its CRD installs it.
async fn install_service_export_crd(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "serviceexports.multicluster.x-k8s.io"},
        "spec": {
            "group": "multicluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "serviceexports", "singular": "serviceexport",
                "kind": "ServiceExport", "listKind": "ServiceExportList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("ServiceExport CRD");
}

fn service_exports(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ServiceExport"),
        "serviceexports",
    );
    Api::namespaced_with(client.clone(), NS, &resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_service_is_exported_where_the_multi_cluster_services_api_is_served() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    install_service_export_crd(&world.b.client).await;
    let exports = service_exports(&world.b.client);
    support_cluster::eventually("the ServiceExport API is served", WAIT, || {
        let exports = exports.clone();
        async move { exports.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;
    // Only the receiver: the request reaches Ready and stays there.
    world.start_receiver();
    let name = started_name(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    let target = wait_phase(&world.targets(), &name, MigrationPhase::Ready).await;
    let export = exports
        .get(WORKLOAD)
        .await
        .expect("the Service is exported");
    let recorded = applied(&target)
        .into_iter()
        .find(|o| o.kind == "ServiceExport")
        .expect("the export is in applied");
    assert_eq!(export.uid(), Some(recorded.uid));
    assert_eq!(
        export
            .labels()
            .get("ferry.dev/migration")
            .map(String::as_str),
        Some(name.as_str())
    );

    // Deleting the request before it completes rolls it back: the export
    // goes with everything else the move created.
    world
        .targets()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // The request goes once its finalizer removed everything it recorded.
    let targets = world.targets();
    support_cluster::eventually("the request rolled back and gone", WAIT, || {
        let targets = targets.clone();
        let name = name.clone();
        async move { targets.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(
        exports.get_opt(WORKLOAD).await.unwrap().is_none(),
        "the export is removed"
    );
    assert_absent(&world, &[("Service", WORKLOAD)]).await;
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_move_creates_the_autoscaler_only_with_its_last_step() {
    let mut world = World::start(KUBELET).await;
    give_web_its_dependents(&world).await;
    world.start_sender();
    world.start_receiver();
    let mut request = world.request();
    request.strategy = Some(ferry::crd::MigrationStrategy {
        step: Some(ferry::crd::ReplicaCount::Count(1)),
        pause: Some(ferry::crd::Duration::new("500ms")),
        ..ferry::crd::MigrationStrategy::progressive()
    });
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    // A step before the last: everything is there but the autoscaler,
    // which would scale the target past the step.
    let early = wait_reason(&world.targets(), &name, "StepReady").await;
    let progress = early.status.as_ref().unwrap().progress.clone().unwrap();
    assert!(progress.step < progress.steps, "{progress:?}");
    let kinds: Vec<String> = applied(&early).into_iter().map(|o| o.kind).collect();
    assert!(
        !kinds.contains(&"HorizontalPodAutoscaler".to_owned()),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"Service".to_owned()), "{kinds:?}");

    let target = wait_phase(&world.targets(), &name, MigrationPhase::Completed).await;
    assert_created(&world, &applied(&target), &CARRIED).await;
    world.shutdown().await;
}
