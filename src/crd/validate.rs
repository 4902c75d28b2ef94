//! The checks of a `MigrationPolicy` spec that the schema cannot express, or
//! that must hold even where the API server did not enforce the schema (CEL
//! is not evaluated everywhere), and the conversion into what the control loop
//! uses. Pure: needs no client.

use std::fmt;
use std::time::Duration as StdDuration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};

use super::common::{LocalKeyRef, SourceAction};
use super::condition::{new_condition, reasons, types};
use super::migration_policy::{MigrationPolicySpec, PolicyMode};
use crate::contract::Thresholds;

/// Largest `limits.memoryBytes`: 1 GiB.
pub const MAX_MODULE_MEMORY_BYTES: u64 = 1 << 30;
/// Smallest `limits.memoryBytes`: 1 MiB.
pub const MIN_MODULE_MEMORY_BYTES: u64 = 1 << 20;
/// Longest `limits.timeout`.
pub const MAX_EVALUATION_TIMEOUT: StdDuration = StdDuration::from_secs(30);
/// Shortest `interval`.
pub const MIN_INTERVAL: StdDuration = StdDuration::from_secs(1);

/// One problem in a spec: the field's path and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field, from the object's root: `spec.thresholds.cooldown`.
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// A spec that passed [`validate_policy`], in the units the operator uses.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedPolicy {
    pub module: ModuleLocation,
    /// The expected sha256 of the module bytes (64 lowercase hex digits);
    /// absent only for an OCI module, which its manifest digest pins.
    pub sha256: Option<String>,
    pub mode: PolicyMode,
    pub interval: StdDuration,
    pub selector: Option<LabelSelector>,
    /// The thresholds handed to the module, as fractions.
    pub thresholds: Thresholds,
    /// The rules the contract does not carry; the guardrails apply them.
    pub guardrails: Guardrails,
    pub limits: SandboxLimits,
    /// `spec.parameters` as JSON text (`{}` when absent).
    pub parameters_json: String,
    pub allow_secret_copy: bool,
    pub source_action: SourceAction,
    /// How moves hand over; `None` for all at once.
    pub strategy: Option<super::MigrationStrategy>,
    /// Whether stateful workloads may move, with their hooks; `None`: not.
    pub stateful: Option<super::StatefulMoves>,
    /// Peers the policy may move workloads to; empty: all.
    pub target_clusters: Vec<String>,
}

/// Where the module's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleLocation {
    /// `binaryData[key]` of a ConfigMap in the policy's namespace.
    ConfigMap(LocalKeyRef),
    /// `data[key]` of a Secret in the policy's namespace.
    Secret(LocalKeyRef),
    /// An https URL.
    Url(String),
    /// An artifact in an OCI registry.
    Oci(super::migration_policy::OciModuleSource),
}

impl std::fmt::Display for ModuleLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleLocation::ConfigMap(r) => write!(f, "ConfigMap {} key {}", r.name, r.key),
            ModuleLocation::Secret(r) => write!(f, "Secret {} key {}", r.name, r.key),
            ModuleLocation::Url(url) => f.write_str(url),
            ModuleLocation::Oci(oci) => {
                write!(f, "oci://{}", oci.reference.trim_start_matches("oci://"))
            }
        }
    }
}

/// Guardrail settings of a policy beyond [`Thresholds`].
#[derive(Clone, Debug, PartialEq)]
pub struct Guardrails {
    /// Most migrations of the policy in progress at once.
    pub max_in_flight: u32,
    /// Cost of one move, in the operator's currency.
    pub migration_cost: f64,
    /// Longest allowed payback time of a move, in hours.
    pub max_payback_hours: f64,
    /// Least ratio of a move's saving over a day to its disruption cost
    /// ([`Guardrails::disruption_cost`]); 0: no such rule.
    pub savings_per_disruption: f64,
    /// Most moves of one workload started in any 24 hours; 0: no limit.
    pub max_moves_per_workload_per_day: u32,
}

impl Guardrails {
    /// The payback rule: a move is allowed only when
    /// `migrationCost / hourlySavings <= maxPaybackHours`. A move that saves
    /// nothing (or less) never pays back and is refused; a free move pays
    /// back at once.
    pub fn payback_allows(&self, hourly_savings: f64) -> bool {
        if !hourly_savings.is_finite() || hourly_savings <= 0.0 {
            return false;
        }
        // Multiplied rather than divided: no division by tiny savings.
        self.migration_cost <= self.max_payback_hours * hourly_savings
    }

