//! Namespace lifecycle, through the real `kube::Client` and raw HTTP: no
//! create in a missing (404) or terminating (403) namespace, the system
//! namespaces, termination (content, conditions, finalizers), and the
//! `/status`, `/finalize` and collection doors that must not bypass it.

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ObjectMeta, Status};
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

fn held(name: &str, finalizer: &str) -> ConfigMap {
    let mut object = cm(name);
    object.metadata.finalizers = Some(vec![finalizer.into()]);
    object
}

async fn create_namespace(client: &kube::Client, name: &str, finalizers: &[&str]) -> Namespace {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    if !finalizers.is_empty() {
        ns.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    api.create(&PostParams::default(), &ns).await.unwrap()
}

/// The `reason`, `message` and `field` of each `details.causes` entry.
fn causes(status: &Status) -> Vec<(String, String, String)> {
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.reason.clone(), c.message.clone(), c.field.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn condition(ns: &Namespace, type_: &str) -> (String, String, String) {
    let c = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {ns:?}"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

fn phase(ns: &Namespace) -> String {
    ns.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_namespaces_not_found() {
    let cluster = common::start("ns-missing").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "nowhere");
    let refused = common::status(api.create(&PostParams::default(), &cm("a")).await);
    assert_eq!(
        (
            refused.code,
            refused.reason.as_str(),
            refused.message.as_str()
        ),
        (404, "NotFound", "namespaces \"nowhere\" not found")
    );
    let details = refused.details.expect("details");
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("nowhere", "", "namespaces")
    );

    // Server-side apply creates too, and is refused the same way.
    let apply = PatchParams::apply("test");
    let patch =
        Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}));
    let refused = common::status(api.patch("b", &apply, &patch).await);
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    create_namespace(&cluster.client, "nowhere", &[]).await;
    api.create(&PostParams::default(), &cm("a"))
        .await
        .expect("admitted once it exists");
    cluster.stop().await;
}

