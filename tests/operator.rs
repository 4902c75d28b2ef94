//! The whole control loop against sandbox clusters, with scripted metrics and
//! a real compiled policy: Enforce migrates, DryRun writes nothing anywhere,
//! the guardrails refuse what they should, only the leader acts, and the
//! decision journal replays to the same decisions.

mod support;
use support::modules::module_path;
use support::operator::{NS, Operator, config, pair, start, upload};

use support::cluster;

use std::collections::BTreeMap;
use std::time::Duration;

use ferry::crd::{
    DecisionOutcome, MigrationPhase, MigrationPolicy, MigrationPolicyStatus, PolicyMode,
    WorkloadMigration,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{Discovery, verbs};

async fn policy(client: &kube::Client) -> MigrationPolicy {
    Api::<MigrationPolicy>::namespaced(client.clone(), NS)
        .get("cost")
        .await
        .expect("policy")
}

/// The policy's status once it holds a decision on `workload`. A move can
/// complete on the peer before the cycle that started it has applied its
/// status, so reading the status once right after the move can miss it.
async fn status_deciding(client: &kube::Client, workload: &str) -> MigrationPolicyStatus {
    cluster::eventually("the cycle's decisions in status", cluster::WAIT, || {
        let client = client.clone();
        async move {
            policy(&client)
                .await
                .status
                .filter(|s| s.last_decisions.iter().any(|d| d.name == workload))
        }
    })
    .await
}

async fn replicas(client: &kube::Client, name: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|d| d.spec.replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_migrates_a_workload_to_the_cheaper_peer() {
    let pair = pair().await;
    cluster::apply_deployment(&pair.dear.client, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(
        &pair.dear.client,
        "cheapest_cluster",
        PolicyMode::Enforce,
        None,
    )
    .await;
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        pair.metrics.clone(),
    );

    let (dear, cheap) = (pair.dear.client.clone(), pair.cheap.client.clone());
    cluster::until(
        "web to run on cheap and be scaled to zero on dear",
        cluster::WAIT,
        || {
            let (dear, cheap) = (dear.clone(), cheap.clone());
            async move {
                replicas(&cheap, "web").await == Some(2) && replicas(&dear, "web").await == Some(0)
            }
        },
    )
    .await;
    let mirrors = Api::<WorkloadMigration>::namespaced(dear.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(mirrors.items.len(), 1);
    cluster::until("the migration to complete", cluster::WAIT, || {
        let dear = dear.clone();
        async move {
            Api::<WorkloadMigration>::namespaced(dear, NS)
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| {
                    l.items.iter().all(|m| {
                        m.status
                            .as_ref()
                            .is_some_and(|s| s.phase == MigrationPhase::Completed)
                    })
                })
        }
    })
    .await;

    let status = status_deciding(&dear, "web").await;
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
    };
    assert_eq!(condition("ModuleLoaded").as_deref(), Some("True"));
    assert_eq!(condition("Ready").as_deref(), Some("True"));
    assert!(
        status
            .last_decisions
            .iter()
            .any(|d| d.outcome == DecisionOutcome::Accepted && d.name == "web")
    );
    assert!(status.counters.migrations_started >= 1);
}

/// Every object of every listable kind, by kind, namespace and name, with its
/// resourceVersion, except those the operator keeps of itself.
async fn everything(client: &kube::Client, own_records_allowed: bool) -> BTreeMap<String, String> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut objects = BTreeMap::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            // The operator's own bookkeeping: leader Lease, Events, policy and peer status.
            let own = ["Lease", "Event", "MigrationPolicy", "ClusterPeer"]
                .contains(&resource.kind.as_str());
            if own_records_allowed && own {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            for object in api.list(&ListParams::default()).await.expect("list") {
                let key = format!(
                    "{}/{}/{}",
                    resource.kind,
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default()
                );
                objects.insert(
                    key,
                    object.metadata.resource_version.clone().unwrap_or_default(),
                );
            }
        }
    }
    objects
}

