//! The suite's machinery: one sandbox per test with the namespace `conf`
//! and the Widget CRD installed, callers holding exactly the RBAC a row
//! needs (a ServiceAccount token or a client certificate bound to a Role),
//! kubectl run as such a caller, and raw HTTP in JSON or protobuf. It never
//! sleeps to wait: what must happen is awaited with `common::WAIT`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::common::{self, Cluster};
use crate::kinds::{Kind, widget_crd};

/// The namespace every row works in.
pub const NS: &str = "conf";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends for built-in kinds.
pub const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf,application/json";
pub const JSON: &str = "application/json";

/// Every verb a Role may grant on a resource; a "lacking" caller holds all
/// of them but the one under test.
pub const ALL_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// One sandbox for one test function.
pub struct World {
    pub cluster: Cluster,
}

/// Someone calling the sandbox: a client with its credential, the same
/// credential as a kubeconfig for kubectl, and the user name RBAC sees.
pub struct Caller {
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub user: String,
}

/// What kubectl did.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A raw HTTP answer as it came.
#[derive(Debug)]
pub struct Answer {
    pub code: u16,
    pub content_type: String,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        assert!(
            self.content_type.starts_with(JSON),
            "expected JSON, got {}: {}",
            self.content_type,
            String::from_utf8_lossy(&self.body)
        );
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

impl World {
    pub async fn start(name: &str) -> World {
        let cluster = common::start(name).await;
        // The namespace, by way of a ServiceAccount nobody binds.
        cluster
            .sandbox
            .create_service_account(NS, "nobody")
            .expect("namespace conf");
        let world = World { cluster };
        let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let created = world.admin_json("POST", crds, widget_crd()).await;
        assert_eq!(created.0, 201, "{}", created.1);
        // Served once discovery lists it.
        common::eventually("the Widget CRD is served", || async {
            let (code, _) = world
                .admin_json(
                    "GET",
                    "/apis/conf.ferry.dev/v1/namespaces/conf/widgets",
                    Value::Null,
                )
                .await;
            (code == 200).then_some(())
        })
        .await;
        world
    }

    pub fn admin(&self) -> &Client {
        &self.cluster.client
    }

    pub async fn stop(self) {
        self.cluster.stop().await;
    }

    /// A JSON request as the administrator.
    pub async fn admin_json(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let answer = send(self.admin(), method, path, Some(JSON), JSON, body).await;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        (answer.code, value)
    }

    /// The stored object as the administrator sees it, or `None` if absent.
    pub async fn stored(&self, kind: &Kind, name: &str) -> Option<Value> {
        let (code, body) = self.admin_json("GET", &kind.item(name), Value::Null).await;
        match code {
            200 => Some(body),
            404 => None,
            other => panic!("GET {} answered {other}: {body}", kind.item(name)),
        }
    }

    /// Create `object` as the administrator (the row's precondition).
    pub async fn seed(&self, kind: &Kind, object: Value) -> Value {
        let (code, body) = self.admin_json("POST", &kind.collection(), object).await;
        assert_eq!(code, 201, "seeding: {body}");
        body
    }

    /// The ServiceAccount `conf/NAME` holding exactly `verbs` on `kind`,
    /// through a Role and RoleBinding of its own.
    pub async fn service_account(&self, name: &str, kind: &Kind, verbs: &[&str]) -> Caller {
        let sandbox = &self.cluster.sandbox;
        sandbox
            .create_service_account(NS, name)
            .expect("service account");
        let subject = json!({"kind": "ServiceAccount", "name": name, "namespace": NS});
        self.grant(name, kind, verbs, subject).await;
        let yaml = sandbox
            .kubeconfig_for_service_account(NS, name, Duration::from_secs(3600))
            .expect("token kubeconfig");
        self.caller(name, &yaml, format!("system:serviceaccount:{NS}:{name}"))
            .await
    }

