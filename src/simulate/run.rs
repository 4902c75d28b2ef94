//! The step loop: one policy on the virtual clock, through the guardrails
//! the live operator uses.
//!
//! Model, per step (time `start + step × stepSize`):
//! 1. Moves due at this step complete: the workload now runs at the target,
//!    or, if the move failed (drawn from the seed), stays at the source.
//! 2. Each cluster's requested resources are summed from the placement; a
//!    moving workload counts on its source until its move completes. A
//!    cluster whose requests exceed its allocatable CPU or memory is a
//!    capacity breach for this step.
//! 3. The hourly cost is every workload's requests at its cluster's prices
//!    (the target's copy during a move is covered by the migration cost).
//! 4. On policy steps (every `interval`), the policy sees the snapshot,
//!    its answer goes through [`crate::guardrails::check`], and each accepted
//!    move starts: its cost is charged, and it completes `migration.duration`
//!    later. A policy error is counted by class and the step goes on with no
//!    moves.
//!
//! Cooldown counts from the start of the last move, failed or not, so a
//! failing move is not retried at every step.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::random::mix;
use super::report::{Bucketer, MigrationEvent, Outcome, RunResult};
use super::scenario::Scenario;
use crate::contract::{Decision, Resources, Snapshot, Workload};
use crate::guardrails::{self, Context};
use crate::policy::{Engine, Limits, Policy};
use crate::snapshot::{self, Member, Terms};

/// The windows of contract v2's move history.
const DAY_MS: u64 = 24 * 3_600_000;
const WEEK_MS: u64 = 7 * DAY_MS;

const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How a run is driven from outside.
pub struct Control<'a> {
    /// Checked before every step; when set, the run stops and returns what
    /// was simulated so far.
    pub stop: &'a AtomicBool,
    /// Incremented after every step.
    pub progress: &'a AtomicU64,
}

#[derive(Clone, Copy)]
struct Move {
    from: usize,
    to: usize,
    started: usize,
    done: usize,
    fails: bool,
}

/// Per-step values of the clusters, shared by every run of a scenario.
pub(crate) struct Grid {
    /// [step][cluster] allocatable millicores and bytes.
    alloc: Vec<Vec<Resources>>,
    /// [step][cluster] price per core-hour and per GiB-hour.
    prices: Vec<Vec<(f64, f64)>>,
}

impl Grid {
    pub(crate) fn new(s: &Scenario) -> Self {
        let alloc = (0..s.steps)
            .map(|t| {
                s.clusters
                    .iter()
                    .map(|c| Resources {
                        cpu_millis: (c.cpu_cores.at(t) * 1000.0).round() as u64,
                        memory_bytes: (c.memory_gib.at(t) * BYTES_PER_GIB).round() as u64,
                    })
                    .collect()
            })
            .collect();
        let prices = (0..s.steps)
            .map(|t| {
                s.clusters
                    .iter()
                    .map(|c| (c.cpu_price.at(t), c.memory_price.at(t)))
                    .collect()
            })
            .collect();
        Grid { alloc, prices }
    }

    /// Allocatable millicores and bytes of cluster `c` at step `t`.
    pub(crate) fn alloc(&self, t: usize, c: usize) -> Resources {
        self.alloc[t][c]
    }

    /// Prices per core-hour and per GiB-hour of cluster `c` at step `t`.
    pub(crate) fn price(&self, t: usize, c: usize) -> (f64, f64) {
        self.prices[t][c]
    }
}

/// What workload `w`'s replicas request at step `t`.
pub(super) fn requests(s: &Scenario, w: usize, t: usize) -> Resources {
    let spec = &s.workloads[w];
    let replicas = spec.replicas.at(t).round().max(0.0) as u64;
    Resources {
        cpu_millis: spec.pod_cpu_millis * replicas,
        memory_bytes: spec.pod_memory_bytes * replicas,
    }
}

/// The hourly cost of `r` at (core-hour, GiB-hour) prices.
#[inline]
pub(super) fn cost(r: Resources, (cpu, mem): (f64, f64)) -> f64 {
    r.cpu_millis as f64 / 1000.0 * cpu + r.memory_bytes as f64 / BYTES_PER_GIB * mem
}

/// Runs the scenario with no policy: every workload stays where it starts.
pub(crate) fn baseline(
    s: &Scenario,
    grid: &Grid,
    b: &Bucketer,
    control: &Control<'_>,
) -> RunResult {
    let placement: Vec<usize> = s.workloads.iter().map(|w| w.cluster).collect();
    let mut result = RunResult::new("baseline", None, s, b);
    let mut requested = vec![Resources::default(); s.clusters.len()];
    for t in 0..s.steps {
        if control.stop.load(Ordering::Relaxed) {
            break;
        }
        let hourly = account(s, grid, &placement, t, &mut requested, &mut result);
        result.record_step(t, hourly, 0, &requested, &grid.alloc[t], b);
        result.record_emissions(t, emissions_per_hour(s, t, &requested), b);
    }
    result.finish(s, b);
    result
}

