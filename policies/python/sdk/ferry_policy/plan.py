"""The greedy cost planner shared by the cost-driven policies.

For every workload outside its cooldown it prices the workload at its own
cluster and at every other ready cluster, keeps the targets that clear both
savings thresholds, and then hands out moves best saving first while tracking
capacity, so no two moves count on the same free room. A workload that moved
back and forth within the day (`settling`) stays. Each decision carries its
reasons: the two prices compared, the saving, and the hours until the saving
repays the workload's disruption cost when that is known. Same rules, order
and tie-breaks as the Rust SDK's `plan_moves`.
"""

from __future__ import annotations

from typing import Iterator, List, NamedTuple, Optional

from .cost import Capacity, hourly_cost_at
from .types import Cluster, Decision, Reasons, Snapshot, Workload


class Pricing:
    """How a policy sees the clusters: which ones a workload may move to and
    how it ranks them. Subclass it and override what differs; the money in a
    decision is always the plain price difference."""

    name = "pricing"
    """Text that starts each decision's reason."""

    def eligible(self, workload: Workload, cluster: Cluster) -> bool:
        """May `workload` move to `cluster` at all?"""
        return True

    def ranking_cost(self, workload: Workload, cluster: Cluster) -> Optional[float]:
        """The cost the policy ranks by: the plain hourly cost unless
        overridden (for example with a risk premium)."""
        return hourly_cost_at(workload, cluster)


def settling(workload: Workload) -> bool:
    """Has `workload` moved back and forth lately? Two moves within a day are
    a round trip: prices that swing that fast would only swing it back, so it
    stays until the day has passed, whatever the cooldown says."""
    return workload.moves_last_day >= 2


class _Target(NamedTuple):
    cluster: int
    current: float
    cost: float
    savings: float
    ranked_savings: float


def _clearing_targets(
    snapshot: Snapshot, pricing: Pricing, workload: Workload, source: int
) -> Iterator[_Target]:
    """The targets that clear both savings thresholds, in cluster order; none
    when the workload has no positive price at its own cluster."""
    limits = snapshot.thresholds
    home = snapshot.clusters[source]
    current = hourly_cost_at(workload, home)
    current_ranked = pricing.ranking_cost(workload, home)
    if current is None or current_ranked is None or not current > 0.0:
        return
    for i, cluster in enumerate(snapshot.clusters):
        if i == source or not cluster.ready or not pricing.eligible(workload, cluster):
            continue
        cost = hourly_cost_at(workload, cluster)
        if cost is None:
            continue
        ranked = pricing.ranking_cost(workload, cluster)
        if ranked is None:
            continue
        savings = current - cost
        ranked_savings = current_ranked - ranked
        if (
            savings >= limits.min_hourly_savings
            and savings / current >= limits.min_savings_ratio
            and savings > 0.0
            and ranked_savings > 0.0
        ):
            yield _Target(i, current, cost, savings, ranked_savings)


def plan_moves(snapshot: Snapshot, pricing: Pricing) -> List[Decision]:
    """Plans moves for `snapshot` under its thresholds."""
    limits = snapshot.thresholds
    if limits.max_migrations_per_cycle == 0:
        return []
    clusters = snapshot.clusters
    # A name given twice means its last cluster, as in the Rust SDK.
    index = {cluster.name: i for i, cluster in enumerate(clusters)}

    candidates = []
    for w, workload in enumerate(snapshot.workloads):
        since = workload.seconds_since_migration
        if (since is not None and since < limits.cooldown_seconds) or settling(workload):
            continue
        source = index.get(workload.cluster)
        if source is None:
            continue
        best = None
        for target in _clearing_targets(snapshot, pricing, workload, source):
            if best is None or target.ranked_savings > best:
                best = target.ranked_savings
        if best is not None:
            candidates.append((best, w, source))
    # Best saving first, ties by position. Savings are positive, never NaN.
    candidates.sort(key=lambda c: (-c[0], c[1]))

    capacity = Capacity(clusters)
    decisions: List[Decision] = []
    for _, w, source in candidates:
        workload = snapshot.workloads[w]
        targets = sorted(
            _clearing_targets(snapshot, pricing, workload, source),
            key=lambda t: (-t.ranked_savings, t.cluster),
        )
        target = next(
            (
                t
                for t in targets
                if capacity.fits(
                    clusters,
                    t.cluster,
                    workload.requests,
                    limits.max_target_cpu_utilization,
                    limits.max_target_memory_utilization,
                )
            ),
            None,
        )
        if target is None:
            continue
        capacity.record_move(source, target.cluster, workload.requests)
        to = clusters[target.cluster]
        percent = target.savings / target.current * 100.0
        decisions.append(
            Decision(
                namespace=workload.namespace,
                name=workload.name,
                from_cluster=workload.cluster,
                to_cluster=to.name,
                hourly_savings=target.savings,
                reason=(
                    f"{pricing.name}: {target.cost:.4f}/h at {to.name} instead of "
                    f"{target.current:.4f}/h at {workload.cluster} ({percent:.0f}% less)"
                ),
                reasons=Reasons(
                    source_hourly_cost=target.current,
                    target_hourly_cost=target.cost,
                    hourly_savings=target.savings,
                    payback_hours=(
                        None
                        if workload.disruption_cost is None
                        else workload.disruption_cost / target.savings
                    ),
                ),
            )
        )
        if len(decisions) >= limits.max_migrations_per_cycle:
            break
    return decisions
