//! Why a decision was refused: one typed reason per rule, with the numbers a
//! person needs to see why.

use std::fmt;

use serde::Serialize;

use crate::policy::Rejection;

/// The rule that refused a decision. The `Display` text is what a person
/// reads (status, Events, the simulator's report); the serialised form is
/// `{"rule": "<camelCase name>", ...fields}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "camelCase")]
pub enum Refusal {
    /// The decision does not hold against the snapshot (the host's
    /// validation, [`crate::policy::validate`]).
    Invalid { check: Rejection },
    /// The workload runs in another cluster than the one carrying out the
    /// verdict (it was moved away from here).
    NotLocal { cluster: String },
    /// The workload is outside the policy's `selector`.
    NotSelected,
    /// The workload is annotated `ferry.dev/pinned: "true"`.
    Pinned,
    /// The workload is already being moved.
    AlreadyMoving,
    /// The target is not in the policy's `targetClusters`.
    TargetNotAllowed,
    /// The workload moved less than `cooldown` ago.
    #[serde(rename_all = "camelCase")]
    Cooldown {
        seconds_since_migration: u64,
        cooldown_seconds: u64,
    },
    /// The workload started `maxMovesPerWorkloadPerDay` moves in the last
    /// 24 hours.
    #[serde(rename_all = "camelCase")]
    OverDailyMoveLimit { recent_moves: u32, limit: u32 },
    /// The workload's current cost is unknown, so the savings ratio cannot be
    /// checked.
    UnknownCurrentCost,
    /// The move saves less than `minHourlySavings`.
    #[serde(rename_all = "camelCase")]
    BelowMinHourlySavings { hourly_savings: f64, minimum: f64 },
    /// The move saves less than `minSavingsPercent` of the current cost.
    #[serde(rename_all = "camelCase")]
    BelowMinSavingsRatio { ratio: f64, minimum: f64 },
    /// `migrationCost / hourlySavings` exceeds `maxPaybackHours`.
    #[serde(rename_all = "camelCase")]
    PaybackTooLong {
        migration_cost: f64,
        hourly_savings: f64,
        max_payback_hours: f64,
    },
    /// A day's savings are less than `savingsPerDisruption` times the move's
    /// disruption cost.
    #[serde(rename_all = "camelCase")]
    BelowSavingsPerDisruption {
        hourly_savings: f64,
        disruption_cost: f64,
        recent_moves: u32,
        savings_per_disruption: f64,
    },
    /// After the move (and the moves accepted before it in this cycle, and
    /// those in flight towards the target), the target's requested over
    /// allocatable would exceed a utilisation limit.
    #[serde(rename_all = "camelCase")]
    TargetOverCapacity {
        cpu_utilization: f64,
        memory_utilization: f64,
        max_cpu_utilization: f64,
        max_memory_utilization: f64,
    },
    /// `maxMigrationsPerCycle` moves were already accepted in this cycle.
    OverCycleLimit { limit: u32 },
    /// `maxInFlight` migrations would be in progress at once.
    #[serde(rename_all = "camelCase")]
    OverInFlightLimit { in_flight: u32, limit: u32 },
}

