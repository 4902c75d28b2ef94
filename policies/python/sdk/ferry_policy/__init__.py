"""Ferry's policy SDK for Python: the `ferry:policy@0.1.0` contract's records
as dataclasses, and the arithmetic every cost policy needs (`Pricing`,
`plan_moves`, `hourly_cost_at`, `Capacity`), so a policy module holds only
its own decision logic. The same helpers as the Rust SDK, with the same
results on the same snapshot.

A policy module defines `decide(snapshot) -> list[Decision]` and ends with
`WitWorld = export(decide)`; `scripts/build-policies` turns it into a
component with componentize-py.
"""

from .component import Level, export, log
from .cost import Capacity, hourly_cost_at, projected_utilization
from .params import parameters
from .plan import Pricing, plan_moves
from .types import (
    Cluster,
    Decision,
    Label,
    PolicyError,
    Resources,
    Snapshot,
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
    "Resources",
    "Snapshot",
    "Thresholds",
    "Workload",
    "export",
    "hourly_cost_at",
    "label",
    "log",
    "parameters",
    "plan_moves",
    "projected_utilization",
]
