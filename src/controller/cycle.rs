//! One policy cycle: validate → load the module → build the snapshot →
//! evaluate → guardrails → act by mode → record. Each step that can fail
//! says so in the policy's status, and nothing is written to a peer or a
//! workload unless the policy enforces and the operator is not in dry run.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::ListParams;
use kube::core::SelectorExt;
use kube::{Api, ResourceExt};

use super::Context;
use super::error::chain;
use super::in_flight;
use super::module::Reload;
use crate::contract::{Label, Snapshot, Workload};
use crate::crd::{MigrationStrategy, PolicyMode, ValidatedPolicy};
use crate::guardrails::{self, Verdict};
use crate::metrics;
use crate::migration::{self, MigrationRequest, StartOutcome};
use crate::policy::{Evaluation, Limits};
use crate::snapshot::{self, Member, Terms};

/// Clusters whose metrics are read at once.
const METRICS_CONCURRENCY: usize = 8;

/// Why a cycle did not get to a verdict. Each becomes a condition.
#[derive(Debug)]
pub enum Skipped {
    /// The spec is invalid: nothing runs until it changes.
    InvalidSpec(String),
    /// No module could be loaded (and none was running).
    NoModule {
        reason: &'static str,
        message: String,
    },
    /// The own cluster's metrics are unusable: no decision on guesses.
    NoMetrics(String),
    /// The module failed; the class is the policy error class.
    PolicyFailed {
        class: &'static str,
        message: String,
    },
    /// The cluster's API failed while building the snapshot.
    Api(String),
}

impl Skipped {
    /// The error class counted in `ferry_errors`: the policy error class
    /// when the module failed.
    pub fn class(&self) -> &'static str {
        match self {
            Skipped::InvalidSpec(_) => "invalid_spec",
            Skipped::NoModule { .. } => "module",
            Skipped::NoMetrics(_) => "metrics",
            Skipped::PolicyFailed { class, .. } => class,
            Skipped::Api(_) => "api",
        }
    }

    /// The reason of the `Ready=False` condition and of the Event.
    pub fn reason(&self) -> &'static str {
        match self {
            Skipped::InvalidSpec(_) => "InvalidSpec",
            Skipped::NoModule { reason, .. } => reason,
            Skipped::NoMetrics(_) => "MetricsUnavailable",
            Skipped::PolicyFailed { .. } => "PolicyFailed",
            Skipped::Api(_) => "ApiError",
        }
    }

    /// The condition's and the Event's message.
    pub fn message(&self) -> String {
        match self {
            Skipped::NoMetrics(message) => format!("cycle skipped: {message}"),
            Skipped::InvalidSpec(message)
            | Skipped::NoModule { message, .. }
            | Skipped::PolicyFailed { message, .. }
            | Skipped::Api(message) => message.clone(),
        }
    }

    /// Whether it sets `Degraded=True`: all but an invalid spec, which waits
    /// for a spec change rather than for a retry.
    pub fn degrades(&self) -> bool {
        !matches!(self, Skipped::InvalidSpec(_))
    }
}

/// What a cycle produced.
#[derive(Debug)]
pub struct Outcome {
    pub snapshot: Arc<Snapshot>,
    pub evaluation: Evaluation,
    pub verdict: Verdict,
    /// Accepted decisions carried out (Enforce), with the migration names.
    pub started: Vec<(String, String)>,
    /// Accepted decisions that could not be started, with the reason.
    pub start_failures: Vec<(String, String)>,
    pub mode: PolicyMode,
    pub module_sha256: String,
}

