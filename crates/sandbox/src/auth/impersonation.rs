//! Impersonation, as kube-apiserver's filter does it: `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-*` switch
//! the request to another user, each part only if the authenticated user may
//! `impersonate` it (users, groups and serviceaccounts in the core group;
//! uids and userextras in authentication.k8s.io). It must never hand out an
//! identity part that was not authorized. Extra values are authorized and
//! then dropped: the sandbox's users carry no extra fields.

use http::HeaderMap;

use super::attributes::{
    AUTHENTICATED, Attributes, SERVICE_ACCOUNT_PREFIX, UNAUTHENTICATED, UserInfo, forbidden,
    service_account_groups,
};
use super::rbac::Authorizer;
use crate::error::{ApiError, ApiResult};
use crate::object::is_dns_subdomain;
use crate::route::percent_decode;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
const ANONYMOUS: &str = "system:anonymous";

/// One thing the caller asks to act as, with the attributes that authorize it.
struct Part {
    attributes: Attributes,
    /// How upstream prints the `ObjectReference` it builds for the part.
    printed: String,
}

/// The user `requestor` acts as once the headers apply; the requestor
/// itself when there are none.
pub(crate) fn impersonate(
    authorizer: &Authorizer,
    requestor: UserInfo,
    headers: &HeaderMap,
) -> ApiResult<UserInfo> {
    let text = |value: &http::HeaderValue| value.to_str().unwrap_or("").to_owned();
    let user = headers.get(USER).map(text).filter(|u| !u.is_empty());
    let groups: Vec<String> = headers.get_all(GROUP).iter().map(text).collect();
    let uid = headers.get(UID).map(text).filter(|u| !u.is_empty());
    let mut extras: Vec<(String, String)> = Vec::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            extras.push((percent_decode(key), text(value)));
        }
    }
    if user.is_none() && groups.is_empty() && uid.is_none() && extras.is_empty() {
        return Ok(requestor);
    }

    let mut parts = Vec::new();
    let mut name = String::new();
    let mut implied_groups = Vec::new();
    if let Some(user) = &user {
        match service_account(user) {
            Some((namespace, account)) => {
                parts.push(part(
                    "serviceaccounts",
                    "",
                    namespace,
                    account,
                    "ServiceAccount",
                ));
                implied_groups = service_account_groups(namespace);
            }
            None => parts.push(part("users", "", "", user, "User")),
        }
        name.clone_from(user);
    }
    for group in &groups {
        parts.push(part("groups", "", "", group, "Group"));
    }
    for (key, value) in &extras {
        let mut extra = part("userextras", AUTHENTICATION_GROUP, "", value, "UserExtra");
        extra.attributes.subresource.clone_from(key);
        extra.printed = format!("{{UserExtra  {value}  authentication.k8s.io/v1  {key}}}");
        parts.push(extra);
    }
    if let Some(uid) = &uid {
        let mut part = part("uids", AUTHENTICATION_GROUP, "", uid, "UID");
        part.printed = format!("{{UID  {uid}  authentication.k8s.io/v1  }}");
        parts.push(part);
    }
    if user.is_none() {
        let printed: Vec<&str> = parts.iter().map(|p| p.printed.as_str()).collect();
        return Err(ApiError::internal(format!(
            "Internal error occurred: requested [{}] without impersonating a user",
            printed.join(" ")
        )));
    }
    for part in &parts {
        let decision = authorizer.decide(&requestor, &part.attributes);
        if !decision.allowed {
            return Err(forbidden(&requestor, &part.attributes, &decision.reason()));
        }
    }

    // Given groups are the whole truth; without them a ServiceAccount has its
    // fixed groups. Everyone but the anonymous user is authenticated.
    let mut groups = if groups.is_empty() {
        implied_groups
    } else {
        groups
    };
    let anonymous = name == ANONYMOUS;
    let marked = groups
        .iter()
        .any(|g| g == UNAUTHENTICATED || (!anonymous && g == AUTHENTICATED));
    if !marked {
        groups.push(
            if anonymous {
                UNAUTHENTICATED
            } else {
                AUTHENTICATED
            }
            .to_owned(),
        );
    }
    Ok(UserInfo {
        name,
        uid: uid.unwrap_or_default(),
        groups,
    })
}

