"""cheapest-cluster in Python: moves each workload to the cheapest eligible
ready cluster, when both savings thresholds hold and the target stays under
its utilisation limits. The same policy as the Rust crate of that name."""

from ferry_policy import Pricing, Snapshot, export, plan_moves


class PlainPrice(Pricing):
    name = "cheapest-cluster"


def decide(snapshot: Snapshot):
    return plan_moves(snapshot, PlainPrice())


WitWorld = export(decide)