/// Builds what the policy sees: this cluster and every peer, with metrics,
/// and the policy namespace's Deployments that its selector picks.
pub(crate) async fn build_snapshot(
    ctx: &Context,
    namespace: &str,
    validated: &ValidatedPolicy,
) -> Result<(Snapshot, guardrails::Context), Skipped> {
    let own = ctx.config.cluster_name.clone();
    let peers = ctx.peers.all();
    let mut names = vec![own.clone()];
    names.extend(peers.iter().map(|p| p.name.clone()));
    let metrics = metrics::read(&*ctx.metrics, &names, Some(&own), None, METRICS_CONCURRENCY).await;
    if !metrics.own_cluster_is_usable() {
        let why = match metrics.clusters.get(&own) {
            Some(Err(err)) => err.with_root_cause(),
            _ => "its prices or capacity are missing or stale".to_owned(),
        };
        return Err(Skipped::NoMetrics(format!(
            "no usable metrics for this cluster ({own}): {why}"
        )));
    }
    let mut members = vec![Member {
        name: own.clone(),
        region: ctx.config.region.clone(),
        labels: Label::from_map(&ctx.config.labels),
        reachable: true,
    }];
    members.extend(peers.iter().map(|peer| Member {
        name: peer.name.clone(),
        region: peer.spec.region.clone(),
        labels: Label::from_map(&peer.spec.labels),
        reachable: peer.ready,
    }));

    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), namespace);
    let listed = deployments
        .list(&ListParams::default())
        .await
        .map_err(|err| {
            Skipped::Api(format!(
                "listing Deployments in {namespace}: {}",
                chain(&err)
            ))
        })?;
    let mut listed: Vec<(Deployment, &str)> = listed
        .items
        .into_iter()
        .map(|d| (d, "Deployment"))
        .collect();
    if validated.stateful.is_some() {
        // StatefulSets move only when the policy enables stateful moves; a
        // Deployment of the same name keeps it.
        let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), namespace);
        let sets = sets.list(&ListParams::default()).await.map_err(|err| {
            Skipped::Api(format!(
                "listing StatefulSets in {namespace}: {}",
                chain(&err)
            ))
        })?;
        let deployments: Vec<Deployment> = listed.iter().map(|(d, _)| d.clone()).collect();
        for view in stateful_set_views(&sets.items, &deployments) {
            listed.push((view, "StatefulSet"));
        }
    }
    let usage = metrics.workloads.as_ref().and_then(|w| w.as_ref().ok());
    let now = jiff::Timestamp::now();
    let mut context = guardrails::Context::for_policy(validated)
        .map_err(|err| Skipped::InvalidSpec(err.to_string()))?;
    let mut workloads = Vec::new();
    for (deployment, kind) in &listed {
        if context
            .selector
            .as_ref()
            .is_some_and(|s| !s.matches(deployment.labels()))
        {
            continue;
        }
        let Some(mut workload) = as_workload(deployment, &own, usage)
            .filter(|w| members.iter().any(|m| m.name == w.cluster))
        else {
            continue;
        };
        workload.kind = (*kind).to_owned();
        let moved = migration::last_migration_time(&deployment.metadata);
        workload.seconds_since_migration =
            moved.map(|at| u64::try_from(now.duration_since(at).as_secs()).unwrap_or(0));
        // The Deployment records its last move only: the counts are at least
        // what it shows.
        workload.last_move_ms = moved.and_then(|at| u64::try_from(at.as_millisecond()).ok());
        let age = workload.seconds_since_migration;
        let within = |seconds: u64| u32::from(age.is_some_and(|s| s < seconds));
        workload.moves_last_day = within(24 * 3600);
        workload.moves_last_week = within(7 * 24 * 3600);
        workload.disruption_cost = Some(validated.guardrails.migration_cost);
        if guardrails::is_pinned(deployment.annotations()) {
            context
                .pinned
                .insert((workload.namespace.clone(), workload.name.clone()));
        }
        workloads.push(workload);
    }
    workloads.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    context.local_cluster = Some(own);

    let terms = Terms {
        thresholds: validated.thresholds.clone(),
        parameters: validated.parameters_json.clone(),
    };
    let snapshot = snapshot::assemble(metrics.at_ms(), members, Some(&metrics), workloads, terms);
    Ok((snapshot, context))
}

