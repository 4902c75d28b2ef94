// {{name}}: moves each workload to the cheapest eligible ready cluster, when
// both savings thresholds hold and the target stays under its utilisation
// limits. Change `Prices` to rank or rule out clusters your way.
import { log } from 'ferry:policy/host@2.0.0';
import { Pricing, planMoves, policy } from '{{sdk}}';

class Prices extends Pricing {
  // Starts the reason of each decision.
  get name() {
    return '{{name}}';
  }
}

export const decide = policy((snapshot) => planMoves(snapshot, new Prices()), log);
