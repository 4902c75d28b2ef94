"""Prices and capacity, in the contract's units.

The arithmetic is the Rust SDK's operation for operation (integers turned
into floats before dividing, saturating sums), so a policy written with
either SDK reaches the same decisions on the same snapshot.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from .types import Cluster, Resources, Workload

MILLIS_PER_CORE = 1000.0
BYTES_PER_GIB = 1024.0 * 1024.0 * 1024.0
U64_MAX = (1 << 64) - 1


def hourly_cost_at(workload: Workload, cluster: Cluster) -> Optional[float]:
    """What `workload` would cost per hour at `cluster`'s prices, from its
    requests; None when the cluster lacks a CPU or memory price (an unknown
    price is never taken for a free one)."""
    cpu = cluster.cpu_core_hour_price
    memory = cluster.memory_gib_hour_price
    if cpu is None or memory is None:
        return None
    cores = float(workload.requests.cpu_millis) / MILLIS_PER_CORE
    gib = float(workload.requests.memory_bytes) / BYTES_PER_GIB
    return cores * cpu + gib * memory


def _ratio(used: int, add: int, total: int) -> float:
    if total == 0:
        return float("inf")
    # float / float, as Rust does: Python's int / int would round the exact
    # quotient instead and differ past 2**53.
    return float(min(used + add, U64_MAX)) / float(total)


def projected_utilization(
    requested: Resources, extra: Resources, allocatable: Resources
) -> Tuple[float, float]:
    """Requested-over-allocatable after adding `extra`, as (cpu, memory)
    fractions. A cluster with nothing allocatable is full."""
    return (
        _ratio(requested.cpu_millis, extra.cpu_millis, allocatable.cpu_millis),
        _ratio(requested.memory_bytes, extra.memory_bytes, allocatable.memory_bytes),
    )


class Capacity:
    """Capacity bookkeeping across the moves one evaluation proposes, so two
    moves never both count on the same free room."""

    def __init__(self, clusters: List[Cluster]):
        self._requested = [
            [c.requested.cpu_millis, c.requested.memory_bytes] for c in clusters
        ]

    def fits(
        self,
        clusters: List[Cluster],
        index: int,
        extra: Resources,
        max_cpu: float,
        max_memory: float,
    ) -> bool:
        """Whether `extra` fits in cluster `index` under the given limits."""
        cpu, memory = self._requested[index]
        allocatable = clusters[index].allocatable
        return (
            _ratio(cpu, extra.cpu_millis, allocatable.cpu_millis) <= max_cpu
            and _ratio(memory, extra.memory_bytes, allocatable.memory_bytes)
            <= max_memory
        )

    def record_move(self, source: int, target: int, amount: Resources) -> None:
        """Records a move of `amount` from cluster `source` to `target`."""
        src, dst = self._requested[source], self._requested[target]
        src[0] = max(src[0] - amount.cpu_millis, 0)
        src[1] = max(src[1] - amount.memory_bytes, 0)
        dst[0] = min(dst[0] + amount.cpu_millis, U64_MAX)
        dst[1] = min(dst[1] + amount.memory_bytes, U64_MAX)

    def utilization(self, clusters: List[Cluster], index: int) -> Tuple[float, float]:
        """Current requested-over-allocatable of cluster `index`."""
        cpu, memory = self._requested[index]
        return projected_utilization(
            Resources(cpu, memory), Resources(0, 0), clusters[index].allocatable
        )
