//! What the sandbox's benchmarks share: the ConfigMap they write, and the
//! write-to-watch measurement.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// A small ConfigMap labelled `app=bench`.
pub fn cm(name: String) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"key": "value"}}),
    )
    .expect("config map")
}

/// Patches one ConfigMap `writes` times while a watch follows it, and
/// returns, sorted, how long each write took to arrive as a watch event.
pub async fn watch_delays(api: &Api<ConfigMap>, writes: usize) -> Vec<Duration> {
    api.create(&PostParams::default(), &cm("latency".into()))
        .await
        .expect("create");
    let rv = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut stream = api
        .watch(&WatchParams::default().fields("metadata.name=latency"), &rv)
        .await
        .expect("watch")
        .boxed();
    let receiver = tokio::spawn(async move {
        let mut seen = HashMap::new();
        while seen.len() < writes {
            match stream.try_next().await {
                Ok(Some(WatchEvent::Modified(o))) => {
                    seen.insert(
                        o.metadata.resource_version.unwrap_or_default(),
                        Instant::now(),
                    );
                }
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        seen
    });
    let mut sent = Vec::with_capacity(writes);
    for i in 0..writes {
        let before = Instant::now();
        let patch = Patch::Merge(json!({"data": {"i": i.to_string()}}));
        let out = api
            .patch("latency", &PatchParams::default(), &patch)
            .await
            .expect("patch");
        sent.push((out.metadata.resource_version.unwrap_or_default(), before));
    }
    let seen = receiver.await.expect("watch task");
    let mut delays: Vec<Duration> = sent
        .iter()
        .filter_map(|(rv, before)| seen.get(rv).map(|at| at.saturating_duration_since(*before)))
        .collect();
    delays.sort_unstable();
    delays
}
