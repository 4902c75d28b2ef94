//! The gauges read from the cluster rather than counted as things happen:
//! migrations by phase, the hourly saving completed moves realise, and
//! which peers are connected. Refreshed every few seconds by the leader;
//! it only lists `WorkloadMigration`s and never writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;

use super::Telemetry;
use super::telemetry::{PeerLabels, PhaseLabels, PolicyLabels};
use crate::crd::{MigrationPhase, MigrationRole, SourceAction, WorkloadMigration};
use crate::peers::PeerSet;

/// How often the gauges are refreshed.
const REFRESH: Duration = Duration::from_secs(5);

/// Keeps the migration, saving and peer gauges current. Never returns.
pub(crate) async fn refresh_gauges(
    client: kube::Client,
    peers: PeerSet,
    telemetry: Arc<Telemetry>,
) {
    let migrations: Api<WorkloadMigration> = Api::all(client);
    let mut known_phases: Vec<String> = Vec::new();
    let mut known_policies: Vec<PolicyLabels> = Vec::new();
    loop {
        if let Ok(list) = migrations.list(&Default::default()).await {
            known_phases = set_phases(&telemetry, &list.items, &known_phases);
            known_policies = set_savings(&telemetry, &list.items, &known_policies);
        }
        for peer in peers.all() {
            telemetry
                .peer_connected
                .get_or_create(&PeerLabels {
                    peer: peer.name.clone(),
                })
                .set(i64::from(peer.connected));
        }
        tokio::time::sleep(REFRESH).await;
    }
}

/// Sets `ferry_migrations{phase}`; a phase seen before and absent now
/// goes to 0. Returns the phases now known.
fn set_phases(telemetry: &Telemetry, list: &[WorkloadMigration], known: &[String]) -> Vec<String> {
    let mut counts: BTreeMap<String, i64> = known.iter().map(|p| (p.clone(), 0)).collect();
    for migration in list {
        let phase = migration
            .status
            .as_ref()
            .map(|s| format!("{:?}", s.phase))
            .unwrap_or_else(|| "Pending".to_owned());
        *counts.entry(phase).or_default() += 1;
    }
    for (phase, count) in &counts {
        telemetry
            .migrations
            .get_or_create(&PhaseLabels {
                phase: phase.clone(),
            })
            .set(*count);
    }
    counts.into_keys().collect()
}

/// Sets `ferry_realised_hourly_savings{namespace,name}`; a policy seen
/// before and absent now goes to 0. Returns the policies now known.
fn set_savings(
    telemetry: &Telemetry,
    list: &[WorkloadMigration],
    known: &[PolicyLabels],
) -> Vec<PolicyLabels> {
    let mut savings: BTreeMap<PolicyLabels, f64> = known.iter().map(|p| (p.clone(), 0.0)).collect();
    savings.extend(realised_savings(list));
    for (policy, saving) in &savings {
        telemetry
            .realised_savings
            .get_or_create(policy)
            .set(*saving);
    }
    savings.into_keys().collect()
}

