//! `MigrationPolicy` (namespaced): which module decides, on what schedule,
//! within which thresholds, and whether decisions are carried out.
//!
//! The schema holds every rule it can express (ranges, patterns, enums, one
//! module source via CEL); [`super::validate_policy`] checks the rest and
//! converts the spec into what the control loop uses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use super::common::{LocalKeyRef, SourceAction, preserve_object};
use super::stateful::StatefulMoves;
use super::strategy::MigrationStrategy;

/// How many decisions `status.lastDecisions` keeps.
pub const MAX_LAST_DECISIONS: usize = 20;

/// How many hex digits of the module digest the `Module` column shows.
pub const DIGEST_SHORT_LEN: usize = 12;

/// A policy: a WebAssembly module that decides which workloads move, run on
/// a schedule, within thresholds.
// Every `printcolumn(...)` repeats the same keys, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ferry.dev",
    version = "v1alpha1",
    kind = "MigrationPolicy",
    plural = "migrationpolicies",
    namespaced,
    status = "MigrationPolicyStatus",
    derive = "PartialEq",
    shortname = "mpol",
    category = "ferry",
    doc = "A cost policy: a WebAssembly module deciding which workloads move to which peer cluster.",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.mode"),
    printcolumn(
        name = "Module",
        type_ = "string",
        json_path = ".status.moduleDigestShort",
        description = "First 12 hex digits of the sha256 of the loaded module"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Degraded")].status"#
    ),
    printcolumn(
        name = "Saving/h",
        type_ = "number",
        json_path = ".status.lastCycleHourlySavings",
        description = "Hourly saving the last completed cycle's accepted moves were estimated at"
    ),
    printcolumn(
        name = "Last Cycle",
        type_ = "date",
        json_path = ".status.lastCycleTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MigrationPolicySpec {
    /// Where the policy module (a WebAssembly component) comes from.
    pub module: ModuleSource,
    /// `DryRun` (the default) records decisions in status, Events and metrics
    /// and moves nothing; `Enforce` carries them out. Dry run is the default so
    /// that a new or edited policy never moves workloads by surprise.
    #[serde(default)]
    pub mode: PolicyMode,
    /// Time between two control cycles.
    #[serde(default = "default_interval")]
    pub interval: Duration,
    /// The workloads that may move. Absent: every workload in the policy's
    /// namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Limits every decision must respect; each has a default.
    #[serde(default)]
    pub thresholds: ThresholdsSpec,
    /// Free JSON handed to the module untouched (as JSON text).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schemars(schema_with = "preserve_object")]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// Sandbox limits of one evaluation.
    #[serde(default)]
    pub limits: LimitsSpec,
    /// May a move copy the Secrets a workload mounts to the target cluster.
    /// Off by default: a workload that needs Secrets is refused instead.
    #[serde(default)]
    pub allow_secret_copy: bool,
    /// What happens to the source workload once the target copy is ready.
    #[serde(default)]
    pub source_action: SourceAction,
    /// How each move hands the workload over: all at once (the default) or
    /// progressively, in steps with a pause and a health gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MigrationStrategy>,
    /// Whether StatefulSets, and Deployments that mount
    /// PersistentVolumeClaims, may move, and the Jobs that hand their
    /// data over. Off by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful: Option<StatefulMoves>,
    /// Names of the ClusterPeers this policy may move workloads to. Empty: all peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_clusters: Vec<String>,
}

fn default_interval() -> Duration {
    Duration::new("5m")
}

/// The module's bytes: exactly one of `configMapKeyRef`, `secretKeyRef`,
/// `url` or `oci`. `sha256` is required for the first three; for `oci` the
/// manifest digest pins the bytes, and a `sha256` given as well must match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "[has(self.configMapKeyRef), has(self.secretKeyRef), has(self.url), has(self.oci)].filter(x, x).size() == 1"
).message("set exactly one of configMapKeyRef, secretKeyRef, url or oci").reason(Reason::FieldValueInvalid))]
#[x_kube(validation = Rule::new("has(self.oci) || has(self.sha256)")
    .message("sha256 is required unless the module comes from oci").reason(Reason::FieldValueRequired))]
pub struct ModuleSource {
    /// A key of a ConfigMap in the policy's namespace whose `binaryData` holds the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<LocalKeyRef>,
    /// A key of a Secret in the policy's namespace holding the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<LocalKeyRef>,
    /// An https URL serving the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https://"))]
    pub url: Option<String>,
    /// A WebAssembly artifact in an OCI registry, run pinned by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciModuleSource>,
    /// The sha256 of the module bytes, 64 lowercase hex digits. A module
    /// whose digest differs is never loaded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^[0-9a-f]{64}$"))]
    pub sha256: String,
}

