//! MigrationPolicies whose module comes from a real registry (Debian's
//! `docker-registry`, TLS, loopback): the module slot as the operator drives
//! it, with Ferry's own ServiceAccount (RBAC enforced) reading the Secrets,
//! and the whole operator with its conditions and Events.

mod support;
use support::cluster::{self, FERRY_NAMESPACE, TestCluster};
use support::modules::module;
use support::registry::{Registry, RegistryOptions};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry::contract::Resources;
use ferry::controller::module::{FetchScope, ModuleSlot, Reload};
use ferry::controller::{Config, Context, Telemetry};
use ferry::crd::{MigrationPolicy, MigrationPolicySpec, ValidatedPolicy, validate_policy};
use ferry::demo::{DemoCluster, DemoMetrics, PriceStep};
use ferry::modules::oci::signature::SigningKey;
use ferry::modules::oci::{self, ClientOptions, Reference, RegistryClient};
use ferry::policy::{Engine, EngineConfig, sha256_hex};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use tokio::sync::watch;

const NS: &str = "team";

struct World {
    cluster: TestCluster,
    registry: Registry,
    client: RegistryClient,
    key: SigningKey,
}

async fn world(options: RegistryOptions) -> World {
    let cluster = cluster::start_clusters(&["oci"], Duration::from_millis(50))
        .await
        .remove(0);
    cluster::ensure_namespace(&cluster.client, NS).await;
    cluster::ensure_namespace(&cluster.client, FERRY_NAMESPACE).await;
    let registry = Registry::start(options);
    let client = RegistryClient::new(
        &registry.host(),
        ClientOptions {
            ca_pem: Some(registry.ca_pem.clone().into_bytes()),
            credentials: options.basic_auth.then(|| oci::Credentials {
                username: support::registry::USER.to_owned(),
                password: support::registry::PASSWORD.to_owned(),
            }),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let (_, key) = SigningKey::generate().unwrap();
    let world = World {
        cluster,
        registry,
        client,
        key,
    };
    world
        .secret("registry-ca", None, "ca.pem", &world.registry.ca_pem)
        .await;
    world
        .secret(
            "policy-key",
            None,
            "cosign.pub",
            &world.key.public_key_pem(),
        )
        .await;
    world
        .secret(
            "registry-login",
            Some("kubernetes.io/dockerconfigjson"),
            ".dockerconfigjson",
            &world.registry.docker_config(),
        )
        .await;
    world
        .secret(
            "not-a-login",
            None,
            ".dockerconfigjson",
            &world.registry.docker_config(),
        )
        .await;
    world
}

impl World {
    /// A Secret in Ferry's namespace.
    async fn secret(&self, name: &str, type_: Option<&str>, key: &str, value: &str) {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "type": type_.unwrap_or("Opaque"),
            "stringData": {key: value},
        }))
        .unwrap();
        Api::<Secret>::namespaced(self.cluster.client.clone(), FERRY_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    async fn push(&self, module_name: &str, tag: &str) -> oci::Pushed {
        let reference = Reference::parse(&self.registry.reference(&format!("p:{tag}"))).unwrap();
        oci::push_module(
            &self.client,
            &reference,
            &module(module_name),
            Default::default(),
            "2026-01-01T00:00:00Z",
        )
        .await
        .unwrap()
    }

    /// `spec.module.oci` for `path` (`p:v1`), with `extra` merged in.
    fn oci(&self, path: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut oci = serde_json::json!({
            "reference": format!("{}/{path}", self.registry.host()),
            "caSecretRef": {"name": "registry-ca", "key": "ca.pem"},
        });
        if let (Some(oci), Some(extra)) = (oci.as_object_mut(), extra.as_object()) {
            oci.extend(extra.clone());
        }
        oci
    }

    fn scope(&self, max_module_bytes: usize) -> FetchScope<'_> {
        FetchScope {
            client: &self.cluster.ferry,
            operator_namespace: FERRY_NAMESPACE,
            max_module_bytes,
        }
    }
}

fn validated(module: serde_json::Value) -> ValidatedPolicy {
    let spec: MigrationPolicySpec =
        serde_json::from_value(serde_json::json!({"module": module})).unwrap();
    validate_policy(&spec).unwrap()
}