/// The StatefulSets a policy with `stateful.enabled` sees, each read
/// through the fields it shares with a Deployment; one with the namespace
/// and name of one of `deployments` is left out (the Deployment keeps the
/// name).
pub fn stateful_set_views(sets: &[StatefulSet], deployments: &[Deployment]) -> Vec<Deployment> {
    sets.iter()
        .filter(|set| {
            !deployments.iter().any(|d| {
                d.metadata.namespace == set.metadata.namespace
                    && d.metadata.name == set.metadata.name
            })
        })
        .filter_map(|set| serde_json::to_value(set).ok())
        .filter_map(|set| snapshot::deployment_view(&set))
        .collect()
}

/// A Deployment of this cluster as the policy sees it. One this cluster
/// moved away and scaled to zero shows as running where it went, with the
/// replicas it had; any other Deployment scaled to zero has nothing to move.
pub fn as_workload(
    deployment: &Deployment,
    own: &str,
    usage: Option<&crate::metrics::WorkloadMap>,
) -> Option<Workload> {
    if deployment.spec.replicas != Some(0) {
        return snapshot::from_deployment(deployment, own, usage);
    }
    let annotations = deployment.annotations();
    let moved_to = annotations.get(migration::ANNOTATION_MIGRATED_TO)?;
    let replicas = annotations
        .get(migration::ANNOTATION_ORIGINAL_REPLICAS)
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    snapshot::moved_away(deployment, moved_to, replicas)
}

/// Runs one cycle of the policy `namespace/name`.
pub(crate) async fn run_cycle(
    ctx: &Context,
    namespace: &str,
    name: &str,
    validated: &ValidatedPolicy,
) -> Result<Outcome, Skipped> {
    let key = format!("{namespace}/{name}");
    let active = {
        let slot = ctx.module_slot(&key).await;
        let mut slot = slot.lock().await;
        let reload = slot
            .ensure(
                &ctx.engine,
                &super::module::FetchScope {
                    client: &ctx.client,
                    operator_namespace: &ctx.config.namespace,
                    max_module_bytes: ctx.config.max_module_bytes,
                },
                namespace,
                name,
                validated,
            )
            .await;
        ctx.module_states
            .note(
                namespace,
                name,
                &reload,
                slot.active().map(|a| a.sha256.as_str()),
            )
            .await;
        match (slot.active(), reload) {
            (Some(active), _) => active.clone(),
            (None, Reload::Failed(err)) => {
                return Err(Skipped::NoModule {
                    reason: err.reason(),
                    message: chain(&err),
                });
            }
            (None, _) => {
                return Err(Skipped::NoModule {
                    reason: "NotLoaded",
                    message: "no module is loaded".to_owned(),
                });
            }
        }
    };

    let (snapshot, context) = build_snapshot(ctx, namespace, validated).await?;
    let snapshot = Arc::new(snapshot);
    let limits = Limits {
        timeout: validated.limits.timeout,
        memory_bytes: validated.limits.memory_bytes,
        fuel: validated.limits.fuel,
        ..Limits::default()
    };
    let started_at = Instant::now();
    let evaluation = ctx
        .engine
        .evaluate_for(&key, &active.policy, snapshot.clone(), limits)
        .await
        .map_err(|err| Skipped::PolicyFailed {
            class: err.class(),
            message: err.to_string(),
        })?;
    let labels = super::telemetry::PolicyLabels::new(namespace, name);
    ctx.telemetry
        .evaluation_seconds
        .get_or_create(&labels)
        .observe(started_at.elapsed().as_secs_f64());
    ctx.telemetry
        .evaluation_memory
        .get_or_create(&labels)
        .set(i64::try_from(evaluation.memory_bytes).unwrap_or(i64::MAX));

    let mode = if ctx.config.dry_run {
        PolicyMode::DryRun
    } else {
        validated.mode
    };
    // Counting what is in flight, checking and starting are one step under
    // the move lock: a cycle ending beside this one sees these moves.
    let _moves = ctx.moves.lock().await;
    let mut context = context;
    in_flight::observe(
        &ctx.client,
        &ctx.config.cluster_name,
        jiff::Timestamp::now(),
    )
    .await
    .map_err(|err| Skipped::Api(format!("counting migrations in flight: {}", chain(&err))))?
    .fill(&mut context);
    let verdict = guardrails::check_evaluation(&snapshot, evaluation.clone(), &context);
    let mut outcome = Outcome {
        snapshot,
        evaluation,
        verdict,
        started: Vec::new(),
        start_failures: Vec::new(),
        mode,
        module_sha256: active.sha256.clone(),
    };
    if mode == PolicyMode::Enforce {
        start_accepted(ctx, namespace, name, validated, &mut outcome).await;
    }
    Ok(outcome)
}

