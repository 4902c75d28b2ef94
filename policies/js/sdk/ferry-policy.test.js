// The JavaScript SDK's planner, natively under Node (no component, no host):
// the cases of cheapest-cluster's Rust unit tests, with the records in the
// component model's JavaScript form (u64 as BigInt). tests/policy_languages.rs
// compares the built components with the Rust ones; these say what went
// wrong faster. Run: node --test policies/js/sdk/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { PolicyError, Pricing, onlyKeys, parameters, planMoves } from './ferry-policy.js';

const GIB = 1n << 30n;

class PlainPrice extends Pricing {
  get name() {
    return 'cheapest-cluster';
  }
}

const cluster = (name, cpu, memory, fields = {}) => ({
  name,
  region: 'region-1',
  labels: [],
  ready: true,
  allocatable: { cpuMillis: 100_000n, memoryBytes: 400n * GIB },
  requested: { cpuMillis: 0n, memoryBytes: 0n },
  cpuCoreHourPrice: cpu,
  memoryGibHourPrice: memory,
  ...fields,
});

const workload = (name, home, cpuMillis, memoryGib, fields = {}) => ({
  namespace: 'shop',
  name,
  kind: 'Deployment',
  cluster: home,
  replicas: 2,
  requests: { cpuMillis: BigInt(cpuMillis), memoryBytes: BigInt(memoryGib) * GIB },
  labels: [],
  ...fields,
});

const snapshot = (clusters, workloads) => ({
  timestampMs: 1_767_225_600_000n,
  clusters,
  workloads,
  thresholds: {
    minHourlySavings: 0,
    minSavingsRatio: 0,
    maxTargetCpuUtilization: 0.8,
    maxTargetMemoryUtilization: 0.8,
    cooldownSeconds: 0n,
    maxMigrationsPerCycle: 10,
  },
  parameters: '{}',
});

const decide = (s) => planMoves(s, new PlainPrice());

test('moves to the cheapest ready cluster', () => {
  const s = snapshot(
    [cluster('a', 0.05, 0.006), cluster('b', 0.03, 0.004), cluster('c', 0.02, 0.003)],
    [workload('web', 'a', 4000, 8)],
  );
  const [decision, ...rest] = decide(s);
  assert.equal(rest.length, 0);
  assert.equal(decision.toCluster, 'c');
  assert.ok(Math.abs(decision.hourlySavings - (0.248 - 0.104)) < 1e-9);
});

test('skips unready and unpriced clusters', () => {
  const s = snapshot(
    [
      cluster('a', 0.05, 0.006),
      cluster('b', 0.03, 0.004),
      cluster('c', 0.01, 0.001, { ready: false }),
      cluster('d', 0.01, undefined),
    ],
    [workload('web', 'a', 4000, 8)],
  );
  assert.equal(decide(s)[0].toCluster, 'b');
});

test('no move below either savings threshold', () => {
  const s = snapshot(
    [cluster('a', 0.05, 0.006), cluster('b', 0.045, 0.006)],
    [workload('web', 'a', 1000, 1)],
  );
  s.thresholds.minSavingsRatio = 0.2;
  assert.deepEqual(decide(s), []);
  s.thresholds.minSavingsRatio = 0;
  s.thresholds.minHourlySavings = 1.0;
  assert.deepEqual(decide(s), []);
  s.thresholds.minHourlySavings = 0;
  assert.equal(decide(s).length, 1);
});

test('respects target capacity across moves', () => {
  const small = cluster('b', 0.01, 0.001, {
    allocatable: { cpuMillis: 10_000n, memoryBytes: 100n * GIB },
  });
  const s = snapshot(
    [cluster('a', 0.05, 0.006), small],
    [1, 2, 3].map((i) => workload(`w${i}`, 'a', 4000, 1)),
  );
  assert.equal(decide(s).length, 2);
});

test('cooldown and cycle cap hold', () => {
  const s = snapshot(
    [cluster('a', 0.05, 0.006), cluster('b', 0.01, 0.001)],
    [
      workload('w1', 'a', 4000, 8, { secondsSinceMigration: 60n }),
      workload('w2', 'a', 1000, 1),
      workload('w3', 'a', 2000, 1),
    ],
  );
  s.thresholds.cooldownSeconds = 3600n;
  s.thresholds.maxMigrationsPerCycle = 1;
  const decisions = decide(s);
  assert.equal(decisions.length, 1);
  assert.equal(decisions[0].name, 'w3');
});

test('states its reasons and the payback of the disruption', () => {
  const s = snapshot(
    [cluster('a', 0.05, 0.006), cluster('c', 0.02, 0.003)],
    [workload('web', 'a', 4000, 8, { disruptionCost: 0.288 })],
  );
  const { reasons } = decide(s)[0];
  assert.ok(Math.abs(reasons.sourceHourlyCost - 0.248) < 1e-9);
  assert.ok(Math.abs(reasons.targetHourlyCost - 0.104) < 1e-9);
  assert.ok(Math.abs(reasons.hourlySavings - 0.144) < 1e-9);
  // 0.288 to move, 0.144 an hour saved.
  assert.ok(Math.abs(reasons.paybackHours - 2.0) < 1e-9);
  // Without a disruption cost there is no payback to state.
  s.workloads[0].disruptionCost = undefined;
  assert.equal(decide(s)[0].reasons.paybackHours, undefined);
});

test('a workload that moved back and forth today stays', () => {
  const s = snapshot(
    [cluster('a', 0.05, 0.006), cluster('c', 0.02, 0.003)],
    [
      workload('bounced', 'a', 4000, 8, { movesLastDay: 2 }),
      workload('moved-once', 'a', 4000, 8, { movesLastDay: 1 }),
    ],
  );
  assert.deepEqual(
    decide(s).map((d) => d.name),
    ['moved-once'],
  );
});

test('parameters are a JSON object with known keys only', () => {
  assert.deepEqual(parameters('  '), {});
  assert.throws(() => parameters('[1]'), PolicyError);
  assert.throws(() => parameters('{nope'), PolicyError);
  assert.throws(() => onlyKeys({ riskPremium: 1 }, ['riskPremiums']), /riskPremium/);
});
