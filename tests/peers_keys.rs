//! The cluster key Secret against a sandbox API server with the chart's
//! RBAC: created once however many replicas start at once, rotated in
//! place keeping the previous keys, and never replaced when it is broken.
//! The code under test runs as Ferry's own ServiceAccount.

mod support;
use support::cluster as support_cluster;

use std::collections::BTreeMap;
use std::time::Duration;

use ferry::peers::Error;
use ferry::peers::keys::{KEY_SECRET_NAME, load_or_create, rotate};
use ferry::trust::{TrustError, context, seal, verify};
use futures::future::join_all;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use support_cluster::*;

/// How many replicas race to create the Secret.
const REPLICAS: usize = 8;

async fn stored(cluster: &TestCluster) -> Secret {
    Api::<Secret>::namespaced(cluster.client.clone(), FERRY_NAMESPACE)
        .get(KEY_SECRET_NAME)
        .await
        .expect("the key Secret exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_at_once_end_with_one_key() {
    let clusters = start_clusters(&["home"], Duration::ZERO).await;
    let home = &clusters[0];
    let loads =
        (0..REPLICAS).map(|_| load_or_create(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME));
    let keys: Vec<_> = join_all(loads)
        .await
        .into_iter()
        .map(|k| k.expect("keys load or are created"))
        .collect();
    let first = keys[0].key_id().to_owned();
    for k in &keys {
        assert_eq!(k.key_id(), first, "two replicas hold different keys");
    }
    let secret = stored(home).await;
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let data = secret.data.expect("data");
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        ["current.sealing", "current.signing"]
    );
    // What a later start reads is what the racers hold.
    let again = load_or_create(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .expect("keys load");
    assert_eq!(again.key_id(), first);
    assert_eq!(again.public_keys(), keys[0].public_keys());
    for c in clusters {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_the_previous_keys_working() {
    let clusters = start_clusters(&["home"], Duration::ZERO).await;
    let home = &clusters[0];
    let before = load_or_create(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .expect("keys are created");
    let content = serde_json::json!({"requestId": "wm-1", "replicas": 3});
    let old_sig = before.sign(context::REQUEST, &content).expect("sign");
    let old_sealed = seal(&before.public_keys()[0], b"wm-1/db", b"password").expect("seal");

    let rotated = rotate(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .expect("keys rotate");
    assert_ne!(rotated.key_id(), before.key_id());
    assert_eq!(rotated.previous_key_id(), Some(before.key_id()));

    // A restart reads the rotated keys back.
    let reloaded = load_or_create(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME)
        .await
        .expect("keys load");
    assert_eq!(reloaded.key_id(), rotated.key_id());
    assert_eq!(reloaded.previous_key_id(), Some(before.key_id()));
    let published = reloaded.public_keys();
    verify(&published, context::REQUEST, &content, &old_sig).expect("old signature verifies");
    let new_sig = reloaded.sign(context::REQUEST, &content).expect("sign");
    verify(&published, context::REQUEST, &content, &new_sig).expect("new signature verifies");
    assert_eq!(
        reloaded
            .open(&old_sealed, b"wm-1/db")
            .expect("previous key opens"),
        b"password"
    );
    assert_eq!(stored(home).await.data.expect("data").len(), 4);
    for c in clusters {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_key_secret_is_an_error_and_stays_as_it_was() {
    let clusters = start_clusters(&["home"], Duration::ZERO).await;
    let home = &clusters[0];
    let broken = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(KEY_SECRET_NAME.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("current.signing".to_owned(), ByteString(vec![1; 31])),
            ("current.sealing".to_owned(), ByteString(vec![2; 32])),
        ])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(home.client.clone(), FERRY_NAMESPACE)
        .create(&PostParams::default(), &broken)
        .await
        .expect("the admin creates a broken Secret");
    let before = stored(home).await;

    for result in [
        load_or_create(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME).await,
        rotate(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME).await,
    ] {
        match result {
            Err(Error::InvalidKeys {
                source: TrustError::Malformed { field, .. },
                ..
            }) => assert_eq!(field, "current.signing"),
            other => panic!("a broken key Secret was accepted: {other:?}"),
        }
    }
    let after = stored(home).await;
    assert_eq!(after.data, before.data, "the broken Secret was replaced");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    for c in clusters {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_a_missing_key_secret_creates_nothing() {
    let clusters = start_clusters(&["home"], Duration::ZERO).await;
    let home = &clusters[0];
    let result = rotate(&home.ferry, FERRY_NAMESPACE, KEY_SECRET_NAME).await;
    assert!(matches!(result, Err(Error::Kube { .. })), "{result:?}");
    let secrets = Api::<Secret>::namespaced(home.client.clone(), FERRY_NAMESPACE);
    assert!(
        secrets
            .get_opt(KEY_SECRET_NAME)
            .await
            .expect("get")
            .is_none()
    );
    for c in clusters {
        c.shutdown().await;
    }
}
