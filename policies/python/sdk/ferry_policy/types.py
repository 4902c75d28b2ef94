"""The records of contract v2 (`ferry:policy@2.0.0`), as Python dataclasses.

Field names and meanings are the WIT's (`policies/wit/v2/policy.wit`):
fractions for utilisations and ratios, cost per hour for prices, millicores
and bytes, grams of CO2 per kWh for carbon intensity. The host hands the
policy its own generated records with the same fields; the SDK only reads
attributes, so either kind works. Every field past the required ones has a
default, so a snapshot built by hand in a test names only what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import List, Optional


@dataclass
class Resources:
    cpu_millis: int = 0
    memory_bytes: int = 0


@dataclass
class Label:
    key: str
    value: str


@dataclass
class Cluster:
    name: str
    region: str = ""
    labels: List[Label] = field(default_factory=list)
    ready: bool = True
    allocatable: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)
    cpu_utilization: Optional[float] = None
    memory_utilization: Optional[float] = None
    cpu_core_hour_price: Optional[float] = None
    memory_gib_hour_price: Optional[float] = None
    carbon_intensity: Optional[float] = None
    """Grams of CO2 per kWh where the cluster runs, when a metric gives it."""


@dataclass
class Workload:
    namespace: str
    name: str
    kind: str = "Deployment"
    cluster: str = ""
    replicas: int = 1
    requests: Resources = field(default_factory=Resources)
    cpu_usage_millis: Optional[int] = None
    memory_usage_bytes: Optional[int] = None
    hourly_cost: Optional[float] = None
    labels: List[Label] = field(default_factory=list)
    seconds_since_migration: Optional[int] = None
    last_move_ms: Optional[int] = None
    """When the workload last arrived by a move, in ms since the epoch."""
    moves_last_day: int = 0
    """Moves of the workload within the last 24 hours."""
    moves_last_week: int = 0
    """Moves of the workload within the last 7 days."""
    disruption_cost: Optional[float] = None
    """What one move of the workload costs, in the cost currency, when known."""


@dataclass
class Thresholds:
    min_hourly_savings: float = 0.0
    min_savings_ratio: float = 0.0
    max_target_cpu_utilization: float = 0.8
    max_target_memory_utilization: float = 0.8
    cooldown_seconds: int = 0
    max_migrations_per_cycle: int = 10


@dataclass
class Snapshot:
    timestamp_ms: int = 0
    clusters: List[Cluster] = field(default_factory=list)
    workloads: List[Workload] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)
    parameters: str = ""


class Strategy(Enum):
    """How a move's replicas should arrive: all together, or a few at a time."""

    ALL_AT_ONCE = 0
    PROGRESSIVE = 1


@dataclass
class Reasons:
    """Why a move pays, as the policy compared it: Ferry shows these in
    `ferry policy eval`, the decision journal and the policy's status."""

    source_hourly_cost: float
    target_hourly_cost: float
    hourly_savings: float
    payback_hours: Optional[float] = None
    """Hours until the savings repay the disruption cost, when it is known."""
    detail: str = ""


@dataclass
class Decision:
    """One proposed move of a workload from one cluster to another: all of
    its replicas, or `replicas` of them (a partial move)."""

    namespace: str
    name: str
    from_cluster: str
    to_cluster: str
    hourly_savings: float
    reason: str = ""
    replicas: Optional[int] = None
    strategy: Optional[Strategy] = None
    reasons: Optional[Reasons] = None


class PolicyError(Exception):
    """Raised by a policy to refuse a snapshot: Ferry reports the message
    as the evaluation's error (the contract's `result` error case)."""


def label(labels: List[Label], key: str) -> Optional[str]:
    """The value of the first label named `key`, if any."""
    for item in labels:
        if item.key == key:
            return item.value
    return None
