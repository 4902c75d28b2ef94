//! The vocabulary of authorization: who asks ([`UserInfo`]), what they ask
//! ([`Attributes`]), how a request becomes attributes, and how a refusal is
//! worded. Pure: it must never read the cluster's state or decide anything.

use std::collections::HashMap;

use crate::error::ApiError;
use crate::object::path_segment_problem;
use crate::route::Target;

/// The group whose members may do anything, as kube-apiserver's
/// privileged-group authorizer allows before RBAC is asked.
pub(crate) const SYSTEM_MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without a credential.
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The prefix of a ServiceAccount's user name: `system:serviceaccount:NS:NAME`.
pub(crate) const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The groups every ServiceAccount of `namespace` is in, whether it
/// authenticated by token or is impersonated.
pub(crate) fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// The user a request acts as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) name: String,
    pub(crate) uid: String,
    /// Includes `system:authenticated` for every authenticated user.
    pub(crate) groups: Vec<String>,
}

impl UserInfo {
    pub(crate) fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// A member of `system:masters`: allowed everything, never escalating.
    pub(crate) fn is_superuser(&self) -> bool {
        self.in_group(SYSTEM_MASTERS)
    }
}

/// What a request asks to do, in the terms RBAC rules speak.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or for a non-resource URL the lowercase method.
    pub(crate) verb: String,
    /// True for an object or collection path, false for a non-resource URL.
    pub(crate) resource_request: bool,
    pub(crate) api_group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The request path, for a non-resource URL.
    pub(crate) path: String,
}

impl Attributes {
    /// A resource request with these parts (for the checks the server makes
    /// on its own behalf: impersonate, escalate, bind, create-on-apply).
    pub(crate) fn resource(
        verb: &str,
        api_group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self {
            verb: verb.to_owned(),
            resource_request: true,
            api_group: api_group.to_owned(),
            resource: resource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..Self::default()
        }
    }
}

/// The attributes of a request to a resource path, as kube-apiserver's
/// request-info resolver derives them.
pub(crate) fn resource_attributes(
    method: &http::Method,
    target: &Target,
    query: &HashMap<String, String>,
) -> Attributes {
    let watching = target.watch_path || query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let named = target.name.is_some();
    let verb = match *method {
        http::Method::GET | http::Method::HEAD if watching => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "",
    };
    let mut name = target.name.clone().unwrap_or_default();
    let mut namespace = target.namespace.clone().unwrap_or_default();
    // A Namespace object lies in itself: `/api/v1/namespaces/x` is in the
    // namespace "x", so a RoleBinding there may grant reading it.
    if target.group.is_empty() && target.plural == "namespaces" && namespace.is_empty() {
        namespace.clone_from(&name);
    }
    // A list or watch of one object by `metadata.name=` is authorized as
    // that name, so a rule with resourceNames can allow it.
    if name.is_empty()
        && matches!(verb, "list" | "watch")
        && let Some(exact) = query.get("fieldSelector").and_then(|s| exact_name(s))
    {
        name = exact;
    }
    Attributes {
        verb: verb.to_owned(),
        resource_request: true,
        api_group: target.group.clone(),
        resource: target.plural.clone(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace,
        name,
        path: String::new(),
    }
}

/// The attributes of a request to a non-resource URL (discovery, OpenAPI).
pub(crate) fn non_resource_attributes(method: &http::Method, path: &str) -> Attributes {
    Attributes {
        verb: method.as_str().to_ascii_lowercase(),
        resource_request: false,
        path: path.to_owned(),
        ..Attributes::default()
    }
}

/// The name a field selector requires exactly (`metadata.name=x` or `==`),
/// if it is a valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        let value = value.trim();
        (field.trim() == "metadata.name" && is_path_segment(value)).then(|| value.to_owned())
    })
}

/// Whether `name` may appear as one path segment (RBAC object names and
/// authorized names must).
pub(crate) fn is_path_segment(name: &str) -> bool {
    !name.is_empty() && path_segment_problem(name).is_none()
}

