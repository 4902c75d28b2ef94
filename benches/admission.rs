//! What a receiver's admission of one request costs: `admission::review`
//! of a realistic Deployment (three containers and an init container, four
//! volumes, env references, a toleration, registry and cap checks) with its
//! travelling ConfigMap and Secrets, and one rate-limiter step.
//!
//! `cargo bench --bench admission`

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use ferry::admission::{Incoming, RateLimiter, Usage, review};
use ferry::crd::{AdmissionSpec, AllowedToleration, RateLimitSpec};
use serde_json::{Value, json};

const DEPLOYMENT: &str = include_str!("../tests/data/admission/bench-deployment.json");

fn spec() -> AdmissionSpec {
    let mut spec = AdmissionSpec {
        tolerations: vec![AllowedToleration {
            key: Some("pool".into()),
            operator: Some("Equal".into()),
            value: Some("spot".into()),
            effect: Some("NoSchedule".into()),
        }],
        image_registries: vec![
            "ghcr.io/acme".into(),
            "docker.io/envoyproxy".into(),
            "quay.io/prometheus".into(),
        ],
        ..AdmissionSpec::default()
    };
    spec.caps.per_request.cpu = Some("8".into());
    spec.caps.per_request.memory = Some("16Gi".into());
    spec.caps.total.replicas = Some(100);
    spec.caps.total.memory = Some("64Gi".into());
    spec
}

fn admission(c: &mut Criterion) {
    let workload: Value = serde_json::from_str(DEPLOYMENT).expect("bench Deployment");
    let config_maps = [
        json!({"kind": "ConfigMap", "metadata": {"name": "shop-config"}, "data": {"region": "eu"}}),
    ];
    let secrets = [
        json!({"kind": "Secret", "type": "Opaque", "metadata": {"name": "shop-db"}, "data": {"password": "cGFzcw=="}}),
        json!({"kind": "Secret", "metadata": {"name": "shop-tls"}, "data": {"tls.crt": "", "tls.key": ""}}),
    ];
    let incoming = Incoming {
        workload: &workload,
        config_maps: &config_maps,
        secrets: &secrets,
        service_accounts: &[],
        claims: &[],
        hook_image: None,
    };
    let spec = spec();
    let usage = Usage {
        replicas: 10,
        cpu_millis: 4_000,
        memory_bytes: 8 << 30,
    };
    review(&incoming, &spec, &usage).expect("the bench Deployment is admitted");
    c.bench_function("admission/review", |b| {
        b.iter(|| review(black_box(&incoming), black_box(&spec), black_box(&usage)))
    });
    let limit = RateLimitSpec {
        requests_per_minute: u32::MAX,
        burst: u32::MAX,
    };
    let mut limiter = RateLimiter::new(1024);
    let start = Instant::now();
    c.bench_function("admission/rate_limiter", |b| {
        b.iter(|| limiter.admit(black_box("peer-a"), &limit, start))
    });
}

criterion_group!(benches, admission);
criterion_main!(benches);
