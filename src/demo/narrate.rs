//! What the demo prints: the clusters' own record of what happened (the
//! policies' status and the migrations' phases), read through their API as
//! it happens, and the closing cost summary.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, ResourceExt};

use super::setup::{Cluster, WORKLOAD_NAMESPACE};
use super::{ClusterPlan, DemoMetrics, Options, Summary};
use crate::crd::{
    DecisionOutcome, MigrationPhase, MigrationPolicy, MigrationRole, WorkloadMigration,
};

/// Prints (when echoing) and keeps every line.
pub struct Narrator {
    color: bool,
    echo: bool,
    started: Instant,
    lines: Vec<String>,
}

impl Narrator {
    pub fn new(color: bool, echo: bool) -> Self {
        Narrator {
            color,
            echo,
            started: Instant::now(),
            lines: Vec::new(),
        }
    }

    fn emit(&mut self, plain: String, styled: String) {
        if self.echo {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", if self.color { &styled } else { &plain });
            let _ = out.flush();
        }
        self.lines.push(plain);
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn headline(&mut self, text: &str) {
        let styled = self.paint("1", &format!("== {text}"));
        self.emit(format!("== {text}"), styled);
    }

    pub fn say(&mut self, text: &str) {
        self.emit(format!("   {text}"), format!("   {text}"));
    }

    /// A timed event line; `code` is an ANSI colour for the tag.
    fn event(&mut self, tag: &str, code: &str, text: &str) {
        let at = self.started.elapsed().as_secs_f64();
        let plain = format!("[{at:5.1}s] {tag:<10} {text}");
        let styled = format!(
            "[{at:5.1}s] {} {text}",
            self.paint(code, &format!("{tag:<10}"))
        );
        self.emit(plain, styled);
    }
}

/// Where each workload of the demo namespace runs (replicas > 0).
pub(crate) async fn placement(clusters: &[Cluster]) -> BTreeMap<String, String> {
    let mut placement = BTreeMap::new();
    for cluster in clusters {
        let deployments: Api<Deployment> =
            Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
        if let Ok(list) = deployments.list(&Default::default()).await {
            for deployment in list.iter().filter(|d| d.spec.replicas.unwrap_or(1) > 0) {
                placement.insert(
                    format!("{WORKLOAD_NAMESPACE}/{}", deployment.name_any()),
                    cluster.name.to_owned(),
                );
            }
        }
    }
    placement
}

/// Reports decisions and migration phases until the demo's time is up.
pub(crate) async fn watch(
    clusters: &[Cluster],
    plans: &[ClusterPlan],
    options: &Options,
    metrics: &DemoMetrics,
    narrator: &mut Narrator,
) -> (usize, usize) {
    let began = Instant::now();
    let mut seen_decisions: BTreeSet<String> = BTreeSet::new();
    let mut phases: BTreeMap<String, MigrationPhase> = BTreeMap::new();
    let mut spiked = false;
    let (mut completed, mut refused) = (0, 0);
    while began.elapsed() < options.duration {
        if !spiked && began.elapsed() >= options.spike_at {
            spiked = true;
            for plan in plans.iter().filter(|p| p.prices.len() > 1) {
                let now = jiff::Timestamp::now();
                if let Some((core, gib)) = metrics.prices(plan.name, now) {
                    narrator.event(
                        "PRICE",
                        "35",
                        &format!(
                            "{}: spot price spikes to {core:.3}/core-h, {gib:.4}/GiB-h",
                            plan.name
                        ),
                    );
                }
            }
        }
        for cluster in clusters {
            report_decisions(cluster, &mut seen_decisions, &mut refused, narrator).await;
            completed += report_migrations(cluster, &mut phases, narrator).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (completed, refused)
}

async fn report_decisions(
    cluster: &Cluster,
    seen: &mut BTreeSet<String>,
    refused: &mut usize,
    narrator: &mut Narrator,
) {
    let policies: Api<MigrationPolicy> =
        Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
    let Ok(list) = policies.list(&Default::default()).await else {
        return;
    };
    for policy in list {
        for record in policy.status.map(|s| s.last_decisions).unwrap_or_default() {
            let workload = format!("{}/{}", record.namespace, record.name);
            // A refusal repeats every cycle: report each distinct one once.
            let key = match record.outcome {
                DecisionOutcome::Refused => format!(
                    "{}|{workload}|{}|{}",
                    cluster.name,
                    record.to,
                    record.refusal_reason.clone().unwrap_or_default()
                ),
                _ => format!(
                    "{}|{workload}|{}|{}",
                    cluster.name, record.to, record.time.0
                ),
            };
            if !seen.insert(key) {
                continue;
            }
            match record.outcome {
                DecisionOutcome::Refused => {
                    *refused += 1;
                    narrator.event(
                        "REFUSED",
                        "33",
                        &format!(
                            "{workload} {} → {}: {}",
                            record.from,
                            record.to,
                            record.refusal_reason.unwrap_or_default()
                        ),
                    );
                }
                outcome => narrator.event(
                    if outcome == DecisionOutcome::Accepted {
                        "DECIDED"
                    } else {
                        "WOULD"
                    },
                    "36",
                    &format!(
                        "{workload} {} → {}: saves {:.4}/h",
                        record.from, record.to, record.hourly_savings
                    ),
                ),
            }
        }
    }
}

/// Prints phase changes of migrations this cluster receives, and the end of
/// those it sends; returns how many completed now.
async fn report_migrations(
    cluster: &Cluster,
    phases: &mut BTreeMap<String, MigrationPhase>,
    narrator: &mut Narrator,
) -> usize {
    let migrations: Api<WorkloadMigration> = Api::all(cluster.client.clone());
    let Ok(list) = migrations.list(&Default::default()).await else {
        return 0;
    };
    let mut completed = 0;
    for migration in list {
        let Some(status) = &migration.status else {
            continue;
        };
        let phase = status.phase;
        let spec = &migration.spec;
        let role = spec.role;
        // Receivers report the way in; senders report the end.
        let interesting = match role {
            MigrationRole::Target => !matches!(
                phase,
                MigrationPhase::Completed | MigrationPhase::RolledBack
            ),
            MigrationRole::Source => matches!(
                phase,
                MigrationPhase::Completed | MigrationPhase::RolledBack
            ),
        };
        let key = format!("{}|{}|{:?}", cluster.name, migration.name_any(), role);
        if !interesting || phases.get(&key) == Some(&phase) {
            continue;
        }
        phases.insert(key, phase);
        if phase == MigrationPhase::Completed {
            completed += 1;
        }
        let workload = workload_name(&spec.workload);
        let why = status
            .message
            .clone()
            .or(status.reason.clone())
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        let code = match phase {
            MigrationPhase::Completed => "32",
            MigrationPhase::Failed | MigrationPhase::Rejected | MigrationPhase::RolledBack => "31",
            _ => "34",
        };
        narrator.event(
            &format!("{phase:?}").to_uppercase(),
            code,
            &format!(
                "{workload} {} → {}{why}",
                spec.source_cluster, spec.target_cluster
            ),
        );
    }
    completed
}

fn workload_name(manifest: &serde_json::Value) -> String {
    let meta = &manifest["metadata"];
    format!(
        "{}/{}",
        meta["namespace"].as_str().unwrap_or(WORKLOAD_NAMESPACE),
        meta["name"].as_str().unwrap_or("?")
    )
}

/// Cost per hour of a placement at the prices of `at`.
fn cost(placement: &BTreeMap<String, String>, metrics: &DemoMetrics, at: jiff::Timestamp) -> f64 {
    placement
        .iter()
        .filter_map(|(workload, cluster)| {
            let name = workload.rsplit('/').next()?;
            let (_, replicas, cpu, memory, _) = super::setup::workload_spec(name)?;
            let (core_hour, gib_hour) = metrics.prices(cluster, at)?;
            let cores = f64::from(replicas) * f64::from(cpu) / 1000.0;
            let gib = f64::from(replicas) * f64::from(memory) / 1024.0;
            Some(cores * core_hour + gib * gib_hour)
        })
        .sum()
}

pub(crate) fn summarize(
    plans: &[ClusterPlan],
    metrics: &DemoMetrics,
    start: jiff::Timestamp,
    (initial, completed, refused): (&BTreeMap<String, String>, usize, usize),
    last: &BTreeMap<String, String>,
    mut narrator: Narrator,
) -> Summary {
    let now = jiff::Timestamp::now();
    let before = cost(initial, metrics, start);
    let after = cost(last, metrics, now);
    let unmoved = cost(initial, metrics, now);
    narrator.headline("Summary");
    for plan in plans {
        let here: Vec<&str> = last
            .iter()
            .filter(|(_, cluster)| cluster.as_str() == plan.name)
            .map(|(workload, _)| workload.as_str())
            .collect();
        narrator.say(&format!(
            "{:<9} runs {}",
            plan.name,
            if here.is_empty() {
                "nothing".to_owned()
            } else {
                here.join(", ")
            }
        ));
    }
    narrator.say(&format!(
        "migrations completed: {completed}; distinct refusals: {refused}"
    ));
    narrator.say(&format!("cost per hour before:              {before:8.4}"));
    narrator.say(&format!("cost per hour now, had none moved: {unmoved:8.4}"));
    narrator.say(&format!("cost per hour now, after Ferry:    {after:8.4}"));
    if unmoved > 0.0 {
        narrator.say(&format!(
            "saving against staying put: {:.4}/h ({:.0}%)",
            unmoved - after,
            (unmoved - after) / unmoved * 100.0
        ));
    }
    Summary {
        before,
        after,
        unmoved,
        placement: last.clone(),
        completed_migrations: completed,
        refused_decisions: refused,
        lines: narrator.lines,
    }
}
