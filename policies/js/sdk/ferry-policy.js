// Ferry's policy SDK for JavaScript: contract v2 (`ferry:policy@2.0.0`) and
// the arithmetic every cost policy needs (`Pricing`, `planMoves`, `settling`,
// `hourlyCostAt`, `Capacity`), so a policy module holds only its own
// decision logic. The same helpers as the Rust SDK, giving the same
// decisions on the same snapshot; it must never reach for anything outside
// the snapshot (no clock, no randomness), so a decision is reproducible.
//
// A policy module is an ES module that exports `decide(snapshot)` wrapped by
// `policy()`; `scripts/build-policies` turns it into a component with
// componentize-js. The records arrive as the component model's JavaScript
// form: camelCase fields, `u64` as BigInt, an absent option as undefined.
// The SDK reads them as they are and never needs the bindings, so it runs
// and is tested under plain Node as well.
//
// Contract v2 gives each workload its move history (`lastMoveMs`,
// `movesLastDay`, `movesLastWeek`) and `disruptionCost`, and each cluster
// its `carbonIntensity` (grams of CO2 per kWh). A decision may carry
// `reasons` (see `reasons()`), `replicas` for a partial move, and a
// `strategy` (see `Strategy`).

const MILLIS_PER_CORE = 1000.0;
const BYTES_PER_GIB = 1024.0 * 1024.0 * 1024.0;
const U64_MAX = (1n << 64n) - 1n;

/** Refuses a snapshot: Ferry reports the message as the evaluation's error. */
export class PolicyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PolicyError';
  }
}

/** A `u64` field as a BigInt (the bindings give BigInt; tests may give numbers). */
export function u64(value) {
  return typeof value === 'bigint' ? value : BigInt(value);
}

/** An option field: null or undefined is "none". */
export function isSome(value) {
  return value !== undefined && value !== null;
}

/** How a move's replicas should arrive: the contract's enum values. */
export const Strategy = Object.freeze({
  allAtOnce: 'all-at-once',
  progressive: 'progressive',
});

/**
 * A decision's structured reasons: the hourly costs compared and the saving,
 * with the hours until the saving repays the disruption cost when it is
 * known (`paybackHours`) and free text (`detail`).
 */
export function reasons({ sourceHourlyCost, targetHourlyCost, hourlySavings, paybackHours, detail = '' }) {
  return { sourceHourlyCost, targetHourlyCost, hourlySavings, paybackHours, detail };
}

/**
 * Has `workload` moved back and forth lately? Two moves within a day are a
 * round trip: prices that swing that fast would only swing it back, so it
 * stays until the day has passed, whatever the cooldown says.
 */
export function settling(workload) {
  return Number(workload.movesLastDay ?? 0) >= 2;
}

/** The value of the first label named `key`, or undefined. */
export function label(labels, key) {
  const found = labels.find((l) => l.key === key);
  return found === undefined ? undefined : found.value;
}

/**
 * What `workload` would cost per hour at `cluster`'s prices, from its
 * requests; undefined when the cluster lacks a CPU or memory price (an
 * unknown price is never taken for a free one).
 */
export function hourlyCostAt(workload, cluster) {
  const cpu = cluster.cpuCoreHourPrice;
  const memory = cluster.memoryGibHourPrice;
  if (!isSome(cpu) || !isSome(memory)) return undefined;
  const cores = Number(u64(workload.requests.cpuMillis)) / MILLIS_PER_CORE;
  const gib = Number(u64(workload.requests.memoryBytes)) / BYTES_PER_GIB;
  return cores * cpu + gib * memory;
}

function ratio(used, add, total) {
  if (total === 0n) return Infinity;
  const sum = used + add;
  return Number(sum > U64_MAX ? U64_MAX : sum) / Number(total);
}

/**
 * Requested-over-allocatable after adding `extra`, as [cpu, memory]
 * fractions. A cluster with nothing allocatable is full.
 */
