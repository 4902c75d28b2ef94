//! What is moving right now, as the guardrails count it in the live loop:
//! every WorkloadMigration of this cluster that has not reached a terminal
//! phase, in either direction; and the move history the per-workload rules
//! read: every move this cluster took part in (the mirror of one it started,
//! the request of one it received) created in the last 24 hours, ended or
//! not.
//!
//! The simulator keeps the same figures in memory; here they are read from
//! the cluster under the controller's move lock, so two policies' cycles
//! that end at the same time cannot both fill the same target. This part
//! only reads: it must never change a migration.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::contract::Resources;
use crate::crd::{MigrationRole, WorkloadMigration};
use crate::guardrails::{Context as Guardrails, WorkloadRef};
use crate::snapshot;

/// Moves in flight, by what the guardrails need of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// Workloads being moved out of this cluster or into it.
    pub(crate) moving: BTreeSet<WorkloadRef>,
    /// What the moves in flight will add to each cluster they go to.
    pub(crate) incoming: BTreeMap<String, Resources>,
    /// Moves this cluster started that have not ended.
    pub(crate) outgoing: u32,
    /// Moves of each workload, out of this cluster or into it, created in
    /// the last 24 hours.
    pub(crate) recent: BTreeMap<WorkloadRef, u32>,
}

impl InFlight {
    /// Puts the figures into a policy's guardrail context.
    pub(crate) fn fill(self, context: &mut Guardrails) {
        context.moving.extend(self.moving);
        context.in_flight = self.outgoing;
        for (workload, moves) in self.recent {
            let total = context.recent_moves.entry(workload).or_default();
            *total = total.saturating_add(moves);
        }
        for (cluster, r) in self.incoming {
            let total = context.incoming.entry(cluster).or_default();
            total.cpu_millis = total.cpu_millis.saturating_add(r.cpu_millis);
            total.memory_bytes = total.memory_bytes.saturating_add(r.memory_bytes);
        }
    }
}

/// How far back a move counts as recent.
const DAY: jiff::SignedDuration = jiff::SignedDuration::from_hours(24);

/// Reads every WorkloadMigration of this cluster and counts those in flight
/// and the moves of the last 24 hours before `now`.
pub(crate) async fn observe(
    client: &Client,
    own: &str,
    now: jiff::Timestamp,
) -> Result<InFlight, kube::Error> {
    let api: Api<WorkloadMigration> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await?;
    Ok(tally(&list.items, own, now))
}

/// The count over `migrations` (pure). A mirror (role `Source`) moves one of
/// this cluster's workloads to its target; a request (role `Target`) moves a
/// peer's workload into `own`. Either, created less than 24 hours before
/// `now`, is a recent move of its workload, whatever its phase: a workload
/// that arrived here an hour ago has moved once today when this cluster
/// considers moving it on.
pub(crate) fn tally(migrations: &[WorkloadMigration], own: &str, now: jiff::Timestamp) -> InFlight {
    let mut in_flight = InFlight::default();
    for migration in migrations {
        let created = migration.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if created.is_some_and(|at| now.duration_since(at) < DAY) {
            let (namespace, name, _) = carried(migration);
            let moves = in_flight.recent.entry((namespace, name)).or_default();
            *moves = moves.saturating_add(1);
        }
        if migration
            .status
            .as_ref()
            .is_some_and(|s| s.phase.is_terminal())
        {
            continue;
        }
        let (namespace, name, requests) = carried(migration);
        let to = match migration.spec.role {
            MigrationRole::Source => {
                in_flight.outgoing = in_flight.outgoing.saturating_add(1);
                migration.spec.target_cluster.clone()
            }
            MigrationRole::Target => own.to_owned(),
        };
        in_flight.moving.insert((namespace, name));
        let total = in_flight.incoming.entry(to).or_default();
        total.cpu_millis = total.cpu_millis.saturating_add(requests.cpu_millis);
        total.memory_bytes = total.memory_bytes.saturating_add(requests.memory_bytes);
    }
    in_flight
}