fn digest_hex(pushed: &oci::Pushed) -> String {
    pushed.layer_digest.trim_start_matches("sha256:").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_is_pinned_by_digest_until_the_module_is_loaded_anew() {
    let world = world(RegistryOptions::default()).await;
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let first = world.push("cheapest_cluster", "v1").await;
    let wanted = validated(serde_json::json!({"oci": world.oci("p:v1", serde_json::json!({}))}));
    let mut slot = ModuleSlot::default();
    let reload = slot
        .ensure(&engine, &world.scope(1 << 24), NS, "cost", &wanted)
        .await;
    assert!(
        matches!(reload, Reload::Replaced { previous: None }),
        "{reload:?}"
    );
    let active = slot.active().unwrap();
    assert_eq!(active.sha256, sha256_hex(&module("cheapest_cluster")));
    assert_eq!(active.sha256, digest_hex(&first));
    assert_eq!(
        active.reference.as_deref(),
        Some(first.pinned.to_string().as_str())
    );

    // The tag moves: the loaded module keeps its digest.
    let second = world.push("spot_aware", "v1").await;
    assert_ne!(first.manifest_digest, second.manifest_digest);
    assert!(matches!(
        slot.ensure(&engine, &world.scope(1 << 24), NS, "cost", &wanted)
            .await,
        Reload::Unchanged
    ));
    assert_eq!(slot.active().unwrap().sha256, digest_hex(&first));

    // Loaded anew (a restart, a new leader), the tag is resolved again.
    let mut fresh = ModuleSlot::default();
    fresh
        .ensure(&engine, &world.scope(1 << 24), NS, "cost", &wanted)
        .await;
    assert_eq!(fresh.active().unwrap().sha256, digest_hex(&second));
    assert_eq!(
        fresh.active().unwrap().reference.as_deref(),
        Some(second.pinned.to_string().as_str())
    );

    // A spec that pins the digest keeps the first module whatever the tag says.
    let pinned = validated(serde_json::json!({"oci": world.oci(
        &format!("p@{}", first.manifest_digest), serde_json::json!({})
    )}));
    let reload = fresh
        .ensure(&engine, &world.scope(1 << 24), NS, "cost", &pinned)
        .await;
    assert!(matches!(reload, Reload::Replaced { .. }), "{reload:?}");
    assert_eq!(fresh.active().unwrap().sha256, digest_hex(&first));
    world.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_fails_to_fetch_or_verify_leaves_the_previous_one_running() {
    let world = world(RegistryOptions {
        basic_auth: true,
        ..RegistryOptions::default()
    })
    .await;
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let good = world.push("cheapest_cluster", "good").await;
    let next = world.push("spot_aware", "next").await;
    let login = serde_json::json!({"pullSecretName": "registry-login"});
    let mut slot = ModuleSlot::default();
    let wanted = validated(serde_json::json!({"oci": world.oci("p:good", login.clone())}));
    let reload = slot
        .ensure(&engine, &world.scope(1 << 24), NS, "cost", &wanted)
        .await;
    assert!(matches!(reload, Reload::Replaced { .. }), "{reload:?}");

    let with = |extra: serde_json::Value| {
        let mut all = login.clone();
        all.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        world.oci("p:next", all)
    };
    let verify = serde_json::json!({"verify": {"publicKeySecretRef": {"name": "policy-key", "key": "cosign.pub"}}});
    let (_, stranger) = SigningKey::generate().unwrap();
    let cases: Vec<(&str, serde_json::Value, usize, &str)> = vec![
        (
            "no credentials",
            serde_json::json!({"oci": world.oci("p:next", serde_json::json!({}))}),
            1 << 24,
            "FetchFailed",
        ),
        (
            "a Secret that is not a docker login",
            serde_json::json!({"oci": world.oci("p:next", serde_json::json!({"pullSecretName": "not-a-login"}))}),
            1 << 24,
            "FetchFailed",
        ),
        (
            "a digest the spec does not expect",
            serde_json::json!({"oci": with(serde_json::json!({})), "sha256": "0".repeat(64)}),
            1 << 24,
            "DigestMismatch",
        ),
        (
            "over the size limit",
            serde_json::json!({"oci": with(serde_json::json!({}))}),
            4096,
            "TooLarge",
        ),
        (
            "unsigned",
            serde_json::json!({"oci": with(verify.clone())}),
            1 << 24,
            "Unsigned",
        ),
        (
            "a tag that does not exist",
            serde_json::json!({"oci": world.oci("p:missing", login.clone())}),
            1 << 24,
            "FetchFailed",
        ),
    ];
    for (what, module, max, reason) in cases {
        let reload = slot
            .ensure(&engine, &world.scope(max), NS, "cost", &validated(module))
            .await;
        let Reload::Failed(err) = reload else {
            panic!("{what}: expected a failure, got {reload:?}")
        };
        assert_eq!(err.reason(), reason, "{what}: {err}");
        assert_eq!(slot.active().unwrap().sha256, digest_hex(&good), "{what}");
    }

    // Signed, but by another key.
    oci::sign(&world.client, &next.pinned, &stranger)
        .await
        .unwrap();
    let Reload::Failed(err) = slot
        .ensure(
            &engine,
            &world.scope(1 << 24),
            NS,
            "cost",
            &validated(serde_json::json!({"oci": with(verify.clone())})),
        )
        .await
    else {
        panic!("a module signed by another key must be refused")
    };
    assert_eq!(err.reason(), "SignatureInvalid", "{err}");
    assert_eq!(slot.active().unwrap().sha256, digest_hex(&good));

    // Signed by the key: it takes over.
    oci::sign(&world.client, &next.pinned, &world.key)
        .await
        .unwrap();
    let reload = slot
        .ensure(
            &engine,
            &world.scope(1 << 24),
            NS,
            "cost",
            &validated(serde_json::json!({"oci": with(verify)})),
        )
        .await;
    assert!(matches!(reload, Reload::Replaced { .. }), "{reload:?}");
    assert_eq!(slot.active().unwrap().sha256, digest_hex(&next));
    world.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_never_talks_plain_http_to_a_registry() {
    let world = world(RegistryOptions::default()).await;
    let plain = Registry::start(RegistryOptions {
        plain_http: true,
        ..RegistryOptions::default()
    });
    let plain_client = RegistryClient::new(
        &plain.host(),
        ClientOptions {
            plain_http: true,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let reference = Reference::parse(&plain.reference("p:v1")).unwrap();
    oci::push_module(
        &plain_client,
        &reference,
        &module("noop"),
        Default::default(),
        "2026-01-01T00:00:00Z",
    )
    .await
    .unwrap();
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let mut slot = ModuleSlot::default();
    let wanted =
        validated(serde_json::json!({"oci": {"reference": format!("{}/p:v1", plain.host())}}));
    let Reload::Failed(err) = slot
        .ensure(&engine, &world.scope(1 << 24), NS, "cost", &wanted)
        .await
    else {
        panic!("a plain-http registry must not serve the operator")
    };
    assert_eq!(err.reason(), "FetchFailed", "{err}");
    assert!(slot.active().is_none());
    world.cluster.shutdown().await;
}

fn start_operator(
    world: &World,
) -> (
    Arc<Context>,
    watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let mut config = Config::new("oci");
    config.namespace = FERRY_NAMESPACE.to_owned();
    config.leader.namespace = FERRY_NAMESPACE.to_owned();
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    config.error_requeue = Duration::from_secs(1);
    config.leader.identity = "oci-1".to_owned();
    config.leader.renew_interval = Duration::from_millis(300);
    config.leader.lease_duration = Duration::from_secs(30);
    let clusters = BTreeMap::from([(
        "oci".to_owned(),
        DemoCluster {
            client: world.cluster.client.clone(),
            allocatable: Resources {
                cpu_millis: 8000,
                memory_bytes: 32 << 30,
            },
            prices: vec![PriceStep {
                from: Duration::ZERO,
                core_hour: 0.05,
                gib_hour: 0.006,
            }],
        },
    )]);
    let metrics = Arc::new(DemoMetrics::new(jiff::Timestamp::now(), clusters));
    let ctx = Arc::new(
        Context::new(
            world.cluster.ferry.clone(),
            config,
            metrics,
            Arc::new(Telemetry::new()),
        )
        .unwrap(),
    );
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn({
        let ctx = ctx.clone();
        async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            ferry::controller::run(ctx, shutdown)
                .await
                .expect("operator runs");
        }
    });
    (ctx, stop, task)
}

async fn policy(client: &kube::Client) -> MigrationPolicy {
    Api::<MigrationPolicy>::namespaced(client.clone(), NS)
        .get("cost")
        .await
        .unwrap()
}

fn condition(policy: &MigrationPolicy, type_: &str) -> Option<(String, String)> {
    policy
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn event_reasons(client: &kube::Client) -> Vec<String> {
    use k8s_openapi::api::events::v1::Event;
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("cost"))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_runs_an_oci_module_and_refuses_an_unsigned_one_with_a_condition() {
    let world = world(RegistryOptions {
        basic_auth: true,
        ..RegistryOptions::default()
    })
    .await;
    let first = world.push("cheapest_cluster", "v1").await;
    let login = serde_json::json!({"pullSecretName": "registry-login"});
    let object = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "MigrationPolicy",
        "metadata": {"name": "cost", "namespace": NS},
        "spec": {"module": {"oci": world.oci("p:v1", login.clone())}, "interval": "2s"},
    });
    let policies = Api::<MigrationPolicy>::namespaced(world.cluster.client.clone(), NS);
    policies
        .patch("cost", &PatchParams::apply("test"), &Patch::Apply(&object))
        .await
        .unwrap();
    let (_ctx, stop, task) = start_operator(&world);

    let client = world.cluster.client.clone();
    let pinned = first.pinned.to_string();
    cluster::until("the OCI module to run, pinned", cluster::WAIT, || {
        let (client, pinned) = (client.clone(), pinned.clone());
        async move {
            let policy = policy(&client).await;
            policy
                .status
                .as_ref()
                .and_then(|s| s.module_reference.clone())
                == Some(pinned)
                && condition(&policy, "ModuleLoaded").is_some_and(|(status, _)| status == "True")
        }
    })
    .await;
    let status = policy(&client).await.status.unwrap();
    assert_eq!(
        status.module_digest.as_deref(),
        Some(digest_hex(&first).as_str())
    );

    // Require a signature the module does not have.
    world.push("spot_aware", "v2").await;
    let mut module = world.oci("p:v2", login);
    module["verify"] =
        serde_json::json!({"publicKeySecretRef": {"name": "policy-key", "key": "cosign.pub"}});
    policies
        .patch(
            "cost",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"module": {"oci": module}}})),
        )
        .await
        .unwrap();
    cluster::until("the unsigned module to be refused", cluster::WAIT, || {
        let client = client.clone();
        async move {
            condition(&policy(&client).await, "ModuleLoaded")
                == Some(("False".to_owned(), "Unsigned".to_owned()))
        }
    })
    .await;
    let status = policy(&client).await.status.unwrap();
    assert_eq!(
        status.module_reference.as_deref(),
        Some(pinned.as_str()),
        "the old module keeps running"
    );
    assert!(
        event_reasons(&client)
            .await
            .contains(&"ModuleLoadFailed".to_owned())
    );
    let cycles = status.counters.cycles;
    cluster::until("cycles to go on with the old module", cluster::WAIT, || {
        let client = client.clone();
        async move {
            policy(&client)
                .await
                .status
                .is_some_and(|s| s.counters.cycles >= cycles + 2)
        }
    })
    .await;

    // Signed with the key, it takes over.
    let second = Reference::parse(&world.registry.reference("p:v2")).unwrap();
    let digest = oci::resolve(&world.client, &second).await.unwrap();
    oci::sign(&world.client, &second.pinned(&digest), &world.key)
        .await
        .unwrap();
    let pinned = second.pinned(&digest).to_string();
    cluster::until("the signed module to run", cluster::WAIT, || {
        let (client, pinned) = (client.clone(), pinned.clone());
        async move {
            let policy = policy(&client).await;
            policy
                .status
                .as_ref()
                .and_then(|s| s.module_reference.clone())
                == Some(pinned)
                && condition(&policy, "ModuleLoaded").is_some_and(|(status, _)| status == "True")
        }
    })
    .await;
    let _ = stop.send(true);
    task.await.unwrap();
    world.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_asks_for_a_digest_unless_the_module_comes_from_oci() {
    let cluster = cluster::start_clusters(&["cel"], Duration::from_millis(50))
        .await
        .remove(0);
    cluster::ensure_namespace(&cluster.client, NS).await;
    let policies = Api::<MigrationPolicy>::namespaced(cluster.client.clone(), NS);
    let object = |name: &str, module: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "ferry.dev/v1alpha1", "kind": "MigrationPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"module": module},
        })
    };
    let apply = |name: &'static str, module: serde_json::Value| {
        let (policies, body) = (policies.clone(), object(name, module));
        async move {
            policies
                .patch(name, &PatchParams::apply("test"), &Patch::Apply(&body))
                .await
        }
    };
    apply(
        "oci",
        serde_json::json!({"oci": {"reference": "registry.example/p:v1"}}),
    )
    .await
    .expect("an OCI module needs no sha256");
    let err = apply(
        "url",
        serde_json::json!({"url": "https://policies.example/p.wasm"}),
    )
    .await
    .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("sha256 is required"),
        "{}",
        status.message
    );
    let err = apply(
        "both",
        serde_json::json!({"oci": {"reference": "registry.example/p:v1"}, "url": "https://policies.example/p.wasm"}),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("exactly one"), "{err}");
    cluster.shutdown().await;
}
