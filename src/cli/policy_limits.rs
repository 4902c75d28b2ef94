//! The evaluation limits a policy author tries a module under: the same
//! flags, defaults and meaning for `eval`, `test`, `bench` and `check`, and
//! the defaults of `MigrationPolicy.spec.limits`.

use std::time::Duration;

use clap::Args;
use ferry::policy::Limits;

#[derive(Debug, Args)]
pub(super) struct LimitArgs {
    /// Deadline of one evaluation, instantiation included, for example
    /// `500ms`, `2s`.
    #[arg(long, env = "FERRY_TIMEOUT", value_name = "DURATION", value_parser = super::duration::parse_positive, default_value = "1s")]
    pub(super) timeout: Duration,
    /// Cap on the module's linear memory, for example `64Mi` or `1048576`.
    #[arg(long, env = "FERRY_MEMORY", value_name = "BYTES", value_parser = ferry::units::quantity::whole_bytes, default_value = "64Mi")]
    pub(super) memory: u64,
    /// Fuel budget for a deterministic cut-off; unlimited when absent.
    #[arg(long, env = "FERRY_FUEL", value_name = "UNITS")]
    pub(super) fuel: Option<u64>,
}

impl LimitArgs {
    /// The limits every evaluation of the command runs under.
    pub(super) fn limits(&self) -> Limits {
        Limits {
            timeout: self.timeout,
            memory_bytes: self.memory,
            fuel: self.fuel,
            ..Limits::default()
        }
    }
}
