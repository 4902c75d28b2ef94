//! A deliberately misbehaving policy: the `mode` parameter picks how it
//! breaks, so the host's tests exercise every failure class with a real
//! compiled component. Never deploy it.
//!
//! Modes: `ok` (no decisions), `loop` (never returns), `grow` (allocates
//! without bound, or `mebibytes` MiB and then answers nothing), `panic`,
//! `recurse` (overflows the stack), `error` (returns `err`),
//! `flood-decisions` (ten times more decisions than workloads),
//! `flood-logs` (floods `host.log`, stdout and stderr, or only the one that
//! `via` names, then succeeds),
//! `return` (returns the `decisions` parameter verbatim), `probe` (reports
//! what the sandbox lets it see, as its error string), `count` (reports how
//! many calls its instance has seen, as its error string), `echo` (returns
//! the snapshot it received, as JSON in its error string, so the host can
//! check that every field arrived intact).

use ferry_policy_sdk::{Decision, Level, Snapshot, Text, host_log, parameters};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Parameters {
    pub mode: String,
    pub decisions: Vec<DecisionJson>,
    pub lines: Option<u32>,
    pub mebibytes: Option<usize>,
    /// For `flood-logs`: `host`, `stdout` or `stderr`; all three if unset.
    pub via: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionJson {
    pub namespace: String,
    pub name: String,
    pub from_cluster: String,
    pub to_cluster: String,
    pub hourly_savings: f64,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub replicas: Option<u32>,
}

pub fn decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    let params: Parameters = parameters(&snapshot.parameters)?;
    match params.mode.as_str() {
        "" | "ok" => Ok(Vec::new()),
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "grow" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            while params.mebibytes.is_none_or(|limit| hoard.len() < limit) {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
            Ok(Vec::new())
        }
        "panic" => panic!("testbed panicked on purpose"),
        "recurse" => Ok(vec![recurse(std::hint::black_box(1))]),
        "error" => Err("testbed refuses to decide".to_owned()),
        "count" => {
            // A global that would remember earlier calls if an instance were reused.
            static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            Err(format!("call {calls}"))
        }
        "flood-decisions" => {
            let count = snapshot.workloads.len() * 10 + 100;
            Ok((0..count)
                .map(|i| Decision {
                    namespace: "flood".into(),
                    name: format!("w{i}").into(),
                    from_cluster: "a".into(),
                    to_cluster: "b".into(),
                    hourly_savings: 1.0,
                    reason: Text::new(),
                    ..Decision::default()
                })
                .collect())
        }
        "flood-logs" => {
            let lines = params.lines.unwrap_or(100_000);
            let via = |channel: &str| params.via.as_deref().is_none_or(|v| v == channel);
            let (host, stdout, stderr) = (via("host"), via("stdout"), via("stderr"));
            for i in 0..lines {
                if host {
                    host_log(
                        Level::Info,
                        &format!("host log line {i} {}", "x".repeat(64)),
                    );
                }
                if stdout {
                    println!("stdout line {i}");
                }
                if stderr {
                    eprintln!("stderr line {i}");
                }
            }
            Ok(Vec::new())
        }
        "return" => Ok(params
            .decisions
            .into_iter()
            .map(|d| Decision {
                namespace: d.namespace.into(),
                name: d.name.into(),
                from_cluster: d.from_cluster.into(),
                to_cluster: d.to_cluster.into(),
                hourly_savings: d.hourly_savings,
                reason: d.reason.into(),
                replicas: d.replicas.into(),
                ..Decision::default()
            })
            .collect()),
        "echo" => Err(echo(snapshot).to_string()),
        "probe" => Err(format!(
            "env={} args={} root_readable={} cwd={}",
            std::env::vars().count(),
            std::env::args().count(),
            std::fs::read_dir("/").is_ok(),
            std::env::current_dir().is_ok(),
        )),
        other => Err(format!("unknown mode {other:?}")),
    }
}

/// The snapshot in the JSON form of `ferry policy eval --input`.
fn echo(s: &Snapshot) -> serde_json::Value {
    use serde_json::json;
    let resources = |r: &ferry_policy_sdk::Resources| json!({"cpuMillis": r.cpu_millis, "memoryBytes": r.memory_bytes});
    let labels = |labels: &[ferry_policy_sdk::Label]| {
        labels
            .iter()
            .map(|l| json!({"key": l.key.as_str(), "value": l.value.as_str()}))
            .collect::<Vec<_>>()
    };
    json!({
        "timestampMs": s.timestamp_ms,
        "clusters": s.clusters.iter().map(|c| json!({
            "name": c.name.as_str(),
            "region": c.region.as_str(),
            "labels": labels(&c.labels),
            "ready": c.ready,
            "allocatable": resources(&c.allocatable),
            "requested": resources(&c.requested),
            "cpuUtilization": c.cpu_utilization.get(),
            "memoryUtilization": c.memory_utilization.get(),
            "cpuCoreHourPrice": c.cpu_core_hour_price.get(),
            "memoryGibHourPrice": c.memory_gib_hour_price.get(),
            "carbonIntensity": c.carbon_intensity.get(),
        })).collect::<Vec<_>>(),
        "workloads": s.workloads.iter().map(|w| json!({
            "namespace": w.namespace.as_str(),
            "name": w.name.as_str(),
            "kind": w.kind.as_str(),
            "cluster": w.cluster.as_str(),
            "replicas": w.replicas,
            "requests": resources(&w.requests),
            "cpuUsageMillis": w.cpu_usage_millis.get(),
            "memoryUsageBytes": w.memory_usage_bytes.get(),
            "hourlyCost": w.hourly_cost.get(),
            "labels": labels(&w.labels),
            "secondsSinceMigration": w.seconds_since_migration.get(),
            "lastMoveMs": w.last_move_ms.get(),
            "movesLastDay": w.moves_last_day,
            "movesLastWeek": w.moves_last_week,
            "disruptionCost": w.disruption_cost.get(),
        })).collect::<Vec<_>>(),
        "thresholds": {
            "minHourlySavings": s.thresholds.min_hourly_savings,
            "minSavingsRatio": s.thresholds.min_savings_ratio,
            "maxTargetCpuUtilization": s.thresholds.max_target_cpu_utilization,
            "maxTargetMemoryUtilization": s.thresholds.max_target_memory_utilization,
            "cooldownSeconds": s.thresholds.cooldown_seconds,
            "maxMigrationsPerCycle": s.thresholds.max_migrations_per_cycle,
        },
        "parameters": s.parameters.as_str(),
    })
}

#[inline(never)]
#[allow(unconditional_recursion)] // On purpose: it must overflow the stack.
fn recurse(depth: u64) -> Decision {
    let mut deeper = recurse(std::hint::black_box(depth + 1));
    deeper.hourly_savings += depth as f64;
    deeper
}

ferry_policy_sdk::policy!(decide);
