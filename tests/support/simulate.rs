//! Running real compiled policies through the simulator, as the scenario
//! tests do.

use std::sync::atomic::{AtomicBool, AtomicU64};

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy, Report, Scenario};

/// `scenario` with each of `modules` (a name and its component bytes), under
/// generous limits.
pub fn run_modules(scenario: &Scenario, modules: &[(&str, Vec<u8>)]) -> Report {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let policies: Vec<NamedPolicy> = modules
        .iter()
        .map(|(name, bytes)| NamedPolicy {
            name: (*name).to_owned(),
            policy: engine.load(name, bytes, None).unwrap(),
        })
        .collect();
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let limits = Limits {
        fuel: Some(1_000_000_000),
        timeout: std::time::Duration::from_secs(300),
        ..Limits::default()
    };
    simulate::simulate(
        scenario,
        &engine,
        &policies,
        &limits,
        &Control {
            stop: &stop,
            progress: &progress,
        },
    )
}
