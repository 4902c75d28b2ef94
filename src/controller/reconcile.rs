//! The `MigrationPolicy` controller: runs a cycle when one is due, and
//! records what happened in the policy's status, in Events and in metrics.
//!
//! Status holds only what was observed; a condition's transition time moves
//! only when its status changes, and Events are published only on such
//! transitions (and for each new would-be move), so the controller's own
//! status writes never feed a reconcile storm.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::Context;
use super::cycle::{self, Skipped};
use super::journal::{self};
use super::module::Reload;
use super::status::{
    cycle_summary, describe, journal_entry, publish, record_outcome, write_status,
};
use super::telemetry::{PeerLabels, PhaseLabels, PolicyLabels};
use crate::crd::{
    MigrationPolicy, WorkloadMigration, invalid_spec_condition, new_condition, set_condition,
    types, validate_policy,
};

/// Why a reconcile failed; every class is retried after `error_requeue`.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing the status of {policy}")]
    Status {
        policy: String,
        #[source]
        source: kube::Error,
    },
    #[error("the policy object has no namespace")]
    NoNamespace,
}

/// What the last module reload of each policy said, for its condition.
#[derive(Clone, Debug)]
pub(crate) struct ModuleState {
    loaded: bool,
    reason: &'static str,
    message: String,
}

impl Context {
    /// Remembers what the module slot did, for the `ModuleLoaded` condition.
    pub(crate) async fn note_reload(
        &self,
        namespace: &str,
        name: &str,
        reload: &Reload,
        active: Option<&str>,
    ) {
        let state = match reload {
            Reload::Unchanged => return,
            Reload::Replaced { previous } => ModuleState {
                loaded: true,
                reason: "Loaded",
                message: match (previous, active) {
                    (Some(old), Some(new)) => {
                        format!("module {} replaced {}", short(new), short(old))
                    }
                    (_, Some(new)) => format!("module {} loaded", short(new)),
                    _ => "module loaded".to_owned(),
                },
            },
            Reload::Failed(err) => ModuleState {
                loaded: false,
                reason: err.reason(),
                message: match active {
                    Some(old) => format!("{err}; module {} keeps running", short(old)),
                    None => err.to_string(),
                },
            },
        };
        self.module_states
            .lock()
            .await
            .insert(format!("{namespace}/{name}"), state);
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// Runs the controller until its watch stream ends or `stop` turns true.
pub(crate) async fn run_policies(ctx: Arc<Context>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let policies: Api<MigrationPolicy> = Api::all(ctx.client.clone());
    // On shutdown no new cycle starts and running ones finish their writes.
    let stopping = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    Controller::new(policies, watcher::Config::default().any_semantic())
        .graceful_shutdown_on(stopping)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "policy reconcile failed");
            }
        })
        .await;
}

fn error_policy(_policy: Arc<MigrationPolicy>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %err, "policy reconcile failed; retrying");
    Action::requeue(ctx.config.error_requeue)
}

