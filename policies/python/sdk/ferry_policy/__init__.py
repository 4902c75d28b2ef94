"""Ferry's policy SDK for Python: the records of contract v2
(`ferry:policy@2.0.0`) as dataclasses, and the arithmetic every cost policy
needs (`Pricing`, `plan_moves`, `settling`, `hourly_cost_at`, `Capacity`), so
a policy module holds only its own decision logic. The same helpers as the
Rust SDK, with the same results on the same snapshot.

A decision may carry `Reasons` (the prices compared, the saving, the payback
of the disruption), a replica count for a partial move and a `Strategy` hint;
a snapshot carries each workload's move history and disruption cost and each
cluster's carbon intensity.

A policy module defines `decide(snapshot) -> list[Decision]` and ends with
`WitWorld = export(decide)`; `scripts/build-policies` turns it into a
component with componentize-py.
"""

from .component import Level, export, log
from .cost import Capacity, hourly_cost_at, projected_utilization
from .params import parameters
from .plan import Pricing, plan_moves, settling
from .types import (
    Cluster,
    Decision,
    Label,
    PolicyError,
    Reasons,
    Resources,
    Snapshot,
    Strategy,
    Thresholds,
    Workload,
    label,
)

__all__ = [
    "Capacity",
    "Cluster",
    "Decision",
    "Label",
    "Level",
    "PolicyError",
    "Pricing",
    "Reasons",
    "Resources",
    "Snapshot",
    "Strategy",
    "Thresholds",
    "Workload",
    "export",
    "hourly_cost_at",
    "label",
    "log",
    "parameters",
    "plan_moves",
    "projected_utilization",
    "settling",
]