    /// What moving a workload disrupts, in the operator's currency: the
    /// move's cost, once more for each move of the workload started in the
    /// last 24 hours, so that a workload that keeps moving must gain more
    /// from each further move.
    pub fn disruption_cost(&self, recent_moves: u32) -> f64 {
        self.migration_cost * (1.0 + f64::from(recent_moves))
    }

    /// The savings-per-disruption rule: a day's savings (`hourly_savings` ×
    /// 24) must be at least `savingsPerDisruption` × the disruption cost.
    /// Always true when the factor is 0.
    pub fn disruption_allows(&self, hourly_savings: f64, recent_moves: u32) -> bool {
        self.savings_per_disruption <= 0.0
            || hourly_savings * 24.0
                >= self.savings_per_disruption * self.disruption_cost(recent_moves)
    }
}

/// Sandbox limits of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxLimits {
    pub timeout: StdDuration,
    pub memory_bytes: u64,
    pub fuel: Option<u64>,
}

/// Checks a spec and converts it; every problem is reported, not only the first.
pub fn validate_policy(spec: &MigrationPolicySpec) -> Result<ValidatedPolicy, Vec<FieldError>> {
    let mut errors = Errors::default();
    // The problems are reported in the order of these checks.
    let module = check_module(spec, &mut errors);
    let interval = check_interval(spec, &mut errors);
    let cooldown = check_thresholds(spec, &mut errors);
    let timeout = check_limits(spec, interval, &mut errors);
    check_selection(spec, &mut errors);
    if let Some(strategy) = &spec.strategy {
        for (field, message) in strategy.problems() {
            errors.push(format!("spec.strategy.{field}"), message);
        }
    }
    if let Some(stateful) = &spec.stateful {
        for (field, message) in stateful.problems() {
            errors.push(format!("spec.stateful.{field}"), message);
        }
    }
    let parameters_json = parameters_json(spec, &mut errors);

    if !errors.0.is_empty() {
        return Err(errors.0);
    }
    // Every `None` below has pushed an error above.
    let (Some(module), Some(interval), Some(cooldown), Some(timeout)) =
        (module, interval, cooldown, timeout)
    else {
        return Err(errors.0);
    };
    Ok(into_validated(
        spec,
        module,
        interval,
        cooldown,
        timeout,
        parameters_json,
    ))
}

/// `spec.interval`: a duration of at least [`MIN_INTERVAL`]. The parsed
/// value even when too short, for the timeout's check.
fn check_interval(spec: &MigrationPolicySpec, errors: &mut Errors) -> Option<StdDuration> {
    let interval = errors.duration("spec.interval", spec.interval.to_std());
    if let Some(interval) = interval
        && interval < MIN_INTERVAL
    {
        errors.push(
            "spec.interval",
            "must be at least 1s; write for example \"30s\" or \"5m\"",
        );
    }
    interval
}

/// `spec.thresholds`: amounts not negative, percentages from 0 to 100, a
/// cooldown that parses (returned).
fn check_thresholds(spec: &MigrationPolicySpec, errors: &mut Errors) -> Option<StdDuration> {
    let t = &spec.thresholds;
    errors.non_negative("spec.thresholds.minHourlySavings", t.min_hourly_savings);
    errors.percent("spec.thresholds.minSavingsPercent", t.min_savings_percent);
    errors.percent(
        "spec.thresholds.maxTargetCpuUtilizationPercent",
        t.max_target_cpu_utilization_percent,
    );
    errors.percent(
        "spec.thresholds.maxTargetMemoryUtilizationPercent",
        t.max_target_memory_utilization_percent,
    );
    let cooldown = errors.duration("spec.thresholds.cooldown", t.cooldown.to_std());
    errors.non_negative("spec.thresholds.migrationCost", t.migration_cost);
    errors.non_negative("spec.thresholds.maxPaybackHours", t.max_payback_hours);
    errors.non_negative(
        "spec.thresholds.savingsPerDisruption",
        t.savings_per_disruption,
    );
    cooldown
}

