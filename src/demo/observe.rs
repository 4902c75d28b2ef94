//! Watching the demo's clusters through their API: each new decision and
//! migration phase becomes a timed event, the cost of the placement is
//! integrated over the run, and after the scripted time the demo waits for
//! the clusters to settle.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use kube::{Api, ResourceExt};

use super::narrate::{Event, Narrator, Timeline};
use super::setup::{Cluster, WORKLOAD_NAMESPACE};
use super::summary::{Watched, cost};
use super::{ClusterPlan, DemoMetrics, Options};
use crate::crd::{
    DecisionOutcome, MigrationPhase, MigrationPolicy, MigrationRole, WorkloadMigration, types,
};

/// How often the clusters are read.
const TICK: Duration = Duration::from_millis(250);

/// What one read of every cluster found.
#[derive(Default)]
struct Reading {
    /// Every cluster's policy has completed a cycle up to here: all
    /// decisions made before it are known.
    decided_up_to: Option<Timestamp>,
    in_flight: usize,
    last_finish: Option<Timestamp>,
    /// Per cluster: (last cycle time, Ready, accepted something in it).
    cycles: Vec<(Option<Timestamp>, bool, bool)>,
}

/// Reports decisions and migration phases until the scripted time is up
/// and the clusters have settled (or the settle limit passed).
pub(crate) async fn watch(
    clusters: &[Cluster],
    plans: &[ClusterPlan],
    options: &Options,
    metrics: &DemoMetrics,
    start: Timestamp,
    narrator: &mut Narrator,
) -> Watched {
    let began = Instant::now();
    let mut timeline = Timeline::new(start);
    let spike = start + SignedDuration::try_from(options.spike_at).unwrap_or_default();
    for plan in plans.iter().filter(|p| p.prices.len() > 1) {
        if let Some((core, gib)) = metrics.prices(plan.name, spike) {
            timeline.add(Event {
                at: spike,
                step: 0,
                tag: "PRICE",
                code: "35",
                text: format!(
                    "{}: spot price spikes to {core:.3}/core-h, {gib:.4}/GiB-h",
                    plan.name
                ),
            });
        }
    }
    let initial = super::summary::placement(clusters).await;
    let mut watcher = Watcher {
        seen: BTreeSet::new(),
        spiking: plans
            .iter()
            .filter(|p| p.prices.len() > 1)
            .map(|p| p.name)
            .collect(),
        watched: Watched::default(),
    };
    // Cost per hour times seconds, and the seconds they cover.
    let (mut cost_seconds, mut unmoved_seconds, mut covered) = (0.0, 0.0, 0.0);
    let mut last_tick = Timestamp::now();
    let mut announced_settling = false;
    loop {
        let reading = watcher.read(clusters, &mut timeline).await;
        let now = Timestamp::now();
        let placement = super::summary::placement(clusters).await;
        let dt = now.duration_since(last_tick).as_secs_f64();
        cost_seconds += cost(&placement, metrics, now) * dt;
        unmoved_seconds += cost(&initial, metrics, now) * dt;
        covered += dt;
        last_tick = now;
        timeline.release(reading.decided_up_to.unwrap_or(start), narrator);

        let elapsed = began.elapsed();
        if elapsed >= options.duration {
            if settled(&reading, spike, options.cooldown) {
                watcher.watched.settled_at = Some(timeline.offset(now));
                break;
            }
            if elapsed >= options.duration + options.settle_limit {
                watcher.watched.in_flight = reading.in_flight;
                break;
            }
            if !announced_settling {
                announced_settling = true;
                timeline.add(Event {
                    at: now,
                    step: 6,
                    tag: "SETTLING",
                    code: "1",
                    text: format!(
                        "the price script is over; waiting (at most {}s) until nothing is in flight \
                         and every policy, past its cooldown, decides no more moves",
                        options.settle_limit.as_secs()
                    ),
                });
            }
        }
        tokio::time::sleep(TICK).await;
    }
    timeline.flush(narrator);
    let mut watched = watcher.watched;
    watched.run_seconds = timeline.offset(Timestamp::now());
    if covered > 0.0 {
        watched.average_cost = cost_seconds / covered;
        watched.average_unmoved = unmoved_seconds / covered;
    }
    watched
}