/// The 403 kube-apiserver answers when `user` may not do `attributes`;
/// `reason` is the authorizer's, appended after a colon when non-empty.
pub(crate) fn forbidden(user: &UserInfo, attributes: &Attributes, reason: &str) -> ApiError {
    let a = attributes;
    let mut message = if !a.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path)
    } else {
        let mut resource = a.resource.clone();
        if !a.subresource.is_empty() {
            resource = format!("{resource}/{}", a.subresource);
        }
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace {:?}", a.namespace)
        };
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
            user.name, a.verb, resource, a.api_group
        )
    };
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    ApiError::forbidden(&a.api_group, &a.resource, &a.name, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(namespace: Option<&str>, name: Option<&str>, sub: Option<&str>) -> Target {
        Target {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
            namespace: namespace.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
            watch_path: false,
        }
    }

    #[test]
    fn methods_and_paths_become_rbac_verbs() {
        let none = HashMap::new();
        let watch = HashMap::from([("watch".to_owned(), "1".to_owned())]);
        let cases = [
            (
                http::Method::GET,
                target(Some("ns"), Some("web"), None),
                &none,
                "get",
            ),
            (
                http::Method::GET,
                target(Some("ns"), None, None),
                &none,
                "list",
            ),
            (http::Method::GET, target(None, None, None), &watch, "watch"),
            (
                http::Method::POST,
                target(Some("ns"), None, None),
                &none,
                "create",
            ),
            (
                http::Method::PUT,
                target(Some("ns"), Some("web"), Some("scale")),
                &none,
                "update",
            ),
            (
                http::Method::PATCH,
                target(Some("ns"), Some("web"), None),
                &none,
                "patch",
            ),
            (
                http::Method::DELETE,
                target(Some("ns"), Some("web"), None),
                &none,
                "delete",
            ),
            (
                http::Method::DELETE,
                target(Some("ns"), None, None),
                &none,
                "deletecollection",
            ),
        ];
        for (method, target, query, verb) in cases {
            let attributes = resource_attributes(&method, &target, query);
            assert_eq!(attributes.verb, verb, "{method} {target:?}");
            assert_eq!(attributes.resource, "deployments");
        }
        let scale = resource_attributes(
            &http::Method::GET,
            &target(Some("ns"), Some("web"), Some("scale")),
            &none,
        );
        assert_eq!(
            (
                scale.subresource.as_str(),
                scale.namespace.as_str(),
                scale.name.as_str()
            ),
            ("scale", "ns", "web")
        );
    }

    #[test]
    fn a_list_by_exact_name_is_authorized_as_that_name() {
        let query = |s: &str| HashMap::from([("fieldSelector".to_owned(), s.to_owned())]);
        let list = target(Some("ns"), None, None);
        let name = |q| resource_attributes(&http::Method::GET, &list, &q).name;
        assert_eq!(name(query("metadata.name=web")), "web");
        assert_eq!(
            name(query("metadata.namespace=ns,metadata.name==web")),
            "web"
        );
        assert_eq!(name(query("metadata.name!=web")), "");
        assert_eq!(name(query("metadata.name=a/b")), "");
        let delete = resource_attributes(&http::Method::DELETE, &list, &query("metadata.name=web"));
        assert_eq!(
            delete.name, "",
            "only list and watch take the selector's name"
        );
    }

    #[test]
    fn a_namespace_object_lies_in_itself() {
        let ns = Target {
            version: "v1".into(),
            plural: "namespaces".into(),
            name: Some("team".into()),
            ..Target::default()
        };
        let a = resource_attributes(&http::Method::GET, &ns, &HashMap::new());
        assert_eq!((a.namespace.as_str(), a.name.as_str()), ("team", "team"));
    }

    #[test]
    fn refusals_are_worded_as_kube_apiserver_words_them() {
        let user = UserInfo {
            name: "system:serviceaccount:ns:sa".into(),
            ..UserInfo::default()
        };
        let create = Attributes::resource("create", "", "configmaps", "ns", "");
        let error = forbidden(&user, &create, "");
        assert_eq!((error.code, error.reason), (403, "Forbidden"));
        assert_eq!(
            error.message,
            "configmaps is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
        let mut scale = Attributes::resource("get", "apps", "deployments", "", "web");
        scale.subresource = "scale".into();
        assert_eq!(
            forbidden(
                &user,
                &scale,
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found"
            )
            .message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"deployments/scale\" in API group \"apps\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"r\" not found"
        );
        let path = non_resource_attributes(&http::Method::GET, "/apis");
        assert_eq!(
            forbidden(&user, &path, "").message,
            "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/apis\""
        );
    }
}
