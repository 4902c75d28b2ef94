//! The cost of trust on the receiver's path: signing and verifying a
//! realistic request (a Deployment manifest of about 4 KiB and two
//! ConfigMaps), and sealing and opening a 4 KiB Secret. The budget
//! for receiver admission, signature checks included, is 1 ms a request.
//!
//! Run: `cargo bench --bench trust`.

use criterion::{Criterion, criterion_group, criterion_main};
use ferry::trust::{ClusterKeys, context, seal, verify};
use serde_json::{Value, json};
use std::hint::black_box;

/// A Deployment with a few containers, probes, env and volumes: about 4 KiB
/// of JSON, like a real service's manifest.
fn deployment() -> Value {
    let container = |name: &str| {
        json!({
            "name": name,
            "image": format!("registry.example.com/shop/{name}:1.24.3"),
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": (0..18).map(|i| json!({"name": format!("{name}_SETTING_{i}"),
                                          "value": format!("value-{i}-for-{name}")}))
                         .collect::<Vec<_>>(),
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                          "limits": {"cpu": "1", "memory": "512Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"},
                               "periodSeconds": 5, "failureThreshold": 3},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                              "initialDelaySeconds": 10, "periodSeconds": 10},
            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/shop"},
                             {"name": "settings", "mountPath": "/etc/settings"}],
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "checkout", "namespace": "shop",
                     "labels": {"app": "checkout", "tier": "backend", "team": "payments"},
                     "annotations": {"ferry.dev/moved-from": "eu-west", "owner": "payments@example.com"}},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "checkout"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "checkout", "tier": "backend"}},
                "spec": {
                    "containers": [container("checkout"), container("sidecar")],
                    "volumes": [{"name": "config", "configMap": {"name": "checkout-config"}},
                                {"name": "settings", "configMap": {"name": "checkout-settings"}}],
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
    })
}

fn config_map(name: &str) -> Value {
    let data: serde_json::Map<String, Value> = (0..10)
        .map(|i| {
            (
                format!("key-{i}"),
                json!(format!("setting {i} of {name}: {}", "x".repeat(40))),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "shop"}, "data": data})
}

fn request() -> Value {
    json!({
        "requestId": "wm-3f2a9c1e", "sourceCluster": "eu-west", "targetCluster": "us-east",
        "nonce": "5b1e0f6a9d2c4e7f", "deadline": "2026-01-01T00:05:00Z",
        "sourceAction": "ScaleToZero",
        "workload": deployment(),
        "configMaps": [config_map("checkout-config"), config_map("checkout-settings")],
    })
}

fn bench(c: &mut Criterion) {
    let keys = ClusterKeys::generate().expect("keys");
    let public = keys.public_keys();
    let request = request();
    let manifest = serde_json::to_vec(&deployment()).expect("json").len();
    let total = serde_json::to_vec(&request).expect("json").len();
    println!("request: Deployment manifest {manifest} bytes, whole request {total} bytes");
    let sig = keys.sign(context::REQUEST, &request).expect("sign");
    let secret = vec![0x5a_u8; 4096];
    let aad = b"wm-3f2a9c1e/secret/checkout-db";
    let sealed = seal(&public[0], aad, &secret).expect("seal");

    let mut group = c.benchmark_group("trust");
    group.bench_function("sign request", |b| {
        b.iter(|| {
            keys.sign(context::REQUEST, black_box(&request))
                .expect("sign")
        })
    });
    group.bench_function("verify request", |b| {
        b.iter(|| verify(&public, context::REQUEST, black_box(&request), &sig).expect("verify"))
    });
    group.bench_function("seal 4 KiB secret", |b| {
        b.iter(|| seal(&public[0], aad, black_box(&secret)).expect("seal"))
    });
    group.bench_function("open 4 KiB secret", |b| {
        b.iter(|| keys.open(black_box(&sealed), aad).expect("open"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