    /// The certificate user NAME holding `verbs` on `kind`.
    pub async fn cert_user(&self, name: &str, kind: &Kind, verbs: &[&str]) -> Caller {
        let subject =
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name});
        if !verbs.is_empty() {
            self.grant(name, kind, verbs, subject).await;
        }
        let yaml = self
            .cluster
            .sandbox
            .kubeconfig_for_user(name, &["conformance"])
            .expect("certificate kubeconfig");
        self.caller(name, &yaml, name.to_owned()).await
    }

    /// The pair every row runs as: a ServiceAccount with exactly `needed`,
    /// and a certificate user with every verb but `verb` (and so with all
    /// else the client needs to reach the refused request).
    pub async fn pair(
        &self,
        row: &str,
        kind: &Kind,
        verb: &str,
        needed: &[&str],
    ) -> (Caller, Caller) {
        let granted = self
            .service_account(&format!("{row}-ok"), kind, needed)
            .await;
        let rest: Vec<&str> = ALL_VERBS.iter().copied().filter(|v| *v != verb).collect();
        let lacking = self.cert_user(&format!("{row}-no"), kind, &rest).await;
        (granted, lacking)
    }

    async fn grant(&self, name: &str, kind: &Kind, verbs: &[&str], subject: Value) {
        let roles: Api<Role> = Api::namespaced(self.admin().clone(), NS);
        let rule =
            json!({"apiGroups": [kind.group], "resources": kind.rbac_resources(), "verbs": verbs});
        let role = json!({"metadata": {"name": name}, "rules": [rule]});
        roles
            .create(
                &PostParams::default(),
                &serde_json::from_value(role).expect("role"),
            )
            .await
            .expect("role created");
        let bindings: Api<RoleBinding> = Api::namespaced(self.admin().clone(), NS);
        let binding = json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject]});
        bindings
            .create(
                &PostParams::default(),
                &serde_json::from_value(binding).expect("binding"),
            )
            .await
            .expect("binding created");
    }

    async fn caller(&self, name: &str, yaml: &str, user: String) -> Caller {
        // Each caller has its own directory: kubectl keeps its discovery
        // cache under $HOME, beside the kubeconfig.
        let dir = self.cluster.dir.path().join(name);
        std::fs::create_dir_all(&dir).expect("caller directory");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, yaml).expect("kubeconfig written");
        Caller {
            client: common::client_from(&kubeconfig).await,
            kubeconfig,
            user,
        }
    }

    /// A caller presenting the bearer `token` (the sandbox's CA, no client
    /// certificate), for tokens minted elsewhere or not at all.
    pub async fn bearer(&self, name: &str, token: &str) -> Caller {
        let admin = self.cluster.sandbox.kubeconfig_yaml();
        let yaml = admin.replace(self.cluster.sandbox.token(), token);
        assert_ne!(yaml, admin, "the admin kubeconfig names its token");
        self.caller(name, &yaml, String::new()).await
    }

    /// Write `text` to a file in the test's directory; its path.
    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.cluster.dir.path().join(name);
        std::fs::write(&path, text).expect("file written");
        path.to_string_lossy().into_owned()
    }
}

/// Run kubectl as `caller` in the namespace `conf`.
pub async fn kubectl(caller: &Caller, args: &[&str]) -> Run {
    let kubeconfig = caller.kubeconfig.clone();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || run_kubectl(&kubeconfig, &args))
        .await
        .expect("kubectl task")
}

fn run_kubectl(kubeconfig: &Path, args: &[String]) -> Run {
    let binary = common::kubectl();
    let output = Command::new(&binary)
        .args(args)
        .args(["--namespace", NS])
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().expect("caller directory"))
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", binary.display()));
    Run {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

impl Run {
    /// Its stdout, after asserting it succeeded.
    pub fn out(self, what: &str) -> String {
        assert!(
            self.ok,
            "{what}: kubectl failed: {}{}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    /// Its stderr, after asserting it failed.
    pub fn err(self, what: &str) -> String {
        assert!(!self.ok, "{what}: kubectl succeeded: {}", self.stdout);
        self.stderr
    }
}

/// One raw request through `client`'s connection and credential.
pub async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    accept: &str,
    body: Vec<u8>,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept);
    if let Some(content_type) = content_type {
        request = request.header(http::header::CONTENT_TYPE, content_type);
    }
    let response = client
        .send(request.body(body.into()).expect("request builds"))
        .await
        .expect("the sandbox answers");
    let code = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .expect("the whole body");
    Answer {
        code,
        content_type,
        body,
    }
}

/// A JSON request; the code and the body as JSON (`Null` if not JSON).
pub async fn json_call(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let answer = send(client, method, path, Some(JSON), JSON, bytes).await;
    let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.code, value)
}

