//! Ferry's custom resources (group `ferry.dev`, version `v1alpha1`):
//! [`ClusterPeer`], [`MigrationPolicy`] and [`WorkloadMigration`].
//!
//! The Rust types are the source of truth: `crds/*.yaml` is generated from
//! them by `ferry crds --out-dir crds`, and a test fails when the files
//! drift. The schema carries every rule it can (ranges, patterns, enums, CEL);
//! [`validate_policy`] checks the rest without a client. Nothing here talks
//! to an API server.

mod admission;
mod cluster_peer;
mod common;
mod condition;
mod migration_policy;
mod reference;
mod stateful;
mod strategy;
mod validate;
mod workload_migration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use crate::units::duration::{DURATION_PATTERN, Duration, DurationError};
pub use crate::units::quantity::{QUANTITY_PATTERN, Quantity};
pub use admission::{
    AdmissionCaps, AdmissionSpec, AllowedToleration, ClaimAdmission, DependentsAdmission,
    ExposedServiceType, PodSecurityProfile, RateLimitSpec, ResourceCaps,
};
pub use cluster_peer::{
    ClusterPeer, ClusterPeerSpec, ClusterPeerStatus, InsecureSwitches, PROTECTED_NAMESPACES,
    PrometheusEndpoint,
};
pub use common::{LocalKeyRef, SecretKeyRef, SourceAction, Transport};
pub use condition::{
    find_condition, is_condition_true, new_condition, reasons, set_condition, status_str, types,
};
pub use migration_policy::{
    DIGEST_SHORT_LEN, DecisionOutcome, DecisionRecord, LimitsSpec, MAX_LAST_DECISIONS,
    MigrationPolicy, MigrationPolicySpec, MigrationPolicyStatus, ModuleSource, OciModuleSource,
    OciVerify, PolicyCounters, PolicyMode, ThresholdsSpec,
};
pub use reference::{REFERENCE_COMMAND, reference_markdown};
pub use stateful::{
    DEFAULT_HOOK_TIMEOUT, DataHook, DataHooks, HookKind, HookRun, HookState, MAX_HOOK_TIMEOUT,
    StatefulMoves,
};
pub use strategy::{GateQuery, MigrationStrategy, ReplicaCount, Rounding, StrategyType};
pub use validate::{
    FieldError, Guardrails, MAX_EVALUATION_TIMEOUT, MAX_MODULE_MEMORY_BYTES, MIN_INTERVAL,
    MIN_MODULE_MEMORY_BYTES, ModuleLocation, SandboxLimits, ValidatedPolicy,
    invalid_spec_condition, validate_policy,
};
pub use workload_migration::{
    AppliedObject, Intent, IntentAction, MigrationPhase, MigrationRole, PartialMove, PolicyRef,
    StepProgress, WorkloadMigration, WorkloadMigrationSpec, WorkloadMigrationStatus,
};

/// The API group of every Ferry resource.
pub const GROUP: &str = "ferry.dev";
/// The API version of every Ferry resource.
pub const VERSION: &str = "v1alpha1";

/// The command that regenerates `crds/*.yaml`.
pub const REGENERATE_COMMAND: &str = "cargo run -- crds --out-dir crds";

/// Writing a CRD as YAML failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the CustomResourceDefinition {name} as YAML")]
pub struct RenderError {
    pub name: String,
    #[source]
    pub source: serde_saphyr::ser::Error,
}

/// Every CRD, in a stable order (ClusterPeer, MigrationPolicy, WorkloadMigration).
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        ClusterPeer::crd(),
        MigrationPolicy::crd(),
        WorkloadMigration::crd(),
    ]
}

/// The file a CRD is written to: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// One CRD as a YAML document.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    serde_saphyr::to_string(crd).map_err(|source| RenderError {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })
}

/// Every CRD as one multi-document YAML stream, in the order of [`all`].
pub fn to_yaml_stream(crds: &[CustomResourceDefinition]) -> Result<String, RenderError> {
    let documents = crds.iter().map(to_yaml).collect::<Result<Vec<_>, _>>()?;
    Ok(documents.join("---\n"))
}

/// The content of a CRD's file under `crds/`: a header naming the command,
/// then the YAML document.
pub fn file_content(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    Ok(format!(
        "# Generated from src/crd by `{REGENERATE_COMMAND}`. Do not edit.\n{}",
        to_yaml(crd)?
    ))
}
