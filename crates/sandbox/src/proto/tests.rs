//! Unit tests of the protobuf conversion: request bodies kubectl sent, the
//! round trip of every served kind, upstream's own fixtures when a checkout
//! is at hand, and hostile bytes.

use serde_json::json;

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/protobuf/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What kubectl 1.32 sent for `kubectl create …` (captured by a logging
/// proxy in front of the sandbox, see tests/data/protobuf/README.md), and
/// the JSON kube-apiserver makes of it.
#[test]
fn bodies_kubectl_sent_decode_to_the_objects_it_meant() {
    let cases = [
        (
            "kubectl-1.32-configmap.pb",
            "v1",
            "ConfigMap",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b"}}),
        ),
        (
            "kubectl-1.32-namespace.pb",
            "v1",
            "Namespace",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n1"}, "spec": {}, "status": {}}),
        ),
        (
            "kubectl-1.32-secret.pb",
            "v1",
            "Secret",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}}),
        ),
        (
            "kubectl-1.32-service.pb",
            "v1",
            "Service",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "svc1", "labels": {"app": "svc1"}},
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "svc1"},
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            }),
        ),
        (
            "kubectl-1.32-deployment.pb",
            "apps/v1",
            "Deployment",
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d1", "labels": {"app": "d1"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "d1"}},
                    "template": {
                        "metadata": {"labels": {"app": "d1"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]},
                    },
                    "strategy": {},
                },
                "status": {},
            }),
        ),
        (
            "kubectl-1.32-tokenrequest.pb",
            "authentication.k8s.io/v1",
            "TokenRequest",
            // `status.token` has no omitempty in Go: its empty string stays.
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {}, "spec": {}, "status": {"token": ""}}),
        ),
        (
            "kubectl-1.32-selfsubjectaccessreview.pb",
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
                "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}},
                "status": {"allowed": false},
            }),
        ),
    ];
    for (file, api_version, kind, want) in cases {
        let got = decode_body(&fixture(file), api_version, kind)
            .unwrap_or_else(|e| panic!("{file}: {e:?}"));
        assert_eq!(got, want, "{file}");
    }
}

/// Every field kind the converter knows, through JSON -> protobuf -> JSON.
#[test]
fn objects_of_every_served_kind_survive_a_round_trip() {
    let meta = json!({
        "name": "x", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "generation": 3,
        "creationTimestamp": "2024-05-06T07:08:09Z",
        "labels": {"a": "b", "empty": ""}, "annotations": {"note": "text"},
        "finalizers": ["f/one"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-2", "controller": true}],
        "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}, "time": "2024-05-06T07:08:09Z"}],
    });
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}, "binaryData": {"b": "AAEC"}, "immutable": false}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": {"k": "djE="}, "stringData": {"s": "t"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 80, "targetPort": "http", "protocol": "TCP"}, {"port": 81, "targetPort": 8081}], "clusterIP": "10.0.0.1", "type": "ClusterIP", "allocateLoadBalancerNodePorts": false}}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": meta, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "count": 2, "eventTime": "2024-05-06T07:08:09.123456Z", "firstTimestamp": "2024-05-06T07:08:09Z", "type": "Normal"}),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta, "eventTime": "2024-05-06T07:08:09.000001Z", "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R", "regarding": {"kind": "Pod", "name": "p"}, "series": {"count": 3, "lastObservedTime": "2024-05-06T07:08:10.500000Z"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "w"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["a", "b"]}]},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {
                "containers": [{"name": "c", "image": "i", "args": ["-v"], "ports": [{"containerPort": 8080}],
                    "env": [{"name": "E", "value": "1"}, {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "1"}},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 0, "allowPrivilegeEscalation": false}}],
                "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420}}],
                "terminationGracePeriodSeconds": 0, "nodeSelector": {"zone": "a"}}}},
            "status": {"replicas": 1, "conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2024-05-06T07:08:09Z"}]}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {"holderIdentity": "", "leaseDurationSeconds": 15, "acquireTime": "2024-05-06T07:08:09.000000Z", "renewTime": "2024-05-06T07:08:19.250000Z", "leaseTransitions": 0}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": meta, "spec": {
            "group": "g.dev", "scope": "Namespaced", "names": {"plural": "ws", "kind": "W", "shortNames": ["w"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}],
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "default": {"a": [1, "two"]},
                        "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a", "message": "immutable"}],
                        "additionalProperties": {"type": "string"}},
                    "list": {"type": "array", "items": {"type": "integer", "minimum": 0.5, "enum": [1, 2]}},
                    "free": {"type": "object", "additionalProperties": false},
                    "any": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}]},
            "status": {"acceptedNames": {"plural": "ws", "kind": "W"}, "storedVersions": ["v1"]}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x"}, "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}}),
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": "m", "reason": "Invalid", "code": 422, "details": {"name": "x", "kind": "configmaps", "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.name"}]}}),
    ];
    for object in objects {
        let bytes = encode_object(&object).expect("a served kind encodes");
        assert!(bytes.starts_with(MAGIC));
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        let back =
            decode_body(&bytes, api_version, kind).unwrap_or_else(|e| panic!("{kind}: {e:?}"));
        assert_eq!(back, object, "{kind}");
    }
}

