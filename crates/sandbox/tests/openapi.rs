//! OpenAPI documents and server-side field validation: the v3 discovery
//! and per-group-version documents as raw HTTP sees them, `kubectl apply`
//! with validation on and `kubectl explain` (kubectl from `FERRY_KUBECTL`,
//! else PATH), and the `fieldValidation` answers to raw writes.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// A raw request through the client's connection and credentials; the
/// answer as it came, whatever its status.
async fn raw(
    client: &kube::Client,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(kube::client::Body::from(body.to_vec()))
        .expect("request builds");
    let response = client.send(request).await.expect("the sandbox answers");
    let (parts, body) = response.into_parts();
    let bytes = body.collect_bytes().await.expect("the body arrives");
    (parts.status, parts.headers, bytes)
}

async fn get_json(client: &kube::Client, uri: &str) -> Value {
    let (status, _, body) = raw(client, Method::GET, uri, &[], b"").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{uri}: {}",
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).expect("JSON")
}

const GADGET_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.test.ferry.dev"},
  "spec": {
    "group": "test.ferry.dev",
    "scope": "Namespaced",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "description": "A gadget for the OpenAPI tests.",
        "properties": {
          "spec": {
            "type": "object",
            "description": "What the gadget should be: its size and free-form settings.",
            "properties": {
              "size": {"type": "integer", "description": "How big the gadget is, in gadget units."},
              "settings": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
          },
          "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
      }}
    }]
  }
}"#;

async fn install_gadgets(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_str(GADGET_CRD).expect("CRD parses");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
}