#[tokio::test]
async fn a_terminating_namespace_refuses_new_content_until_its_finalizers_let_it_go() {
    let cluster = common::start("ns-terminating").await;
    let created = create_namespace(&cluster.client, "doomed", &[]).await;
    assert_eq!(
        created.spec.clone().and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()])
    );
    assert_eq!(phase(&created), "Active");
    let labels = created.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("doomed")
    );

    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "doomed");
    inside
        .create(&PostParams::default(), &held("held", "ferry.dev/hold"))
        .await
        .unwrap();
    inside
        .create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();

    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let answer = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let marked = answer
        .left()
        .expect("a namespace delete answers with the namespace");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(phase(&marked), "Terminating");

    // The controller deleted what it could and says what holds it.
    assert_eq!(common::status(inside.get("plain").await).code, 404);
    assert!(
        inside
            .get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let terminating = namespaces.get("doomed").await.unwrap();
    assert_eq!(phase(&terminating), "Terminating");
    assert_eq!(
        terminating.spec.clone().and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()])
    );
    assert_eq!(
        condition(&terminating, "NamespaceContentRemaining"),
        (
            "True".into(),
            "SomeResourcesRemain".into(),
            "Some resources are remaining: configmaps. has 1 resource instances".into()
        )
    );
    assert_eq!(
        condition(&terminating, "NamespaceFinalizersRemaining"),
        ("True".into(), "SomeFinalizersRemain".into(), "Some content in the namespace has finalizers remaining: ferry.dev/hold in 1 resource instances".into())
    );
    assert_eq!(
        condition(&terminating, "NamespaceDeletionContentFailure").0,
        "False"
    );

    let refused = common::status(inside.create(&PostParams::default(), &cm("late")).await);
    assert_eq!(
        (
            refused.code,
            refused.reason.as_str(),
            refused.message.as_str()
        ),
        (
            403,
            "Forbidden",
            "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
        )
    );
    assert_eq!(
        causes(&refused),
        [(
            "NamespaceTerminating".into(),
            "namespace doomed is being terminated".into(),
            "metadata.namespace".into()
        )]
    );
    let details = refused.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("late", "configmaps")
    );

    // A generated name is not known yet: the refusal names the prefix.
    let mut generated = cm("");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let refused = common::status(inside.create(&PostParams::default(), &generated).await);
    assert!(
        refused
            .message
            .starts_with("configmaps \"gen-\" is forbidden"),
        "{}",
        refused.message
    );

    // Updates are admitted: that is how the content's finalizers go.
    inside
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("updates in a terminating namespace are allowed");
    inside
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(common::status(inside.get("held").await).code, 404);
    assert_eq!(common::status(namespaces.get("doomed").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn a_namespace_held_by_its_own_finalizer_outlives_its_content() {
    let cluster = common::start("ns-held").await;
    create_namespace(&cluster.client, "kept", &["ferry.dev/keep"]).await;
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "kept");
    inside
        .create(&PostParams::default(), &cm("content"))
        .await
        .unwrap();

    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(common::status(inside.get("content").await).code, 404);
    let emptied = namespaces
        .get("kept")
        .await
        .expect("held by its metadata finalizer");
    assert_eq!(phase(&emptied), "Terminating");
    assert_eq!(
        emptied.spec.clone().and_then(|s| s.finalizers),
        None,
        "the kubernetes finalizer is done"
    );
    assert_eq!(
        condition(&emptied, "NamespaceContentRemaining"),
        (
            "False".into(),
            "ContentRemoved".into(),
            "All content successfully removed".into()
        )
    );

    namespaces
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(common::status(namespaces.get("kept").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn the_system_namespaces_exist_and_three_of_them_cannot_be_deleted() {
    let cluster = common::start("ns-system").await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let ns = namespaces.get(name).await.unwrap();
        assert_eq!(phase(&ns), "Active", "{name}");
        assert_eq!(
            ns.spec.and_then(|s| s.finalizers),
            Some(vec!["kubernetes".to_string()]),
            "{name}"
        );
        let labels = ns.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get("kubernetes.io/metadata.name")
                .map(String::as_str),
            Some(name)
        );
    }
    for name in ["default", "kube-system", "kube-public"] {
        let refused = common::status(namespaces.delete(name, &DeleteParams::default()).await);
        assert_eq!(
            (refused.code, refused.reason.as_str(), refused.message),
            (
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
            )
        );
        let details = refused.details.unwrap();
        assert_eq!(
            (details.name.as_str(), details.kind.as_str()),
            (name, "namespaces")
        );
        let still = namespaces.get(name).await.unwrap();
        assert!(still.metadata.deletion_timestamp.is_none(), "{name}");
    }
    // Upstream lets kube-node-lease go (its controller recreates it).
    namespaces
        .delete("kube-node-lease", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        common::status(namespaces.get("kube-node-lease").await).code,
        404
    );

    // One request may not delete them all.
    let (code, body) = common::raw(&cluster.client, "DELETE", "/api/v1/namespaces", None).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed")),
        "{body}"
    );
    assert!(namespaces.get("default").await.is_ok());
    cluster.stop().await;
}

#[tokio::test]
async fn status_and_finalize_cannot_revive_or_rewrite_a_namespace() {
    let cluster = common::start("ns-doors").await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut ns = create_namespace(&cluster.client, "door", &[]).await;

    // The main resource cannot change spec.finalizers or status.
    ns.spec.as_mut().unwrap().finalizers = Some(vec![]);
    ns.status.as_mut().unwrap().phase = Some("Terminating".into());
    let replaced = namespaces
        .replace("door", &PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(
        replaced.spec.clone().and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()])
    );
    assert_eq!(phase(&replaced), "Active");

    // /status cannot claim a phase the deletionTimestamp does not back.
    let terminating = Patch::Merge(json!({"status": {"phase": "Terminating"}}));
    let refused = common::status(
        namespaces
            .patch_status("door", &PatchParams::default(), &terminating)
            .await,
    );
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (
            422,
            "Namespace \"door\" is invalid: status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
        )
    );

    // /finalize takes only valid names, only by PUT, only on namespaces.
    let path = "/api/v1/namespaces/door/finalize";
    let body = |finalizers: serde_json::Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "door"}, "spec": {"finalizers": finalizers}});
    let (code, refused) =
        common::raw(&cluster.client, "PUT", path, Some(body(json!(["bad"])))).await;
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "Namespace \"door\" is invalid: spec.finalizers[0]: Invalid value: \"bad\": name is neither a standard finalizer name nor is it fully qualified"
    );
    for method in ["GET", "PATCH"] {
        let (code, answer) = common::raw(&cluster.client, method, path, Some(json!({}))).await;
        assert_eq!(code, 405, "{method}: {answer}");
    }
    let (code, _) = common::raw(
        &cluster.client,
        "PUT",
        "/api/v1/namespaces/default/configmaps/x/finalize",
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 404);
    let (code, finalized) = common::raw(
        &cluster.client,
        "PUT",
        path,
        Some(body(json!(["example.com/other"]))),
    )
    .await;
    assert_eq!(code, 200, "{finalized}");
    assert_eq!(
        finalized["spec"]["finalizers"],
        json!(["example.com/other"])
    );
    assert_eq!(
        finalized["status"]["phase"], "Active",
        "status is not /finalize's"
    );

    // A terminating namespace cannot be made Active again through /status.
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "door");
    inside
        .create(&PostParams::default(), &held("held", "ferry.dev/hold"))
        .await
        .unwrap();
    namespaces
        .delete("door", &DeleteParams::default())
        .await
        .unwrap();
    let active = Patch::Merge(json!({"status": {"phase": "Active"}}));
    let refused = common::status(
        namespaces
            .patch_status("door", &PatchParams::default(), &active)
            .await,
    );
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (
            422,
            "Namespace \"door\" is invalid: status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"
        )
    );
    assert_eq!(
        common::status(inside.create(&PostParams::default(), &cm("late")).await).code,
        403
    );

    // Emptying spec.finalizers by hand is the documented way out: the
    // namespace goes although content remains, as upstream.
    let (code, _) = common::raw(&cluster.client, "PUT", path, Some(body(json!([])))).await;
    assert_eq!(code, 200);
    assert_eq!(common::status(namespaces.get("door").await).code, 404);
    cluster.stop().await;
}