/// A zero in a Go field that is neither a pointer nor without `omitempty`
/// is gone from the JSON, as in kube-apiserver; a pointer's zero stays.
#[test]
fn zero_values_follow_go_json() {
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "x"}, "spec": {"replicas": 0}});
    let back = decode_body(&encode_object(&scale).unwrap(), "autoscaling/v1", "Scale").unwrap();
    assert_eq!(back["spec"], json!({}));
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 0, "paused": false}});
    let back = decode_body(
        &encode_object(&deployment).unwrap(),
        "apps/v1",
        "Deployment",
    )
    .unwrap();
    assert_eq!(back["spec"], json!({"replicas": 0}));
}

#[test]
fn lists_and_watch_frames_carry_enveloped_objects() {
    let item = Arc::new(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
    );
    let list = encode_list(
        "v1",
        "ConfigMapList",
        &json!({"resourceVersion": "9"}),
        &[item.clone(), item.clone()],
    )
    .expect("ConfigMapList encodes");
    let back = decode_body(&list, "v1", "ConfigMapList").expect("decodes");
    assert_eq!(back["metadata"], json!({"resourceVersion": "9"}));
    assert_eq!(back["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(back["items"][1]["data"], json!({"k": "v"}));

    let object = encode_object(&item).expect("encodes");
    let frame = watch_frame("ADDED", &object);
    let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(length, frame.len() - 4);
    let event = decoder()
        .message(
            schema().message("meta.v1.WatchEvent").unwrap(),
            &frame[4..],
            0,
        )
        .expect("a WatchEvent");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"], *item);
}

#[test]
fn malformed_bodies_are_errors_with_kube_apiserver_wording() {
    let good = fixture("kubectl-1.32-configmap.pb");
    let garbage = decode_body(b"{\"kind\": \"ConfigMap\"}", "v1", "ConfigMap").unwrap_err();
    assert_eq!(
        garbage.message(),
        "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({\"kind\": \"ConfigMap\"})"
    );
    let truncated = decode_body(&good[..good.len() - 12], "v1", "ConfigMap").unwrap_err();
    assert!(
        truncated.message().contains("unexpected EOF"),
        "{truncated:?}"
    );
    let wrong_kind = decode_body(&good, "v1", "Namespace").unwrap_err();
    assert!(
        wrong_kind
            .message()
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a Namespace"),
        "{wrong_kind:?}"
    );
    assert!(
        decode_body(b"", "v1", "ConfigMap")
            .unwrap_err()
            .message()
            .contains("empty data")
    );
    assert!(
        decode_body(MAGIC, "v1", "ConfigMap")
            .unwrap_err()
            .message()
            .contains("empty body")
    );
}

/// A deterministic stream of pseudo-random numbers (xorshift), so that a
/// failure names its seed and replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_and_mutated_bytes_never_panic() {
    let seeds = [
        fixture("kubectl-1.32-configmap.pb"),
        fixture("kubectl-1.32-deployment.pb"),
        fixture("kubectl-1.32-service.pb"),
    ];
    let kinds = [
        ("v1", "ConfigMap"),
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..20_000 {
        let mut bytes = match round % 3 {
            // Pure noise behind the magic, so the decoder gets past it.
            0 => {
                let len = (rng.next() % 64) as usize;
                let mut b = MAGIC.to_vec();
                b.extend((0..len).map(|_| rng.next() as u8));
                b
            }
            // A real body with a few bytes flipped, cut or inserted.
            _ => {
                let mut b = seeds[round % seeds.len()].clone();
                for _ in 0..1 + rng.next() % 4 {
                    let at = (rng.next() as usize) % b.len();
                    match rng.next() % 3 {
                        0 => b[at] = rng.next() as u8,
                        1 => b.truncate(at.max(4)),
                        _ => b.insert(at, rng.next() as u8),
                    }
                    if b.is_empty() {
                        break;
                    }
                }
                b
            }
        };
        bytes.truncate(4096);
        let (api_version, kind) = kinds[round % kinds.len()];
        // Decoding may fail; it must return.
        let _ = decode_body(&bytes, api_version, kind);
    }
}

#[test]
fn nesting_is_bounded() {
    // A JSONSchemaProps nested through `not` far deeper than any CRD.
    let mut raw = Vec::new();
    for _ in 0..10_000 {
        let mut outer = Vec::new();
        put_bytes(&mut outer, 28, &raw);
        raw = outer;
    }
    let index = schema()
        .message("apiextensions.v1.JSONSchemaProps")
        .unwrap();
    let error = decoder().message(index, &raw, 0).unwrap_err();
    assert!(error.0.contains("depth"), "{error}");
}

/// Upstream's compatibility fixtures (`testdata/HEAD/*.pb` and `*.json` of
/// k8s.io/api and k8s.io/apiextensions-apiserver) set every field of a kind;
/// they prove the schema's numbers, names and special types. They are not
/// vendored: set FERRY_K8S_TESTDATA to directories holding them, separated by
/// `:`, to run this check.
#[test]
fn upstream_fixtures_decode_to_upstream_json() {
    let Ok(dirs) = std::env::var("FERRY_K8S_TESTDATA") else {
        eprintln!("FERRY_K8S_TESTDATA is not set: upstream fixtures not checked");
        return;
    };
    let kinds = [
        ("core.v1.ConfigMap", "v1", "ConfigMap"),
        ("core.v1.Secret", "v1", "Secret"),
        ("core.v1.Namespace", "v1", "Namespace"),
        ("core.v1.Service", "v1", "Service"),
        ("core.v1.Event", "v1", "Event"),
        ("core.v1.ServiceAccount", "v1", "ServiceAccount"),
        ("events.k8s.io.v1.Event", "events.k8s.io/v1", "Event"),
        ("apps.v1.Deployment", "apps/v1", "Deployment"),
        ("core.v1.Pod", "v1", "Pod"),
        (
            "core.v1.PersistentVolumeClaim",
            "v1",
            "PersistentVolumeClaim",
        ),
        ("apps.v1.StatefulSet", "apps/v1", "StatefulSet"),
        ("batch.v1.Job", "batch/v1", "Job"),
        (
            "discovery.k8s.io.v1.EndpointSlice",
            "discovery.k8s.io/v1",
            "EndpointSlice",
        ),
        (
            "autoscaling.v2.HorizontalPodAutoscaler",
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
        ),
        (
            "policy.v1.PodDisruptionBudget",
            "policy/v1",
            "PodDisruptionBudget",
        ),
        (
            "networking.k8s.io.v1.NetworkPolicy",
            "networking.k8s.io/v1",
            "NetworkPolicy",
        ),
        (
            "coordination.k8s.io.v1.Lease",
            "coordination.k8s.io/v1",
            "Lease",
        ),
        ("autoscaling.v1.Scale", "autoscaling/v1", "Scale"),
        (
            "apiextensions.k8s.io.v1.CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
        ),
        (
            "rbac.authorization.k8s.io.v1.ClusterRole",
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
        ),
        (
            "rbac.authorization.k8s.io.v1.RoleBinding",
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
        ),
        (
            "authentication.k8s.io.v1.TokenRequest",
            "authentication.k8s.io/v1",
            "TokenRequest",
        ),
        (
            "authorization.k8s.io.v1.SubjectAccessReview",
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
        ),
        (
            "authorization.k8s.io.v1.SelfSubjectRulesReview",
            "authorization.k8s.io/v1",
            "SelfSubjectRulesReview",
        ),
    ];
    let mut checked = 0;
    for (file, api_version, kind) in kinds {
        let Some(dir) = dirs
            .split(':')
            .find(|d| std::path::Path::new(&format!("{d}/{file}.pb")).exists())
        else {
            continue;
        };
        let pb = std::fs::read(format!("{dir}/{file}.pb")).expect("readable");
        let want: Value =
            serde_json::from_slice(&std::fs::read(format!("{dir}/{file}.json")).expect("readable"))
                .expect("JSON");
        let got = decode_body(&pb, api_version, kind).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        assert_json_eq(&got, &want, file);
        let again = encode_object(&want).expect("encodes");
        let back = decode_body(&again, api_version, kind).expect("decodes");
        assert_json_eq(&back, &want, &format!("{file} re-encoded"));
        checked += 1;
    }
    eprintln!("{checked} upstream fixtures checked");
    assert!(checked > 0, "no fixture found under {dirs}");
}

/// Equal JSON, or a panic naming the first path that differs.
fn assert_json_eq(got: &Value, want: &Value, what: &str) {
    fn diff(got: &Value, want: &Value, path: String, out: &mut Vec<String>) {
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => {
                for key in g.keys().chain(w.keys().filter(|k| !g.contains_key(*k))) {
                    let null = Value::Null;
                    diff(
                        g.get(key).unwrap_or(&null),
                        w.get(key).unwrap_or(&null),
                        format!("{path}.{key}"),
                        out,
                    );
                }
            }
            (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
                for (i, (g, w)) in g.iter().zip(w).enumerate() {
                    diff(g, w, format!("{path}[{i}]"), out);
                }
            }
            (g, w) if g != w => out.push(format!("{path}: got {g}, want {w}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    diff(got, want, String::new(), &mut out);
    assert!(out.is_empty(), "{what}:\n{}", out.join("\n"));
}