/// The workload a migration carries: its namespace and name, and what its
/// replicas request. A manifest that does not read as a Deployment or a
/// StatefulSet still counts as moving, with nothing requested.
fn carried(migration: &WorkloadMigration) -> (String, String, Resources) {
    let manifest = &migration.spec.workload;
    let field = |pointer: &str| {
        manifest
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let namespace =
        field("/metadata/namespace").unwrap_or_else(|| migration.namespace().unwrap_or_default());
    let name = field("/metadata/name").unwrap_or_default();
    let requests = snapshot::deployment_view(manifest)
        .map(|mut deployment| {
            deployment.metadata.namespace = Some(namespace.clone());
            deployment.metadata.name = Some(name.clone());
            deployment
        })
        .and_then(|deployment| snapshot::from_deployment(&deployment, "", None))
        .map(|workload| workload.requests)
        .unwrap_or_default();
    (namespace, name, requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{MigrationPhase, WorkloadMigrationStatus};

    fn now() -> jiff::Timestamp {
        "2030-01-01T12:00:00Z".parse().unwrap()
    }

    fn migration(role: MigrationRole, name: &str, target: &str) -> WorkloadMigration {
        let mut wm: WorkloadMigration = serde_json::from_value(serde_json::json!({
            "apiVersion": "ferry.dev/v1alpha1",
            "kind": "WorkloadMigration",
            "metadata": {"namespace": "shop", "name": format!("{name}-0123456789")},
            "spec": {
                "requestId": "0123456789",
                "sourceCluster": "a",
                "targetCluster": target,
                "workload": {
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"namespace": "shop", "name": name},
                    "spec": {
                        "replicas": 2,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"spec": {"containers": [{"name": "c",
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}},
                    },
                },
                "deadline": "2030-01-01T00:00:00Z",
                "role": role,
            },
        }))
        .unwrap();
        wm.status = Some(WorkloadMigrationStatus::default());
        wm
    }

    #[test]
    fn moves_out_and_in_are_counted_until_they_end() {
        let mut done = migration(MigrationRole::Source, "old", "b");
        done.status.as_mut().unwrap().phase = MigrationPhase::Completed;
        let all = [
            migration(MigrationRole::Source, "web", "b"),
            migration(MigrationRole::Source, "api", "b"),
            migration(MigrationRole::Target, "db", "a"),
            done,
        ];
        let counted = tally(&all, "a", now());
        assert_eq!(counted.outgoing, 2);
        let names: Vec<_> = counted.moving.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["api", "db", "web"]);
        // Two moves of 2 × (500m, 1Gi) towards b; one into a itself.
        assert_eq!(counted.incoming["b"].cpu_millis, 2000);
        assert_eq!(counted.incoming["b"].memory_bytes, 4 << 30);
        assert_eq!(counted.incoming["a"].cpu_millis, 1000);
    }

    #[test]
    fn the_count_adds_to_what_the_context_already_holds() {
        let guardrails = crate::crd::Guardrails {
            max_in_flight: 10,
            migration_cost: 0.0,
            max_payback_hours: 24.0,
            savings_per_disruption: 0.0,
            max_moves_per_workload_per_day: 0,
        };
        let mut context = Guardrails::new(Default::default(), guardrails);
        context.incoming.insert(
            "b".into(),
            Resources {
                cpu_millis: 100,
                memory_bytes: 1,
            },
        );
        tally(&[migration(MigrationRole::Source, "web", "b")], "a", now()).fill(&mut context);
        assert_eq!(context.in_flight, 1);
        assert_eq!(context.incoming["b"].cpu_millis, 1100);
        assert!(
            context
                .moving
                .contains(&("shop".to_owned(), "web".to_owned()))
        );
    }

    #[test]
    fn a_manifest_that_is_not_a_deployment_still_counts_as_moving() {
        let mut odd = migration(MigrationRole::Source, "web", "b");
        odd.spec.workload = serde_json::json!({"metadata": {"name": "web"}, "spec": 7});
        let counted = tally(&[odd], "a", now());
        assert_eq!(counted.outgoing, 1);
        assert_eq!(counted.incoming["b"], Resources::default());
    }

    #[test]
    fn mirrors_of_the_last_day_are_the_recent_moves_ended_or_not() {
        let at = |m: &mut WorkloadMigration, when: &str| {
            m.metadata.creation_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(when.parse().unwrap()),
            );
        };
        let mut done = migration(MigrationRole::Source, "web", "b");
        done.status.as_mut().unwrap().phase = MigrationPhase::Completed;
        at(&mut done, "2030-01-01T01:00:00Z");
        let mut failed = migration(MigrationRole::Source, "web", "c");
        failed.status.as_mut().unwrap().phase = MigrationPhase::Failed;
        at(&mut failed, "2030-01-01T11:00:00Z");
        let mut old = migration(MigrationRole::Source, "web", "b");
        at(&mut old, "2029-12-31T12:00:00Z");
        let mut incoming = migration(MigrationRole::Target, "db", "a");
        at(&mut incoming, "2030-01-01T11:00:00Z");
        let mut undated = migration(MigrationRole::Source, "api", "b");
        undated.metadata.creation_timestamp = None;
        let counted = tally(&[done, failed, old, incoming, undated], "a", now());
        // Exactly 24 h ago is no longer recent; a peer's move into this
        // cluster is a move of its workload too.
        assert_eq!(counted.recent.len(), 2);
        assert_eq!(counted.recent[&("shop".to_owned(), "web".to_owned())], 2);
        assert_eq!(counted.recent[&("shop".to_owned(), "db".to_owned())], 1);
        let mut context = Guardrails::new(
            Default::default(),
            crate::crd::Guardrails {
                max_in_flight: 10,
                migration_cost: 0.0,
                max_payback_hours: 24.0,
                savings_per_disruption: 0.0,
                max_moves_per_workload_per_day: 1,
            },
        );
        counted.fill(&mut context);
        assert_eq!(
            context.recent_moves[&("shop".to_owned(), "web".to_owned())],
            2
        );
    }
}
