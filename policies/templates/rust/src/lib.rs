//! {{name}}: moves each workload to the cheapest eligible ready cluster, when
//! both savings thresholds hold and the target stays under its utilisation
//! limits. Change `Pricing` to rank or rule out clusters your way.

use ferry_policy_sdk::{Decision, Pricing, Snapshot, plan_moves};

struct Prices;

impl Pricing for Prices {
    /// Starts the reason of each decision.
    fn name(&self) -> &str {
        "{{name}}"
    }
}

pub fn decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    Ok(plan_moves(snapshot, &Prices))
}

ferry_policy_sdk::policy!(decide);

#[cfg(test)]
mod tests {
    use ferry_policy_sdk::testing::{cluster, snapshot, workload};

    #[test]
    fn moves_to_the_cheaper_cluster() {
        let s = snapshot(
            vec![cluster("dear", 0.05, 0.006), cluster("cheap", 0.02, 0.003)],
            vec![workload("web", "dear", 2000, 4)],
        );
        let decisions = super::decide(&s).unwrap();
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions[0].to_cluster, "cheap");
    }
}
