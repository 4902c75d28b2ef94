"""The Python examples' logic, natively (no component, no host): the cases
of the Rust examples' unit tests. tests/policy_languages.rs compares the
built components with the Rust ones; these say what went wrong faster.

    python3 -m unittest discover -s policies/python/tests
"""

import importlib.util
import pathlib
import sys
import unittest
from dataclasses import fields

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "sdk"))

from ferry_policy import (  # noqa: E402
    Cluster,
    Label,
    PolicyError,
    Resources,
    Snapshot,
    Thresholds,
    Workload,
)

GIB = 1 << 30


def load(example):
    spec = importlib.util.spec_from_file_location(
        example.replace("-", "_"), HERE.parent / example / "app.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cheapest = load("cheapest-cluster")
spot_aware = load("spot-aware")


def cluster(name, core_hour, gib_hour, **fields):
    return Cluster(
        name=name,
        region=fields.pop("region", "region-1"),
        allocatable=fields.pop("allocatable", Resources(100_000, 400 * GIB)),
        cpu_core_hour_price=core_hour,
        memory_gib_hour_price=gib_hour,
        **fields,
    )


def workload(name, home, cpu_millis, memory_gib, **fields):
    return Workload(
        namespace="shop",
        name=name,
        cluster=home,
        replicas=2,
        requests=Resources(cpu_millis, memory_gib * GIB),
        **fields,
    )


def snapshot(clusters, workloads, **fields):
    return Snapshot(
        timestamp_ms=1_767_225_600_000,
        clusters=clusters,
        workloads=workloads,
        thresholds=fields.pop("thresholds", Thresholds()),
        parameters=fields.pop("parameters", "{}"),
    )


class CheapestCluster(unittest.TestCase):
    def test_moves_to_the_cheapest_ready_cluster(self):
        s = snapshot(
            [cluster("a", 0.05, 0.006), cluster("b", 0.03, 0.004), cluster("c", 0.02, 0.003)],
            [workload("web", "a", 4000, 8)],
        )
        [decision] = cheapest.decide(s)
        self.assertEqual(decision.to_cluster, "c")
        self.assertAlmostEqual(decision.hourly_savings, 0.248 - 0.104, delta=1e-9)

    def test_skips_unready_and_unpriced_clusters(self):
        s = snapshot(
            [
                cluster("a", 0.05, 0.006),
                cluster("b", 0.03, 0.004),
                cluster("c", 0.01, 0.001, ready=False),
                cluster("d", 0.01, None),
            ],
            [workload("web", "a", 4000, 8)],
        )
        self.assertEqual(cheapest.decide(s)[0].to_cluster, "b")

    def test_no_move_below_either_savings_threshold(self):
        s = snapshot(
            [cluster("a", 0.05, 0.006), cluster("b", 0.045, 0.006)],
            [workload("web", "a", 1000, 1)],
        )
        s.thresholds.min_savings_ratio = 0.2
        self.assertEqual(cheapest.decide(s), [])
        s.thresholds.min_savings_ratio = 0.0
        s.thresholds.min_hourly_savings = 1.0
        self.assertEqual(cheapest.decide(s), [])
        s.thresholds.min_hourly_savings = 0.0
        self.assertEqual(len(cheapest.decide(s)), 1)

    def test_respects_target_capacity_across_moves(self):
        small = cluster("b", 0.01, 0.001, allocatable=Resources(10_000, 100 * GIB))
        s = snapshot(
            [cluster("a", 0.05, 0.006), small],
            [workload(f"w{i}", "a", 4000, 1) for i in (1, 2, 3)],
        )
        self.assertEqual(len(cheapest.decide(s)), 2)

    def test_cooldown_and_cycle_cap_hold(self):
        s = snapshot(
            [cluster("a", 0.05, 0.006), cluster("b", 0.01, 0.001)],
            [
                workload("w1", "a", 4000, 8, seconds_since_migration=60),
                workload("w2", "a", 1000, 1),
                workload("w3", "a", 2000, 1),
            ],
            thresholds=Thresholds(cooldown_seconds=3600, max_migrations_per_cycle=1),
        )
        [decision] = cheapest.decide(s)
        self.assertEqual(decision.name, "w3")

    def test_states_its_reasons_and_the_payback_of_the_disruption(self):
        s = snapshot(
            [cluster("a", 0.05, 0.006), cluster("c", 0.02, 0.003)],
            [workload("web", "a", 4000, 8, disruption_cost=0.288)],
        )
        [decision] = cheapest.decide(s)
        reasons = decision.reasons
        self.assertAlmostEqual(reasons.source_hourly_cost, 0.248, delta=1e-9)
        self.assertAlmostEqual(reasons.target_hourly_cost, 0.104, delta=1e-9)
        self.assertAlmostEqual(reasons.hourly_savings, 0.144, delta=1e-9)
        # 0.288 to move, 0.144 an hour saved.
        self.assertAlmostEqual(reasons.payback_hours, 2.0, delta=1e-9)
        # Without a disruption cost there is no payback to state.
        s.workloads[0].disruption_cost = None
        self.assertIsNone(cheapest.decide(s)[0].reasons.payback_hours)

    def test_a_workload_that_moved_back_and_forth_today_stays(self):
        s = snapshot(
            [cluster("a", 0.05, 0.006), cluster("c", 0.02, 0.003)],
            [
                workload("bounced", "a", 4000, 8, moves_last_day=2),
                workload("moved-once", "a", 4000, 8, moves_last_day=1),
            ],
        )
        self.assertEqual([d.name for d in cheapest.decide(s)], ["moved-once"])


class Lowering(unittest.TestCase):
    """What `export` hands componentize-py: every v2 field of a decision,
    with the SDK's enum turned into the bindings' by name."""

    def test_a_decision_keeps_its_replicas_strategy_and_reasons(self):
        import enum
        import types as stdlib_types
        from dataclasses import make_dataclass

        from ferry_policy import Decision, Reasons, Strategy
        from ferry_policy.component import _lower

        bindings = stdlib_types.SimpleNamespace(
            Decision=make_dataclass("Decision", [f.name for f in fields(Decision)]),
            Reasons=make_dataclass("Reasons", [f.name for f in fields(Reasons)]),
            Strategy=enum.Enum("Strategy", {"ALL_AT_ONCE": 0, "PROGRESSIVE": 1}),
        )
        lowered = _lower(
            bindings,
            Decision("shop", "web", "a", "b", 1, replicas=3, strategy=Strategy.PROGRESSIVE,
                     reasons=Reasons(2, 1, 1, payback_hours=4, detail="why")),
        )
        self.assertEqual(lowered.replicas, 3)
        self.assertIs(lowered.strategy, bindings.Strategy.PROGRESSIVE)
        self.assertEqual(lowered.reasons.payback_hours, 4.0)
        self.assertEqual(lowered.reasons.detail, "why")
        self.assertIsInstance(lowered.hourly_savings, float)
        bare = _lower(bindings, Decision("shop", "web", "a", "b", 1.0))
        self.assertEqual((bare.replicas, bare.strategy, bare.reasons), (None, None, None))


def spot_clusters():
    return [
        cluster("home", 0.050, 0.006),
        cluster("spot", 0.030, 0.004, labels=[Label("ferry.dev/capacity-type", "spot")]),
        cluster("steady", 0.034, 0.0045),
        cluster("far", 0.010, 0.001, region="region-2"),
    ]


class SpotAware(unittest.TestCase):
    def test_the_risk_premium_can_outweigh_a_lower_spot_price(self):
        s = snapshot(spot_clusters(), [workload("web", "home", 4000, 8)],
                     parameters='{"allowedRegions": ["region-1"]}')
        [decision] = spot_aware.decide(s)
        self.assertEqual(decision.to_cluster, "steady")
        self.assertAlmostEqual(decision.hourly_savings, 0.248 - 0.172, delta=1e-9)

    def test_without_premium_spot_wins(self):
        s = snapshot(spot_clusters(), [workload("web", "home", 4000, 8)],
                     parameters='{"riskPremiums": {}, "allowedRegions": ["region-1"]}')
        self.assertEqual(spot_aware.decide(s)[0].to_cluster, "spot")

    def test_regions_outside_the_allowed_list_are_never_targets(self):
        s = snapshot(spot_clusters(), [workload("web", "home", 4000, 8)],
                     parameters='{"allowedRegions": ["region-1"]}')
        self.assertTrue(all(d.to_cluster != "far" for d in spot_aware.decide(s)))
        s.parameters = "{}"
        self.assertEqual(spot_aware.decide(s)[0].to_cluster, "far")

    def test_bad_parameters_are_refused_with_the_key(self):
        for text, key in [
            ('{"riskPremiums": {"spot": -1}}', "riskPremiums.spot"),
            ('{"riskPremium": {}}', "riskPremium"),
            ('{"allowedRegions": [1]}', "allowedRegions"),
            ('{"riskLabel": null}', "riskLabel"),
        ]:
            s = snapshot(spot_clusters(), [], parameters=text)
            with self.assertRaises(PolicyError) as refused:
                spot_aware.decide(s)
            self.assertIn(key, str(refused.exception))


if __name__ == "__main__":
    unittest.main()