/// `spec.limits`: a timeout above 0, at most [`MAX_EVALUATION_TIMEOUT`] and
/// shorter than a valid `interval` (returned); memory within bounds; fuel
/// not 0.
fn check_limits(
    spec: &MigrationPolicySpec,
    interval: Option<StdDuration>,
    errors: &mut Errors,
) -> Option<StdDuration> {
    let l = &spec.limits;
    let timeout = errors.duration("spec.limits.timeout", l.timeout.to_std());
    if let Some(timeout) = timeout {
        if timeout.is_zero() || timeout > MAX_EVALUATION_TIMEOUT {
            errors.push(
                "spec.limits.timeout",
                "must be more than 0 and at most 30s; write for example \"1s\" or \"500ms\"",
            );
        } else if let Some(interval) = interval
            && interval >= MIN_INTERVAL
            && timeout >= interval
        {
            errors.push(
                "spec.limits.timeout",
                format!(
                    "must be shorter than spec.interval ({}); shorten the timeout or lengthen the interval",
                    spec.interval
                ),
            );
        }
    }
    if !(MIN_MODULE_MEMORY_BYTES..=MAX_MODULE_MEMORY_BYTES).contains(&l.memory_bytes) {
        errors.push(
            "spec.limits.memoryBytes",
            format!(
                "is {}; must be between {MIN_MODULE_MEMORY_BYTES} (1 MiB) and {MAX_MODULE_MEMORY_BYTES} (1 GiB) bytes",
                l.memory_bytes
            ),
        );
    }
    if l.fuel == Some(0) {
        errors.push(
            "spec.limits.fuel",
            "must be at least 1; remove the field for no fuel limit",
        );
    }
    timeout
}

/// Which workloads and targets: `spec.selector` a valid label selector,
/// no empty name in `spec.targetClusters`.
fn check_selection(spec: &MigrationPolicySpec, errors: &mut Errors) {
    if let Some(selector) = &spec.selector
        && let Err(err) = kube::core::Selector::try_from(selector.clone())
    {
        errors.push(
            "spec.selector",
            format!("is not a valid label selector ({err}); operators are In, NotIn, Exists and DoesNotExist"),
        );
    }
    for (i, name) in spec.target_clusters.iter().enumerate() {
        if name.is_empty() {
            errors.push(
                format!("spec.targetClusters[{i}]"),
                "is empty; name a ClusterPeer or remove the entry",
            );
        }
    }
}

/// `spec.parameters` as JSON text; empty (with an error) when it cannot be
/// written.
fn parameters_json(spec: &MigrationPolicySpec, errors: &mut Errors) -> String {
    match serde_json::to_string(&spec.parameters) {
        Ok(json) => json,
        Err(err) => {
            errors.push(
                "spec.parameters",
                format!("cannot be written as JSON ({err})"),
            );
            String::new()
        }
    }
}

/// A checked spec in the units the operator uses: thresholds as fractions,
/// durations parsed.
fn into_validated(
    spec: &MigrationPolicySpec,
    module: ModuleLocation,
    interval: StdDuration,
    cooldown: StdDuration,
    timeout: StdDuration,
    parameters_json: String,
) -> ValidatedPolicy {
    let t = &spec.thresholds;
    let l = &spec.limits;
    ValidatedPolicy {
        module,
        sha256: Some(spec.module.sha256.clone()).filter(|sha| !sha.is_empty()),
        mode: spec.mode,
        interval,
        selector: spec.selector.clone(),
        thresholds: Thresholds {
            min_hourly_savings: t.min_hourly_savings,
            min_savings_ratio: t.min_savings_percent / 100.0,
            max_target_cpu_utilization: t.max_target_cpu_utilization_percent / 100.0,
            max_target_memory_utilization: t.max_target_memory_utilization_percent / 100.0,
            cooldown_seconds: cooldown.as_secs(),
            max_migrations_per_cycle: t.max_migrations_per_cycle,
        },
        guardrails: Guardrails {
            max_in_flight: t.max_in_flight,
            migration_cost: t.migration_cost,
            max_payback_hours: t.max_payback_hours,
            savings_per_disruption: t.savings_per_disruption,
            max_moves_per_workload_per_day: t.max_moves_per_workload_per_day,
        },
        limits: SandboxLimits {
            timeout,
            memory_bytes: l.memory_bytes,
            fuel: l.fuel,
        },
        parameters_json,
        allow_secret_copy: spec.allow_secret_copy,
        source_action: spec.source_action,
        strategy: spec.strategy.clone().filter(|s| s.is_progressive()),
        stateful: spec.stateful.clone().filter(|s| s.enabled),
        target_clusters: spec.target_clusters.clone(),
    }
}

