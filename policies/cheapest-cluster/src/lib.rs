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

#[cfg(target_arch = "wasm32")]
mod component {
    struct CheapestCluster;

    impl ferry_policy_sdk::Guest for CheapestCluster {
        fn decide(
            input: ferry_policy_sdk::Snapshot,
        ) -> Result<Vec<ferry_policy_sdk::Decision>, String> {
            ferry_policy_sdk::answer(input, super::decide)
        }
    }

    ferry_policy_sdk::export!(CheapestCluster with_types_in ferry_policy_sdk::bindings);
}

#[cfg(test)]
mod tests;
