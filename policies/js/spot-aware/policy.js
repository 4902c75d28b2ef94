// spot-aware in JavaScript: like cheapest-cluster, but it prices in the risk
// of interruptible capacity and keeps workloads inside allowed regions. The
// same policy as the Rust crate.
//
// A cluster's ranking price is its plain price times `1 + premium`, the
// premium coming from the value of the cluster's `riskLabel`; the savings
// reported are always the plain price difference.
//
// Parameters (JSON, all optional):
//   {"riskLabel": "ferry.dev/capacity-type",
//    "riskPremiums": {"spot": 0.25},
//    "allowedRegions": ["eu-west-1", "eu-central-1"]}
// An empty `allowedRegions` allows every region.
import { log } from 'ferry:policy/host@2.0.0';
import {
  PolicyError,
  Pricing,
  hourlyCostAt,
  isSome,
  label,
  onlyKeys,
  parameters,
  planMoves,
  policy,
} from '../sdk/ferry-policy.js';

const KEYS = ['riskLabel', 'riskPremiums', 'allowedRegions'];

class SpotAware extends Pricing {
  constructor(text) {
    super();
    const given = parameters(text);
    onlyKeys(given, KEYS);
    this.riskLabel = 'riskLabel' in given ? given.riskLabel : 'ferry.dev/capacity-type';
    if (typeof this.riskLabel !== 'string') {
      throw new PolicyError('invalid parameters: riskLabel must be a string');
    }
    const premiums = 'riskPremiums' in given ? given.riskPremiums : { spot: 0.25 };
    if (premiums === null || typeof premiums !== 'object' || Array.isArray(premiums)) {
      throw new PolicyError('invalid parameters: riskPremiums must be an object of numbers');
    }
    this.riskPremiums = new Map(Object.entries(premiums));
    for (const kind of [...this.riskPremiums.keys()].sort()) {
      const premium = this.riskPremiums.get(kind);
      if (typeof premium !== 'number') {
        throw new PolicyError(`invalid parameters: riskPremiums.${kind} must be a number`);
      }
      if (!Number.isFinite(premium) || premium < 0.0) {
        throw new PolicyError(`riskPremiums.${kind} is ${premium}: it must be a finite number >= 0`);
      }
    }
    this.allowedRegions = 'allowedRegions' in given ? given.allowedRegions : [];
    if (!Array.isArray(this.allowedRegions) || !this.allowedRegions.every((r) => typeof r === 'string')) {
      throw new PolicyError('invalid parameters: allowedRegions must be a list of strings');
    }
  }

  get name() {
    return 'spot-aware';
  }

  eligible(_workload, cluster) {
    return this.allowedRegions.length === 0 || this.allowedRegions.includes(cluster.region);
  }

  rankingCost(workload, cluster) {
    const value = label(cluster.labels, this.riskLabel);
    const premium = value !== undefined && this.riskPremiums.has(value) ? this.riskPremiums.get(value) : 0.0;
    const cost = hourlyCostAt(workload, cluster);
    return isSome(cost) ? cost * (1.0 + premium) : undefined;
  }
}

export const decide = policy((snapshot) => planMoves(snapshot, new SpotAware(snapshot.parameters)), log);