/// A module in an OCI registry (https only). A tag is resolved to a
/// manifest digest when the module is loaded, and the policy keeps running
/// that digest (`status.moduleReference`) until `reference` changes or the
/// operator loads the module anew. The Secrets named here are read in
/// Ferry's own namespace, never in the policy's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciModuleSource {
    /// `registry[:port]/repository:tag` or `registry[:port]/repository@sha256:<64 hex>`.
    #[schemars(regex(
        pattern = r"^(oci://)?[A-Za-z0-9.\-\[\]:]+/[a-z0-9._/-]+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?$"
    ))]
    pub reference: String,
    /// A `kubernetes.io/dockerconfigjson` Secret in Ferry's namespace with
    /// credentials for the registry. Absent: anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub pull_secret_name: Option<String>,
    /// A key of a Secret in Ferry's namespace holding a PEM CA bundle to
    /// trust for the registry instead of the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<LocalKeyRef>,
    /// Require a cosign-compatible signature by a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<OciVerify>,
}

/// The key a module's signature must verify with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciVerify {
    /// A key of a Secret in Ferry's namespace holding a PEM ECDSA P-256
    /// public key (as `cosign.pub`).
    pub public_key_secret_ref: LocalKeyRef,
}

/// `Enforce` or `DryRun`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PolicyMode {
    /// Carry accepted decisions out.
    Enforce,
    /// Record decisions only (the default).
    #[default]
    DryRun,
}

/// The thresholds, in the units people use (percent, currency per hour).
/// The operator converts them to fractions for the module.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ThresholdsSpec {
    /// Smallest saving per hour, in the operator's currency, worth a move.
    #[schemars(range(min = 0.0))]
    pub min_hourly_savings: f64,
    /// Smallest saving worth a move, as percent of the workload's current hourly cost.
    #[schemars(range(min = 0.0, max = 100.0))]
    pub min_savings_percent: f64,
    /// A target whose CPU utilisation (percent) would exceed this after the move is refused.
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_target_cpu_utilization_percent: f64,
    /// A target whose memory utilisation (percent) would exceed this after the move is refused.
    #[schemars(range(min = 0.0, max = 100.0))]
    pub max_target_memory_utilization_percent: f64,
    /// A workload moved less than this long ago does not move again.
    pub cooldown: Duration,
    /// Most moves started in one cycle.
    pub max_migrations_per_cycle: u32,
    /// Most migrations of this policy in progress at once.
    pub max_in_flight: u32,
    /// Cost of one move in the operator's currency (egress, warm-up, risk).
    #[schemars(range(min = 0.0))]
    pub migration_cost: f64,
    /// A move is allowed only when migrationCost / hourly savings is at most
    /// this many hours.
    #[schemars(range(min = 0.0))]
    pub max_payback_hours: f64,
    /// A move is allowed only when what it saves in a day (hourly savings ×
    /// 24) is at least this factor times its disruption cost, where the
    /// disruption cost is migrationCost × (1 + the workload's moves started
    /// in the last 24 hours). 0 turns the rule off.
    #[serde(skip_serializing_if = "off")]
    #[schemars(range(min = 0.0))]
    pub savings_per_disruption: f64,
    /// Most moves of one workload started in any 24 hours. 0: no limit.
    #[serde(skip_serializing_if = "no_limit")]
    pub max_moves_per_workload_per_day: u32,
}

// The rules added after the first release are left out of a spec while off,
// so a stored policy reads and writes back exactly as it was.
fn off(factor: &f64) -> bool {
    *factor == 0.0
}

fn no_limit(limit: &u32) -> bool {
    *limit == 0
}

impl Default for ThresholdsSpec {
    fn default() -> Self {
        ThresholdsSpec {
            min_hourly_savings: 0.05,
            min_savings_percent: 10.0,
            max_target_cpu_utilization_percent: 80.0,
            max_target_memory_utilization_percent: 80.0,
            cooldown: Duration::new("1h"),
            max_migrations_per_cycle: 5,
            max_in_flight: 10,
            migration_cost: 0.0,
            max_payback_hours: 24.0,
            savings_per_disruption: 0.0,
            max_moves_per_workload_per_day: 0,
        }
    }
}

/// Sandbox limits of one policy evaluation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct LimitsSpec {
    /// Wall-clock limit of one `decide` call (at most 30s).
    pub timeout: Duration,
    /// Most linear memory the module may grow to, in bytes (1 MiB to 1 GiB).
    #[schemars(range(min = 1_048_576, max = 1_073_741_824))]
    pub memory_bytes: u64,
    /// Fuel (roughly, WebAssembly instructions) of one call. Absent: no fuel
    /// limit, only the timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub fuel: Option<u64>,
}

impl Default for LimitsSpec {
    fn default() -> Self {
        LimitsSpec {
            timeout: Duration::new("1s"),
            memory_bytes: 64 * 1024 * 1024,
            fuel: None,
        }
    }
}

