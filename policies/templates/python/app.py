"""{{name}}: moves each workload to the cheapest eligible ready cluster, when
both savings thresholds hold and the target stays under its utilisation
limits. Change `Prices` to rank or rule out clusters your way."""

from ferry_policy import Pricing, Snapshot, export, plan_moves


class Prices(Pricing):
    # Starts the reason of each decision.
    name = "{{name}}"


def decide(snapshot: Snapshot):
    return plan_moves(snapshot, Prices())


WitWorld = export(decide)