/// Settled: nothing in flight, and every policy has completed a cycle
/// after the spike and after the last move's cooldown, and accepted
/// nothing in it: each is content with where the workloads run.
fn settled(reading: &Reading, spike: Timestamp, cooldown: Duration) -> bool {
    let cooled = reading
        .last_finish
        .map(|f| f + SignedDuration::try_from(cooldown).unwrap_or_default())
        .map_or(spike, |c| c.max(spike));
    reading.in_flight == 0
        && !reading.cycles.is_empty()
        && reading
            .cycles
            .iter()
            .all(|(at, ready, accepted)| at.is_some_and(|at| at > cooled) && *ready && !accepted)
}

/// What the watch remembers between reads.
struct Watcher {
    /// Keys of the events already on the timeline.
    seen: BTreeSet<String>,
    /// The clusters whose price spikes.
    spiking: Vec<&'static str>,
    watched: Watched,
}

impl Watcher {
    /// Reads every cluster once: new decisions and phases go to the timeline.
    async fn read(&mut self, clusters: &[Cluster], timeline: &mut Timeline) -> Reading {
        let mut reading = Reading::default();
        let mut decided: Vec<Option<Timestamp>> = Vec::new();
        for cluster in clusters {
            let cycle = self.read_policy(cluster, timeline).await;
            decided.push(cycle.0);
            reading.cycles.push(cycle);
            self.read_migrations(cluster, timeline, &mut reading).await;
        }
        reading.decided_up_to = decided.into_iter().min().flatten();
        reading
    }

    /// The policy's new decisions; returns its last cycle's time, whether it
    /// is Ready and whether that cycle accepted a move.
    async fn read_policy(
        &mut self,
        cluster: &Cluster,
        timeline: &mut Timeline,
    ) -> (Option<Timestamp>, bool, bool) {
        let policies: Api<MigrationPolicy> =
            Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
        let Ok(Some(policy)) = policies.get_opt("cost").await else {
            return (None, false, false);
        };
        let status = policy.status.unwrap_or_default();
        let last_cycle = status.last_cycle_time.as_ref().map(|t| t.0);
        let ready = crate::crd::is_condition_true(&status.conditions, types::READY);
        let mut accepted = false;
        for record in &status.last_decisions {
            let workload = format!("{}/{}", record.namespace, record.name);
            let reason = record.refusal_reason.clone().unwrap_or_default();
            if record.outcome == DecisionOutcome::Accepted && Some(record.time.0) == last_cycle {
                accepted = true;
            }
            // A refusal repeats every cycle: report each distinct one once.
            let key = match record.outcome {
                DecisionOutcome::Refused => {
                    format!("R|{}|{workload}|{}|{reason}", cluster.name, record.to)
                }
                _ => format!(
                    "D|{}|{workload}|{}|{}",
                    cluster.name, record.to, record.time.0
                ),
            };
            if !self.seen.insert(key) {
                continue;
            }
            let (tag, code, text) = match record.outcome {
                DecisionOutcome::Refused => {
                    self.watched.refused += 1;
                    (
                        "REFUSED",
                        "33",
                        format!("{workload} {} → {}: {reason}", record.from, record.to),
                    )
                }
                outcome => (
                    if outcome == DecisionOutcome::Accepted {
                        "DECIDED"
                    } else {
                        "WOULD"
                    },
                    "36",
                    format!(
                        "{workload} {} → {}: saves {:.4}/h",
                        record.from, record.to, record.hourly_savings
                    ),
                ),
            };
            timeline.add(Event {
                at: record.time.0,
                step: 1,
                tag,
                code,
                text,
            });
        }
        (last_cycle, ready, accepted)
    }