impl Refusal {
    /// A short stable name, for counting refusals by rule.
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::Invalid { .. } => "invalid",
            Refusal::NotLocal { .. } => "notLocal",
            Refusal::NotSelected => "notSelected",
            Refusal::Pinned => "pinned",
            Refusal::AlreadyMoving => "alreadyMoving",
            Refusal::TargetNotAllowed => "targetNotAllowed",
            Refusal::Cooldown { .. } => "cooldown",
            Refusal::OverDailyMoveLimit { .. } => "overDailyMoveLimit",
            Refusal::UnknownCurrentCost => "unknownCurrentCost",
            Refusal::BelowMinHourlySavings { .. } => "belowMinHourlySavings",
            Refusal::BelowMinSavingsRatio { .. } => "belowMinSavingsRatio",
            Refusal::PaybackTooLong { .. } => "paybackTooLong",
            Refusal::BelowSavingsPerDisruption { .. } => "belowSavingsPerDisruption",
            Refusal::TargetOverCapacity { .. } => "targetOverCapacity",
            Refusal::OverCycleLimit { .. } => "overCycleLimit",
            Refusal::OverInFlightLimit { .. } => "overInFlightLimit",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Invalid { check } => write!(f, "invalid decision: {check}"),
            Refusal::NotLocal { cluster } => write!(
                f,
                "workload runs in {cluster} (it moved there); only {cluster} can move it again"
            ),
            Refusal::NotSelected => write!(f, "workload is not matched by the policy's selector"),
            Refusal::Pinned => write!(f, "workload is pinned (ferry.dev/pinned: \"true\")"),
            Refusal::AlreadyMoving => write!(f, "workload has a migration in progress"),
            Refusal::TargetNotAllowed => {
                write!(f, "toCluster is not in the policy's targetClusters")
            }
            Refusal::Cooldown {
                seconds_since_migration,
                cooldown_seconds,
            } => write!(
                f,
                "workload moved {seconds_since_migration}s ago, within its {cooldown_seconds}s cooldown"
            ),
            Refusal::OverDailyMoveLimit {
                recent_moves,
                limit,
            } => write!(
                f,
                "workload started {recent_moves} moves in the last 24h; maxMovesPerWorkloadPerDay is {limit}"
            ),
            Refusal::UnknownCurrentCost => write!(
                f,
                "the workload's current cost is unknown (no prices at its cluster), so minSavingsPercent cannot be checked"
            ),
            Refusal::BelowMinHourlySavings {
                hourly_savings,
                minimum,
            } => write!(
                f,
                "saves {hourly_savings:.4}/h, less than minHourlySavings ({minimum})"
            ),
            Refusal::BelowMinSavingsRatio { ratio, minimum } => write!(
                f,
                "saves {:.1}% of the current cost, less than minSavingsPercent ({:.1}%)",
                ratio * 100.0,
                minimum * 100.0
            ),
            Refusal::PaybackTooLong {
                migration_cost,
                hourly_savings,
                max_payback_hours,
            } => {
                if *hourly_savings > 0.0 {
                    write!(
                        f,
                        "pays back its cost ({migration_cost}) in {:.1}h, more than maxPaybackHours ({max_payback_hours})",
                        migration_cost / hourly_savings
                    )
                } else {
                    write!(
                        f,
                        "saves nothing, so its cost ({migration_cost}) never pays back"
                    )
                }
            }
            Refusal::BelowSavingsPerDisruption {
                hourly_savings,
                disruption_cost,
                recent_moves,
                savings_per_disruption,
            } => write!(
                f,
                "saves {:.4} a day, less than savingsPerDisruption ({savings_per_disruption}) × its disruption cost ({disruption_cost:.4}: migrationCost × (1 + {recent_moves} moves in the last 24h))",
                hourly_savings * 24.0
            ),
            Refusal::TargetOverCapacity {
                cpu_utilization,
                memory_utilization,
                max_cpu_utilization,
                max_memory_utilization,
            } => write!(
                f,
                "the target would be at {:.1}% CPU and {:.1}% memory requested, over its limits ({:.1}%, {:.1}%)",
                cpu_utilization * 100.0,
                memory_utilization * 100.0,
                max_cpu_utilization * 100.0,
                max_memory_utilization * 100.0
            ),
            Refusal::OverCycleLimit { limit } => write!(
                f,
                "maxMigrationsPerCycle ({limit}) moves were already accepted in this cycle"
            ),
            Refusal::OverInFlightLimit { in_flight, limit } => write!(
                f,
                "{in_flight} migrations are already in flight or accepted; maxInFlight is {limit}"
            ),
        }
    }
}
