//! The one assembler of the policy's input. The live loop, `ferry snapshot`
//! and the simulator each gather their parts their own way (the Kubernetes
//! API and Prometheus, or a scenario) and hand them here, so that a cluster
//! means the same thing to a policy wherever it runs. Pure: no client, no
//! clock.

use crate::contract::{Cluster, Label, Resources, Snapshot, Thresholds, Workload};
use crate::metrics::{ClusterMetrics, Reading, WorkloadMetrics};

/// A cluster as configured, before any metric is read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Member {
    pub name: String,
    pub region: String,
    pub labels: Vec<Label>,
    /// Reachable and connected: a peer's health; true for the own cluster.
    pub reachable: bool,
}

/// What the policy is told besides the clusters and workloads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Terms {
    pub thresholds: Thresholds,
    /// The policy's `parameters`, as JSON text.
    pub parameters: String,
}

/// The policy's input at `at_ms`: one cluster per member, in the members'
/// order, and the workloads in the order given.
///
/// With a `reading`, each cluster gets its metrics, and a cluster the
/// reading has no usable metrics for is not ready. Without one (the
/// simulator, which sets the numbers itself at every step), the metric
/// fields are left empty.
pub fn assemble(
    at_ms: u64,
    members: Vec<Member>,
    reading: Option<&Reading>,
    workloads: Vec<Workload>,
    terms: Terms,
) -> Snapshot {
    let clusters = members
        .into_iter()
        .map(|member| {
            let mut cluster = Cluster {
                name: member.name,
                region: member.region,
                labels: member.labels,
                ready: member.reachable,
                ..Cluster::default()
            };
            if let Some(reading) = reading {
                match reading.cluster(&cluster.name) {
                    Some(metrics) => apply_cluster(metrics, &mut cluster),
                    None => cluster.ready = false,
                }
            }
            cluster
        })
        .collect();
    Snapshot {
        timestamp_ms: at_ms,
        clusters,
        workloads,
        thresholds: terms.thresholds,
        parameters: terms.parameters,
    }
}

/// Writes the metric fields of a contract [`Cluster`].
///
/// `allocatable` and `requested` are not optional in the contract: when any
/// of them is missing they are written as zero **and** `ready` is set to
/// false, so a policy never places work on a cluster whose capacity is
/// unknown. `ready` is only ever lowered here: reachability and peer health
/// are the member's.
pub fn apply_cluster(metrics: &ClusterMetrics, cluster: &mut Cluster) {
    cluster.ready = cluster.ready && metrics.is_usable();
    cluster.allocatable = Resources {
        cpu_millis: metrics.allocatable_cpu_millis.unwrap_or(0),
        memory_bytes: metrics.allocatable_memory_bytes.unwrap_or(0),
    };
    cluster.requested = Resources {
        cpu_millis: metrics.requested_cpu_millis.unwrap_or(0),
        memory_bytes: metrics.requested_memory_bytes.unwrap_or(0),
    };
    cluster.cpu_utilization = metrics.cpu_utilization;
    cluster.memory_utilization = metrics.memory_utilization;
    cluster.cpu_core_hour_price = metrics.cpu_core_hour_price;
    cluster.memory_gib_hour_price = metrics.memory_gib_hour_price;
    cluster.carbon_intensity = metrics.carbon_intensity;
}

