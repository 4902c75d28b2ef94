// cheapest-cluster in JavaScript: moves each workload to the cheapest
// eligible ready cluster, when both savings thresholds hold and the target
// stays under its utilisation limits. The same policy as the Rust crate.
import { log } from 'ferry:policy/host@2.0.0';
import { Pricing, planMoves, policy } from '../sdk/ferry-policy.js';

class PlainPrice extends Pricing {
  get name() {
    return 'cheapest-cluster';
  }
}

export const decide = policy((snapshot) => planMoves(snapshot, new PlainPrice()), log);
