"""The records of the `ferry:policy@0.1.0` contract, as Python dataclasses.

Field names and meanings are the WIT's (`policies/wit/policy.wit`): fractions
for utilisations and ratios, cost per hour for prices, millicores and bytes.
The host hands the policy its own generated records with the same fields; the
SDK only reads attributes, so either kind works. Fields a later contract adds
come with defaults here, so code written today keeps building.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class Decision:
    """One proposed move: the whole workload from one cluster to another."""

    namespace: str
    name: str
    from_cluster: str
    to_cluster: str
    hourly_savings: float
    reason: str = ""


class PolicyError(Exception):
    """Raised by a policy to refuse a snapshot: Ferry reports the message
    as the evaluation's error (the contract's `result` error case)."""


def label(labels: List[Label], key: str) -> Optional[str]:
    """The value of the first label named `key`, if any."""
    for item in labels:
        if item.key == key:
            return item.value
    return None