/// The hourly saving each policy's completed moves realise, from the
/// `WorkloadMigration`s this cluster holds (pure: no client).
///
/// For each workload (namespace and name), only its latest completed move
/// counts. When that is a move out of this cluster (a mirror, role
/// `Source`), the saving its policy estimated at decision time
/// (`spec.hourlySavings`) counts for that policy; when it is a move into
/// this cluster (role `Target`), the workload came back and nothing counts.
/// Dry-run requests and moves with `sourceAction: Keep` (the source keeps
/// running, so nothing is saved) never count. A record deleted after its
/// `finishedTtl` takes its saving with it.
pub(crate) fn realised_savings(list: &[WorkloadMigration]) -> BTreeMap<PolicyLabels, f64> {
    // workload → (completion time, the policy and saving it realises, if any)
    let mut latest: BTreeMap<String, (jiff::Timestamp, Option<(PolicyLabels, f64)>)> =
        BTreeMap::new();
    for migration in list {
        let spec = &migration.spec;
        let Some(status) = &migration.status else {
            continue;
        };
        if status.phase != MigrationPhase::Completed || spec.dry_run {
            continue;
        }
        let Some(at) = status
            .completed_time
            .as_ref()
            .or(status.finished_time.as_ref())
        else {
            continue;
        };
        let realised = match spec.role {
            MigrationRole::Target => None,
            MigrationRole::Source if spec.source_action == SourceAction::Keep => None,
            MigrationRole::Source => spec.policy.as_ref().map(|policy| {
                let saving = spec.hourly_savings.filter(|s| s.is_finite()).unwrap_or(0.0);
                (PolicyLabels::new(&policy.namespace, &policy.name), saving)
            }),
        };
        let workload = spec.workload_key();
        match latest.get(&workload) {
            Some((seen, _)) if *seen >= at.0 => {}
            _ => {
                latest.insert(workload, (at.0, realised));
            }
        }
    }
    let mut savings = BTreeMap::new();
    for (policy, saving) in latest.into_values().filter_map(|(_, realised)| realised) {
        *savings.entry(policy).or_insert(0.0) += saving;
    }
    savings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{PolicyRef, WorkloadMigrationSpec, WorkloadMigrationStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    /// A move of `shop/<workload>` completed at `completed`.
    fn moved(
        workload: &str,
        role: MigrationRole,
        saving: f64,
        completed: i64,
    ) -> WorkloadMigration {
        let spec = WorkloadMigrationSpec {
            request_id: "r".into(),
            source_cluster: "a".into(),
            target_cluster: "b".into(),
            target_namespace: "shop".into(),
            workload: serde_json::json!({"kind": "Deployment", "metadata": {"name": workload}}),
            config_maps: Vec::new(),
            dependents: Vec::new(),
            secrets: Vec::new(),
            claims: Vec::new(),
            hooks: None,
            source_action: SourceAction::ScaleToZero,
            strategy: None,
            partial: None,
            deadline: at(0),
            dry_run: false,
            role,
            policy: Some(PolicyRef {
                namespace: "shop".into(),
                name: "cost".into(),
            }),
            hourly_savings: Some(saving),
            intent: None,
            transport: None,
            nonce: String::new(),
            issued_at: None,
            signature: None,
        };
        let mut migration = WorkloadMigration::new(&format!("{workload}-{completed}"), spec);
        migration.status = Some(WorkloadMigrationStatus {
            phase: MigrationPhase::Completed,
            completed_time: Some(at(completed)),
            ..WorkloadMigrationStatus::default()
        });
        migration
    }

    fn cost() -> PolicyLabels {
        PolicyLabels::new("shop", "cost")
    }

    #[test]
    fn completed_moves_out_add_up_per_policy() {
        let list = [
            moved("web", MigrationRole::Source, 0.25, 10),
            moved("api", MigrationRole::Source, 0.5, 20),
        ];
        assert_eq!(realised_savings(&list), BTreeMap::from([(cost(), 0.75)]));
    }

    #[test]
    fn a_workload_counts_once_by_its_latest_move() {
        let list = [
            moved("web", MigrationRole::Source, 0.25, 10),
            moved("web", MigrationRole::Source, 0.5, 30),
        ];
        assert_eq!(realised_savings(&list), BTreeMap::from([(cost(), 0.5)]));
    }

    #[test]
    fn a_workload_that_came_back_realises_nothing() {
        let list = [
            moved("web", MigrationRole::Source, 0.25, 10),
            moved("web", MigrationRole::Target, 0.4, 20),
        ];
        assert_eq!(realised_savings(&list), BTreeMap::new());
    }

    #[test]
    fn dry_runs_keep_moves_and_unfinished_moves_realise_nothing() {
        let mut dry = moved("a", MigrationRole::Source, 1.0, 10);
        dry.spec.dry_run = true;
        let mut kept = moved("b", MigrationRole::Source, 1.0, 10);
        kept.spec.source_action = SourceAction::Keep;
        let mut running = moved("c", MigrationRole::Source, 1.0, 10);
        running.status.as_mut().unwrap().phase = MigrationPhase::Progressing;
        assert_eq!(realised_savings(&[dry, kept, running]), BTreeMap::new());
    }
}
