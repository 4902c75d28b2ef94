//! A policy that never moves anything: the baseline for benchmarks and a safe
//! module to start a `MigrationPolicy` with.

use ferry_policy_sdk::{Decision, Snapshot};

pub fn decide(_snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    Ok(Vec::new())
}

#[cfg(target_arch = "wasm32")]
mod component {
    struct Noop;

    impl ferry_policy_sdk::Guest for Noop {
        fn decide(
            input: ferry_policy_sdk::Snapshot,
        ) -> Result<Vec<ferry_policy_sdk::Decision>, String> {
            ferry_policy_sdk::answer(input, super::decide)
        }
    }

    ferry_policy_sdk::export!(Noop with_types_in ferry_policy_sdk::bindings);
}