/// Hands every accepted decision to the migration protocol.
async fn start_accepted(
    ctx: &Context,
    namespace: &str,
    name: &str,
    validated: &ValidatedPolicy,
    outcome: &mut Outcome,
) {
    for decision in &outcome.verdict.accepted {
        let workload = format!("{}/{}", decision.namespace, decision.name);
        let kind = outcome
            .snapshot
            .workloads
            .iter()
            .find(|w| w.namespace == decision.namespace && w.name == decision.name)
            .map_or("Deployment", |w| w.kind.as_str())
            .to_owned();
        let request = MigrationRequest {
            kind,
            stateful: validated.stateful.clone(),
            source_action: validated.source_action,
            // The policy's own strategy governs; a module's hint picks
            // progressive only when the policy sets none.
            strategy: validated.strategy.clone().or_else(|| {
                (decision.strategy == Some(crate::contract::Strategy::Progressive))
                    .then(MigrationStrategy::progressive)
            }),
            replicas: decision
                .replicas
                .map(|r| i32::try_from(r).unwrap_or(i32::MAX)),
            allow_secret_copy: validated.allow_secret_copy,
            timeout: ctx.config.migration_deadline,
            policy: Some(crate::crd::PolicyRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }),
            hourly_savings: Some(decision.hourly_savings),
            ..MigrationRequest::deployment(
                &decision.namespace,
                &decision.name,
                &decision.to_cluster,
            )
        };
        match migration::start_migration(&ctx.sender, request).await {
            Ok(StartOutcome::Created { name } | StartOutcome::AlreadyExists { name }) => {
                outcome.started.push((workload, name));
            }
            Err(err) => outcome.start_failures.push((workload, chain(&err))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Skipped;

    /// Class, reason, message and whether it degrades: what the status,
    /// Events and metrics have always said for each kind of skipped cycle.
    #[test]
    fn each_skip_keeps_its_words() {
        let said = |s: Skipped| (s.class(), s.reason(), s.message(), s.degrades());
        assert_eq!(
            said(Skipped::InvalidSpec("bad".into())),
            ("invalid_spec", "InvalidSpec", "bad".into(), false)
        );
        assert_eq!(
            said(Skipped::NoModule {
                reason: "FetchFailed",
                message: "gone".into()
            }),
            ("module", "FetchFailed", "gone".into(), true)
        );
        assert_eq!(
            said(Skipped::NoMetrics("stale".into())),
            (
                "metrics",
                "MetricsUnavailable",
                "cycle skipped: stale".into(),
                true
            )
        );
        assert_eq!(
            said(Skipped::PolicyFailed {
                class: "Trap",
                message: "boom".into()
            }),
            ("Trap", "PolicyFailed", "boom".into(), true)
        );
        assert_eq!(
            said(Skipped::Api("down".into())),
            ("api", "ApiError", "down".into(), true)
        );
    }
}
