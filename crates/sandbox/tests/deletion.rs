//! Deletion as the API documents it, through the real `kube::Client` (and
//! raw HTTP where `kube::Api` cannot say it): background, foreground and
//! orphan propagation and the deprecated `orphanDependents`, finalizers,
//! preconditions, `dryRun`, the validation of `DeleteOptions`, and
//! kube-runtime's `finalizer` helper across a foreground deletion.

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use kube::core::ObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A ConfigMap owned by `owners`, optionally blocking them and held by a
/// finalizer of its own.
fn dependent(name: &str, owners: &[&ConfigMap], block: bool, hold: bool) -> ConfigMap {
    let mut object = cm(name);
    let refs: Vec<_> = owners
        .iter()
        .map(|owner| {
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "name": owner.metadata.name, "uid": owner.metadata.uid,
                "blockOwnerDeletion": block,
            })
        })
        .collect();
    object.metadata.owner_references = Some(serde_json::from_value(json!(refs)).unwrap());
    if hold {
        object.metadata.finalizers = Some(vec!["ferry.dev/hold".into()]);
    }
    object
}

async fn release(api: &Api<ConfigMap>, name: &str) {
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

fn owner_names(object: &ConfigMap) -> Vec<String> {
    object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect()
}

fn finalizers(object: &ConfigMap) -> Vec<String> {
    object.metadata.finalizers.clone().unwrap_or_default()
}

async fn gone(api: &Api<ConfigMap>, name: &str) -> bool {
    matches!(api.get(name).await, Err(kube::Error::Api(s)) if s.code == 404)
}

#[tokio::test]
async fn background_deletion_takes_only_dependents_without_another_live_owner() {
    let cluster = common::start("gc-background").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let pp = PostParams::default();
    let first = api.create(&pp, &cm("first")).await.unwrap();
    let second = api.create(&pp, &cm("second")).await.unwrap();
    api.create(&pp, &dependent("only-first", &[&first], false, false))
        .await
        .unwrap();
    api.create(&pp, &dependent("shared", &[&first, &second], true, false))
        .await
        .unwrap();

    let answer = api.delete("first", &DeleteParams::default()).await.unwrap();
    let status = answer
        .right()
        .expect("a ConfigMap delete answers with a Status");
    let details = status.details.expect("details");
    assert_eq!(
        (
            details.name.as_str(),
            details.kind.as_str(),
            details.uid.as_str()
        ),
        (
            "first",
            "configmaps",
            first.metadata.uid.as_deref().unwrap()
        )
    );
    assert!(gone(&api, "only-first").await);
    let shared = api.get("shared").await.expect("still owned by second");
    assert_eq!(owner_names(&shared), ["second"]);
    cluster.stop().await;
}

#[tokio::test]
async fn foreground_deletion_holds_the_owner_until_blocking_dependents_are_gone() {
    let cluster = common::start("gc-foreground").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner")).await.unwrap();
    api.create(&pp, &dependent("blocking", &[&owner], true, true))
        .await
        .unwrap();
    api.create(&pp, &dependent("loose", &[&owner], false, true))
        .await
        .unwrap();
    api.create(&pp, &dependent("plain", &[&owner], true, false))
        .await
        .unwrap();
    let from = api
        .get("owner")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    let answer = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let marked = answer.left().expect("the owner stays while it waits");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(finalizers(&marked), ["foregroundDeletion"]);
    assert_eq!(
        marked.metadata.generation,
        Some(2),
        "the generation moves when deletion starts"
    );

    // Dependents go first; the ones held by finalizers are marked.
    assert!(gone(&api, "plain").await);
    for name in ["blocking", "loose"] {
        assert!(
            api.get(name)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_some(),
            "{name}"
        );
    }
    assert_eq!(
        finalizers(&api.get("owner").await.unwrap()),
        ["foregroundDeletion"]
    );

    // A dependent that does not block may outlive the owner's wait...
    release(&api, "loose").await;
    assert!(gone(&api, "loose").await);
    assert!(
        api.get("owner").await.is_ok(),
        "still blocked by `blocking`"
    );
    // ...the blocking one may not.
    release(&api, "blocking").await;
    assert!(gone(&api, "blocking").await);
    assert!(gone(&api, "owner").await);

    // A watcher sees every dependent go before the owner does.
    let mut events = api
        .watch(&WatchParams::default().timeout(30), &from)
        .await
        .unwrap()
        .boxed();
    let mut deleted = Vec::new();
    while !deleted.contains(&"owner".to_string()) {
        match events.try_next().await.unwrap() {
            Some(WatchEvent::Deleted(object)) => deleted.push(object.metadata.name.unwrap()),
            Some(_) => {}
            None => panic!("the watch ended before the owner's deletion: {deleted:?}"),
        }
    }
    assert_eq!(deleted, ["plain", "loose", "blocking", "owner"]);
    cluster.stop().await;
}

#[tokio::test]
async fn an_owner_stops_waiting_when_its_dependent_stops_blocking_it() {
    let cluster = common::start("gc-unblock").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let held = dependent("held", &[&owner], true, true);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    assert!(api.get("owner").await.is_ok(), "blocked by `held`");

    let mut references = held.metadata.owner_references.unwrap();
    references[0].block_owner_deletion = Some(false);
    let unblock = Patch::Merge(json!({"metadata": {"ownerReferences": references}}));
    api.patch("held", &PatchParams::default(), &unblock)
        .await
        .unwrap();
    assert!(gone(&api, "owner").await, "nothing blocks it any more");
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cluster.stop().await;
}

#[tokio::test]
async fn foreground_deletion_unwinds_a_chain_from_the_bottom() {
    let cluster = common::start("gc-chain").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let pp = PostParams::default();
    let top = api.create(&pp, &cm("top")).await.unwrap();
    let middle = api
        .create(&pp, &dependent("middle", &[&top], true, false))
        .await
        .unwrap();
    api.create(&pp, &dependent("bottom", &[&middle], true, true))
        .await
        .unwrap();

    api.delete("top", &DeleteParams::foreground())
        .await
        .unwrap();
    // The middle has dependents of its own, so it is deleted in the foreground too.
    let middle = api.get("middle").await.unwrap();
    assert_eq!(finalizers(&middle), ["foregroundDeletion"]);
    assert!(
        api.get("bottom")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(api.get("top").await.is_ok());

    release(&api, "bottom").await;
    for name in ["bottom", "middle", "top"] {
        assert!(gone(&api, name).await, "{name}");
    }
    cluster.stop().await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_and_strips_the_reference() {
    let cluster = common::start("gc-orphan").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let pp = PostParams::default();

    let owner = api.create(&pp, &cm("owner")).await.unwrap();
    api.create(&pp, &dependent("child", &[&owner], true, false))
        .await
        .unwrap();
    let answer = api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    assert_eq!(finalizers(&answer.left().expect("pending")), ["orphan"]);
    assert!(gone(&api, "owner").await);
    assert_eq!(
        owner_names(&api.get("child").await.unwrap()),
        Vec::<String>::new()
    );

    // The deprecated orphanDependents says the same.
    let owner = api.create(&pp, &cm("old-style")).await.unwrap();
    api.create(&pp, &dependent("old-child", &[&owner], false, false))
        .await
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/old-style";
    let (code, body) = common::raw(
        &cluster.client,
        "DELETE",
        path,
        Some(json!({"orphanDependents": true})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(gone(&api, "old-style").await);
    assert!(owner_names(&api.get("old-child").await.unwrap()).is_empty());

    // So does the query, when there is no body.
    let owner = api.create(&pp, &cm("by-query")).await.unwrap();
    api.create(&pp, &dependent("query-child", &[&owner], false, false))
        .await
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/by-query?propagationPolicy=Orphan";
    let (code, _) = common::raw(&cluster.client, "DELETE", path, None).await;
    assert_eq!(code, 200);
    assert!(owner_names(&api.get("query-child").await.unwrap()).is_empty());

    // orphanDependents: false asks for cascading: 202 while the owner waits.
    let mut held = cm("cascading");
    held.metadata.finalizers = Some(vec!["ferry.dev/hold".into()]);
    let owner = api.create(&pp, &held).await.unwrap();
    api.create(&pp, &dependent("doomed-child", &[&owner], false, false))
        .await
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/cascading";
    let (code, body) = common::raw(
        &cluster.client,
        "DELETE",
        path,
        Some(json!({"orphanDependents": false})),
    )
    .await;
    assert_eq!(
        (code, body["metadata"]["finalizers"].clone()),
        (202, json!(["ferry.dev/hold"]))
    );
    assert!(
        api.get("doomed-child").await.is_ok(),
        "its owner still exists"
    );
    release(&api, "cascading").await;
    assert!(gone(&api, "doomed-child").await);
    cluster.stop().await;
}

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_is_collected() {
    let cluster = common::start("gc-dangling").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut ghost = cm("ghost");
    ghost.metadata.uid = Some("00000000-0000-4000-8000-000000000000".into());
    api.create(
        &PostParams::default(),
        &dependent("orphaned", &[&ghost], false, false),
    )
    .await
    .expect("created");
    assert!(gone(&api, "orphaned").await, "its owner does not exist");

    // An owner of a kind the sandbox does not serve cannot be looked up:
    // like upstream's collector, leave the dependent alone.
    let mut unknown = dependent("unknown-owner", &[&ghost], false, false);
    unknown.metadata.owner_references.as_mut().unwrap()[0].api_version = "apps/v1".into();
    unknown.metadata.owner_references.as_mut().unwrap()[0].kind = "ReplicaSet".into();
    api.create(&PostParams::default(), &unknown).await.unwrap();
    assert!(api.get("unknown-owner").await.is_ok());
    cluster.stop().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_and_none_may_be_added_once_it_started() {
    let cluster = common::start("finalizer-rules").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut object = cm("held");
    object.metadata.finalizers = Some(vec!["example.com/one".into()]);
    api.create(&PostParams::default(), &object).await.unwrap();
    let marked = api
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    let again = api
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, marked.metadata.resource_version,
        "a repeated delete changes nothing"
    );

    let add =
        Patch::Merge(json!({"metadata": {"finalizers": ["example.com/one", "example.com/two"]}}));
    let refused = common::status(api.patch("held", &PatchParams::default(), &add).await);
    assert_eq!(
        (
            refused.code,
            refused.reason.as_str(),
            refused.message.as_str()
        ),
        (
            422,
            "Invalid",
            "ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/two\"}"
        )
    );
    release(&api, "held").await;
    assert!(gone(&api, "held").await);

    // Rules on any write: not both GC finalizers, standard names only
    // without a domain on built-in kinds, owners named in full.
    let mut both = cm("both");
    both.metadata.finalizers = Some(vec!["orphan".into(), "foregroundDeletion".into()]);
    let refused = common::status(api.create(&PostParams::default(), &both).await);
    assert_eq!(
        refused.message,
        "ConfigMap \"both\" is invalid: metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"
    );
    let mut bare = cm("bare");
    bare.metadata.finalizers = Some(vec!["cleanup".into()]);
    let refused = common::status(api.create(&PostParams::default(), &bare).await);
    assert_eq!(
        refused.message,
        "ConfigMap \"bare\" is invalid: metadata.finalizers[0]: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"
    );
    let mut anonymous = cm("anonymous");
    anonymous.metadata.owner_references = Some(
        serde_json::from_value(
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": ""}]),
        )
        .unwrap(),
    );
    let refused = common::status(api.create(&PostParams::default(), &anonymous).await);
    assert_eq!(
        refused.message,
        "ConfigMap \"anonymous\" is invalid: metadata.ownerReferences[0].uid: Required value: must not be empty"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn preconditions_that_do_not_match_are_conflicts() {
    let cluster = common::start("preconditions").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let created = api.create(&PostParams::default(), &cm("x")).await.unwrap();
    let (uid, rv) = (
        created.metadata.uid.unwrap(),
        created.metadata.resource_version.unwrap(),
    );
    let with = |uid: Option<&str>, rv: Option<&str>| DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(String::from),
            resource_version: rv.map(String::from),
        }),
        ..DeleteParams::default()
    };

    let refused = common::status(api.delete("x", &with(Some("wrong"), None)).await);
    assert_eq!(
        (refused.code, refused.reason.as_str(), refused.message),
        (
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on ConfigMap \"x\": the UID in the precondition (wrong) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            )
        )
    );
    let details = refused.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("x", "ConfigMap")
    );
    let refused = common::status(api.delete("x", &with(None, Some("1"))).await);
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"x\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    assert!(api.get("x").await.is_ok());
    api.delete("x", &with(Some(&uid), Some(&rv))).await.unwrap();
    assert!(gone(&api, "x").await);

    // Namespaces answer in their own storage's words.
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("guarded".into());
    let ns = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let refused = common::status(
        namespaces
            .delete("guarded", &with(Some("wrong"), None))
            .await,
    );
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on namespaces \"guarded\": Precondition failed: UID in precondition: wrong, UID in object meta: {}",
            ns.metadata.uid.unwrap()
        )
    );
    cluster.stop().await;
}

#[tokio::test]
async fn dry_run_deletes_nothing() {
    let cluster = common::start("dry-run").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let pp = PostParams::default();
    let owner = api.create(&pp, &cm("owner")).await.unwrap();
    api.create(&pp, &dependent("child", &[&owner], true, false))
        .await
        .unwrap();
    let dry = |p: DeleteParams| DeleteParams { dry_run: true, ..p };

    let answer = api
        .delete("child", &dry(DeleteParams::default()))
        .await
        .unwrap();
    assert!(answer.is_right(), "answered as if deleted");
    let answer = api
        .delete("owner", &dry(DeleteParams::foreground()))
        .await
        .unwrap();
    assert_eq!(finalizers(&answer.left().unwrap()), ["foregroundDeletion"]);
    let stored = api.get("owner").await.unwrap();
    assert_eq!(
        stored.metadata.resource_version,
        owner.metadata.resource_version
    );
    assert!(stored.metadata.deletion_timestamp.is_none());
    assert!(api.get("child").await.is_ok());

    let (code, listed) = common::raw(
        &cluster.client,
        "DELETE",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        None,
    )
    .await;
    assert_eq!(
        (code, listed["items"].as_array().map(Vec::len)),
        (200, Some(2))
    );
    assert!(api.get("owner").await.is_ok() && api.get("child").await.is_ok());

    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("rehearsal".into());
    namespaces.create(&pp, &ns).await.unwrap();
    let answer = namespaces
        .delete("rehearsal", &dry(DeleteParams::default()))
        .await
        .unwrap();
    assert!(answer.left().unwrap().metadata.deletion_timestamp.is_some());
    let stored = namespaces.get("rehearsal").await.unwrap();
    assert_eq!(
        stored.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
    cluster.stop().await;
}

#[tokio::test]
async fn delete_options_are_validated_before_anything_is_deleted() {
    let cluster = common::start("delete-options").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &cm("x")).await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps/x";
    let cases = [
        (
            json!({"propagationPolicy": "Sideways"}),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        ),
        (
            json!({"propagationPolicy": "Orphan", "orphanDependents": true}),
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            json!({"dryRun": ["Maybe"]}),
            "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Maybe\"]: supported values: \"All\"",
        ),
    ];
    for (options, message) in cases {
        let (code, body) =
            common::raw(&cluster.client, "DELETE", path, Some(options.clone())).await;
        assert_eq!(
            (code, body["reason"].as_str()),
            (422, Some("Invalid")),
            "{options}"
        );
        assert_eq!(body["message"], message);
        assert_eq!(body["details"]["kind"], "DeleteOptions");
    }
    let (code, body) = common::raw(
        &cluster.client,
        "DELETE",
        path,
        Some(json!({"orphanDependents": "yes"})),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    assert!(api.get("x").await.is_ok(), "nothing was deleted");
    cluster.stop().await;
}

/// The controller's shared state: its Api and how often it cleaned up.
struct Context {
    api: Api<ConfigMap>,
    cleanups: AtomicUsize,
}

#[tokio::test]
async fn kube_runtimes_finalizer_helper_cleans_up_across_a_foreground_deletion() {
    let cluster = common::start("finalizer-helper").await;
    let mut ns = Namespace::default();
    ns.metadata.name = Some("controlled".into());
    Api::<Namespace>::all(cluster.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "controlled");
    let context = Arc::new(Context {
        api: api.clone(),
        cleanups: AtomicUsize::new(0),
    });
    const FINALIZER: &str = "ferry.dev/cleanup";
    let reconcile = |object: Arc<ConfigMap>, ctx: Arc<Context>| async move {
        let api = ctx.api.clone();
        finalizer(&api, FINALIZER, object, |event| async move {
            if let Finalizer::Cleanup(_) = event {
                ctx.cleanups.fetch_add(1, Ordering::SeqCst);
            }
            Ok::<_, Infallible>(Action::await_change())
        })
        .await
    };
    let controller = Controller::new(api.clone(), watcher::Config::default().labels("role=owner"))
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_millis(50)),
            context.clone(),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    let mut owner = cm("owner");
    owner.metadata.labels = Some([("role".to_string(), "owner".to_string())].into());
    let owner = api.create(&PostParams::default(), &owner).await.unwrap();
    common::eventually("the controller's finalizer", || async {
        let current = api.get("owner").await.ok()?;
        (finalizers(&current) == [FINALIZER]).then_some(())
    })
    .await;
    api.create(
        &PostParams::default(),
        &dependent("dependent", &[&owner], true, true),
    )
    .await
    .unwrap();

    let marked = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    assert_eq!(
        finalizers(&marked.left().unwrap()),
        [FINALIZER, "foregroundDeletion"]
    );
    // The helper removes its own finalizer by index while the collector's
    // stays: the owner waits for its blocking dependent.
    common::eventually("the cleanup", || async {
        let current = api.get("owner").await.ok()?;
        (finalizers(&current) == ["foregroundDeletion"]).then_some(())
    })
    .await;
    assert_eq!(context.cleanups.load(Ordering::SeqCst), 1);
    assert!(
        api.get("dependent")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    release(&api, "dependent").await;
    common::eventually("the owner to go", || async {
        gone(&api, "owner").await.then_some(())
    })
    .await;
    assert_eq!(
        context.cleanups.load(Ordering::SeqCst),
        1,
        "cleaned up once"
    );
    task.abort();
    cluster.stop().await;
}