export function projectedUtilization(requested, extra, allocatable) {
  return [
    ratio(u64(requested.cpuMillis), u64(extra.cpuMillis), u64(allocatable.cpuMillis)),
    ratio(u64(requested.memoryBytes), u64(extra.memoryBytes), u64(allocatable.memoryBytes)),
  ];
}

/**
 * Capacity bookkeeping across the moves one evaluation proposes, so two
 * moves never both count on the same free room.
 */
export class Capacity {
  constructor(clusters) {
    this.requested = clusters.map((c) => ({
      cpuMillis: u64(c.requested.cpuMillis),
      memoryBytes: u64(c.requested.memoryBytes),
    }));
  }

  /** Whether `extra` fits in cluster `index` under the given limits. */
  fits(clusters, index, extra, maxCpu, maxMemory) {
    const [cpu, memory] = projectedUtilization(
      this.requested[index],
      extra,
      clusters[index].allocatable,
    );
    return cpu <= maxCpu && memory <= maxMemory;
  }

  /** Records a move of `amount` from cluster `from` to cluster `to`. */
  recordMove(from, to, amount) {
    const cpu = u64(amount.cpuMillis);
    const memory = u64(amount.memoryBytes);
    const source = this.requested[from];
    source.cpuMillis = source.cpuMillis > cpu ? source.cpuMillis - cpu : 0n;
    source.memoryBytes = source.memoryBytes > memory ? source.memoryBytes - memory : 0n;
    const target = this.requested[to];
    const addCpu = target.cpuMillis + cpu;
    const addMemory = target.memoryBytes + memory;
    target.cpuMillis = addCpu > U64_MAX ? U64_MAX : addCpu;
    target.memoryBytes = addMemory > U64_MAX ? U64_MAX : addMemory;
  }

  /** Current requested-over-allocatable of cluster `index`. */
  utilization(clusters, index) {
    return projectedUtilization(
      this.requested[index],
      { cpuMillis: 0n, memoryBytes: 0n },
      clusters[index].allocatable,
    );
  }
}

/**
 * How a policy sees the clusters: which ones a workload may move to and how
 * it ranks them. Extend it and override what differs; the money in a
 * decision is always the plain price difference.
 */
export class Pricing {
  /** Text that starts each decision's reason. */
  get name() {
    return 'pricing';
  }

  /** May `workload` move to `cluster` at all? */
  eligible(_workload, _cluster) {
    return true;
  }

  /** The cost the policy ranks by: the plain hourly cost unless overridden. */
  rankingCost(workload, cluster) {
    return hourlyCostAt(workload, cluster);
  }
}

/**
 * The targets that clear both savings thresholds, in cluster order; none when
 * the workload has no positive price at its own cluster.
 */
function clearingTargets(snapshot, pricing, workload, source) {
  const limits = snapshot.thresholds;
  const home = snapshot.clusters[source];
  const current = hourlyCostAt(workload, home);
  const currentRanked = pricing.rankingCost(workload, home);
  const found = [];
  if (!isSome(current) || !isSome(currentRanked) || !(current > 0.0)) return found;
  snapshot.clusters.forEach((cluster, i) => {
    if (i === source || !cluster.ready || !pricing.eligible(workload, cluster)) return;
    const cost = hourlyCostAt(workload, cluster);
    if (!isSome(cost)) return;
    const ranked = pricing.rankingCost(workload, cluster);
    if (!isSome(ranked)) return;
    const savings = current - cost;
    const rankedSavings = currentRanked - ranked;
    if (
      savings >= limits.minHourlySavings &&
      savings / current >= limits.minSavingsRatio &&
      savings > 0.0 &&
      rankedSavings > 0.0
    ) {
      found.push({ cluster: i, current, cost, savings, rankedSavings });
    }
  });
  return found;
}

