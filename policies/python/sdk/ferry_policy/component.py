"""The glue between a policy's `decide` and the component's export.

componentize-py looks for a class named `WitWorld` in the policy's module;
`export(decide)` makes it. Bindings (`wit_world`) are generated from the WIT
at build time, so they are imported only inside the component: natively the
SDK runs and tests without them. It never catches anything but PolicyError:
a bug in a policy traps, as a panic does in Rust, and Ferry reports it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Callable, List

from .types import Decision, PolicyError, Reasons, Snapshot


class Level(IntEnum):
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


def log(level: Level, message: str) -> None:
    """Logs through Ferry's host when running as a component; natively a
    no-op, where there is no host to receive it."""
    try:
        from wit_world.imports import host  # type: ignore[import-not-found]
    except ImportError:
        return
    host.log(host.Level(int(level)), message)


def export(decide: Callable[[Snapshot], List[Decision]]) -> type:
    """The `WitWorld` class componentize-py exports, calling `decide`.

    `decide` takes the snapshot and returns a list of Decision, or raises
    PolicyError to refuse the snapshot with a message."""

    class WitWorld:
        def decide(self, input):  # noqa: A002 - the WIT's parameter name
            from componentize_py_types import Err  # type: ignore[import-not-found]
            from wit_world.imports import types  # type: ignore[import-not-found]

            try:
                decisions = decide(input)
            except PolicyError as err:
                raise Err(str(err)) from None
            return [_lower(types, d) for d in decisions]

    return WitWorld


def _lower(types, d: Decision):
    """The SDK's Decision as the bindings' record. The strategy goes by its
    name, so the SDK's enum and the generated one need not share values."""
    strategy = None if d.strategy is None else types.Strategy[d.strategy.name]
    return types.Decision(
        namespace=d.namespace,
        name=d.name,
        from_cluster=d.from_cluster,
        to_cluster=d.to_cluster,
        hourly_savings=float(d.hourly_savings),
        reason=d.reason,
        replicas=d.replicas,
        strategy=strategy,
        reasons=None if d.reasons is None else _lower_reasons(types, d.reasons),
    )


def _lower_reasons(types, r: Reasons):
    return types.Reasons(
        source_hourly_cost=float(r.source_hourly_cost),
        target_hourly_cost=float(r.target_hourly_cost),
        hourly_savings=float(r.hourly_savings),
        payback_hours=None if r.payback_hours is None else float(r.payback_hours),
        detail=r.detail,
    )