/// The power drawn per core and per GiB requested, in watts: the
/// simulator's estimate of energy, from which emissions follow.
pub const WATTS_PER_CORE: f64 = 4.0;
pub const WATTS_PER_GIB: f64 = 0.4;

/// Grams of CO2 per hour that `requested` emits at step `t`, by the
/// clusters' carbon intensity; clusters with no carbon series count nothing.
fn emissions_per_hour(s: &Scenario, t: usize, requested: &[Resources]) -> f64 {
    s.clusters
        .iter()
        .zip(requested)
        .filter_map(|(c, r)| {
            let intensity = c.carbon_intensity.as_ref()?.at(t);
            let watts = r.cpu_millis as f64 / 1000.0 * WATTS_PER_CORE
                + r.memory_bytes as f64 / BYTES_PER_GIB * WATTS_PER_GIB;
            Some(watts / 1000.0 * intensity)
        })
        .sum()
}

/// Sums requests per cluster into `requested`, counts breaches, and returns
/// the hourly cost at step `t`.
fn account(
    s: &Scenario,
    grid: &Grid,
    placement: &[usize],
    t: usize,
    requested: &mut [Resources],
    result: &mut RunResult,
) -> f64 {
    requested.fill(Resources::default());
    let mut hourly = 0.0;
    for (w, &c) in placement.iter().enumerate() {
        let r = requests(s, w, t);
        requested[c].cpu_millis += r.cpu_millis;
        requested[c].memory_bytes += r.memory_bytes;
        hourly += cost(r, grid.prices[t][c]);
    }
    for (c, r) in requested.iter().enumerate() {
        let a = grid.alloc[t][c];
        if r.cpu_millis > a.cpu_millis || r.memory_bytes > a.memory_bytes {
            result.capacity_breaches += 1;
        }
    }
    hourly
}

/// Runs the scenario with one policy.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_policy(
    s: &Scenario,
    grid: &Grid,
    engine: &Engine,
    policy: &Policy,
    name: &str,
    limits: &Limits,
    b: &Bucketer,
    control: &Control<'_>,
) -> RunResult {
    let mut result = RunResult::new(name, Some(policy.digest().to_owned()), s, b);
    let mut fleet = Fleet::new(s);
    let mut requested = vec![Resources::default(); s.clusters.len()];
    let mut snapshot = initial_snapshot(s);
    let index: HashMap<(String, String), usize> = s
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| ((w.namespace.clone(), w.name.clone()), i))
        .collect();
    let mut context = guardrail_context(s);
    let step_hours = s.step_ms as f64 / 3_600_000.0;

    for t in 0..s.steps {
        if control.stop.load(Ordering::Relaxed) {
            break;
        }
        // 1. Completions.
        fleet.complete(t, step_hours, &mut result);
        // 2–3. Placement, breaches, cost.
        let hourly = account(s, grid, &fleet.placement, t, &mut requested, &mut result);

        // 4. The policy.
        let mut started = 0;
        if t % s.interval_steps == 0 {
            fill_snapshot(s, grid, t, &fleet, &requested, &mut snapshot);
            fleet.describe(s, t, &mut context);
            match engine.evaluate_blocking(policy, &snapshot, limits) {
                Err(err) => *result.errors.entry(err.class().to_owned()).or_default() += 1,
                Ok(evaluation) => {
                    let verdict = guardrails::check_evaluation(&snapshot, evaluation, &context);
                    for r in &verdict.refused {
                        *result
                            .refusals
                            .entry(r.refusal.rule().to_owned())
                            .or_default() += 1;
                    }
                    for d in verdict.accepted {
                        let Some(&w) = index.get(&(d.namespace.clone(), d.name.clone())) else {
                            continue;
                        };
                        if fleet.start(s, t, w, d, &mut result) {
                            started += 1;
                        }
                    }
                }
            }
        }
        result.record_step(t, hourly, started, &requested, &grid.alloc[t], b);
        result.record_emissions(t, emissions_per_hour(s, t, &requested), b);
        control.progress.fetch_add(1, Ordering::Relaxed);
    }
    result.finish(s, b);
    result
}

/// The guardrails' view of the scenario that does not change during a run:
/// thresholds, selector, allowed targets and pinned workloads.
pub(super) fn guardrail_context(s: &Scenario) -> Context {
    let mut context = Context::new(s.thresholds.clone(), s.guardrails.clone());
    if let Some(selector) = s.selector.clone() {
        // The scenario's selector was checked when it was loaded.
        context = match context.clone().with_selector(selector) {
            Ok(c) => c,
            Err(_) => context,
        };
    }
    context.allowed_targets = s.target_clusters.clone();
    context.pinned = s
        .workloads
        .iter()
        .filter(|w| w.pinned)
        .map(|w| (w.namespace.clone(), w.name.clone()))
        .collect();
    context
}