fn part(resource: &str, api_group: &str, namespace: &str, name: &str, kind: &str) -> Part {
    Part {
        attributes: Attributes::resource("impersonate", api_group, resource, namespace, name),
        printed: format!("{{{kind} {namespace} {name}    }}"),
    }
}

/// `system:serviceaccount:NS:NAME` as (NS, NAME), when both are valid names.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')?;
    (is_dns_subdomain(namespace) && !namespace.contains('.') && is_dns_subdomain(name))
        .then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    fn admin() -> UserInfo {
        UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        }
    }

    #[test]
    fn a_service_account_gets_its_fixed_groups_and_authenticated() {
        let authorizer = Authorizer::default();
        let user = impersonate(
            &authorizer,
            admin(),
            &headers(&[("Impersonate-User", "system:serviceaccount:ns:sa")]),
        )
        .unwrap();
        assert_eq!(user.name, "system:serviceaccount:ns:sa");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        let user = impersonate(
            &authorizer,
            admin(),
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "a"),
                ("Impersonate-Group", "b"),
                ("Impersonate-Uid", "42"),
            ]),
        )
        .unwrap();
        assert_eq!((user.name.as_str(), user.uid.as_str()), ("bob", "42"));
        assert_eq!(user.groups, ["a", "b", "system:authenticated"]);
    }

    #[test]
    fn a_granted_impersonation_covers_only_what_the_rules_name() {
        use crate::store::{CLUSTER_ROLE_BINDINGS_KEY, CLUSTER_ROLES_KEY, State};
        use serde_json::json;
        let mut state = State::new(100);
        state.put(
            CLUSTER_ROLES_KEY,
            json!({"metadata": {"name": "impersonator"}, "rules": [
                {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["bob"]},
                {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"], "resourceNames": ["devs"]}]}),
        );
        state.put(
            CLUSTER_ROLE_BINDINGS_KEY,
            json!({"metadata": {"name": "alice"}, "roleRef": {"kind": "ClusterRole", "name": "impersonator"},
                   "subjects": [{"kind": "User", "name": "alice"}]}),
        );
        let authorizer = Authorizer::default();
        authorizer.refresh(&mut state);
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let as_ = |pairs: &[(&str, &str)]| impersonate(&authorizer, alice.clone(), &headers(pairs));
        let bob = as_(&[("Impersonate-User", "bob"), ("Impersonate-Group", "devs")]).unwrap();
        assert_eq!(
            (bob.name.as_str(), bob.groups.as_slice()),
            (
                "bob",
                &["devs".to_owned(), "system:authenticated".to_owned()][..]
            )
        );
        let refusal = |pairs: &[(&str, &str)]| as_(pairs).unwrap_err().message;
        assert_eq!(
            refusal(&[("Impersonate-User", "carol")]),
            "users \"carol\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            refusal(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "system:masters")
            ]),
            "groups \"system:masters\" is forbidden: User \"alice\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        );
        assert_eq!(
            refusal(&[("Impersonate-User", "bob"), ("Impersonate-Uid", "42")]),
            "uids.authentication.k8s.io \"42\" is forbidden: User \"alice\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope"
        );
        assert_eq!(
            refusal(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Extra-Scopes", "view")
            ]),
            "userextras.authentication.k8s.io \"view\" is forbidden: User \"alice\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope"
        );
    }

    #[test]
    fn impersonation_needs_the_verb_for_each_part() {
        let authorizer = Authorizer::default();
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let refused = impersonate(
            &authorizer,
            alice.clone(),
            &headers(&[("Impersonate-User", "system:serviceaccount:ns:sa")]),
        )
        .unwrap_err();
        assert_eq!(
            refused.message,
            "serviceaccounts \"sa\" is forbidden: User \"alice\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\""
        );
        let refused = impersonate(
            &authorizer,
            alice.clone(),
            &headers(&[("Impersonate-Group", "system:masters")]),
        )
        .unwrap_err();
        assert_eq!(refused.code, 500, "groups without a user");
        assert_eq!(
            refused.message,
            "Internal error occurred: requested [{Group  system:masters    }] without impersonating a user"
        );
        assert_eq!(
            impersonate(&authorizer, alice.clone(), &HeaderMap::new()).unwrap(),
            alice
        );
    }
}