/// Writes the usage and cost fields of a contract [`Workload`].
pub fn apply_usage(metrics: &WorkloadMetrics, workload: &mut Workload) {
    workload.cpu_usage_millis = metrics.cpu_usage_millis;
    workload.memory_usage_bytes = metrics.memory_usage_bytes;
    workload.hourly_cost = metrics.hourly_cost;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn full() -> ClusterMetrics {
        ClusterMetrics {
            cpu_core_hour_price: Some(0.03),
            memory_gib_hour_price: Some(0.004),
            allocatable_cpu_millis: Some(12_000),
            allocatable_memory_bytes: Some(48 << 30),
            requested_cpu_millis: Some(2_000),
            requested_memory_bytes: Some(4 << 30),
            cpu_utilization: Some(0.1),
            memory_utilization: Some(0.05),
            carbon_intensity: Some(420.0),
            fresh: true,
        }
    }

    fn ready_with(metrics: ClusterMetrics) -> Cluster {
        let mut cluster = Cluster {
            ready: true,
            ..Cluster::default()
        };
        apply_cluster(&metrics, &mut cluster);
        cluster
    }

    #[test]
    fn cluster_without_capacity_is_not_ready() {
        assert!(ready_with(full()).ready);
        let mut missing = full();
        missing.requested_memory_bytes = None;
        let cluster = ready_with(missing);
        assert!(!cluster.ready);
        assert_eq!(cluster.requested.memory_bytes, 0);
        let mut stale = full();
        stale.fresh = false;
        assert!(!ready_with(stale).ready);
    }

    #[test]
    fn apply_never_raises_ready() {
        let mut cluster = Cluster {
            ready: false,
            ..Cluster::default()
        };
        apply_cluster(&full(), &mut cluster);
        assert!(!cluster.ready);
        assert_eq!(cluster.cpu_core_hour_price, Some(0.03));
        assert_eq!(cluster.carbon_intensity, Some(420.0));
    }

    fn member(name: &str, reachable: bool) -> Member {
        Member {
            name: name.to_owned(),
            region: format!("{name}-region"),
            labels: vec![Label {
                key: "tier".to_owned(),
                value: name.to_owned(),
            }],
            reachable,
        }
    }

    #[test]
    fn a_member_is_ready_only_when_reachable_and_its_metrics_are_usable() {
        let mut clusters = BTreeMap::new();
        clusters.insert("home".to_owned(), Ok(full()));
        clusters.insert("down".to_owned(), Ok(full()));
        let stale = ClusterMetrics {
            fresh: false,
            ..full()
        };
        clusters.insert("stale".to_owned(), Ok(stale));
        let reading = Reading {
            at: jiff::Timestamp::from_second(1_767_225_600).unwrap(),
            clusters,
            own_cluster: None,
            workloads: None,
        };
        let members = vec![
            member("home", true),
            member("down", false),
            member("stale", true),
            member("unread", true),
        ];
        let snapshot = assemble(
            reading.at_ms(),
            members,
            Some(&reading),
            Vec::new(),
            Terms::default(),
        );
        let ready: Vec<(&str, bool)> = snapshot
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.ready))
            .collect();
        assert_eq!(
            ready,
            [
                ("home", true),
                ("down", false),
                ("stale", false),
                ("unread", false)
            ]
        );
        assert_eq!(snapshot.timestamp_ms, 1_767_225_600_000);
        assert_eq!(snapshot.clusters[0].region, "home-region");
        assert_eq!(snapshot.clusters[0].labels[0].value, "home");
        assert_eq!(snapshot.clusters[0].allocatable.cpu_millis, 12_000);
        assert_eq!(snapshot.clusters[3].allocatable.cpu_millis, 0);
    }

    #[test]
    fn without_a_reading_clusters_keep_their_reachability_and_workloads_their_order() {
        let workloads = ["b", "a"]
            .map(|name| Workload {
                name: name.to_owned(),
                ..Workload::default()
            })
            .to_vec();
        let snapshot = assemble(
            7,
            vec![member("x", true)],
            None,
            workloads,
            Terms {
                thresholds: Thresholds::default(),
                parameters: "{\"k\":1}".to_owned(),
            },
        );
        assert!(snapshot.clusters[0].ready);
        assert_eq!(snapshot.clusters[0].cpu_core_hour_price, None);
        assert_eq!(snapshot.workloads[0].name, "b");
        assert_eq!(snapshot.parameters, "{\"k\":1}");
    }
}