/// Where each workload runs and what it is doing, by workload index: what a
/// policy run changes from step to step.
struct Fleet {
    placement: Vec<usize>,
    moving: Vec<Option<Move>>,
    last_move_start: Vec<Option<usize>>,
    /// When each workload's moves of the last week started, oldest first:
    /// the move history of contract v2's snapshot.
    move_starts: Vec<Vec<usize>>,
    /// The last completed move of each workload: (from, to, started).
    last_done: Vec<Option<(usize, usize, usize)>>,
    /// A move back within this many steps counts as back-and-forth.
    window_steps: usize,
    /// The steps at which each workload's moves of the last day started.
    recent: Vec<VecDeque<usize>>,
    /// Steps in 24 hours.
    day_steps: usize,
}

impl Fleet {
    /// Every workload where the scenario starts it, nothing moving.
    fn new(s: &Scenario) -> Self {
        let n = s.workloads.len();
        Fleet {
            placement: s.workloads.iter().map(|w| w.cluster).collect(),
            moving: vec![None; n],
            last_move_start: vec![None; n],
            move_starts: vec![Vec::new(); n],
            last_done: vec![None; n],
            window_steps: (s.back_and_forth_window_ms / s.step_ms) as usize,
            recent: vec![VecDeque::new(); n],
            day_steps: 86_400_000u64.div_ceil(s.step_ms) as usize,
        }
    }

    /// Completes the moves due at step `t`: the workload now runs at the
    /// target, or stays if its move failed.
    fn complete(&mut self, t: usize, step_hours: f64, result: &mut RunResult) {
        for w in 0..self.moving.len() {
            if let Some(m) = self.moving[w]
                && m.done <= t
            {
                self.moving[w] = None;
                let outcome = if m.fails {
                    result.failed += 1;
                    Outcome::Failed
                } else {
                    self.placement[w] = m.to;
                    self.last_done[w] = Some((m.from, m.to, m.started));
                    result.completed += 1;
                    Outcome::Completed
                };
                result.migrating_hours += (t - m.started) as f64 * step_hours;
                result.close_event(w, m.started, outcome);
            }
        }
    }

    /// Tells the guardrails what is in flight at step `t`: how many moves,
    /// which workloads, and the requests on their way to each target; and,
    /// when a rule reads it, each workload's moves of the last 24 hours.
    fn describe(&mut self, s: &Scenario, t: usize, context: &mut Context) {
        context.recent_moves.clear();
        let g = &context.guardrails;
        let history = g.max_moves_per_workload_per_day > 0 || g.savings_per_disruption > 0.0;
        for (w, starts) in self.recent.iter_mut().enumerate() {
            while starts.front().is_some_and(|&m| t - m >= self.day_steps) {
                starts.pop_front();
            }
            if history && !starts.is_empty() {
                let spec = &s.workloads[w];
                context.recent_moves.insert(
                    (spec.namespace.clone(), spec.name.clone()),
                    u32::try_from(starts.len()).unwrap_or(u32::MAX),
                );
            }
        }
        let in_flight = self.moving.iter().filter(|m| m.is_some()).count();
        context.in_flight = u32::try_from(in_flight).unwrap_or(u32::MAX);
        context.incoming = BTreeMap::new();
        context.moving.clear();
        for (w, m) in self.moving.iter().enumerate() {
            if let Some(m) = m {
                let spec = &s.workloads[w];
                context
                    .moving
                    .insert((spec.namespace.clone(), spec.name.clone()));
                let r = requests(s, w, t);
                let e = context
                    .incoming
                    .entry(s.clusters[m.to].name.clone())
                    .or_default();
                e.cpu_millis += r.cpu_millis;
                e.memory_bytes += r.memory_bytes;
            }
        }
    }

