"""spot-aware in Python: like cheapest-cluster, but it prices in the risk of
interruptible capacity and keeps workloads inside allowed regions. The same
policy as the Rust crate of that name.

A cluster's ranking price is its plain price times `1 + premium`, the premium
coming from the value of the cluster's `riskLabel`; the savings reported are
always the plain price difference.

Parameters (JSON, all optional):
  {"riskLabel": "ferry.dev/capacity-type",
   "riskPremiums": {"spot": 0.25},
   "allowedRegions": ["eu-west-1", "eu-central-1"]}
An empty `allowedRegions` allows every region.
"""

import math

from ferry_policy import PolicyError, Pricing, Snapshot, export, hourly_cost_at, label, plan_moves
from ferry_policy import params as p

KEYS = ("riskLabel", "riskPremiums", "allowedRegions")


class SpotAware(Pricing):
    name = "spot-aware"

    def __init__(self, text: str):
        given = p.parameters(text)
        p.only_keys(given, KEYS)
        self.risk_label = p.string(given, "riskLabel", "ferry.dev/capacity-type")
        self.risk_premiums = p.number_map(given, "riskPremiums", {"spot": 0.25})
        self.allowed_regions = p.string_list(given, "allowedRegions")
        for kind in sorted(self.risk_premiums):
            premium = self.risk_premiums[kind]
            if not math.isfinite(premium) or premium < 0.0:
                raise PolicyError(
                    f"riskPremiums.{kind} is {premium}: it must be a finite number >= 0"
                )

    def eligible(self, workload, cluster) -> bool:
        return not self.allowed_regions or cluster.region in self.allowed_regions

    def ranking_cost(self, workload, cluster):
        value = label(cluster.labels, self.risk_label)
        premium = self.risk_premiums.get(value, 0.0) if value is not None else 0.0
        cost = hourly_cost_at(workload, cluster)
        return None if cost is None else cost * (1.0 + premium)


def decide(snapshot: Snapshot):
    return plan_moves(snapshot, SpotAware(snapshot.parameters))


WitWorld = export(decide)
