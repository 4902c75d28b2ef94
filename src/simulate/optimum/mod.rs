//! The hindsight optimum: the largest net saving any policy could have made
//! over a scenario, knowing every future price.
//!
//! Net saving is the baseline's cost (nothing moves) minus the run cost and
//! the migration cost, in the simulator's own model of a move
//! ([`super::run`]): a move decided at a policy step `t` costs
//! `migration.cost` at once, the workload keeps running (and costing) at its
//! source for `migration.duration_steps` steps, and runs at the target from
//! step `t + duration_steps`, when it may move again. No move fails. A move
//! still under way when the run ends is paid for and brings nothing.
//!
//! What binds the optimum is what binds every policy in the simulator: moves
//! start only at policy steps, only for workloads the policy may move (matched
//! by the selector, not pinned) and only to allowed targets
//! (`targetClusters`). The thresholds (savings, payback, cooldown, caps and
//! budgets) are the user's choices, not facts of the scenario; the optimum
//! ignores them, so it is what those choices are judged against.
//!
//! Without capacity, workloads do not interact and the optimum is exact: one
//! dynamic programme per workload over step × cluster, `O(steps × clusters)`
//! each. Where the per-workload schedules together put a cluster over its
//! allocatable CPU or memory at some step (where the baseline did not already
//! have it over), capacity binds: the value is then the capacity-free
//! relaxation, an upper bound on what any policy could have saved, and
//! [`Optimum::exact`] is false.
//!
//! Pure: no client, no clock, no files.

use serde::Serialize;

use super::run::{Grid, cost, guardrail_context, requests};
use super::scenario::Scenario;
use crate::contract::Resources;
use kube::core::SelectorExt;

/// No move from this (step, cluster): the workload stays for the step.
const STAY: u32 = u32::MAX;

/// The hindsight optimum of a scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Optimum {
    /// Baseline total minus the optimal schedule's run and migration cost.
    pub saving: f64,
    /// Moves in the optimal schedule.
    pub migrations: u64,
    /// Cost of running the workloads on the optimal schedule.
    pub run_cost: f64,
    /// `migration.cost` per move of the optimal schedule.
    pub migration_cost: f64,
    /// True when no cluster's capacity binds, so the schedule is one every
    /// workload can follow at once; false when the value is the
    /// capacity-free relaxation, an upper bound.
    pub exact: bool,
    /// (step, cluster) pairs where the schedules together exceed
    /// allocatable CPU or memory and the baseline does not.
    pub capacity_conflicts: u64,
}

impl Optimum {
    /// Baseline total minus the saving: the optimal schedule's total cost.
    pub fn total_cost(&self) -> f64 {
        self.run_cost + self.migration_cost
    }
}

/// The optimum over the first `horizon` steps of `s` (at most `s.steps`).
pub(crate) fn optimum(s: &Scenario, grid: &Grid, horizon: usize) -> Optimum {
    let steps = horizon.min(s.steps);
    let k = s.clusters.len();
    let step_hours = s.step_ms as f64 / 3_600_000.0;
    let context = guardrail_context(s);
    let allowed: Vec<bool> = s
        .clusters
        .iter()
        .map(|c| context.allowed_targets.is_empty() || context.allowed_targets.contains(&c.name))
        .collect();

    let mut plan = Planner::new(steps, k);
    // Requests per [step][cluster], of the optimal schedules and of the baseline.
    let mut placed = vec![Resources::default(); steps * k];
    let mut stayed = vec![Resources::default(); steps * k];
    let mut out = Optimum {
        exact: true,
        ..Optimum::default()
    };
    let mut baseline_cost = 0.0;
    for (w, spec) in s.workloads.iter().enumerate() {
        let movable = !spec.pinned
            && context.selector.as_ref().is_none_or(|sel| {
                sel.matches(
                    &spec
                        .labels
                        .iter()
                        .map(|l| (l.key.clone(), l.value.clone()))
                        .collect(),
                )
            });
        plan.costs(s, grid, w, step_hours);
        baseline_cost += plan.prefix[spec.cluster * (steps + 1) + steps];
        if movable {
            plan.solve(s, &allowed);
        }
        let (run, moves) = plan.follow(s, spec.cluster, movable, &mut placed);
        out.run_cost += run;
        out.migrations += moves;
        for (t, r) in plan.requests.iter().enumerate() {
            add(&mut stayed[t * k + spec.cluster], *r);
        }
    }
    out.migration_cost = out.migrations as f64 * s.migration.cost;
    out.saving = baseline_cost - out.total_cost();
    for t in 0..steps {
        for c in 0..k {
            let a = grid.alloc(t, c);
            let over =
                |r: Resources| r.cpu_millis > a.cpu_millis || r.memory_bytes > a.memory_bytes;
            let (p, b) = (placed[t * k + c], stayed[t * k + c]);
            // The baseline's own overload is the scenario's, not the optimum's.
            if over(p) && (p.cpu_millis > b.cpu_millis || p.memory_bytes > b.memory_bytes) {
                out.capacity_conflicts += 1;
            }
        }
    }
    out.exact = out.capacity_conflicts == 0;
    out
}