    /// Every phase a move reached, once each, at the time its status stamped:
    /// the receiver's way in (ACCEPTED, PROGRESSING, READY, or REJECTED and
    /// FAILED) and the sender's end (COMPLETED or ROLLEDBACK).
    async fn read_migrations(
        &mut self,
        cluster: &Cluster,
        timeline: &mut Timeline,
        reading: &mut Reading,
    ) {
        let migrations: Api<WorkloadMigration> = Api::all(cluster.client.clone());
        let Ok(list) = migrations.list(&Default::default()).await else {
            return;
        };
        for migration in list {
            let status = migration.status.clone().unwrap_or_default();
            if !status.phase.is_terminal() {
                reading.in_flight += 1;
            }
            if let Some(finished) = &status.finished_time {
                reading.last_finish = reading.last_finish.max(Some(finished.0));
            }
            let spec = &migration.spec;
            let stamps = match spec.role {
                MigrationRole::Target => vec![
                    (MigrationPhase::Accepted, status.accepted_time.as_ref()),
                    (
                        MigrationPhase::Progressing,
                        status.progressing_time.as_ref(),
                    ),
                    (MigrationPhase::Ready, status.ready_time.as_ref()),
                    (
                        MigrationPhase::Rejected,
                        finished_in(&status, MigrationPhase::Rejected),
                    ),
                    (
                        MigrationPhase::Failed,
                        finished_in(&status, MigrationPhase::Failed),
                    ),
                ],
                MigrationRole::Source => vec![
                    (MigrationPhase::Completed, status.completed_time.as_ref()),
                    (
                        MigrationPhase::RolledBack,
                        finished_in(&status, MigrationPhase::RolledBack),
                    ),
                ],
            };
            for (phase, at) in stamps {
                let Some(at) = at else { continue };
                let key = format!("M|{}|{}|{phase:?}", cluster.name, migration.name_any());
                if !self.seen.insert(key) {
                    continue;
                }
                if phase == MigrationPhase::Completed {
                    self.watched.completed += 1;
                    if self.spiking.contains(&spec.source_cluster.as_str()) {
                        self.watched.completed_off_spot += 1;
                    }
                }
                let why = match phase {
                    MigrationPhase::Rejected
                    | MigrationPhase::Failed
                    | MigrationPhase::RolledBack => status
                        .message
                        .clone()
                        .or(status.reason.clone())
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                timeline.add(Event {
                    at: at.0,
                    step: phase_step(phase),
                    tag: phase_tag(phase),
                    code: match phase {
                        MigrationPhase::Completed => "32",
                        MigrationPhase::Failed
                        | MigrationPhase::Rejected
                        | MigrationPhase::RolledBack => "31",
                        _ => "34",
                    },
                    text: format!(
                        "{} {} → {}{why}",
                        spec.workload_key(),
                        spec.source_cluster,
                        spec.target_cluster
                    ),
                });
            }
        }
    }
}

/// The finish time, when the move ended in `phase`.
fn finished_in(
    status: &crate::crd::WorkloadMigrationStatus,
    phase: MigrationPhase,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    (status.phase == phase)
        .then_some(status.finished_time.as_ref())
        .flatten()
}

/// Where a phase comes among the events of one second.
fn phase_step(phase: MigrationPhase) -> u8 {
    match phase {
        MigrationPhase::Pending | MigrationPhase::Accepted => 2,
        MigrationPhase::Progressing => 3,
        MigrationPhase::Ready => 4,
        _ => 5,
    }
}

fn phase_tag(phase: MigrationPhase) -> &'static str {
    match phase {
        MigrationPhase::Pending => "PENDING",
        MigrationPhase::Accepted => "ACCEPTED",
        MigrationPhase::Progressing => "PROGRESSING",
        MigrationPhase::Ready => "READY",
        MigrationPhase::Completed => "COMPLETED",
        MigrationPhase::Failed => "FAILED",
        MigrationPhase::Rejected => "REJECTED",
        MigrationPhase::RolledBack => "ROLLEDBACK",
    }
}