    /// Starts the accepted move `d` of workload `w` at step `t`: draws from
    /// the seed whether it fails, charges its cost and opens its event.
    /// False when it names a cluster the scenario does not have.
    fn start(
        &mut self,
        s: &Scenario,
        t: usize,
        w: usize,
        d: Decision,
        result: &mut RunResult,
    ) -> bool {
        let (Some(from), Some(to)) = (
            cluster_index(s, &d.from_cluster),
            cluster_index(s, &d.to_cluster),
        ) else {
            return false;
        };
        let draw = mix(s.seed ^ mix(w as u64) ^ mix((t as u64) << 20));
        let fails = ((draw >> 11) as f64 / (1u64 << 53) as f64) < s.migration.failure_probability;
        self.moving[w] = Some(Move {
            from,
            to,
            started: t,
            done: t + s.migration.duration_steps,
            fails,
        });
        self.last_move_start[w] = Some(t);
        self.recent[w].push_back(t);
        let week = (WEEK_MS / s.step_ms.max(1)) as usize;
        let starts = &mut self.move_starts[w];
        starts.retain(|&start| t - start < week);
        starts.push(t);
        if let Some((pf, pt, ps)) = self.last_done[w]
            && pf == to
            && pt == from
            && t - ps <= self.window_steps
        {
            result.back_and_forth += 1;
        }
        result.migrations += 1;
        result.migration_cost += s.migration.cost;
        result.open_event(MigrationEvent {
            step: t,
            time_ms: s.start_ms + t as u64 * s.step_ms,
            namespace: d.namespace,
            name: d.name,
            from: d.from_cluster,
            to: d.to_cluster,
            hourly_savings: d.hourly_savings,
            outcome: Outcome::InFlight,
            reason: d.reason,
            replicas: d.replicas,
            strategy: d.strategy,
            reasons: d.reasons,
            workload: w,
        });
        true
    }
}

fn cluster_index(s: &Scenario, name: &str) -> Option<usize> {
    s.clusters.iter().position(|c| c.name == name)
}

/// The first snapshot, through the assembler every caller shares: the
/// scenario's clusters (reachable) and workloads in the scenario's order.
/// Their numbers are filled at every step by [`fill_snapshot`].
fn initial_snapshot(s: &Scenario) -> Snapshot {
    let members = s
        .clusters
        .iter()
        .map(|c| Member {
            name: c.name.clone(),
            region: c.region.clone(),
            labels: c.labels.clone(),
            reachable: true,
        })
        .collect();
    let workloads = s
        .workloads
        .iter()
        .map(|w| Workload {
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            kind: w.kind.clone(),
            cluster: s.clusters[w.cluster].name.clone(),
            labels: w.labels.clone(),
            ..Workload::default()
        })
        .collect();
    let terms = Terms {
        thresholds: s.thresholds.clone(),
        parameters: s.parameters_json.clone(),
    };
    snapshot::assemble(s.start_ms, members, None, workloads, terms)
}

/// Updates the snapshot in place: numbers every time, names only when a
/// workload changed cluster.
fn fill_snapshot(
    s: &Scenario,
    grid: &Grid,
    t: usize,
    fleet: &Fleet,
    requested: &[Resources],
    snap: &mut Snapshot,
) {
    let (placement, last_move_start, move_starts) =
        (&fleet.placement, &fleet.last_move_start, &fleet.move_starts);
    snap.timestamp_ms = s.start_ms + t as u64 * s.step_ms;
    for (c, cluster) in snap.clusters.iter_mut().enumerate() {
        let a = grid.alloc[t][c];
        let (cpu, mem) = grid.prices[t][c];
        cluster.allocatable = a;
        cluster.requested = requested[c];
        cluster.cpu_core_hour_price = Some(cpu);
        cluster.carbon_intensity = s.clusters[c].carbon_intensity.as_ref().map(|i| i.at(t));
        cluster.memory_gib_hour_price = Some(mem);
        let ratio = |r: u64, a: u64| (a > 0).then(|| r as f64 / a as f64);
        cluster.cpu_utilization = ratio(requested[c].cpu_millis, a.cpu_millis);
        cluster.memory_utilization = ratio(requested[c].memory_bytes, a.memory_bytes);
    }
    for (w, workload) in snap.workloads.iter_mut().enumerate() {
        let spec = &s.workloads[w];
        let c = placement[w];
        if workload.cluster != s.clusters[c].name {
            workload.cluster.clone_from(&s.clusters[c].name);
        }
        let replicas = spec.replicas.at(t).round().max(0.0);
        let r = requests(s, w, t);
        workload.replicas = replicas as u32;
        workload.requests = r;
        workload.hourly_cost = Some(cost(r, grid.prices[t][c]));
        workload.cpu_usage_millis = spec
            .usage_cpu_cores
            .as_ref()
            .map(|u| (u.at(t) * 1000.0 * replicas).round() as u64);
        workload.memory_usage_bytes = spec
            .usage_memory_gib
            .as_ref()
            .map(|u| (u.at(t) * BYTES_PER_GIB * replicas).round() as u64);
        workload.seconds_since_migration =
            last_move_start[w].map(|m| (t - m) as u64 * s.step_ms / 1000);
        workload.last_move_ms = last_move_start[w].map(|m| s.start_ms + m as u64 * s.step_ms);
        let within = |ms: u64| {
            move_starts[w]
                .iter()
                .filter(|&&m| ((t - m) as u64).saturating_mul(s.step_ms) < ms)
                .count() as u32
        };
        workload.moves_last_day = within(DAY_MS);
        workload.moves_last_week = within(WEEK_MS);
        workload.disruption_cost = Some(s.migration.cost);
    }
}