fn add(total: &mut Resources, r: Resources) {
    total.cpu_millis = total.cpu_millis.saturating_add(r.cpu_millis);
    total.memory_bytes = total.memory_bytes.saturating_add(r.memory_bytes);
}

/// One workload's dynamic programme, its buffers reused across workloads.
struct Planner {
    steps: usize,
    clusters: usize,
    /// [cluster][t]: cost of running steps `0..t` at the cluster.
    prefix: Vec<f64>,
    /// [t][cluster]: least cost of steps `t..` for a workload at the
    /// cluster at step `t`, free to move.
    value: Vec<f64>,
    /// [t][cluster]: the target of the best move at step `t`, or [`STAY`].
    choice: Vec<u32>,
    /// [t]: the workload's requests.
    requests: Vec<Resources>,
}

impl Planner {
    fn new(steps: usize, clusters: usize) -> Self {
        Planner {
            steps,
            clusters,
            prefix: vec![0.0; clusters * (steps + 1)],
            value: vec![0.0; (steps + 1) * clusters],
            choice: vec![STAY; steps * clusters],
            requests: vec![Resources::default(); steps],
        }
    }

    /// Fills the prefix sums of workload `w`'s cost at every cluster.
    fn costs(&mut self, s: &Scenario, grid: &Grid, w: usize, step_hours: f64) {
        let n = self.steps + 1;
        for (t, r) in self.requests.iter_mut().enumerate() {
            *r = requests(s, w, t);
        }
        for c in 0..self.clusters {
            let row = &mut self.prefix[c * n..(c + 1) * n];
            row[0] = 0.0;
            for t in 0..self.steps {
                row[t + 1] = row[t] + cost(self.requests[t], grid.price(t, c)) * step_hours;
            }
        }
    }

    /// Backward induction from the last step. A move started at `t` from
    /// `c` to `q` costs the migration, `c`'s cost until it completes, then
    /// the value of `q` when it does (nothing after the horizon).
    fn solve(&mut self, s: &Scenario, allowed: &[bool]) {
        let (n, k) = (self.steps, self.clusters);
        let d = s.migration.duration_steps.max(1);
        let every = s.interval_steps.max(1);
        self.value[n * k..].fill(0.0);
        for t in (0..n).rev() {
            let done = (t + d).min(n);
            // The best and second-best arrival, so that the best target
            // other than the source is found in O(1).
            let (mut best, mut second) = ((f64::INFINITY, STAY), (f64::INFINITY, STAY));
            if t % every == 0 {
                for (q, _) in allowed.iter().enumerate().filter(|(_, a)| **a) {
                    let v = self.value[done * k + q];
                    if v < best.0 {
                        second = best;
                        best = (v, q as u32);
                    } else if v < second.0 {
                        second = (v, q as u32);
                    }
                }
            }
            for c in 0..k {
                let row = &self.prefix[c * (n + 1)..(c + 1) * (n + 1)];
                let stay = row[t + 1] - row[t] + self.value[(t + 1) * k + c];
                let (arrive, q) = if best.1 as usize == c { second } else { best };
                let go = s.migration.cost + row[done] - row[t] + arrive;
                let i = t * k + c;
                if q != STAY && go < stay {
                    self.value[i] = go;
                    self.choice[i] = q;
                } else {
                    self.value[i] = stay;
                    self.choice[i] = STAY;
                }
            }
        }
    }

    /// Walks the schedule from `start`, adding the workload's requests
    /// where it runs to `placed`; returns its run cost and moves.
    fn follow(
        &self,
        s: &Scenario,
        start: usize,
        movable: bool,
        placed: &mut [Resources],
    ) -> (f64, u64) {
        let (n, k) = (self.steps, self.clusters);
        let d = s.migration.duration_steps.max(1);
        let (mut t, mut c, mut moves) = (0, start, 0);
        let mut run = 0.0;
        while t < n {
            let q = if movable {
                self.choice[t * k + c]
            } else {
                STAY
            };
            let until = if q == STAY { t + 1 } else { (t + d).min(n) };
            let row = &self.prefix[c * (n + 1)..(c + 1) * (n + 1)];
            run += row[until] - row[t];
            for step in t..until {
                add(&mut placed[step * k + c], self.requests[step]);
            }
            if q != STAY {
                moves += 1;
                c = q as usize;
            }
            t = until;
        }
        (run, moves)
    }
}

#[cfg(test)]
mod tests;