/// What the last cycles of the policy observed and decided.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationPolicyStatus {
    /// `ModuleLoaded`, `Ready` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// sha256 of the loaded module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_digest: Option<String>,
    /// For an OCI module, the reference it runs, pinned by manifest digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_reference: Option<String>,
    /// The first 12 hex digits of `moduleDigest`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_digest_short: Option<String>,
    /// When the last cycle finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle_time: Option<Time>,
    /// How long the last cycle took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle_duration_ms: Option<u64>,
    /// The hourly saving, in the operator's currency, that the module
    /// estimated for the moves the last completed cycle accepted (started
    /// under `Enforce`, would start under `DryRun`), rounded to 4 decimal
    /// places. Absent when the last cycle reached no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle_hourly_savings: Option<f64>,
    /// The most recent decisions, newest last (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub last_decisions: Vec<DecisionRecord>,
    /// Totals since the policy was created.
    #[serde(default)]
    pub counters: PolicyCounters,
}

/// One decision of the module and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// Namespace of the workload.
    pub namespace: String,
    /// Name of the workload.
    pub name: String,
    /// The cluster the workload runs in.
    pub from: String,
    /// The cluster the module wanted it in.
    pub to: String,
    /// The saving per hour the module claimed.
    pub hourly_savings: f64,
    /// The module's reason.
    pub reason: String,
    /// The replicas a contract v2 module asked to move (a partial move);
    /// absent: all. The migration moves the whole workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// The strategy a contract v2 module hinted: all-at-once or progressive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// A contract v2 module's structured reasons, as one line: the hourly
    /// costs compared, the savings, the payback and its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<String>,
    /// What Ferry did with it.
    pub outcome: DecisionOutcome,
    /// Why the guardrails refused it (only for `Refused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal_reason: Option<String>,
    /// When the decision was made.
    pub time: Time,
}

/// What became of a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DecisionOutcome {
    /// Passed the guardrails; a migration was started (mode Enforce).
    Accepted,
    /// Passed the guardrails; nothing was done (mode DryRun).
    WouldMigrate,
    /// Refused by the guardrails.
    Refused,
}

/// Totals since the policy was created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyCounters {
    /// Control cycles run.
    pub cycles: u64,
    /// Decisions returned by the module.
    pub decisions: u64,
    /// Migrations started (mode Enforce).
    pub migrations_started: u64,
    /// Decisions refused by the guardrails.
    pub refused: u64,
}

impl MigrationPolicyStatus {
    /// Appends a decision, dropping the oldest beyond [`MAX_LAST_DECISIONS`].
    pub fn record_decision(&mut self, record: DecisionRecord) {
        self.last_decisions.push(record);
        let excess = self.last_decisions.len().saturating_sub(MAX_LAST_DECISIONS);
        self.last_decisions.drain(..excess);
    }

    /// Sets `moduleDigest` and its short form together.
    pub fn set_module_digest(&mut self, digest: &str) {
        self.module_digest = Some(digest.to_owned());
        self.module_digest_short = Some(digest.chars().take(DIGEST_SHORT_LEN).collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> DecisionRecord {
        DecisionRecord {
            namespace: "apps".into(),
            name: name.into(),
            from: "a".into(),
            to: "b".into(),
            hourly_savings: 0.5,
            reason: "cheaper".into(),
            replicas: None,
            strategy: None,
            reasons: None,
            outcome: DecisionOutcome::WouldMigrate,
            refusal_reason: None,
            time: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn last_decisions_keep_the_newest_twenty() {
        let mut status = MigrationPolicyStatus::default();
        for i in 0..25 {
            status.record_decision(record(&format!("w{i}")));
        }
        assert_eq!(status.last_decisions.len(), MAX_LAST_DECISIONS);
        assert_eq!(status.last_decisions[0].name, "w5");
        assert_eq!(status.last_decisions[19].name, "w24");
    }

    #[test]
    fn module_digest_short_is_a_prefix() {
        let mut status = MigrationPolicyStatus::default();
        let digest = "ab".repeat(32);
        status.set_module_digest(&digest);
        assert_eq!(status.module_digest.as_deref(), Some(digest.as_str()));
        assert_eq!(status.module_digest_short.as_deref(), Some("abababababab"));
    }

    #[test]
    fn an_empty_spec_apart_from_the_module_gets_every_default() {
        let spec: MigrationPolicySpec = serde_json::from_value(serde_json::json!({
            "module": {"url": "https://example.invalid/p.wasm", "sha256": "0".repeat(64)},
        }))
        .unwrap();
        assert_eq!(spec.mode, PolicyMode::DryRun);
        assert_eq!(spec.interval.as_str(), "5m");
        assert_eq!(spec.thresholds, ThresholdsSpec::default());
        assert_eq!(spec.limits, LimitsSpec::default());
        assert_eq!(spec.source_action, SourceAction::ScaleToZero);
        assert!(!spec.allow_secret_copy);
        assert!(spec.parameters.is_empty());
    }
}
