//! Moves load off clusters running hotter than a high watermark, largest
//! workloads first, each to the cheapest ready cluster that stays under the
//! target utilisation limits, until the hot cluster is back under a low
//! watermark. It never trades money for headroom: a target that would cost
//! more than the source is not considered (a decision's savings may not be
//! negative).
//!
//! Parameters (JSON, all optional):
//! `{"highWatermark": 0.85, "lowWatermark": 0.70}` as fractions.

use std::cmp::Ordering;

use ferry_policy_sdk::{
    Capacity, Cluster, Decision, Fixed, Snapshot, hourly_cost_at, parameters, settling,
};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Parameters {
    pub high_watermark: f64,
    pub low_watermark: f64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            high_watermark: 0.85,
            low_watermark: 0.70,
        }
    }
}

/// The hotter of observed and requested utilisation, per resource.
fn heat(cluster: &Cluster, capacity: &Capacity, clusters: &[Cluster], index: usize) -> f64 {
    let (cpu, memory) = capacity.utilization(clusters, index);
    let observed = cluster
        .cpu_utilization
        .get()
        .unwrap_or(0.0)
        .max(cluster.memory_utilization.get().unwrap_or(0.0));
    cpu.max(memory).max(observed)
}

pub fn decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    let params: Parameters = parameters(&snapshot.parameters)?;
    if !(0.0..=1.0).contains(&params.low_watermark) || params.low_watermark > params.high_watermark
    {
        return Err(format!(
            "lowWatermark {} must be within 0..=highWatermark ({})",
            params.low_watermark, params.high_watermark
        ));
    }
    let limits = &snapshot.thresholds;
    let clusters = &snapshot.clusters;
    let mut capacity = Capacity::new(clusters);
    let mut decisions = Vec::new();

    for (source, hot) in clusters.iter().enumerate() {
        if !hot.ready || heat(hot, &capacity, clusters, source) <= params.high_watermark {
            continue;
        }
        let mut movable: Vec<_> = snapshot
            .workloads
            .iter()
            .filter(|w| w.cluster == hot.name)
            .filter(|w| {
                w.seconds_since_migration
                    .get()
                    .is_none_or(|s| s >= limits.cooldown_seconds)
                    && !settling(w)
            })
            .collect();
        movable.sort_by(|a, b| {
            b.requests
                .cpu_millis
                .cmp(&a.requests.cpu_millis)
                .then_with(|| a.name.cmp(&b.name))
        });

        for workload in movable {
            if decisions.len() >= limits.max_migrations_per_cycle as usize {
                return Ok(decisions);
            }
            let (cpu, memory) = capacity.utilization(clusters, source);
            if cpu.max(memory) <= params.low_watermark {
                break;
            }
            let Some(current) = hourly_cost_at(workload, hot) else {
                continue;
            };
            let mut targets: Vec<(usize, f64)> = clusters
                .iter()
                .enumerate()
                .filter(|&(i, c)| i != source && c.ready)
                .filter_map(|(i, c)| hourly_cost_at(workload, c).map(|cost| (i, cost)))
                .filter(|&(_, cost)| cost <= current)
                .collect();
            targets.sort_by(|a, b| {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            });
            let fitting = targets.into_iter().find(|&(i, _)| {
                capacity.fits(
                    clusters,
                    i,
                    workload.requests,
                    limits.max_target_cpu_utilization,
                    limits.max_target_memory_utilization,
                )
            });
            let Some((target, cost)) = fitting else {
                continue;
            };
            capacity.record_move(source, target, workload.requests);
            decisions.push(Decision {
                namespace: workload.namespace.clone(),
                name: workload.name.clone(),
                from_cluster: hot.name.clone(),
                to_cluster: clusters[target].name.clone(),
                hourly_savings: current - cost,
                reason: format!(
                    "utilization-balancer: {} is at {}% (above {}%); {} is the cheapest with room",
                    hot.name,
                    Fixed(cpu.max(memory) * 100.0, 0),
                    Fixed(params.high_watermark * 100.0, 0),
                    clusters[target].name
                )
                .into(),
                ..Decision::default()
            });
        }
    }
    Ok(decisions)
}

ferry_policy_sdk::policy!(decide);

#[cfg(test)]
mod tests {
    use ferry_policy_sdk::testing::{cluster, snapshot, workload};

    use super::decide;

    fn hot_cluster() -> ferry_policy_sdk::Cluster {
        let mut hot = cluster("hot", 0.04, 0.005);
        hot.requested.cpu_millis = 90_000;
        hot
    }

    #[test]
    fn relieves_a_hot_cluster_down_to_the_low_watermark() {
        let s = snapshot(
            vec![
                hot_cluster(),
                cluster("cool", 0.03, 0.004),
                cluster("cheap", 0.02, 0.003),
            ],
            vec![
                workload("big", "hot", 15_000, 1),
                workload("mid", "hot", 10_000, 1),
                workload("small", "hot", 1_000, 1),
            ],
        );
        let decisions = decide(&s).unwrap();
        // 90 % → 75 % after "big" → 65 % after "mid": two moves, cheapest target first.
        let names: Vec<_> = decisions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["big", "mid"]);
        assert!(
            decisions
                .iter()
                .all(|d| d.to_cluster == "cheap" && d.hourly_savings >= 0.0)
        );
    }

    #[test]
    fn leaves_clusters_below_the_high_watermark_alone() {
        let s = snapshot(
            vec![cluster("a", 0.04, 0.005), cluster("b", 0.01, 0.001)],
            vec![workload("w", "a", 10_000, 1)],
        );
        assert!(decide(&s).unwrap().is_empty());
    }

    #[test]
    fn never_moves_to_a_dearer_cluster() {
        let s = snapshot(
            vec![hot_cluster(), cluster("dear", 0.09, 0.01)],
            vec![workload("big", "hot", 15_000, 1)],
        );
        assert!(decide(&s).unwrap().is_empty());
    }

    #[test]
    fn rejects_inconsistent_parameters() {
        let mut s = snapshot(vec![hot_cluster()], vec![]);
        s.parameters = r#"{"highWatermark": 0.5, "lowWatermark": 0.9}"#.into();
        assert!(decide(&s).unwrap_err().contains("lowWatermark"));
    }
}
