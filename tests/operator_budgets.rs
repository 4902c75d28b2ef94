//! The per-workload move budget in the live loop: a workload that just
//! arrived has moved once today, counted from the request its target
//! received, and `maxMovesPerWorkloadPerDay: 1` keeps it there even when the
//! policy wants it back at once.

mod support;
use support::operator::{GIB, NS, config, pair, start, upload};

use support::cluster;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry::contract::Resources;
use ferry::crd::{DecisionOutcome, MigrationPolicy, PolicyMode};
use ferry::demo::{DemoCluster, DemoMetrics, PriceStep};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};

async fn replicas(client: &kube::Client, name: &str) -> Option<i32> {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|d| d.spec.replicas)
}

/// Prices in which `dear` is the cheaper cluster: what `cheap`'s operator
/// sees, so that it wants every workload that arrives to go back.
fn reversed(pair: &support::operator::Pair) -> Arc<DemoMetrics> {
    let price = |core_hour, gib_hour| {
        vec![PriceStep {
            from: Duration::ZERO,
            core_hour,
            gib_hour,
        }]
    };
    let room = Resources {
        cpu_millis: 32_000,
        memory_bytes: 128 * GIB,
    };
    let cluster = |client: &kube::Client, core_hour, gib_hour| DemoCluster {
        client: client.clone(),
        allocatable: room,
        prices: price(core_hour, gib_hour),
    };
    Arc::new(DemoMetrics::new(
        jiff::Timestamp::now(),
        BTreeMap::from([
            ("dear".to_owned(), cluster(&pair.dear.client, 0.02, 0.003)),
            ("cheap".to_owned(), cluster(&pair.cheap.client, 0.05, 0.006)),
        ]),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_that_just_arrived_stays_within_its_daily_move_budget() {
    let pair = pair().await;
    let (dear, cheap) = (pair.dear.client.clone(), pair.cheap.client.clone());
    cluster::apply_deployment(&dear, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(&dear, "cheapest_cluster", PolicyMode::Enforce, None).await;
    // cheap's policy would move web straight back (no cooldown), but its
    // budget is one move a day.
    upload(&cheap, "cheapest_cluster", PolicyMode::Enforce, None).await;
    Api::<MigrationPolicy>::namespaced(cheap.clone(), NS)
        .patch(
            "cost",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"thresholds": {
                "cooldown": "0s",
                "maxMovesPerWorkloadPerDay": 1,
            }}})),
        )
        .await
        .expect("policy patch");
    let _dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        reversed(&pair),
    );

    cluster::until("web to run on cheap", cluster::WAIT, || {
        let (dear, cheap) = (dear.clone(), cheap.clone());
        async move {
            replicas(&cheap, "web").await == Some(2) && replicas(&dear, "web").await == Some(0)
        }
    })
    .await;
    let refused = cluster::eventually(
        "cheap's policy to refuse moving web back",
        cluster::WAIT,
        || {
            let cheap = cheap.clone();
            async move {
                Api::<MigrationPolicy>::namespaced(cheap, NS)
                    .get("cost")
                    .await
                    .ok()?
                    .status?
                    .last_decisions
                    .into_iter()
                    .find(|d| d.name == "web" && d.outcome == DecisionOutcome::Refused)
            }
        },
    )
    .await;
    let reason = refused.refusal_reason.unwrap_or_default();
    assert!(
        reason.contains("1 moves in the last 24h")
            && reason.contains("maxMovesPerWorkloadPerDay is 1"),
        "{reason}"
    );
    assert_eq!(refused.to, "dear");
    // It stayed: nothing accepted a move of web out of cheap.
    let status = Api::<MigrationPolicy>::namespaced(cheap.clone(), NS)
        .get("cost")
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(
        status
            .last_decisions
            .iter()
            .all(|d| d.name != "web" || d.outcome == DecisionOutcome::Refused),
        "{:?}",
        status.last_decisions
    );
    assert_eq!(replicas(&cheap, "web").await, Some(2));
    assert_eq!(replicas(&dear, "web").await, Some(0));
}
