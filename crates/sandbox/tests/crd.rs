//! Custom resources: CRD registration and discovery, schema validation and
//! pruning, and a `kube_runtime::Controller` writing status with
//! server-side apply.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A small custom resource for the tests.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "test.ferry.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    #[schemars(range(min = 0, max = 100))]
    pub size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    #[schemars(range(min = 0.0))]
    pub min_savings_percent: f64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    pub phase: String,
    pub observed_size: i32,
}

async fn install_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .expect("CRD created");
}

fn widget(name: &str, size: i32) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            thresholds: None,
        },
    )
}

#[tokio::test]
async fn a_created_crd_is_served_and_discoverable() {
    let cluster = common::start("crd-discovery").await;
    install_crd(&cluster.client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let crd = crds.get("widgets.test.ferry.dev").await.unwrap();
    let established = crd
        .status
        .unwrap()
        .conditions
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established);

    let resources = cluster
        .client
        .list_api_group_resources("test.ferry.dev/v1")
        .await
        .unwrap();
    let names: Vec<&str> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    assert_eq!(
        resources.resources[0].short_names.as_deref(),
        Some(&["wd".to_string()][..])
    );

    let widgets: Api<Widget> = Api::namespaced(cluster.client.clone(), "default");
    let created = widgets
        .create(&PostParams::default(), &widget("w1", 3))
        .await
        .unwrap();
    assert_eq!(created.spec.size, 3);

    crds.delete("widgets.test.ferry.dev", &Default::default())
        .await
        .unwrap();
    assert_eq!(common::status(widgets.get("w1").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn the_crd_schema_rejects_a_bad_object_with_422_naming_the_field() {
    let cluster = common::start("crd-schema").await;
    install_crd(&cluster.client).await;
    let widgets: Api<Widget> = Api::namespaced(cluster.client.clone(), "default");
    let mut bad = widget("bad", 5);
    bad.spec.thresholds = Some(Thresholds {
        min_savings_percent: -1.0,
    });
    let status = common::status(widgets.create(&PostParams::default(), &bad).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status
            .message
            .contains("spec.thresholds.minSavingsPercent: Invalid value: -1"),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("greater than or equal to 0"),
        "{}",
        status.message
    );
    let causes = status.details.unwrap().causes;
    assert_eq!(causes[0].field, "spec.thresholds.minSavingsPercent");

    let too_big = common::status(
        widgets
            .create(&PostParams::default(), &widget("big", 101))
            .await,
    );
    assert!(too_big.message.contains("spec.size"), "{}", too_big.message);

    // Unknown fields are pruned, not stored.
    let gvk = GroupVersionKind::gvk("test.ferry.dev", "v1", "Widget");
    let dynamic: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        "default",
        &ApiResource::from_gvk(&gvk),
    );
    let mut obj = DynamicObject::new("pruned", &ApiResource::from_gvk(&gvk));
    obj.data = json!({"spec": {"size": 1, "unknown": true}, "extra": 1});
    let stored = dynamic.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(stored.data["spec"], json!({"size": 1}));
    assert!(stored.data.get("extra").is_none());
    cluster.stop().await;
}

#[tokio::test]
async fn status_writes_keep_generation_and_spec_writes_bump_it() {
    let cluster = common::start("crd-generation").await;
    install_crd(&cluster.client).await;
    let widgets: Api<Widget> = Api::namespaced(cluster.client.clone(), "default");
    widgets
        .create(&PostParams::default(), &widget("g", 1))
        .await
        .unwrap();
    let status = json!({"status": {"phase": "Ready", "observedSize": 1}, "spec": {"size": 50}});
    let after_status = widgets
        .patch_status("g", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(after_status.metadata.generation, Some(1));
    assert_eq!(after_status.spec.size, 1, "a status write ignores spec");
    assert_eq!(after_status.status.as_ref().unwrap().phase, "Ready");

    let spec = json!({"spec": {"size": 2}, "status": {"phase": "Ignored"}});
    let after_spec = widgets
        .patch("g", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    assert_eq!(after_spec.metadata.generation, Some(2));
    assert_eq!(
        after_spec.status.unwrap().phase,
        "Ready",
        "a main write ignores status"
    );

    let same = widgets
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        same.metadata.generation,
        Some(2),
        "metadata changes keep generation"
    );
    cluster.stop().await;
}

struct Ctx {
    client: kube::Client,
}

async fn reconcile(widget: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let api: Api<Widget> =
        Api::namespaced(ctx.client.clone(), &widget.namespace().unwrap_or_default());
    let status = json!({
        "apiVersion": "test.ferry.dev/v1",
        "kind": "Widget",
        "status": {"phase": "Ready", "observedSize": widget.spec.size},
    });
    api.patch_status(
        &widget.name_any(),
        &PatchParams::apply("widget-controller").force(),
        &Patch::Apply(&status),
    )
    .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_: Arc<Widget>, _: &kube::Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn a_controller_reconciles_a_custom_resource_and_applies_its_status() {
    let cluster = common::start("crd-controller").await;
    install_crd(&cluster.client).await;
    let widgets: Api<Widget> = Api::all(cluster.client.clone());
    let ctx = Arc::new(Ctx {
        client: cluster.client.clone(),
    });
    let controller = tokio::spawn(
        Controller::new(widgets, watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {}),
    );
    let namespaced: Api<Widget> = Api::namespaced(cluster.client.clone(), "default");
    namespaced
        .create(&PostParams::default(), &widget("managed", 7))
        .await
        .unwrap();
    common::eventually("status from the controller", || async {
        let w = namespaced.get("managed").await.ok()?;
        w.status
            .filter(|s| s.phase == "Ready" && s.observed_size == 7)
    })
    .await;
    // A spec change is reconciled again.
    namespaced
        .patch(
            "managed",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"size": 9}})),
        )
        .await
        .unwrap();
    let w = common::eventually("status follows spec", || async {
        let w = namespaced.get("managed").await.ok()?;
        (w.status.as_ref()?.observed_size == 9).then_some(w)
    })
    .await;
    let managers: Vec<String> = w
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"widget-controller".to_string()),
        "{managers:?}"
    );
    controller.abort();
    cluster.stop().await;
}
