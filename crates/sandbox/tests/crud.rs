//! CRUD, errors, list (selectors, pagination) and watch through `kube::Api`.

mod common;

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("key".to_string(), "value".to_string())])),
        ..Default::default()
    }
}

#[tokio::test]
async fn create_get_replace_delete_round_trip() {
    let cluster = common::start("crud").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let created = api
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let mut fetched = api.get("a").await.unwrap();
    assert_eq!(fetched.data, created.data);
    fetched.data = Some(BTreeMap::from([("key".to_string(), "changed".to_string())]));
    let replaced = api
        .replace("a", &PostParams::default(), &fetched)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv, "resource versions rise");
    assert_eq!(replaced.data.unwrap()["key"], "changed");

    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(common::status(api.get("a").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn errors_are_status_objects_with_the_right_codes() {
    let cluster = common::start("errors").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let missing = common::status(api.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert!(
        missing.message.contains("configmaps \"nope\" not found"),
        "{}",
        missing.message
    );

    api.create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .unwrap();
    let dup = common::status(
        api.create(&PostParams::default(), &config_map("dup", &[]))
            .await,
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let no_ns: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "ghost");
    let missing_ns = common::status(
        no_ns
            .create(&PostParams::default(), &config_map("x", &[]))
            .await,
    );
    assert_eq!(missing_ns.code, 404);
    assert!(
        missing_ns
            .message
            .contains("namespaces \"ghost\" not found")
    );

    let bad = common::status(
        api.create(&PostParams::default(), &config_map("Not_Valid", &[]))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));

    // Without the token: 401 Unauthorized, as a Status.
    let mut kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig_path()).unwrap();
    for user in &mut kubeconfig.auth_infos {
        if let Some(info) = user.auth_info.as_mut() {
            info.token = Some("wrong".to_string().into());
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let stranger: Api<ConfigMap> =
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let denied = common::status(stranger.get("dup").await);
    assert_eq!((denied.code, denied.reason.as_str()), (401, "Unauthorized"));
    cluster.stop().await;
}

#[tokio::test]
async fn stale_resource_version_is_a_conflict() {
    let cluster = common::start("stale").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let first = api
        .create(&PostParams::default(), &config_map("c", &[]))
        .await
        .unwrap();
    let mut newer = first.clone();
    newer.data = Some(BTreeMap::from([("k".to_string(), "1".to_string())]));
    api.replace("c", &PostParams::default(), &newer)
        .await
        .unwrap();
    let conflict = common::status(api.replace("c", &PostParams::default(), &first).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    cluster.stop().await;
}

#[tokio::test]
async fn generate_name_gives_a_unique_name() {
    let cluster = common::start("genname").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut cm = config_map("", &[]);
    cm.metadata.name = None;
    cm.metadata.generate_name = Some("job-".into());
    let a = api.create(&PostParams::default(), &cm).await.unwrap();
    let b = api.create(&PostParams::default(), &cm).await.unwrap();
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(a.starts_with("job-") && a.len() == 9, "{a}");
    assert_ne!(a, b);
    cluster.stop().await;
}

#[tokio::test]
async fn list_filters_by_label_and_field_selectors_and_paginates() {
    let cluster = common::start("list").await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("other".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    for i in 0..25 {
        let tier = if i % 2 == 0 { "front" } else { "back" };
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i:02}"), &[("app", "web"), ("tier", tier)]),
        )
        .await
        .unwrap();
    }
    let other: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "other");
    other
        .create(
            &PostParams::default(),
            &config_map("elsewhere", &[("app", "web")]),
        )
        .await
        .unwrap();

    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    assert_eq!(
        api.list(&ListParams::default().labels("tier=front"))
            .await
            .unwrap()
            .items
            .len(),
        13
    );
    assert_eq!(
        api.list(&ListParams::default().labels("tier in (back),app"))
            .await
            .unwrap()
            .items
            .len(),
        12
    );
    assert_eq!(
        api.list(&ListParams::default().labels("tier!=front"))
            .await
            .unwrap()
            .items
            .len(),
        12
    );
    assert_eq!(
        api.list(&ListParams::default().labels("!tier"))
            .await
            .unwrap()
            .items
            .len(),
        0
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=cm-03"))
                .await
                .unwrap()
        ),
        ["cm-03"]
    );

    let everywhere: Api<ConfigMap> = Api::all(cluster.client.clone());
    assert_eq!(
        everywhere
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len(),
        26
    );

    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(10);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.unwrap();
        pages += 1;
        assert!(page.metadata.resource_version.is_some());
        let token = page.metadata.continue_.clone();
        seen.extend(names(page));
        match token {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(seen, expected);
    cluster.stop().await;
}

#[tokio::test]
async fn watch_from_a_version_sees_changes_in_order_and_respects_selectors() {
    let cluster = common::start("watch").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = api
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap();
    let mut stream = stream.boxed();
    api.create(&PostParams::default(), &config_map("w", &[("app", "web")]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &config_map("ignored", &[("app", "db")]),
    )
    .await
    .unwrap();
    let mut changed = api.get("w").await.unwrap();
    changed.metadata.labels = Some(BTreeMap::from([("app".to_string(), "other".to_string())]));
    api.replace("w", &PostParams::default(), &changed)
        .await
        .unwrap();

    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Added(cm)) => {
                kinds.push(format!("ADDED {}", cm.metadata.name.unwrap()))
            }
            Some(WatchEvent::Modified(cm)) => {
                kinds.push(format!("MODIFIED {}", cm.metadata.name.unwrap()))
            }
            Some(WatchEvent::Deleted(cm)) => {
                kinds.push(format!("DELETED {}", cm.metadata.name.unwrap()))
            }
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // Leaving the selection shows as DELETED.
    assert_eq!(kinds, ["ADDED w", "DELETED w"]);
    cluster.stop().await;
}
