//! The operations a served resource offers, as OpenAPI path items (which
//! `render.rs` writes out as v3 or v2 JSON): the
//! list, create, read, replace, patch and delete operations of the
//! resource and of its `status` and `scale` subresources, each tagged with
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind`.
//!
//! kubectl reads two things from them: the group-version-kind of a
//! resource path (`kubectl explain`), and whether the PATCH operation of a
//! kind takes the `fieldValidation` query parameter (`kubectl apply`
//! validates on the server only then). They must never describe an
//! operation the sandbox does not serve. Pure.

use super::builtin::{DELETE_OPTIONS, PATCH, SCALE, STATUS};
use crate::registry::ResourceType;

/// What an operation does, in upstream's words for `x-kubernetes-action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    List,
    Create,
    DeleteCollection,
    Read,
    Replace,
    Patch,
    Delete,
}

impl Action {
    pub(crate) fn method(self) -> &'static str {
        match self {
            Action::List | Action::Read => "get",
            Action::Create => "post",
            Action::Replace => "put",
            Action::Patch => "patch",
            Action::Delete | Action::DeleteCollection => "delete",
        }
    }

    pub(crate) fn kubernetes_action(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Create => "post",
            Action::DeleteCollection => "deletecollection",
            Action::Read => "get",
            Action::Replace => "put",
            Action::Patch => "patch",
            Action::Delete => "delete",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Create => "create",
            Action::DeleteCollection | Action::Delete => "delete",
            Action::Read => "read",
            Action::Replace => "replace",
            Action::Patch => "patch",
        }
    }
}