/// The `Ready=False` condition, reason `InvalidSpec`, that lists the problems.
pub fn invalid_spec_condition(
    errors: &[FieldError],
    observed_generation: Option<i64>,
    now: &Time,
) -> Condition {
    // The API server caps a condition message at 32768 bytes.
    const MAX_MESSAGE: usize = 32_000;
    let mut message = match errors.len() {
        1 => "the spec has 1 problem: ".to_owned(),
        n => format!("the spec has {n} problems: "),
    };
    let listed = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    message.push_str(&listed);
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" …");
    }
    new_condition(
        types::READY,
        false,
        reasons::INVALID_SPEC,
        message,
        observed_generation,
        now,
    )
}

fn check_module(spec: &MigrationPolicySpec, errors: &mut Errors) -> Option<ModuleLocation> {
    let m = &spec.module;
    let sha = &m.sha256;
    // An OCI module is pinned by its manifest digest; a sha256 is optional.
    let sha_optional = m.oci.is_some() && sha.is_empty();
    if !sha_optional
        && (sha.len() != 64
            || !sha
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        errors.push(
            "spec.module.sha256",
            "must be 64 lowercase hex digits; compute it with `sha256sum policy.wasm`",
        );
    }
    let mut sources = Vec::new();
    if let Some(r) = &m.config_map_key_ref {
        check_key_ref("spec.module.configMapKeyRef", r, errors);
        sources.push(ModuleLocation::ConfigMap(r.clone()));
    }
    if let Some(r) = &m.secret_key_ref {
        check_key_ref("spec.module.secretKeyRef", r, errors);
        sources.push(ModuleLocation::Secret(r.clone()));
    }
    if let Some(url) = &m.url {
        let host = url.strip_prefix("https://").unwrap_or_default();
        if host.is_empty() || host.starts_with('/') {
            errors.push(
                "spec.module.url",
                format!("{url:?} is not an https URL; the module is fetched over https only (or use configMapKeyRef)"),
            );
        }
        sources.push(ModuleLocation::Url(url.clone()));
    }
    if let Some(oci) = &m.oci {
        check_oci(oci, errors);
        sources.push(ModuleLocation::Oci(oci.clone()));
    }
    match sources.len() {
        1 => sources.pop(),
        0 => {
            errors.push(
                "spec.module",
                "names no source; set exactly one of configMapKeyRef, secretKeyRef, url or oci",
            );
            None
        }
        _ => {
            errors.push(
                "spec.module",
                "names more than one source; keep exactly one of configMapKeyRef, secretKeyRef, url or oci",
            );
            None
        }
    }
}

/// The shape of an OCI reference (the registry client parses it fully) and
/// the Secret references beside it.
fn check_oci(oci: &super::migration_policy::OciModuleSource, errors: &mut Errors) {
    let reference = oci.reference.trim_start_matches("oci://");
    if reference.contains("://") {
        errors.push(
            "spec.module.oci.reference",
            format!("{:?} has a scheme other than oci://; write registry[:port]/repository:tag (https is always used)", oci.reference),
        );
    } else if !reference.contains('/') || !(reference.contains(':') || reference.contains('@')) {
        errors.push(
            "spec.module.oci.reference",
            format!("{:?} must be registry[:port]/repository:tag or registry[:port]/repository@sha256:<64 hex digits>", oci.reference),
        );
    }
    if oci.pull_secret_name.as_deref() == Some("") {
        errors.push(
            "spec.module.oci.pullSecretName",
            "is empty; name a kubernetes.io/dockerconfigjson Secret in Ferry's namespace, or leave it out",
        );
    }
    if let Some(r) = &oci.ca_secret_ref {
        check_key_ref("spec.module.oci.caSecretRef", r, errors);
    }
    if let Some(verify) = &oci.verify {
        check_key_ref(
            "spec.module.oci.verify.publicKeySecretRef",
            &verify.public_key_secret_ref,
            errors,
        );
    }
}

