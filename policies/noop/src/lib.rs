//! A policy that never moves anything: the baseline for benchmarks and a safe
//! module to start a `MigrationPolicy` with.

use ferry_policy_sdk::{Decision, Snapshot};

pub fn decide(_snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    Ok(Vec::new())
}

ferry_policy_sdk::policy!(decide);
