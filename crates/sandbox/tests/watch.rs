//! Watch semantics: continuity across many writes, 410 Gone past the
//! history, bookmarks, and a kube-runtime watcher surviving an outage.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_sandbox::SandboxConfig;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// Wait (bounded) until the watcher reports an object named `want`.
async fn next(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    want: &str,
) -> Result<(), tokio::time::error::Elapsed> {
    let fut = async move {
        while let Some(name) = rx.recv().await {
            if name == want {
                return;
            }
        }
    };
    tokio::time::timeout(common::WAIT, fut).await
}

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn a_watcher_sees_every_resource_version_of_1000_writes_once_in_order() {
    let cluster = common::start("continuity").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let start_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut rvs = Vec::new();
                let name = format!("w{w}");
                let created = api
                    .create(&PostParams::default(), &cm(&name))
                    .await
                    .unwrap();
                rvs.push(
                    created
                        .metadata
                        .resource_version
                        .unwrap()
                        .parse::<u64>()
                        .unwrap(),
                );
                for i in 1..250 {
                    let patch = json!({"data": {"i": i.to_string()}});
                    let out = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                        .unwrap();
                    rvs.push(
                        out.metadata
                            .resource_version
                            .unwrap()
                            .parse::<u64>()
                            .unwrap(),
                    );
                }
                rvs
            })
        })
        .collect();
    let mut written = Vec::new();
    for writer in writers {
        written.extend(writer.await.unwrap());
    }
    written.sort_unstable();
    assert_eq!(written.len(), 1000);
    let mut seen = Vec::new();
    while seen.len() < written.len() {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                seen.push(o.metadata.resource_version.unwrap().parse::<u64>().unwrap());
            }
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, written, "every write once, in order");
    cluster.stop().await;
}

#[tokio::test]
async fn a_watch_from_before_the_retained_history_gets_410_gone() {
    let cluster = common::start_with(SandboxConfig {
        history_limit: 10,
        ..SandboxConfig::new("gone")
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    for i in 0..30 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
    cluster.stop().await;
}

#[tokio::test]
async fn idle_watches_get_bookmarks_and_end_at_their_timeout() {
    let cluster = common::start_with(SandboxConfig {
        bookmark_interval: Duration::from_millis(100),
        ..SandboxConfig::new("bookmarks")
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    }
    .timeout(1);
    let events: Vec<_> = api
        .watch(&params, &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(events.len() >= 2, "{} events", events.len());
    assert!(
        events
            .iter()
            .all(|e| matches!(e, WatchEvent::Bookmark(b) if b.metadata.resource_version == rv))
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_runtime_watcher_resumes_after_an_outage_and_sees_new_objects() {
    let mut cluster = common::start("outage").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch_api = api.clone();
    let watching = tokio::spawn(async move {
        let mut stream = watcher(watch_api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(item) = stream.next().await {
            if let Ok(cm) = item {
                let _ = tx.send(cm.metadata.name.unwrap_or_default());
            }
        }
    });
    next(&mut rx, "before")
        .await
        .expect("sees the first object");

    cluster.sandbox.stop().await;
    assert!(
        api.get("before").await.is_err(),
        "connections are refused while stopped"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.sandbox.restart().await.unwrap();
    api.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    next(&mut rx, "after")
        .await
        .expect("sees an object created after the restart");
    let data = api.get("before").await.unwrap();
    assert_eq!(
        data.data, None::<BTreeMap<String, String>>,
        "data survived the outage"
    );
    watching.abort();
    cluster.stop().await;
}
