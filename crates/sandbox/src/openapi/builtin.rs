//! The schemas of the built-in kinds, taken from k8s-openapi's
//! `schemars::JsonSchema` impls under upstream's definition names
//! (`io.k8s.api.apps.v1.Deployment`), with the
//! `x-kubernetes-group-version-kind` extension the API server adds. Pure;
//! built once per process.
//!
//! The table names more kinds than a sandbox may serve: documents only ever
//! include the kinds the registry serves. It must never hand out a schema
//! for a kind the table does not know (such a kind is simply undescribed).
//!
//! k8s-openapi's schemas carry no list-type or patch-merge-key extensions,
//! so clients see every list as atomic; that matches the sandbox, which
//! serves strategic merge patches as merge patches.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::Resource;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Value, json};

use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, coordination, core, discovery, events,
    networking, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta;

/// Where a document's definitions live; `$ref`s point here.
pub(crate) const V3_PREFIX: &str = "#/components/schemas/";

pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(crate) const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// Every built-in definition, by upstream name, and which one describes
/// each (group, version, kind).
pub(crate) struct Builtins {
    pub(crate) definitions: BTreeMap<String, Value>,
    kinds: BTreeMap<(String, String, String), String>,
}

impl Builtins {
    /// The definition name of a built-in kind, if the table knows it.
    pub(crate) fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    /// The schema of a built-in kind.
    pub(crate) fn schema_of(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.definitions.get(self.name_of(group, version, kind)?)
    }

    /// Follow a `$ref` to its definition.
    pub(crate) fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => reference
                .strip_prefix(V3_PREFIX)
                .and_then(|name| self.definitions.get(name))
                .unwrap_or(schema),
            None => schema,
        }
    }
}

/// The process-wide table, generated on first use.
pub(crate) fn builtins() -> &'static Builtins {
    static BUILTINS: LazyLock<Builtins> = LazyLock::new(generate);
    &BUILTINS
}

/// One row of the table: a kind and how to add its schema to a generator.
struct Row {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    add: fn(&mut SchemaGenerator) -> String,
}

fn row<T: Resource + JsonSchema>() -> Row {
    Row {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        add: |generator| {
            generator.subschema_for::<T>();
            T::schema_name().into_owned()
        },
    }
}

/// The kinds a sandbox serves or may come to serve.
fn table() -> Vec<Row> {
    vec![
        row::<core::v1::Namespace>(),
        row::<core::v1::ConfigMap>(),
        row::<core::v1::Secret>(),
        row::<core::v1::Service>(),
        row::<core::v1::Event>(),
        row::<core::v1::ServiceAccount>(),
        row::<core::v1::Pod>(),
        row::<core::v1::Endpoints>(),
        row::<core::v1::Node>(),
        row::<core::v1::PersistentVolumeClaim>(),
        row::<core::v1::PersistentVolume>(),
        row::<core::v1::ResourceQuota>(),
        row::<core::v1::LimitRange>(),
        row::<core::v1::ReplicationController>(),
        row::<core::v1::PodTemplate>(),
        row::<events::v1::Event>(),
        row::<apps::v1::Deployment>(),
        row::<apps::v1::StatefulSet>(),
        row::<apps::v1::DaemonSet>(),
        row::<apps::v1::ReplicaSet>(),
        row::<apps::v1::ControllerRevision>(),
        row::<batch::v1::Job>(),
        row::<batch::v1::CronJob>(),
        row::<coordination::v1::Lease>(),
        row::<discovery::v1::EndpointSlice>(),
        row::<autoscaling::v1::Scale>(),
        row::<autoscaling::v1::HorizontalPodAutoscaler>(),
        row::<autoscaling::v2::HorizontalPodAutoscaler>(),
        row::<rbac::v1::Role>(),
        row::<rbac::v1::ClusterRole>(),
        row::<rbac::v1::RoleBinding>(),
        row::<rbac::v1::ClusterRoleBinding>(),
        row::<authentication::v1::TokenRequest>(),
        row::<authentication::v1::TokenReview>(),
        row::<authentication::v1::SelfSubjectReview>(),
        row::<authorization::v1::SelfSubjectAccessReview>(),
        row::<authorization::v1::SubjectAccessReview>(),
        row::<authorization::v1::LocalSubjectAccessReview>(),
        row::<authorization::v1::SelfSubjectRulesReview>(),
        row::<networking::v1::NetworkPolicy>(),
        row::<networking::v1::Ingress>(),
        row::<policy::v1::PodDisruptionBudget>(),
        row::<scheduling::v1::PriorityClass>(),
        row::<storage::v1::StorageClass>(),
        row::<apiextensions::v1::CustomResourceDefinition>(),
    ]
}

fn generate() -> Builtins {
    // Draft 2020-12 keeps `$ref` siblings (a field's own description), as
    // upstream's OpenAPI v3 documents do; no meta-schema, no transforms.
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let mut kinds = BTreeMap::new();
    for row in table() {
        let name = (row.add)(&mut generator);
        kinds.insert(
            (row.group.into(), row.version.into(), row.kind.into()),
            name,
        );
    }
    // Referenced by every document's operations.
    generator.subschema_for::<meta::v1::Status>();
    generator.subschema_for::<meta::v1::DeleteOptions>();
    generator.subschema_for::<meta::v1::Patch>();
    generator.subschema_for::<meta::v1::ListMeta>();
    generator.subschema_for::<meta::v1::ObjectMeta>();
    let mut definitions: BTreeMap<String, Value> =
        generator.take_definitions(false).into_iter().collect();
    for ((group, version, kind), name) in &kinds {
        if let Some(Value::Object(schema)) = definitions.get_mut(name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "kind": kind, "version": version}]),
            );
        }
    }
    Builtins { definitions, kinds }
}

/// The names of the definitions `roots` reach through `$ref`s, in order.
pub(crate) fn closure<'a>(
    roots: impl IntoIterator<Item = &'a Value>,
    definitions: &BTreeMap<String, Value>,
) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<&Value> = roots.into_iter().collect();
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix(V3_PREFIX))
                    && seen.insert(name.to_string())
                    && let Some(target) = definitions.get(name)
                {
                    stack.push(target);
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    seen.into_iter().collect()
}

/// A `$ref` to a definition.
pub(crate) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("{V3_PREFIX}{name}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_get_upstream_names_and_their_group_version_kind() {
        let b = builtins();
        assert_eq!(
            b.name_of("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        let deployment = b.schema_of("apps", "v1", "Deployment").unwrap();
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        let config_map = b.schema_of("", "v1", "ConfigMap").unwrap();
        assert_eq!(
            config_map["x-kubernetes-group-version-kind"][0]["group"],
            ""
        );
        let replicas = &b.resolve(&deployment["properties"]["spec"])["properties"]["replicas"];
        assert!(replicas["description"].as_str().unwrap().contains("pods"));
    }

    #[test]
    fn the_closure_of_a_kind_holds_everything_it_references() {
        let b = builtins();
        let root = reference("io.k8s.api.apps.v1.Deployment");
        let names = closure([&root], &b.definitions);
        for name in [
            "io.k8s.api.apps.v1.Deployment",
            "io.k8s.api.core.v1.PodSpec",
            OBJECT_META,
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
        assert!(!names.iter().any(|n| n.contains("rbac")));
    }
}
