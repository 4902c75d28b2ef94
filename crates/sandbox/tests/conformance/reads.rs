//! get, list (also as a Table) and watch through kubectl and raw HTTP: the
//! object, list and event shapes upstream documents, and the 403 for a
//! caller without the verb.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::harness::{
    self, Caller, NS, PROTOBUF_OR_JSON, World, assert_kubectl_error, json_call, kubectl,
    protobuf_status, send,
};
use crate::kinds::{KINDS, Kind};
use crate::{common, pb, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_list() {
    let world = World::start("conf-get").await;
    for kind in KINDS {
        world.seed(kind, kind.object("one", "1")).await;
        world.seed(kind, kind.object("two", "2")).await;
        let row = format!("get-{}", kind.resource);
        let (ok, no) = world.pair(&row, kind, "get", &["get"]).await;
        let refused = upstream::forbidden(&no.user, "get", kind, "", "one");

        let out = kubectl(&ok, &["get", &kind.qualified(), "one", "-o", "json"])
            .await
            .out(&row);
        let object: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(
            (object["kind"].as_str(), kind.value_of(&object)),
            (Some(kind.kind), Some("1"))
        );
        assert_kubectl_error(
            &kubectl(&no, &["get", &kind.qualified(), "one"])
                .await
                .err(&row),
            &refused,
        );
        let missing = kubectl(&ok, &["get", &kind.qualified(), "missing"])
            .await
            .err(&row);
        assert_kubectl_error(&missing, &upstream::not_found(kind, "missing"));

        let (code, object) = json_call(&ok.client, "GET", &kind.item("one"), None).await;
        assert_eq!(
            (code, object["apiVersion"].as_str()),
            (200, Some(kind.api_version().as_str()))
        );
        assert_eq!(kind.value_of(&object), Some("1"));
        assert_eq!(
            json_call(&no.client, "GET", &kind.item("one"), None).await,
            (403, refused.clone())
        );
        let (code, body) = json_call(&ok.client, "GET", &kind.item("missing"), None).await;
        assert_eq!((code, body), (404, upstream::not_found(kind, "missing")));
        if kind.protobuf {
            let answer = send(
                &ok.client,
                "GET",
                &kind.item("one"),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            let (version, answered, raw) = pb::open(&answer.body);
            assert_eq!(
                (version, answered),
                (kind.api_version(), kind.kind.to_owned())
            );
            assert_eq!(pb::text(&pb::field(&raw, 1), 1), "one");
            let answer = send(
                &no.client,
                "GET",
                &kind.item("one"),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            assert_eq!(protobuf_status(&answer), refused);
        }

        let row = format!("list-{}", kind.resource);
        let (ok, no) = world.pair(&row, kind, "list", &["list"]).await;
        let refused = upstream::forbidden(&no.user, "list", kind, "", "");
        let out = kubectl(&ok, &["get", &kind.qualified(), "-o", "json"])
            .await
            .out(&row);
        let list: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(names(&list), ["one", "two"]);
        assert_kubectl_error(
            &kubectl(&no, &["get", &kind.qualified()]).await.err(&row),
            &refused,
        );
        let (code, list) = json_call(&ok.client, "GET", &kind.collection(), None).await;
        assert_eq!(code, 200);
        // A list is `<Kind>List` with list metadata (k8s.io/apimachinery/pkg/apis/meta/v1/types.go, ListMeta).
        assert_eq!(list["kind"], format!("{}List", kind.kind));
        assert_eq!(list["apiVersion"], kind.api_version());
        assert!(
            list["metadata"]["resourceVersion"]
                .as_str()
                .is_some_and(|rv| !rv.is_empty())
        );
        assert_eq!(names(&list), ["one", "two"]);
        assert_eq!(
            json_call(&no.client, "GET", &kind.collection(), None).await,
            (403, refused.clone())
        );
        if kind.protobuf {
            let answer = send(
                &ok.client,
                "GET",
                &kind.collection(),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            let (_, answered, raw) = pb::open(&answer.body);
            assert_eq!(answered, format!("{}List", kind.kind));
            // ConfigMapList: metadata 1, items 2.
            let items: Vec<String> = pb::fields(&raw)
                .into_iter()
                .filter(|f| f.0 == 2)
                .map(|f| pb::text(&pb::field(&f.2, 1), 1))
                .collect();
            assert_eq!(items, ["one", "two"]);
            let answer = send(
                &no.client,
                "GET",
                &kind.collection(),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            assert_eq!(protobuf_status(&answer), refused);
        }
        table(&ok, kind).await;
    }
    world.stop().await;
}

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect()
}

/// The Table kubectl asks for (k8s.io/apimachinery/pkg/apis/meta/v1/types.go,
/// `Table`): column definitions, one row per object with its cells and, by
/// default, the object's metadata as `PartialObjectMetadata`. ConfigMap's
/// columns are upstream's printer's (k8s.io/kubernetes/pkg/printers/internalversion/printers.go:
/// Name, Data, Age); a CRD's are Name, its printer columns, Age.
async fn table(caller: &Caller, kind: &Kind) {
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let answer = send(
        &caller.client,
        "GET",
        &kind.collection(),
        None,
        accept,
        Vec::new(),
    )
    .await;
    let table = answer.json();
    assert_eq!(
        (table["kind"].as_str(), table["apiVersion"].as_str()),
        (Some("Table"), Some("meta.k8s.io/v1"))
    );
    let columns: Vec<(&str, &str)> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or(""),
                c["type"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let (middle, first_value) = if kind.protobuf {
        (("Data", "string"), json!(1))
    } else {
        (("K", "string"), json!("1"))
    };
    assert_eq!(columns, [("Name", "string"), middle, ("Age", "string")]);
    let row = &table["rows"][0];
    assert_eq!(
        (&row["cells"][0], &row["cells"][1]),
        (&json!("one"), &first_value)
    );
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(row["object"]["metadata"]["name"], "one");
    let printed = kubectl(caller, &["get", &kind.qualified()])
        .await
        .out("table");
    let header: Vec<&str> = printed
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let middle = middle.0.to_uppercase();
    assert_eq!(header, ["NAME", middle.as_str(), "AGE"], "{printed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch() {
    let world = World::start("conf-watch").await;
    for kind in KINDS {
        let row = format!("watch-{}", kind.resource);
        let (ok, no) = world.pair(&row, kind, "watch", &["watch"]).await;
        // As of resourceVersion 0 (any): the object present at the start is
        // ADDED first; an object created later arrives as the next event.
        world.seed(kind, kind.object("before", "b")).await;
        let path = format!("{}?watch=true", kind.collection());
        let mut watch = harness::watch(&ok.client, &path, "application/json").await;
        // JSON events are `{"type": ..., "object": ...}`, one a line
        // (k8s.io/apimachinery/pkg/apis/meta/v1/watch.go, `WatchEvent`).
        assert_eq!(
            (watch.code, watch.content_type.as_str()),
            (200, "application/json")
        );
        let event = watch.json_event().await;
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["metadata"]["name"], "before");
        assert_eq!(event.as_object().map(|o| o.len()), Some(2), "{event}");
        world.seed(kind, kind.object("after", "a")).await;
        let event = watch.json_event().await;
        assert_eq!(
            (
                event["type"].as_str(),
                event["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("after"))
        );
        assert_eq!(kind.value_of(&event["object"]), Some("a"));
        let (code, _) =
            json_call(&world.admin().clone(), "DELETE", &kind.item("after"), None).await;
        assert_eq!(code, 200);
        let event = watch.json_event().await;
        assert_eq!(
            (
                event["type"].as_str(),
                event["object"]["metadata"]["name"].as_str()
            ),
            (Some("DELETED"), Some("after"))
        );

        let refused = upstream::forbidden(&no.user, "watch", kind, "", "");
        let (code, body) = json_call(&no.client, "GET", &path, None).await;
        assert_eq!((code, body), (403, refused.clone()));

        if kind.protobuf {
            let mut watch = harness::watch(&ok.client, &path, PROTOBUF_OR_JSON).await;
            assert_eq!(
                watch.content_type,
                "application/vnd.kubernetes.protobuf;stream=watch"
            );
            // Each frame is a WatchEvent (type 1, object 2 = RawExtension{raw 1})
            // whose object is an enveloped ConfigMap.
            let frame = watch.protobuf_frame().await;
            assert_eq!(pb::text(&frame, 1), "ADDED");
            let object = pb::field(&pb::field(&frame, 2), 1);
            let (_, answered, raw) = pb::open(&object);
            assert_eq!(
                (answered.as_str(), pb::text(&pb::field(&raw, 1), 1).as_str()),
                (kind.kind, "before")
            );
        }
        kubectl_watch(&world, &ok, kind).await;
        let err = kubectl(
            &no,
            &[
                "get",
                &kind.qualified(),
                "--watch-only",
                "--request-timeout=60s",
            ],
        )
        .await
        .err(&row);
        assert_kubectl_error(&err, &refused);
    }
    world.stop().await;
}

/// `kubectl get -w --output-watch-events` prints the listed object, then an
/// object created after its watch started as `ADDED`.
async fn kubectl_watch(world: &World, caller: &Caller, kind: &Kind) {
    let list_too = world
        .cert_user(
            &format!("watcher-{}", kind.resource),
            kind,
            &["list", "watch"],
        )
        .await;
    let mut child = Command::new(common::kubectl())
        .args([
            "get",
            &kind.qualified(),
            "-w",
            "--output-watch-events",
            "--namespace",
            NS,
        ])
        .env("KUBECONFIG", &list_too.kubeconfig)
        .env("HOME", list_too.kubeconfig.parent().expect("directory"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |rx: std::sync::mpsc::Receiver<String>, name: &'static str| {
        tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + common::WAIT;
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let line = rx.recv_timeout(left).expect("kubectl prints the event");
                let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
                if words.get(1).map(String::as_str) == Some(name) {
                    return (rx, words);
                }
            }
        })
    };
    // The object present before: kubectl lists it (and so its watch began).
    let (rx, words) = wait_for(rx, "before").await.expect("reader");
    assert_eq!(words[0], "ADDED");
    world.seed(kind, kind.object("seen-by-kubectl", "k")).await;
    let (_, words) = wait_for(rx, "seen-by-kubectl").await.expect("reader");
    assert_eq!(words[0], "ADDED");
    let _ = child.kill();
    let _ = child.wait();
    let _ = caller;
}