fn check_key_ref(path: &str, r: &LocalKeyRef, errors: &mut Errors) {
    if r.name.is_empty() {
        errors.push(
            format!("{path}.name"),
            "is empty; name the object holding the module",
        );
    }
    if r.key.is_empty() {
        errors.push(
            format!("{path}.key"),
            "is empty; name the key holding the module",
        );
    }
}

#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            path: path.into(),
            message: message.into(),
        });
    }

    fn duration(
        &mut self,
        path: &str,
        parsed: Result<StdDuration, super::DurationError>,
    ) -> Option<StdDuration> {
        parsed.map_err(|err| self.push(path, err.to_string())).ok()
    }

    fn non_negative(&mut self, path: &str, value: f64) {
        if !(value.is_finite() && value >= 0.0) {
            self.push(path, format!("is {value}; must be a number of at least 0"));
        }
    }

    fn percent(&mut self, path: &str, value: f64) {
        if !(value.is_finite() && (0.0..=100.0).contains(&value)) {
            self.push(
                path,
                format!("is {value}; must be a percentage from 0 to 100 (write 15 for 15 %)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Duration, ModuleSource, ThresholdsSpec};

    fn spec() -> MigrationPolicySpec {
        serde_json::from_value(serde_json::json!({
            "module": {"url": "https://policies.example/cheapest.wasm", "sha256": "a".repeat(64)},
        }))
        .unwrap()
    }

    fn paths(spec: &MigrationPolicySpec) -> Vec<String> {
        validate_policy(spec)
            .expect_err("spec should be invalid")
            .into_iter()
            .map(|e| e.path)
            .collect()
    }

    #[test]
    fn a_strategy_is_checked_field_by_field_and_all_at_once_carries_none() {
        let mut bad = spec();
        bad.strategy = Some(
            serde_json::from_value(serde_json::json!({
                "type": "Progressive", "pause": "soon", "step": "0%",
                "gate": [{"name": "errors", "query": "up"}],
            }))
            .unwrap(),
        );
        assert_eq!(
            paths(&bad),
            [
                "spec.strategy.step",
                "spec.strategy.pause",
                "spec.strategy.gate[0].below"
            ]
        );
        let mut all_at_once = spec();
        all_at_once.strategy = Some(serde_json::from_value(serde_json::json!({})).unwrap());
        assert_eq!(validate_policy(&all_at_once).unwrap().strategy, None);
    }

    #[test]
    fn defaults_convert_to_the_contract_defaults_in_fractions() {
        let valid = validate_policy(&spec()).unwrap();
        let expected = Thresholds {
            min_hourly_savings: 0.05,
            ..Thresholds::default()
        };
        assert_eq!(valid.thresholds, expected);
        assert_eq!(valid.interval, StdDuration::from_secs(300));
        assert_eq!(valid.limits.timeout, StdDuration::from_secs(1));
        assert_eq!(valid.limits.memory_bytes, 64 << 20);
        assert_eq!(valid.parameters_json, "{}");
        assert_eq!(
            valid.module,
            ModuleLocation::Url("https://policies.example/cheapest.wasm".into())
        );
        assert_eq!(valid.guardrails.max_in_flight, 10);
    }

    #[test]
    fn percents_become_fractions_and_cooldown_seconds() {
        let mut s = spec();
        s.thresholds = ThresholdsSpec {
            min_savings_percent: 15.0,
            max_target_cpu_utilization_percent: 70.0,
            cooldown: Duration::new("1h30m"),
            ..ThresholdsSpec::default()
        };
        let t = validate_policy(&s).unwrap().thresholds;
        assert!((t.min_savings_ratio - 0.15).abs() < 1e-12);
        assert!((t.max_target_cpu_utilization - 0.70).abs() < 1e-12);
        assert_eq!(t.cooldown_seconds, 5400);
    }

    #[test]
    fn parameters_are_handed_over_as_json_text() {
        let mut s = spec();
        s.parameters
            .insert("preferRegion".into(), serde_json::json!("eu"));
        assert_eq!(
            validate_policy(&s).unwrap().parameters_json,
            r#"{"preferRegion":"eu"}"#
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_field_path() {
        let mut s = spec();
        s.thresholds.min_hourly_savings = -1.0;
        s.thresholds.max_target_memory_utilization_percent = 120.0;
        s.thresholds.cooldown = Duration::new("an hour");
        s.limits.memory_bytes = 4 << 30;
        assert_eq!(
            paths(&s),
            [
                "spec.thresholds.minHourlySavings",
                "spec.thresholds.maxTargetMemoryUtilizationPercent",
                "spec.thresholds.cooldown",
                "spec.limits.memoryBytes",
            ]
        );
    }

    #[test]
    fn timeout_must_be_capped_and_shorter_than_the_interval() {
        let mut s = spec();
        s.limits.timeout = Duration::new("1m");
        assert_eq!(paths(&s), ["spec.limits.timeout"]);
        s.limits.timeout = Duration::new("10s");
        s.interval = Duration::new("5s");
        let errors = validate_policy(&s).unwrap_err();
        assert!(
            errors[0].message.contains("shorter than spec.interval"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn module_needs_exactly_one_source() {
        let mut s = spec();
        s.module = ModuleSource {
            oci: None,
            config_map_key_ref: None,
            secret_key_ref: None,
            url: None,
            sha256: "a".repeat(64),
        };
        assert_eq!(paths(&s), ["spec.module"]);
    }

    #[test]
    fn the_disruption_rules_are_off_by_default_and_refuse_bad_numbers() {
        let valid = validate_policy(&spec()).unwrap();
        assert_eq!(valid.guardrails.savings_per_disruption, 0.0);
        assert_eq!(valid.guardrails.max_moves_per_workload_per_day, 0);
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let mut s = spec();
            s.thresholds.savings_per_disruption = bad;
            assert_eq!(paths(&s), ["spec.thresholds.savingsPerDisruption"], "{bad}");
        }
        let s: MigrationPolicySpec = serde_json::from_value(serde_json::json!({
            "module": {"url": "https://policies.example/cheapest.wasm", "sha256": "a".repeat(64)},
            "thresholds": {"savingsPerDisruption": 3, "maxMovesPerWorkloadPerDay": 2},
        }))
        .unwrap();
        let g = validate_policy(&s).unwrap().guardrails;
        assert_eq!(
            (g.savings_per_disruption, g.max_moves_per_workload_per_day),
            (3.0, 2)
        );
        // A negative count is not a count.
        let negative = serde_json::from_value::<MigrationPolicySpec>(serde_json::json!({
            "module": {"url": "https://policies.example/cheapest.wasm", "sha256": "a".repeat(64)},
            "thresholds": {"maxMovesPerWorkloadPerDay": -1},
        }));
        assert!(negative.is_err());
    }

    #[test]
    fn disruption_rule() {
        let g = Guardrails {
            max_in_flight: 1,
            migration_cost: 2.0,
            max_payback_hours: 24.0,
            savings_per_disruption: 3.0,
            max_moves_per_workload_per_day: 0,
        };
        // A day of 0.25/h is 6 = 3 × 2: allowed; one recent move makes it 12.
        assert_eq!(g.disruption_cost(0), 2.0);
        assert_eq!(g.disruption_cost(2), 6.0);
        assert!(g.disruption_allows(0.25, 0));
        assert!(!g.disruption_allows(0.25, 1));
        assert!(g.disruption_allows(0.5, 1));
        assert!(!g.disruption_allows(f64::NAN, 0));
    }

    #[test]
    fn payback_rule() {
        let g = Guardrails {
            max_in_flight: 1,
            migration_cost: 2.0,
            max_payback_hours: 24.0,
            savings_per_disruption: 0.0,
            max_moves_per_workload_per_day: 0,
        };
        assert!(g.payback_allows(0.1)); // 20 h
        assert!(!g.payback_allows(0.05)); // 40 h
        assert!(!g.payback_allows(0.0));
        assert!(!g.payback_allows(-1.0));
        let free = Guardrails {
            migration_cost: 0.0,
            ..g
        };
        assert!(free.payback_allows(0.001));
    }

    #[test]
    fn invalid_spec_condition_lists_every_problem() {
        let errors = vec![
            FieldError {
                path: "spec.a".into(),
                message: "is bad".into(),
            },
            FieldError {
                path: "spec.b".into(),
                message: "is worse".into(),
            },
        ];
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let c = invalid_spec_condition(&errors, Some(3), &now);
        assert_eq!(c.type_, "Ready");
        assert_eq!(c.status, "False");
        assert_eq!(c.reason, "InvalidSpec");
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(
            c.message,
            "the spec has 2 problems: spec.a: is bad; spec.b: is worse"
        );
    }
}
