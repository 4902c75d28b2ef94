//! Moves each workload to the cheapest eligible ready cluster, when both
//! savings thresholds hold and the target stays under its utilisation limits.

use ferry_policy_sdk::{Decision, Pricing, Snapshot, plan_moves};

struct PlainPrice;

impl Pricing for PlainPrice {
    fn name(&self) -> &str {
        "cheapest-cluster"
    }
}

pub fn decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    Ok(plan_moves(snapshot, &PlainPrice))
}

ferry_policy_sdk::policy!(decide);

#[cfg(test)]
mod tests;