/** Plans moves for `snapshot` under its thresholds; returns decisions. */
export function planMoves(snapshot, pricing) {
  const limits = snapshot.thresholds;
  const cap = Number(limits.maxMigrationsPerCycle);
  if (cap === 0) return [];
  const clusters = snapshot.clusters;
  // A name given twice means its last cluster, as in the Rust SDK.
  const index = new Map();
  clusters.forEach((c, i) => index.set(c.name, i));
  const cooldown = u64(limits.cooldownSeconds);

  const candidates = [];
  snapshot.workloads.forEach((workload, w) => {
    const since = workload.secondsSinceMigration;
    if ((isSome(since) && u64(since) < cooldown) || settling(workload)) return;
    const source = index.get(workload.cluster);
    if (source === undefined) return;
    let best;
    for (const t of clearingTargets(snapshot, pricing, workload, source)) {
      if (best === undefined || t.rankedSavings > best) best = t.rankedSavings;
    }
    if (best !== undefined) candidates.push({ workload: w, source, best });
  });
  // Best saving first, ties by position. Savings are positive, never NaN.
  candidates.sort((a, b) => b.best - a.best || a.workload - b.workload);

  const capacity = new Capacity(clusters);
  const decisions = [];
  for (const candidate of candidates) {
    const workload = snapshot.workloads[candidate.workload];
    const targets = clearingTargets(snapshot, pricing, workload, candidate.source);
    targets.sort((a, b) => b.rankedSavings - a.rankedSavings || a.cluster - b.cluster);
    const target = targets.find((t) =>
      capacity.fits(
        clusters,
        t.cluster,
        workload.requests,
        limits.maxTargetCpuUtilization,
        limits.maxTargetMemoryUtilization,
      ),
    );
    if (target === undefined) continue;
    capacity.recordMove(candidate.source, target.cluster, workload.requests);
    const to = clusters[target.cluster];
    const percent = (target.savings / target.current) * 100.0;
    decisions.push({
      namespace: workload.namespace,
      name: workload.name,
      fromCluster: workload.cluster,
      toCluster: to.name,
      hourlySavings: target.savings,
      reason:
        `${pricing.name}: ${target.cost.toFixed(4)}/h at ${to.name} instead of ` +
        `${target.current.toFixed(4)}/h at ${workload.cluster} (${percent.toFixed(0)}% less)`,
      reasons: reasons({
        sourceHourlyCost: target.current,
        targetHourlyCost: target.cost,
        hourlySavings: target.savings,
        paybackHours: isSome(workload.disruptionCost)
          ? workload.disruptionCost / target.savings
          : undefined,
      }),
    });
    if (decisions.length >= cap) break;
  }
  return decisions;
}

/** Parses `snapshot.parameters` as a JSON object; empty text is `{}`. */
export function parameters(text) {
  if (text.trim() === '') return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new PolicyError(`invalid parameters: ${err.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new PolicyError('invalid parameters: expected a JSON object');
  }
  return value;
}

/** Refuses any key of `params` not in `allowed`, as serde's deny_unknown_fields does. */
export function onlyKeys(params, allowed) {
  for (const key of Object.keys(params)) {
    if (!allowed.includes(key)) {
      throw new PolicyError(
        `invalid parameters: unknown field \`${key}\`, expected one of ${allowed.map((k) => `\`${k}\``).join(', ')}`,
      );
    }
  }
}

/** Logs through Ferry's host when running as a component (set by `policy`). */
let hostLog = () => {};

/** Log levels of the contract's `host.log`. */
export const Level = Object.freeze({
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  error: 'error',
});

export function log(level, message) {
  hostLog(level, message);
}

/**
 * Wraps a policy's `decide(snapshot) -> decisions` as the component's
 * export. A PolicyError becomes the contract's error case; anything else
 * thrown is a bug and traps, as a panic does in Rust. `hostLogFn` is the
 * `log` import of `ferry:policy/host`, which only the module itself can
 * import (the SDK must run natively too).
 */
export function policy(decide, hostLogFn) {
  if (hostLogFn) hostLog = hostLogFn;
  return (snapshot) => {
    try {
      return decide(snapshot);
    } catch (err) {
      if (err instanceof PolicyError) throw err.message;
      throw err;
    }
  };
}
