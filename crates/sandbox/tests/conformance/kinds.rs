//! The kinds the rows run against: ConfigMap (built-in, JSON and
//! protobuf), Deployment (built-in, for the scale subresource) and Widget, a
//! custom resource whose CRD each test installs (JSON only, with status and
//! scale subresources and a printer column). Pure data; no I/O.

use serde_json::{Value, json};

use crate::harness::NS;
use crate::pb;

/// One kind as the rows address it. `value` is a JSON pointer to the one
/// string field the rows write and read back.
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub kind: &'static str,
    pub value: &'static str,
    /// Whether the sandbox (like kube-apiserver) speaks protobuf for it.
    pub protobuf: bool,
    /// The subresource a Role grants beside the resource.
    pub subresource: &'static str,
}

pub const CONFIG_MAP: Kind = Kind {
    group: "",
    version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
    value: "/data/k",
    protobuf: true,
    subresource: "scale",
};

pub const DEPLOYMENT: Kind = Kind {
    group: "apps",
    version: "v1",
    resource: "deployments",
    kind: "Deployment",
    value: "/metadata/annotations/k",
    protobuf: true,
    subresource: "scale",
};

pub const WIDGET: Kind = Kind {
    group: "conf.ferry.dev",
    version: "v1",
    resource: "widgets",
    kind: "Widget",
    value: "/spec/k",
    protobuf: false,
    subresource: "scale",
};

/// The two kinds every verb is tried on.
pub const KINDS: [&Kind; 2] = [&CONFIG_MAP, &WIDGET];

impl Kind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps`, `deployments.apps`: upstream's `GroupResource.String()`,
    /// which both kubectl and the Status messages use.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// `ConfigMap`, `Widget.conf.ferry.dev`: upstream's `GroupKind.String()`.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_owned()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub fn collection(&self) -> String {
        let root = if self.group.is_empty() {
            "/api/v1".to_owned()
        } else {
            format!("/apis/{}", self.api_version())
        };
        format!("{root}/namespaces/{NS}/{}", self.resource)
    }

    pub fn item(&self, name: &str) -> String {
        format!("{}/{name}", self.collection())
    }

    /// What a Role names to grant on this kind: the resource and its subresource.
    pub fn rbac_resources(&self) -> Value {
        json!([
            self.resource,
            format!("{}/{}", self.resource, self.subresource)
        ])
    }

    /// A whole object named `name` whose value field is `value`.
    pub fn object(&self, name: &str, value: &str) -> Value {
        let mut object = json!({"apiVersion": self.api_version(), "kind": self.kind, "metadata": {"name": name}});
        if self.kind == "Deployment" {
            object["spec"] = json!({"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        }
        merge(&mut object, &self.patch(value));
        object
    }

    /// A merge patch (also a strategic one) setting the value field.
    pub fn patch(&self, value: &str) -> Value {
        let mut patch = json!(value);
        for part in self.value.rsplit('/').filter(|p| !p.is_empty()) {
            patch = json!({ part: patch });
        }
        patch
    }

    /// The value field of a stored object.
    pub fn value_of<'a>(&self, object: &'a Value) -> Option<&'a str> {
        object.pointer(self.value).and_then(Value::as_str)
    }

    /// The object as a protobuf body, built from upstream's
    /// `generated.proto` field numbers (ConfigMap: metadata 1, data 2;
    /// ObjectMeta: name 1). `None` for kinds without protobuf.
    pub fn protobuf_object(&self, name: &str, value: &str) -> Option<Vec<u8>> {
        (self.kind == "ConfigMap").then(|| {
            pb::envelope(
                "v1",
                "ConfigMap",
                &[pb::m(1, &[pb::s(1, name)]), pb::entry(2, "k", value)],
            )
        })
    }
}

fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(into), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(into.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (into, patch) => *into = patch.clone(),
    }
}

/// The Widget CRD: a printer column for the value, status and scale
/// subresources, and descriptions for `kubectl explain`.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.conf.ferry.dev"},
        "spec": {
            "group": "conf.ferry.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [{"name": "K", "type": "string", "jsonPath": ".spec.k"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Widget is what the conformance rows write.",
                    "properties": {
                        "spec": {"type": "object", "description": "What the rows set.", "properties": {
                            "k": {"type": "string", "description": "The value every row writes and reads back."},
                            "replicas": {"type": "integer", "description": "How many, for the scale subresource."}}},
                        "status": {"type": "object", "properties": {
                            "replicas": {"type": "integer"},
                            "selector": {"type": "string"}}}}}}
            }]
        }
    })
}

impl Kind {
    /// How kubectl names an object in its messages: `configmap/x`,
    /// `widget.conf.ferry.dev/x` (lowercased kind, then the group).
    pub fn kubectl_ref(&self, name: &str) -> String {
        let kind = self.kind.to_lowercase();
        if self.group.is_empty() {
            format!("{kind}/{name}")
        } else {
            format!("{kind}.{}/{name}", self.group)
        }
    }
}

impl Kind {
    /// kubectl's delete line names the singular resource with its group:
    /// `configmap "x" deleted`, `widget.conf.ferry.dev "x" deleted`.
    pub fn qualified_singular(&self) -> String {
        let singular = self.kind.to_lowercase();
        if self.group.is_empty() {
            singular
        } else {
            format!("{singular}.{}", self.group)
        }
    }
}

/// ServiceAccounts, for the `token` subresource rows.
pub const SERVICE_ACCOUNT: Kind = Kind {
    group: "",
    version: "v1",
    resource: "serviceaccounts",
    kind: "ServiceAccount",
    value: "/metadata/annotations/k",
    protobuf: true,
    subresource: "token",
};