#[tracing::instrument(skip_all, fields(policy = %format!("{}/{}", policy.namespace().unwrap_or_default(), policy.name_any())))]
async fn reconcile(
    policy: Arc<MigrationPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = policy.namespace().ok_or(ReconcileError::NoNamespace)?;
    let name = policy.name_any();
    let key = format!("{namespace}/{name}");
    let generation = policy.metadata.generation;
    let old_status = policy.status.clone().unwrap_or_default();
    let mut status = old_status.clone();
    let now = Time(jiff::Timestamp::now());

    let validated = match validate_policy(&policy.spec) {
        Ok(validated) => validated,
        Err(errors) => {
            ctx.telemetry.count_error(&key, "invalid_spec");
            let condition = invalid_spec_condition(&errors, generation, &now);
            let message = condition.message.clone();
            let changed = set_condition(&mut status.conditions, condition, now.clone());
            status.observed_generation = generation;
            if changed {
                publish(&ctx, &policy, EventType::Warning, "InvalidSpec", &message).await;
            }
            write_status(&ctx, &policy, &old_status, status).await?;
            return Ok(Action::await_change());
        }
    };

    // A cycle is due once per interval, and at once after a spec change.
    if status.observed_generation == generation
        && let Some(last) = &status.last_cycle_time
    {
        let since: Duration = now
            .0
            .duration_since(last.0)
            .try_into()
            .unwrap_or(Duration::ZERO);
        if since < validated.interval {
            return Ok(Action::requeue(validated.interval - since));
        }
    }

    let started = Instant::now();
    let result = cycle::run_cycle(&ctx, &namespace, &name, &validated).await;
    let elapsed = started.elapsed();
    ctx.telemetry
        .cycle_seconds
        .get_or_create(&PolicyLabels {
            policy: key.clone(),
        })
        .observe(elapsed.as_secs_f64());

    status.observed_generation = generation;
    status.last_cycle_time = Some(now.clone());
    status.last_cycle_duration_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    status.counters.cycles += 1;
    let mut events: Vec<(EventType, &str, String)> = Vec::new();

    if let Some(state) = ctx.module_states.lock().await.get(&key).cloned() {
        let condition = new_condition(
            types::MODULE_LOADED,
            state.loaded,
            state.reason,
            state.message.clone(),
            generation,
            &now,
        );
        if set_condition(&mut status.conditions, condition, now.clone()) {
            let kind = if state.loaded {
                EventType::Normal
            } else {
                EventType::Warning
            };
            events.push((
                kind,
                if state.loaded {
                    "ModuleLoaded"
                } else {
                    "ModuleLoadFailed"
                },
                state.message,
            ));
        }
    }
    if let Some(active) = ctx.module_slot(&key).await.lock().await.active() {
        status.set_module_digest(&active.sha256);
    }

    let requeue = match result {
        Ok(outcome) => {
            record_outcome(&ctx, &key, &mut status, &outcome, &now, &mut events);
            if let Some(dir) = &ctx.config.journal_dir {
                let entry = journal_entry(&key, &outcome);
                if let Err(err) = journal::write(dir, &entry) {
                    tracing::warn!(error = %err, dir = %dir.display(), "cannot write the decision journal");
                }
            }
            let ready = new_condition(
                types::READY,
                true,
                "CycleCompleted",
                cycle_summary(&outcome),
                generation,
                &now,
            );
            set_condition(&mut status.conditions, ready, now.clone());
            let healthy = new_condition(
                types::DEGRADED,
                false,
                "AsExpected",
                "the last cycle completed",
                generation,
                &now,
            );
            if set_condition(&mut status.conditions, healthy, now.clone()) {
                events.push((
                    EventType::Normal,
                    "Recovered",
                    "the policy cycles again".to_owned(),
                ));
            }
            validated.interval
        }
        Err(skipped) => {
            let (class, reason, message, degraded) = describe(&skipped);
            ctx.telemetry.count_error(&key, class);
            let ready = new_condition(
                types::READY,
                false,
                reason,
                message.clone(),
                generation,
                &now,
            );
            let ready_changed = set_condition(&mut status.conditions, ready, now.clone());
            let degraded_changed = degraded && {
                let condition = new_condition(
                    types::DEGRADED,
                    true,
                    reason,
                    message.clone(),
                    generation,
                    &now,
                );
                set_condition(&mut status.conditions, condition, now.clone())
            };
            if ready_changed || degraded_changed {
                events.push((EventType::Warning, reason, message));
            }
            match skipped {
                Skipped::InvalidSpec(_) => validated.interval,
                _ => ctx.config.error_requeue.min(validated.interval),
            }
        }
    };

    for (kind, reason, note) in events {
        publish(&ctx, &policy, kind, reason, &note).await;
    }
    write_status(&ctx, &policy, &old_status, status).await?;
    Ok(Action::requeue(requeue))
}

/// Keeps the migration and peer gauges current.
pub(crate) async fn refresh_gauges(ctx: Arc<Context>) {
    let migrations: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    let mut known_phases: Vec<String> = Vec::new();
    loop {
        if let Ok(list) = migrations.list(&Default::default()).await {
            let mut counts: BTreeMap<String, i64> =
                known_phases.iter().map(|p| (p.clone(), 0)).collect();
            for migration in list {
                let phase = migration
                    .status
                    .map(|s| format!("{:?}", s.phase))
                    .unwrap_or_else(|| "Pending".to_owned());
                *counts.entry(phase).or_default() += 1;
            }
            for (phase, count) in &counts {
                ctx.telemetry
                    .migrations
                    .get_or_create(&PhaseLabels {
                        phase: phase.clone(),
                    })
                    .set(*count);
            }
            known_phases = counts.into_keys().collect();
        }
        for peer in ctx.peers.all() {
            ctx.telemetry
                .peer_connected
                .get_or_create(&PeerLabels {
                    peer: peer.name.clone(),
                })
                .set(i64::from(peer.connected));
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}