#[tokio::test]
async fn the_v3_discovery_and_group_version_documents_describe_builtins_and_crds() {
    let cluster = common::start("openapi-v3").await;
    let client = &cluster.client;
    install_gadgets(client).await;

    let discovery = get_json(client, "/openapi/v3").await;
    let paths = discovery["paths"].as_object().expect("paths");
    for key in ["api/v1", "apis/apps/v1", "apis/test.ferry.dev/v1"] {
        let url = paths[key]["serverRelativeURL"].as_str().expect("a URL");
        let hash = url
            .strip_prefix(&format!("/openapi/v3/{key}?hash="))
            .expect("the URL names its document and hash");
        assert_eq!(hash.len(), 128, "{url}");
    }

    // A document fetched by its hashed URL is immutable and tagged with it.
    let apps_url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
    let (status, headers, body) = raw(client, Method::GET, apps_url, &[], b"").await;
    assert_eq!(status, StatusCode::OK);
    let hash = apps_url.rsplit('=').next().unwrap();
    assert_eq!(headers[header::ETAG], format!("\"{hash}\"").as_str());
    assert_eq!(headers[header::CACHE_CONTROL], "public, immutable");
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    let apps: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(apps["openapi"], "3.0.0");
    let deployment = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    let patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
        "kubectl validates on the server only when PATCH takes fieldValidation"
    );
    // Every reference resolves within the document.
    let text = String::from_utf8_lossy(&body);
    let schemas = apps["components"]["schemas"].as_object().unwrap();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(
            schemas.contains_key(name),
            "{name} is referenced but missing"
        );
    }

    let gadgets_url = paths["apis/test.ferry.dev/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    let gadgets = get_json(client, gadgets_url).await;
    let gadget = &gadgets["components"]["schemas"]["dev.ferry.test.v1.Gadget"];
    assert_eq!(
        gadget["x-kubernetes-group-version-kind"],
        json!([{"group": "test.ferry.dev", "kind": "Gadget", "version": "v1"}])
    );
    assert_eq!(
        gadget["properties"]["metadata"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        gadget["properties"]["spec"]["properties"]["size"]["description"],
        "How big the gadget is, in gadget units."
    );
    assert!(
        gadgets["components"]["schemas"]
            .get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
            .is_some()
    );

    // A stale hash is sent to the current one; a known ETag gets 304.
    let (status, headers, _) = raw(
        client,
        Method::GET,
        "/openapi/v3/apis/apps/v1?hash=0000",
        &[],
        b"",
    )
    .await;
    assert_eq!(status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(headers[header::LOCATION], apps_url);
    let etag = format!("\"{hash}\"");
    let (status, _, body) = raw(
        client,
        Method::GET,
        "/openapi/v3/apis/apps/v1",
        &[("if-none-match", &etag)],
        b"",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());

    // Installing a CRD changes its group-version's hash, not the others'.
    let before = discovery.clone();
    Api::<CustomResourceDefinition>::all(client.clone())
        .delete("gadgets.test.ferry.dev", &Default::default())
        .await
        .unwrap();
    let after = get_json(client, "/openapi/v3").await;
    assert!(after["paths"].get("apis/test.ferry.dev/v1").is_none());
    assert_eq!(
        after["paths"]["apis/apps/v1"],
        before["paths"]["apis/apps/v1"]
    );
    let (status, _, body) = raw(
        client,
        Method::GET,
        "/openapi/v3/apis/test.ferry.dev/v1",
        &[],
        b"",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    cluster.stop().await;
}

#[tokio::test]
async fn openapi_v2_is_json_and_a_protobuf_only_client_gets_406() {
    let cluster = common::start("openapi-v2").await;
    let client = &cluster.client;
    let v2 = get_json(client, "/openapi/v2").await;
    assert_eq!(v2["swagger"], "2.0");
    let deployment = &v2["definitions"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    assert!(!v2.to_string().contains("#/components/schemas/"));

    // What client-go sends for /openapi/v2: only the protobuf form.
    let protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let (status, _, body) = raw(
        client,
        Method::GET,
        "/openapi/v2",
        &[("accept", protobuf)],
        b"",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status["kind"].as_str(), status["code"].as_i64()),
        (Some("Status"), Some(406))
    );
    cluster.stop().await;
}

#[tokio::test]
async fn openapi_paths_that_name_nothing_are_404_and_writes_are_refused() {
    let cluster = common::start("openapi-abuse").await;
    let client = &cluster.client;
    for uri in [
        "/openapi/v3/apis/apps",
        "/openapi/v3/apis/../../api/v1",
        "/openapi/v3/apis/apps/v1/extra",
        "/openapi/v3/apis/nothing.example/v1",
        "/openapi/v4",
    ] {
        let (status, _, body) = raw(client, Method::GET, uri, &[], b"").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        let status: Value = serde_json::from_slice(&body).expect("a Status");
        assert_eq!(status["reason"], "NotFound", "{uri}");
    }
    let (status, _, _) = raw(client, Method::POST, "/openapi/v3", &[], b"{}").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    // The hash parameter is never echoed back into a header.
    let (status, headers, _) = raw(
        client,
        Method::GET,
        "/openapi/v3/api/v1?hash=%0d%0aSet-Cookie:%20x",
        &[],
        b"",
    )
    .await;
    assert_eq!(status, StatusCode::MOVED_PERMANENTLY);
    assert!(headers.get("set-cookie").is_none());
    assert!(
        !headers[header::LOCATION]
            .to_str()
            .unwrap()
            .contains("Set-Cookie")
    );
    cluster.stop().await;
}

// ---------------------------------------------------------------------------
// fieldValidation over raw HTTP

fn config_map_with(extra: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "cm"}}, "data": {{"a": "b"}}{extra}}}"#
    )
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test]
async fn strict_refuses_unknown_and_duplicate_fields_with_a_400_status() {
    let cluster = common::start("fv-strict").await;
    let client = &cluster.client;
    let uri = "/api/v1/namespaces/default/configmaps?fieldValidation=Strict";

    let body = config_map_with(r#", "spec": {"foo": 1}, "metadata2": 1"#);
    let (status, _, answer) = raw(client, Method::POST, uri, &[JSON], body.as_bytes()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["kind"], "Status");
    assert_eq!(answer["reason"], "BadRequest");
    assert_eq!(answer["code"], 400);
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: "#
        ),
        "{message}"
    );
    assert!(message.contains(r#"unknown field "spec""#), "{message}");
    assert!(
        message.contains(r#"unknown field "metadata2""#),
        "{message}"
    );

    let duplicated =
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "name": "cm"}}"#;
    let (status, _, answer) = raw(client, Method::POST, uri, &[JSON], duplicated.as_bytes()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        String::from_utf8_lossy(&answer).contains(r#"duplicate field \"metadata.name\""#),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        common::status(configmaps.get("cm").await).code,
        404,
        "nothing was stored"
    );

    // Known fields only: Strict lets it through.
    let (status, headers, _) = raw(
        client,
        Method::POST,
        uri,
        &[JSON],
        config_map_with("").as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(headers.get("warning").is_none());

    // A merge patch that adds an unknown field is refused as upstream
    // refuses patches: 422, naming the patch.
    let patch_uri = "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict";
    let (status, _, answer) = raw(
        client,
        Method::PATCH,
        patch_uri,
        &[("content-type", "application/merge-patch+json")],
        br#"{"data": {"c": "d"}, "bogus": true}"#,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#" "" is invalid: patch: Invalid value: "#),
        "{message}"
    );
    assert!(
        message.ends_with(r#"strict decoding error: unknown field "bogus""#),
        "{message}"
    );
    assert_eq!(answer["details"]["causes"][0]["field"], "patch");
    let data = configmaps.get("cm").await.unwrap().data.unwrap();
    assert!(!data.contains_key("c"), "the refused patch changed nothing");

    // An unknown directive is refused against the options kind.
    let (status, _, answer) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strictly",
        &[JSON],
        config_map_with("").as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Strictly""#),
        "{answer}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn every_write_verb_is_judged_in_its_own_words() {
    let cluster = common::start("fv-verbs").await;
    let client = &cluster.client;
    let create = config_map_with("");
    let (status, _, _) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &[JSON],
        create.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let message = |body: &Bytes| -> String {
        let status: Value = serde_json::from_slice(body).expect("a Status");
        status["message"].as_str().unwrap_or_default().to_string()
    };

    let (status, _, answer) = raw(
        client,
        Method::PUT,
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        &[JSON],
        config_map_with(r#", "extra": 1"#).as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&answer),
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "extra""#
    );

    let (status, _, answer) = raw(
        client,
        Method::PATCH,
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        &[("content-type", "application/json-patch+json")],
        br#"[{"op": "add", "path": "/data/x", "value": "y", "extra": 1}]"#,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        message(&answer)
            .ends_with(r#"strict decoding error: json patch unknown field "[0].extra""#),
        "{}",
        message(&answer)
    );

    let (status, _, answer) = raw(
        client,
        Method::PATCH,
        "/api/v1/namespaces/default/configmaps/cm?fieldValidation=Strict",
        &[("content-type", "application/strategic-merge-patch+json")],
        br#"{"bogus": true}"#,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        message(&answer),
        r#" "" is invalid: patch: Invalid value: "map[bogus:true]": strict decoding error: unknown field "bogus""#
    );

    let (status, _, answer) = raw(
        client,
        Method::PATCH,
        "/api/v1/namespaces/default/configmaps/cm?fieldManager=t&fieldValidation=Strict",
        &[("content-type", "application/apply-patch+yaml")],
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\ndata:\n  c: d\n",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&answer),
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"data\" already set in map"
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_yaml_like(DEPLOYMENT);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let (status, _, answer) = raw(
        client,
        Method::PUT,
        "/apis/apps/v1/namespaces/default/deployments/web/scale?fieldValidation=Strict",
        &[JSON],
        br#"{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3, "replica": 4}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        message(&answer),
        r#"Scale in version "v1" cannot be handled as a Scale: strict decoding error: unknown field "spec.replica""#
    );
    assert_eq!(deployments.get("web").await.unwrap().spec.replicas, Some(2));
    cluster.stop().await;
}

/// The test Deployment, from its YAML manifest.
fn serde_yaml_like(yaml: &str) -> Deployment {
    let value: Value = serde_saphyr::from_str(yaml).expect("YAML");
    serde_json::from_value(value).expect("a Deployment")
}

#[tokio::test]
async fn warn_and_the_default_succeed_with_a_warning_per_field_and_ignore_is_silent() {
    let cluster = common::start("fv-warn").await;
    let client = &cluster.client;
    let body = config_map_with(r#", "spec": {"foo": 1}"#);
    let (status, headers, answer) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
        &[JSON],
        body.as_bytes(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let warnings: Vec<&str> = headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(warnings, [r#"299 - "unknown field \"spec\"""#]);
    let stored: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(stored["data"]["a"], "b");

    // Without the parameter, Warn is the default.
    let body = config_map_with(r#", "extra": 1"#).replace("\"cm\"", "\"cm2\"");
    let (status, headers, _) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &[JSON],
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(headers["warning"], r#"299 - "unknown field \"extra\"""#);

    let body = config_map_with(r#", "extra": 1"#).replace("\"cm\"", "\"cm3\"");
    let (status, headers, _) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Ignore",
        &[JSON],
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(headers.get("warning").is_none());
    cluster.stop().await;
}

#[tokio::test]
async fn custom_resources_are_judged_by_their_schema_and_preserved_fields_pass() {
    let cluster = common::start("fv-crd").await;
    let client = &cluster.client;
    install_gadgets(client).await;
    let uri = "/apis/test.ferry.dev/v1/namespaces/default/gadgets?fieldValidation=Strict";
    let gadget = |name: &str, spec: &str| {
        format!(
            r#"{{"apiVersion": "test.ferry.dev/v1", "kind": "Gadget", "metadata": {{"name": "{name}"}}, "spec": {spec}}}"#
        )
    };
    let (status, _, answer) = raw(
        client,
        Method::POST,
        uri,
        &[JSON],
        gadget("g1", r#"{"size": 1, "colour": "red"}"#).as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        answer["message"],
        r#"Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: unknown field "spec.colour""#
    );

    let (status, _, answer) = raw(
        client,
        Method::POST,
        uri,
        &[JSON],
        gadget(
            "g2",
            r#"{"size": 1, "settings": {"anything": {"goes": [1, 2]}}}"#,
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let stored: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        stored["spec"]["settings"]["anything"]["goes"],
        json!([1, 2])
    );

    // Under Warn the unknown field is pruned and reported.
    let (status, headers, answer) = raw(
        client,
        Method::POST,
        "/apis/test.ferry.dev/v1/namespaces/default/gadgets?fieldValidation=Warn",
        &[JSON],
        gadget("g3", r#"{"size": 3, "colour": "red"}"#).as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        headers["warning"],
        r#"299 - "unknown field \"spec.colour\"""#
    );
    let stored: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(stored["spec"], json!({"size": 3}));

    // Server-side apply refuses undeclared fields whatever the directive,
    // as upstream's typed merge does.
    let (status, _, answer) = raw(
        client,
        Method::PATCH,
        "/apis/test.ferry.dev/v1/namespaces/default/gadgets/g4?fieldManager=test&fieldValidation=Ignore",
        &[("content-type", "application/apply-patch+yaml")],
        b"apiVersion: test.ferry.dev/v1\nkind: Gadget\nmetadata:\n  name: g4\nspec:\n  size: 4\n  colour: red\n",
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        answer["message"],
        "failed to create typed patch object (default/g4; test.ferry.dev/v1, Kind=Gadget): .spec.colour: field not declared in schema"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_flood_of_unknown_fields_is_bounded_and_odd_names_stay_in_one_header() {
    let cluster = common::start("fv-flood").await;
    let client = &cluster.client;
    let mut extra = String::from(r#", "line\r\nSet-Cookie: evil": 1"#);
    for i in 0..5_000 {
        extra.push_str(&format!(r#", "x{i:04}{}": {i}"#, "y".repeat(100)));
    }
    let body = config_map_with(&extra);
    let (status, headers, _) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &[JSON],
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let warnings: Vec<&str> = headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    // As upstream's recorder: about 4096 characters of warnings, no more.
    let text: usize = warnings.iter().map(|w| w.len()).sum();
    assert!(
        !warnings.is_empty() && text < 4096 + 64 * warnings.len(),
        "{text} bytes of warnings"
    );
    assert!(headers.get("set-cookie").is_none());
    // The name is quoted as Go quotes it: the line break stays escaped.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"line\\r\\nSet-Cookie: evil"#)),
        "{warnings:?}"
    );

    let (status, _, answer) = raw(
        client,
        Method::POST,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        &[JSON],
        body.replace("\"cm\"", "\"cm2\"").as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let listed = answer["message"]
        .as_str()
        .unwrap()
        .matches("unknown field")
        .count();
    assert_eq!(listed, 100, "upstream stops at 100 strict errors");
    cluster.stop().await;
}

// ---------------------------------------------------------------------------
// kubectl

/// The kubectl the tests drive: `FERRY_KUBECTL`, else the one on PATH.
fn kubectl_binary() -> String {
    std::env::var("FERRY_KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); set FERRY_KUBECTL", kubectl_binary()))
}

fn succeeds(kubeconfig: &Path, args: &[&str]) -> String {
    let output = kubectl(kubeconfig, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("kubectl task")
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        ports:
        - containerPort: 80
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_validates_on_the_server_and_refuses_an_unknown_field() {
    let cluster = common::start("kubectl-validate").await;
    let kubeconfig = cluster.kubeconfig_path();
    let dir = cluster.dir.path().to_path_buf();
    std::fs::write(dir.join("good.yaml"), DEPLOYMENT).unwrap();
    std::fs::write(
        dir.join("bad.yaml"),
        DEPLOYMENT
            .replace("name: web\nspec:", "name: bad\nspec:")
            .replace("  replicas: 2\n", "  replicas: 2\n  replicaz: 3\n"),
    )
    .unwrap();
    std::fs::write(dir.join("gadget-crd.json"), GADGET_CRD).unwrap();
    std::fs::write(
        dir.join("gadget.yaml"),
        "apiVersion: test.ferry.dev/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  size: 1\n  sise: 2\n",
    )
    .unwrap();

    let cfg = kubeconfig.clone();
    let d = dir.clone();
    let (good, bad, reapplied) = blocking(move || {
        let good = succeeds(
            &cfg,
            &["apply", "-f", &d.join("good.yaml").to_string_lossy()],
        );
        let bad = kubectl(
            &cfg,
            &["apply", "-f", &d.join("bad.yaml").to_string_lossy()],
        );
        // Applying again patches the existing object, validated as well.
        let reapplied = succeeds(
            &cfg,
            &["apply", "-f", &d.join("good.yaml").to_string_lossy()],
        );
        (good, bad, reapplied)
    })
    .await;
    assert!(good.contains("deployment.apps/web created"), "{good}");
    assert!(
        reapplied.contains("deployment.apps/web unchanged"),
        "{reapplied}"
    );
    assert!(!bad.status.success(), "an unknown field must be refused");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains(r#"strict decoding error: unknown field "spec.replicaz""#),
        "{stderr}"
    );
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    assert_eq!(common::status(deployments.get("bad").await).code, 404);

    // A CRD applied with validation on, then its object with a typo.
    let cfg = kubeconfig.clone();
    let d = dir.clone();
    let (crd, gadget) = blocking(move || {
        let crd = succeeds(
            &cfg,
            &["apply", "-f", &d.join("gadget-crd.json").to_string_lossy()],
        );
        let gadget = kubectl(
            &cfg,
            &["apply", "-f", &d.join("gadget.yaml").to_string_lossy()],
        );
        (crd, gadget)
    })
    .await;
    assert!(crd.contains("created"), "{crd}");
    assert!(!gadget.status.success());
    let stderr = String::from_utf8_lossy(&gadget.stderr);
    assert!(stderr.contains(r#"unknown field "spec.sise""#), "{stderr}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_ferrys_crds_with_validation_and_explains_them() {
    let cluster = common::start("kubectl-ferry-crds").await;
    let kubeconfig = cluster.kubeconfig_path();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let cfg = kubeconfig.clone();
    let (applied, explained) = blocking(move || {
        let applied = succeeds(&cfg, &["apply", "-f", &crds.to_string_lossy()]);
        let explained = succeeds(&cfg, &["explain", "migrationpolicies.spec"]);
        (applied, explained)
    })
    .await;
    assert!(
        applied.contains("clusterpeers.ferry.dev created"),
        "{applied}"
    );
    assert!(
        explained.contains("KIND:       MigrationPolicy"),
        "{explained}"
    );
    assert!(explained.contains("FIELDS:"), "{explained}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_prints_field_descriptions_of_builtins_and_crds() {
    let cluster = common::start("kubectl-explain").await;
    install_gadgets(&cluster.client).await;
    let kubeconfig = cluster.kubeconfig_path();
    let cfg = kubeconfig.clone();
    let (replicas, spec) = blocking(move || {
        let replicas = succeeds(&cfg, &["explain", "deployment.spec.replicas"]);
        let spec = succeeds(&cfg, &["explain", "gadgets.spec"]);
        (replicas, spec)
    })
    .await;
    assert!(replicas.contains("KIND:       Deployment"), "{replicas}");
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    assert!(spec.contains("KIND:       Gadget"), "{spec}");
    assert!(spec.contains("What the gadget should be"), "{spec}");
    assert!(spec.contains("How big the gadget is"), "{spec}");
    cluster.stop().await;
}