/// A query parameter: name, JSON type, what it does.
pub(crate) type Param = (&'static str, &'static str, &'static str);

const WRITE_PARAMS: [Param; 3] = [
    (
        "dryRun",
        "string",
        "With the value All, the request is checked and answered but nothing is stored.",
    ),
    (
        "fieldManager",
        "string",
        "The name of the actor making the change; required for apply patches.",
    ),
    (
        "fieldValidation",
        "string",
        "How unknown or duplicate fields in the request are handled: Ignore drops them, Warn (the default) drops them with a Warning header each, Strict refuses the request.",
    ),
];

const LIST_PARAMS: [Param; 10] = [
    (
        "allowWatchBookmarks",
        "boolean",
        "Ask for BOOKMARK events on a watch.",
    ),
    (
        "continue",
        "string",
        "The token from a previous page to continue a paginated list.",
    ),
    (
        "fieldSelector",
        "string",
        "Select objects by fields (metadata.name, metadata.namespace).",
    ),
    ("labelSelector", "string", "Select objects by labels."),
    (
        "limit",
        "integer",
        "The most objects to return; more are reached through the continue token.",
    ),
    (
        "resourceVersion",
        "string",
        "The resource version the list or watch starts from.",
    ),
    (
        "resourceVersionMatch",
        "string",
        "How resourceVersion applies to a list.",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "Start a watch with the current objects, ended by a bookmark.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Close a list or watch after this many seconds.",
    ),
    (
        "watch",
        "boolean",
        "Stream changes instead of answering with a list.",
    ),
];

const DELETE_PARAMS: [Param; 4] = [
    (
        "dryRun",
        "string",
        "With the value All, the request is checked and answered but nothing is deleted.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "Seconds before the object is deleted; accepted and ignored.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: keep the dependents (use propagationPolicy=Orphan).",
    ),
    (
        "propagationPolicy",
        "string",
        "Orphan, Background or Foreground: what happens to the dependents.",
    ),
];

const PATCH_TYPES: [&str; 4] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// One operation of a path item.
pub(crate) struct Operation {
    pub(crate) action: Action,
    pub(crate) operation_id: String,
    pub(crate) description: String,
    /// `x-kubernetes-group-version-kind` (group, version, kind).
    pub(crate) gvk: (String, String, String),
    pub(crate) query: Vec<Param>,
    /// The request body's definition and media types.
    pub(crate) body: Option<(String, Vec<&'static str>)>,
    /// (status code, description) of the answers that carry `answer`.
    pub(crate) codes: Vec<(&'static str, &'static str)>,
    pub(crate) answer: String,
    pub(crate) tag: String,
}

/// A path and its operations.
pub(crate) struct PathItem {
    pub(crate) path: String,
    pub(crate) namespaced: bool,
    pub(crate) named: bool,
    pub(crate) operations: Vec<Operation>,
}

/// What a resource's documents call its kind and list definitions.
pub(crate) struct Names {
    pub(crate) object: String,
    pub(crate) list: String,
    pub(crate) builtin: bool,
}

/// `apps` → `Apps`, `rbac.authorization.k8s.io` → `RbacAuthorization`.
fn group_title(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group
        .trim_end_matches(".k8s.io")
        .split(['.', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn title(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The path items of one resource.
pub(crate) fn resource_paths(rt: &ResourceType, names: &Names) -> Vec<PathItem> {
    let prefix = if rt.group.is_empty() {
        format!("/api/{}", rt.version)
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    let gv = format!("{}{}", group_title(&rt.group), title(&rt.version));
    let tag = {
        let mut t = group_title(&rt.group);
        if let Some(first) = t.get_mut(..1) {
            first.make_ascii_lowercase();
        }
        format!("{t}_{}", rt.version)
    };
    let scope = if rt.namespaced { "Namespaced" } else { "" };
    let kind = &rt.kind;
    let own_gvk = (rt.group.clone(), rt.version.clone(), kind.clone());
    let article = if kind.starts_with(['A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    };
    let object_types = if names.builtin {
        vec![
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ]
    } else {
        vec!["application/json", "application/yaml"]
    };
    let patch_types: Vec<&'static str> = if names.builtin {
        PATCH_TYPES.to_vec()
    } else {
        PATCH_TYPES[..3].to_vec()
    };
    let op = |action: Action,
              id_suffix: &str,
              description: String,
              gvk: &(String, String, String)| {
        let mut query: Vec<Param> = Vec::new();
        let (body, codes, answer): (Option<(String, Vec<&'static str>)>, Vec<_>, String) =
            match action {
                Action::List => {
                    query.extend(LIST_PARAMS);
                    (None, vec![("200", "OK")], names.list.clone())
                }
                Action::Create => {
                    query.extend(WRITE_PARAMS);
                    (
                        Some((names.object.clone(), object_types.clone())),
                        vec![("200", "OK"), ("201", "Created"), ("202", "Accepted")],
                        names.object.clone(),
                    )
                }
                Action::DeleteCollection => {
                    query.extend(DELETE_PARAMS);
                    query.extend(LIST_PARAMS.iter().filter(|p| {
                        !matches!(p.0, "allowWatchBookmarks" | "watch" | "sendInitialEvents")
                    }));
                    (
                        Some((DELETE_OPTIONS.into(), vec!["application/json"])),
                        vec![("200", "OK")],
                        STATUS.into(),
                    )
                }
                Action::Read => (None, vec![("200", "OK")], String::new()),
                Action::Replace => {
                    query.extend(WRITE_PARAMS);
                    (
                        Some((String::new(), object_types.clone())),
                        vec![("200", "OK"), ("201", "Created")],
                        String::new(),
                    )
                }
                Action::Patch => {
                    query.extend(WRITE_PARAMS);
                    query.push((
                        "force",
                        "boolean",
                        "Take over the fields other managers own; only for apply patches.",
                    ));
                    (
                        Some((PATCH.into(), patch_types.clone())),
                        vec![("200", "OK"), ("201", "Created")],
                        String::new(),
                    )
                }
                Action::Delete => {
                    query.extend(DELETE_PARAMS);
                    (
                        Some((DELETE_OPTIONS.into(), vec!["application/json"])),
                        vec![("200", "OK"), ("202", "Accepted")],
                        STATUS.into(),
                    )
                }
            };
        Operation {
            action,
            operation_id: match action {
                Action::DeleteCollection => format!("delete{gv}Collection{scope}{kind}{id_suffix}"),
                _ => format!("{}{gv}{scope}{kind}{id_suffix}", action.verb()),
            },
            description,
            gvk: gvk.clone(),
            query,
            body,
            codes,
            answer,
            tag: tag.clone(),
        }
    };
    let base = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{prefix}/{}", rt.plural)
    };
    let item = |path: String, named: bool, operations: Vec<Operation>| PathItem {
        path,
        namespaced: rt.namespaced,
        named,
        operations,
    };
    if rt.is_create_only() {
        // A review is only ever created: one POST, as upstream documents it.
        let create = op(
            Action::Create,
            "",
            format!("create {article} {kind}"),
            &own_gvk,
        );
        return vec![item(base, false, vec![create])];
    }
    let mut items = Vec::new();
    if rt.namespaced {
        let mut all = op(
            Action::List,
            "",
            format!("list or watch objects of kind {kind}"),
            &own_gvk,
        );
        all.operation_id = format!("list{gv}{kind}ForAllNamespaces");
        items.push(PathItem {
            namespaced: false,
            ..item(format!("{prefix}/{}", rt.plural), false, vec![all])
        });
    }
    items.push(item(
        base.clone(),
        false,
        vec![
            op(
                Action::List,
                "",
                format!("list or watch objects of kind {kind}"),
                &own_gvk,
            ),
            op(
                Action::Create,
                "",
                format!("create {article} {kind}"),
                &own_gvk,
            ),
            op(
                Action::DeleteCollection,
                "",
                format!("delete collection of {kind}"),
                &own_gvk,
            ),
        ],
    ));
    let mut subresources = vec![(String::new(), own_gvk.clone(), names.object.clone())];
    if rt.has_status {
        subresources.push(("status".into(), own_gvk.clone(), names.object.clone()));
    }
    if rt.has_scale {
        let scale_gvk = (
            "autoscaling".to_string(),
            "v1".to_string(),
            "Scale".to_string(),
        );
        subresources.push(("scale".into(), scale_gvk, SCALE.into()));
    }
    for (sub, gvk, answer) in subresources {
        let (path, suffix, of) = if sub.is_empty() {
            (format!("{base}/{{name}}"), String::new(), String::new())
        } else {
            (
                format!("{base}/{{name}}/{sub}"),
                title(&sub),
                format!(" {sub} of"),
            )
        };
        let mut operations = vec![
            op(
                Action::Read,
                &suffix,
                format!("read{of} the specified {kind}"),
                &gvk,
            ),
            op(
                Action::Replace,
                &suffix,
                format!("replace{of} the specified {kind}"),
                &gvk,
            ),
            op(
                Action::Patch,
                &suffix,
                format!("partially update{of} the specified {kind}"),
                &gvk,
            ),
        ];
        if sub.is_empty() {
            operations.push(op(
                Action::Delete,
                "",
                format!("delete {article} {kind}"),
                &gvk,
            ));
        }
        for operation in &mut operations {
            if operation.answer.is_empty() {
                operation.answer = answer.clone();
            }
            if let Some((schema, _)) = operation.body.as_mut()
                && schema.is_empty()
            {
                *schema = answer.clone();
            }
        }
        items.push(item(path, true, operations));
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::render::render_v3;
    use crate::registry::Registry;
    use serde_json::{Map, json};

    #[test]
    fn group_names_become_operation_id_words() {
        assert_eq!(group_title(""), "Core");
        assert_eq!(group_title("apps"), "Apps");
        assert_eq!(
            group_title("rbac.authorization.k8s.io"),
            "RbacAuthorization"
        );
        assert_eq!(group_title("test.ferry.dev"), "TestFerryDev");
    }

    #[test]
    fn a_review_is_only_created() {
        let registry = Registry::with_builtins();
        let rt = registry
            .get("authorization.k8s.io", "v1", "localsubjectaccessreviews")
            .unwrap();
        let names = Names {
            object: "io.k8s.api.authorization.v1.LocalSubjectAccessReview".into(),
            list: String::new(),
            builtin: true,
        };
        let mut paths = Map::new();
        render_v3(&resource_paths(&rt, &names), &mut paths);
        let path = "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews";
        assert_eq!(paths.keys().collect::<Vec<_>>(), [path]);
        let methods: Vec<&String> = paths[path]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "parameters")
            .collect();
        assert_eq!(methods, ["post"]);
        assert_eq!(
            paths[path]["post"]["operationId"],
            "createAuthorizationV1NamespacedLocalSubjectAccessReview"
        );
    }

    #[test]
    fn a_namespaced_kind_with_status_and_scale_gets_every_path() {
        let registry = Registry::with_builtins();
        let rt = registry.get("apps", "v1", "deployments").unwrap();
        let names = Names {
            object: "io.k8s.api.apps.v1.Deployment".into(),
            list: "io.k8s.api.apps.v1.DeploymentList".into(),
            builtin: true,
        };
        let mut paths = Map::new();
        render_v3(&resource_paths(&rt, &names), &mut paths);
        let mut keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "/apis/apps/v1/deployments",
                "/apis/apps/v1/namespaces/{namespace}/deployments",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
            ]
        );
        let patch = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let params = patch["parameters"].as_array().unwrap();
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        let scale = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["put"];
        assert_eq!(scale["x-kubernetes-group-version-kind"]["kind"], "Scale");
        assert_eq!(
            scale["operationId"],
            "replaceAppsV1NamespacedDeploymentScale"
        );
    }
}
