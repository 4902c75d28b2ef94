//! Hostile shapes: wrong JSON types, missing parts, huge lists. Each gets
//! a clean refusal, never a panic, and a wrong type is never read as "not
//! set".

use serde_json::{Value, json};

use super::*;

#[test]
fn a_wrong_type_is_refused_where_it_is_not_read_as_unset() {
    let cases = [
        (format!("{C0}.securityContext.privileged"), json!("true")),
        (
            format!("{C0}.securityContext.allowPrivilegeEscalation"),
            json!("false"),
        ),
        (format!("{POD}.hostNetwork"), json!(1)),
        (
            format!("{POD}.automountServiceAccountToken"),
            json!("false"),
        ),
        (
            format!("{C0}.securityContext.capabilities.add"),
            json!("SYS_ADMIN"),
        ),
        (format!("{C0}.securityContext.capabilities.add.0"), json!(7)),
        (format!("{C0}.securityContext"), json!(["privileged"])),
        (format!("{POD}.volumes"), json!({"name": "x"})),
        (format!("{POD}.tolerations"), json!("everything")),
        (format!("{C0}.image"), json!(["nginx"])),
        (format!("{POD}.nodeName"), json!({"name": "n"})),
        ("spec.replicas".to_owned(), json!("3")),
        ("spec.replicas".to_owned(), json!(-1)),
        ("spec.replicas".to_owned(), json!(1.5)),
    ];
    for (path, value) in cases {
        let refused = refusal(&with(&[(&path, value.clone())]), &AdmissionSpec::default());
        assert_eq!(
            refused.reason,
            reasons::INVALID_MANIFEST,
            "{path} = {value}: {}",
            refused.message
        );
        assert_eq!(refused.field, field(&path), "{}", refused.message);
    }
}

/// A change to the compliant Deployment.
type Change<'a> = &'a dyn Fn(&mut Value);

#[test]
fn missing_parts_are_refused_by_name() {
    let cases: [(Change<'_>, &str, &str); 6] = [
        (&|w| *w = json!("a string"), reasons::INVALID_MANIFEST, ""),
        (&|w| *w = json!({}), reasons::UNSUPPORTED_KIND, "kind"),
        (
            &|w| w["kind"] = json!("DaemonSet"),
            reasons::UNSUPPORTED_KIND,
            "kind",
        ),
        (
            &|w| remove(w, "spec.template"),
            reasons::INVALID_MANIFEST,
            "spec.template",
        ),
        (
            &|w| remove(w, "spec.template.spec"),
            reasons::INVALID_MANIFEST,
            "spec.template.spec",
        ),
        (
            &|w| set(w, "spec.template.spec.containers", json!([])),
            reasons::INVALID_MANIFEST,
            "spec.template.spec.containers",
        ),
    ];
    for (change, reason, at) in cases {
        let mut workload = compliant();
        change(&mut workload);
        let refused = refusal(&workload, &AdmissionSpec::default());
        assert_eq!(
            (refused.reason, refused.field.as_str()),
            (reason, at),
            "{}",
            refused.message
        );
    }
    let no_image = with(&[(&format!("{C0}.image"), Value::Null)]);
    assert_eq!(
        refusal(&no_image, &AdmissionSpec::default()).field,
        field(&format!("{C0}.image"))
    );
    let bad_container = with(&[(&format!("{POD}.containers.1"), json!(42))]);
    assert_eq!(
        refusal(&bad_container, &AdmissionSpec::default()).field,
        field(&format!("{POD}.containers.1"))
    );
    let spec_not_object = with(&[("spec", json!([1, 2]))]);
    assert_eq!(
        refusal(&spec_not_object, &AdmissionSpec::default()).reason,
        reasons::INVALID_MANIFEST
    );
}

#[test]
fn nulls_read_as_unset() {
    let workload = with(&[
        (&format!("{POD}.hostNetwork"), Value::Null),
        (&format!("{POD}.tolerations"), Value::Null),
    ]);
    assert_eq!(check(&workload, &AdmissionSpec::default()), Ok(()));
}

#[test]
fn huge_lists_are_walked_and_judged() {
    let mut variables: Vec<Value> = (0..100_000)
        .map(|i| json!({"name": format!("V{i}"), "value": "x"}))
        .collect();
    let workload = with(&[(&format!("{C0}.env"), json!(variables))]);
    assert_eq!(check(&workload, &AdmissionSpec::default()), Ok(()));
    variables.push(
        json!({"name": "LAST", "valueFrom": {"secretKeyRef": {"name": "theirs", "key": "k"}}}),
    );
    let workload = with(&[(&format!("{C0}.env"), json!(variables))]);
    let refused = refusal(&workload, &AdmissionSpec::default());
    assert_eq!(
        refused.field,
        field(&format!("{C0}.env.100000.valueFrom.secretKeyRef.name"))
    );
    let many_containers: Vec<Value> = (0..10_000)
        .map(|i| {
            let mut c = compliant()["spec"]["template"]["spec"]["containers"][0].clone();
            c["name"] = json!(format!("c{i}"));
            c
        })
        .collect();
    let workload = with(&[(&format!("{POD}.containers"), json!(many_containers))]);
    assert_eq!(check(&workload, &AdmissionSpec::default()), Ok(()));
}

/// Every node of the compliant Deployment replaced, in turn, by a value of
/// each JSON type: `review` answers each without panicking, and every
/// refusal carries a known reason and a field.
#[test]
fn any_node_of_any_type_gives_an_answer_not_a_panic() {
    fn paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
        let join = |key: &str| {
            if prefix.is_empty() {
                key.to_owned()
            } else {
                format!("{prefix}.{key}")
            }
        };
        match value {
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push(join(k));
                paths(v, &join(k), out);
            }),
            Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
                out.push(join(&i.to_string()));
                paths(v, &join(&i.to_string()), out);
            }),
            _ => {}
        }
    }
    let (rich, spec, config_maps, secrets) = super::rules::rich();
    let mut all = Vec::new();
    paths(&rich, "", &mut all);
    assert!(all.len() > 100);
    let replacements = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(1e300),
        json!("x"),
        json!([]),
        json!({}),
        json!([{}]),
    ];
    for path in &all {
        for replacement in &replacements {
            let mut workload = rich.clone();
            set(&mut workload, path, replacement.clone());
            let incoming = Incoming {
                workload: &workload,
                config_maps: &config_maps,
                secrets: &secrets,
                service_accounts: &[],
                claims: &[],
                hook_image: None,
            };
            if let Err(refused) = review(&incoming, &spec, &Usage::default()) {
                assert!(
                    reasons::ALL.contains(&refused.reason),
                    "{path}: {}",
                    refused.reason
                );
                assert!(!refused.message.is_empty(), "{path}");
            }
        }
    }
}