async fn dry_run_writes_nothing(mode: PolicyMode, global_dry_run: bool) {
    let pair = pair().await;
    cluster::apply_deployment(&pair.dear.client, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&pair.dear.client, "cheapest_cluster", mode, None).await;
    let dear_before = everything(&pair.dear.client, true).await;
    let cheap_before = everything(&pair.cheap.client, false).await;

    let mut config = config("dear", "dear-1");
    config.dry_run = global_dry_run;
    let operator = start(&pair.dear.ferry, config, pair.metrics.clone());
    let dear = pair.dear.client.clone();
    cluster::until(
        "two dry-run cycles with a would-be move",
        cluster::WAIT,
        || {
            let dear = dear.clone();
            async move {
                policy(&dear).await.status.is_some_and(|s| {
                    s.counters.cycles >= 2
                        && s.last_decisions
                            .iter()
                            .any(|d| d.outcome == DecisionOutcome::WouldMigrate && d.to == "cheap")
                })
            }
        },
    )
    .await;

    assert_eq!(
        everything(&pair.dear.client, true).await,
        dear_before,
        "the own cluster changed beyond the operator's records"
    );
    assert_eq!(
        everything(&pair.cheap.client, false).await,
        cheap_before,
        "the peer was written to"
    );

    // The module's memory is exported: at least the 4 MiB it starts with,
    // under the default limit of 64 MiB.
    let metrics = operator.telemetry.encode();
    let memory: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ferry_evaluation_memory_bytes{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no evaluation_memory_bytes in\n{metrics}"));
    assert!((4 << 20..64 << 20).contains(&memory), "{memory}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_policy_writes_nothing_to_peers_or_workloads() {
    dry_run_writes_nothing(PolicyMode::DryRun, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_dry_run_flag_overrides_an_enforcing_policy() {
    dry_run_writes_nothing(PolicyMode::Enforce, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_and_unselected_workloads_stay_put() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 1, (2000, 2048), &[("tier", "web")], &[]).await;
    cluster::apply_deployment(
        &dear,
        NS,
        "ledger",
        1,
        (2000, 2048),
        &[("tier", "web")],
        &[("ferry.dev/pinned", "true")],
    )
    .await;
    cluster::apply_deployment(
        &dear,
        NS,
        "batch",
        1,
        (2000, 2048),
        &[("tier", "batch")],
        &[],
    )
    .await;
    let selector = serde_json::json!({"matchLabels": {"tier": "web"}});
    upload(
        &dear,
        "cheapest_cluster",
        PolicyMode::Enforce,
        Some(selector),
    )
    .await;
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        pair.metrics.clone(),
    );

    let cheap = pair.cheap.client.clone();
    cluster::until("web to move", cluster::WAIT, || {
        let cheap = cheap.clone();
        async move { replicas(&cheap, "web").await == Some(1) }
    })
    .await;
    let status = status_deciding(&dear, "ledger").await;
    let ledger = status
        .last_decisions
        .iter()
        .find(|d| d.name == "ledger")
        .expect("ledger was decided on");
    assert_eq!(ledger.outcome, DecisionOutcome::Refused);
    assert!(
        ledger
            .refusal_reason
            .as_deref()
            .unwrap_or_default()
            .contains("pinned"),
        "{ledger:?}"
    );
    // Outside the selector, batch is never shown to the policy at all.
    assert!(status.last_decisions.iter().all(|d| d.name != "batch"));
    assert_eq!(replicas(&dear, "ledger").await, Some(1));
    assert_eq!(replicas(&dear, "batch").await, Some(1));
    assert_eq!(replicas(&cheap, "ledger").await, None);
    assert_eq!(replicas(&cheap, "batch").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 1, (1000, 1024), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::DryRun, None).await;
    let first = start(
        &pair.dear.ferry,
        config("dear", "replica-1"),
        pair.metrics.clone(),
    );
    let second = start(
        &pair.dear.ferry,
        config("dear", "replica-2"),
        pair.metrics.clone(),
    );

    let leaders = |a: &Operator, b: &Operator| a.telemetry.leader.get() + b.telemetry.leader.get();
    // Only the leader's cycles are counted.
    let cycles = |op: &Operator| {
        op.telemetry
            .encode()
            .lines()
            .filter(|l| l.starts_with("ferry_cycle_duration_seconds_count"))
            .count()
    };
    cluster::until("a leader to run a cycle", cluster::WAIT, || {
        let ran = cycles(&first) + cycles(&second) > 0;
        async move { ran }
    })
    .await;
    assert_eq!(leaders(&first, &second), 1, "exactly one leader");
    let (leader, standby) = if first.telemetry.leader.get() == 1 {
        (first, second)
    } else {
        (second, first)
    };
    assert!(cycles(&leader) >= 1);
    assert_eq!(cycles(&standby), 0, "the standby never ran a cycle");

    leader.stop().await;
    cluster::until("the standby to take over", cluster::WAIT, || {
        let taken = standby.telemetry.leader.get() == 1;
        async move { taken }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_replays_to_the_same_decisions() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::DryRun, None).await;
    let journal = tempfile::tempdir().unwrap();
    let mut config = config("dear", "dear-1");
    config.journal_dir = Some(journal.path().to_owned());
    let operator = start(&pair.dear.ferry, config, pair.metrics.clone());
    let dir = journal.path().to_owned();
    cluster::until("a journal entry", cluster::WAIT, || {
        let dir = dir.clone();
        async move { std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) }
    })
    .await;
    drop(operator);

    let entry = std::fs::read_dir(journal.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let recorded: ferry::controller::JournalEntry =
        ferry::controller::read_journal(&std::fs::read_to_string(&entry).unwrap()).unwrap();
    assert!(
        !recorded.decisions.is_empty(),
        "the journaled cycle decided something"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["policy", "eval"])
        .arg(module_path("cheapest_cluster"))
        .arg("--input")
        .arg(&entry)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(replay["replay"]["sameDecisions"], true, "{replay}");
    assert_eq!(
        serde_json::to_value(&recorded.decisions).unwrap(),
        replay["decisions"],
        "the replay gives the journaled decisions"
    );

    // A different module refuses to replay someone else's journal.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["policy", "eval"])
        .arg(module_path("noop"))
        .arg("--input")
        .arg(&entry)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Events the operator published about the policy, by reason.
async fn event_reasons(client: &kube::Client) -> Vec<String> {
    use k8s_openapi::api::events::v1::Event;
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("cost"))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_spec_is_reported_in_a_condition_and_an_event_and_nothing_runs() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::Enforce, None).await;
    // A deadline no shorter than the interval: the schema allows it, the operator does not.
    let patch = serde_json::json!({"spec": {"limits": {"timeout": "2s"}}});
    Api::<MigrationPolicy>::namespaced(dear.clone(), NS)
        .patch(
            "cost",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );

    cluster::until("the InvalidSpec condition", cluster::WAIT, || {
        let dear = dear.clone();
        async move {
            policy(&dear).await.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "False" && c.reason == "InvalidSpec")
            })
        }
    })
    .await;
    let status = policy(&dear).await.status.unwrap();
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert!(
        ready.message.contains("spec.limits.timeout"),
        "{}",
        ready.message
    );
    assert_eq!(
        status.counters.cycles, 0,
        "no cycle runs on an invalid spec"
    );
    assert!(
        event_reasons(&dear)
            .await
            .contains(&"InvalidSpec".to_owned())
    );
    assert_eq!(replicas(&dear, "web").await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_a_module_is_an_event_once_not_every_cycle() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::DryRun, None).await;
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    cluster::until("three cycles", cluster::WAIT, || {
        let dear = dear.clone();
        async move {
            policy(&dear)
                .await
                .status
                .is_some_and(|s| s.counters.cycles >= 3)
        }
    })
    .await;
    let reasons = event_reasons(&dear).await;
    assert_eq!(
        reasons.iter().filter(|r| *r == "ModuleLoaded").count(),
        1,
        "{reasons:?}"
    );
    // The same would-be move each cycle is reported once.
    assert_eq!(
        reasons.iter().filter(|r| *r == "WouldMigrate").count(),
        1,
        "{reasons:?}"
    );
    let status = policy(&dear).await.status.unwrap();
    let loaded = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ModuleLoaded")
        .unwrap();
    assert_eq!(loaded.status, "True");
    assert_eq!(
        status.module_digest_short.as_deref().map(str::len),
        Some(12)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_policy_leaves_nothing_behind_in_the_operator() {
    let pair = pair().await;
    cluster::ensure_namespace(&pair.dear.client, NS).await;
    upload(&pair.dear.client, "noop", PolicyMode::DryRun, None).await;
    let operator = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let ctx = operator.ctx.clone();
    cluster::until("the policy's module to be loaded", cluster::WAIT, || {
        let ctx = ctx.clone();
        async move {
            ctx.held_policies().await == [format!("{NS}/cost")]
                && !ctx.engine.compiled_digests().is_empty()
        }
    })
    .await;

    Api::<MigrationPolicy>::namespaced(pair.dear.client.clone(), NS)
        .delete("cost", &Default::default())
        .await
        .expect("delete the policy");
    cluster::until(
        "the module slot and the compiled module to go",
        cluster::WAIT,
        || {
            let ctx = ctx.clone();
            async move {
                ctx.held_policies().await.is_empty() && ctx.engine.compiled_digests().is_empty()
            }
        },
    )
    .await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_whose_memory_limit_is_over_the_evaluation_budget_is_refused() {
    let pair = pair().await;
    let dear = pair.dear.client.clone();
    cluster::apply_deployment(&dear, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::Enforce, None).await;
    let patch = serde_json::json!({"spec": {"limits": {"memoryBytes": 96 << 20}}});
    Api::<MigrationPolicy>::namespaced(dear.clone(), NS)
        .patch(
            "cost",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let mut config = config("dear", "dear-1");
    config.engine.memory_budget = 64 << 20;
    let _dear = start(&pair.dear.ferry, config, pair.metrics.clone());

    cluster::until(
        "the policy refused for its memory limit",
        cluster::WAIT,
        || {
            let dear = dear.clone();
            async move {
                policy(&dear).await.status.is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.reason == "InvalidSpec"
                            && c.message.contains("spec.limits.memoryBytes")
                            && c.message
                                .contains("evaluation memory budget of 67108864 bytes")
                    })
                })
            }
        },
    )
    .await;
    let status = policy(&dear).await.status.unwrap();
    assert_eq!(
        status.counters.cycles, 0,
        "a policy that cannot fit never runs"
    );
    assert_eq!(replicas(&dear, "web").await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_reaches_the_running_operator_without_a_restart() {
    let pair = pair().await;
    let mut config = config("dear", "dear-1");
    config.key_refresh = Duration::from_millis(100);
    let operator = start(&pair.dear.ferry, config, pair.metrics.clone());
    let ring = operator.ctx.sender.keys.clone();
    let first = cluster::eventually("the cluster keys to load", cluster::WAIT, || {
        let ring = ring.clone();
        async move { ring.get().map(|k| k.key_id().to_owned()) }
    })
    .await;

    let rotated = ferry::peers::keys::rotate(
        &pair.dear.client,
        cluster::FERRY_NAMESPACE,
        ferry::peers::keys::KEY_SECRET_NAME,
    )
    .await
    .expect("rotate the keys");
    assert_ne!(rotated.key_id(), first);
    cluster::until(
        "the operator to sign with the new key",
        cluster::WAIT,
        || {
            let (ring, id) = (ring.clone(), rotated.key_id().to_owned());
            async move { ring.get().is_some_and(|k| k.key_id() == id) }
        },
    )
    .await;
    // The previous generation is still held, so what was signed before the
    // rotation keeps verifying.
    assert_eq!(ring.get().unwrap().previous_key_id(), Some(first.as_str()));
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_with_a_progressive_strategy_moves_in_steps() {
    let pair = pair().await;
    cluster::apply_deployment(&pair.dear.client, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(
        &pair.dear.client,
        "cheapest_cluster",
        PolicyMode::Enforce,
        None,
    )
    .await;
    Api::<MigrationPolicy>::namespaced(pair.dear.client.clone(), NS)
        .patch(
            "cost",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&serde_json::json!({"spec": {"strategy": {
                "type": "Progressive", "step": 1}}})),
        )
        .await
        .unwrap();
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        pair.metrics.clone(),
    );
    let dear = pair.dear.client.clone();
    let mirror = cluster::eventually("the move to complete", cluster::WAIT, || {
        let dear = dear.clone();
        async move {
            let list = Api::<WorkloadMigration>::namespaced(dear, NS)
                .list(&ListParams::default())
                .await
                .ok()?;
            list.items.into_iter().find(|m| {
                m.status
                    .as_ref()
                    .is_some_and(|s| s.phase == MigrationPhase::Completed)
            })
        }
    })
    .await;
    let strategy = mirror.spec.strategy.expect("the policy's strategy travels");
    assert!(strategy.is_progressive());
    let progress = mirror.status.unwrap().progress.expect("stepped");
    assert_eq!((progress.step, progress.steps), (2, 2));
    assert_eq!(replicas(&pair.cheap.client, "web").await, Some(2));
    assert_eq!(replicas(&dear, "web").await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_enables_stateful_moves_moves_a_stateful_set_with_fresh_claims() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let pair = pair().await;
    for side in [&pair.dear, &pair.cheap] {
        side.sandbox
            .kubelet()
            .set_realistic(ferry::sandbox::KubeletRules::default());
    }
    let merge = |value: serde_json::Value| kube::api::Patch::Merge(value);
    Api::<ferry::crd::ClusterPeer>::all(pair.cheap.client.clone())
        .patch(
            "dear",
            &kube::api::PatchParams::default(),
            &merge(serde_json::json!({"spec": {"admission": {"claims": {"allow": true}}}})),
        )
        .await
        .unwrap();
    let set: StatefulSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "db", "namespace": NS, "labels": {"app": "db"}},
        "spec": {"replicas": 2, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": cluster::restricted(serde_json::json!({"containers": [{"name": "db",
                    "image": "registry.example/db:1",
                    "resources": {"requests": {"cpu": "1000m", "memory": "2048Mi"}}}]}))},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]},
    }))
    .unwrap();
    cluster::ensure_namespace(&pair.dear.client, NS).await;
    let dear_sets = Api::<StatefulSet>::namespaced(pair.dear.client.clone(), NS);
    dear_sets
        .create(&Default::default(), &set)
        .await
        .expect("create the StatefulSet");
    upload(
        &pair.dear.client,
        "cheapest_cluster",
        PolicyMode::Enforce,
        None,
    )
    .await;
    Api::<MigrationPolicy>::namespaced(pair.dear.client.clone(), NS)
        .patch(
            "cost",
            &kube::api::PatchParams::default(),
            &merge(serde_json::json!({"spec": {"stateful": {"enabled": true}}})),
        )
        .await
        .unwrap();
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        pair.metrics.clone(),
    );
    let dear = pair.dear.client.clone();
    let mirror = cluster::eventually("the StatefulSet's move to complete", cluster::WAIT, || {
        let dear = dear.clone();
        async move {
            let list = Api::<WorkloadMigration>::namespaced(dear, NS)
                .list(&ListParams::default())
                .await
                .ok()?;
            list.items.into_iter().find(|m| {
                m.spec.workload["kind"] == "StatefulSet"
                    && m.status
                        .as_ref()
                        .is_some_and(|s| s.phase == MigrationPhase::Completed)
            })
        }
    })
    .await;
    // One claim per ordinal, created empty in cheap and bound there.
    assert_eq!(mirror.spec.claims.len(), 2);
    let moved = Api::<StatefulSet>::namespaced(pair.cheap.client.clone(), NS)
        .get("db")
        .await
        .unwrap();
    assert_eq!(moved.status.unwrap().ready_replicas, Some(2));
    let claim = Api::<PersistentVolumeClaim>::namespaced(pair.cheap.client.clone(), NS)
        .get("data-db-1")
        .await
        .unwrap();
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    assert_eq!(dear_sets.get("db").await.unwrap().spec.replicas, Some(0));
}