/// kubectl's stderr holds the line upstream's kubectl prints for `status`.
pub fn assert_kubectl_error(stderr: &str, status: &Value) {
    assert_line(stderr, &crate::upstream::kubectl_error(status));
}

/// kubectl's stderr holds the line for `status` about an object from `file`.
pub fn assert_kubectl_file_error(stderr: &str, status: &Value, verb: &str, file: &str) {
    assert_line(
        stderr,
        &crate::upstream::kubectl_error_from_file(status, verb, file),
    );
}

/// `text` holds `line` as one of its lines.
pub fn assert_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "expected the line\n{line}\nin:\n{text}"
    );
}

/// A protobuf `Status` answer rebuilt as the JSON kube-apiserver would have
/// sent, by `metav1.Status`'s field numbers (status 2, message 3, reason 4,
/// details 5, code 6; details: name 1, group 2, kind 3, uid 6).
pub fn protobuf_status(answer: &Answer) -> Value {
    assert!(
        answer.content_type.starts_with(PROTOBUF),
        "expected protobuf, got {}: {}",
        answer.content_type,
        String::from_utf8_lossy(&answer.body)
    );
    let (api_version, kind, raw) = crate::pb::open(&answer.body);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Status"));
    let mut status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": crate::pb::text(&raw, 2), "message": crate::pb::text(&raw, 3),
        "reason": crate::pb::text(&raw, 4), "code": crate::pb::number(&raw, 6)});
    let details = crate::pb::field(&raw, 5);
    if !details.is_empty() {
        let mut out = serde_json::Map::new();
        for (name, number) in [("name", 1), ("group", 2), ("kind", 3), ("uid", 6)] {
            let text = crate::pb::text(&details, number);
            if !text.is_empty() {
                out.insert(name.into(), json!(text));
            }
        }
        status["details"] = Value::Object(out);
    }
    status
}

/// An open watch: its answer's code and media type, and its body read
/// event by event, each wait bounded by `common::WAIT`.
pub struct Watch {
    pub code: u16,
    pub content_type: String,
    body: kube::client::Body,
    buffer: Vec<u8>,
}

/// Start a watch of `path` (with `?watch=true`) as `client`.
pub async fn watch(client: &Client, path: &str, accept: &str) -> Watch {
    let request = Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .expect("request builds");
    let response = client.send(request).await.expect("the sandbox answers");
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Watch {
        code: response.status().as_u16(),
        content_type,
        body: response.into_body(),
        buffer: Vec::new(),
    }
}

impl Watch {
    /// Read until `split` finds a whole unit in the buffer; the unit.
    async fn until(&mut self, split: impl Fn(&[u8]) -> Option<(usize, usize)>) -> Vec<u8> {
        use http_body_util::BodyExt;
        loop {
            if let Some((start, end)) = split(&self.buffer) {
                let unit = self.buffer[start..end].to_vec();
                self.buffer.drain(..end);
                return unit;
            }
            let frame = tokio::time::timeout(common::WAIT, self.body.frame())
                .await
                .expect("an event within WAIT")
                .expect("the stream goes on")
                .expect("a readable frame");
            if let Ok(data) = frame.into_data() {
                self.buffer.extend_from_slice(&data);
            }
        }
    }

    /// The next JSON event: one line, newline included in the framing.
    pub async fn json_event(&mut self) -> Value {
        let line = self
            .until(|b| b.iter().position(|&c| c == b'\n').map(|i| (0, i + 1)))
            .await;
        serde_json::from_slice(&line).expect("one JSON object a line")
    }

    /// The next protobuf event: a 4-byte big-endian length, then that many
    /// bytes (k8s.io/apimachinery/pkg/runtime/serializer/protobuf, the
    /// length-delimited framer).
    pub async fn protobuf_frame(&mut self) -> Vec<u8> {
        self.until(|b| {
            let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
            (b.len() >= 4 + len).then_some((4, 4 + len))
        })
        .await
    }
}
