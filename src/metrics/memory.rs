//! [`MetricsSource`] over step-function series held in memory: the
//! simulator's virtual clock and the demo read through it exactly what the
//! live loop reads from Prometheus. It knows no file format; scenario files
//! map onto [`MemorySourceBuilder`].

use std::collections::{BTreeMap, HashMap};

use futures::FutureExt;
use futures::future::BoxFuture;
use jiff::Timestamp;

use super::{
    ClusterMetrics, Error, MetricsSource, Result, WorkloadKey, WorkloadMap, WorkloadMetrics, sample,
};

/// A value that holds from each point until the next. Before the first point
/// there is no value; a NaN or infinite point is a gap.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepSeries {
    points: Vec<(Timestamp, f64)>,
}

impl StepSeries {
    /// A series from points in any order; of two points at one time, the
    /// later given wins.
    pub fn new(points: impl IntoIterator<Item = (Timestamp, f64)>) -> Self {
        let mut points: Vec<(Timestamp, f64)> = points.into_iter().collect();
        points.reverse();
        points.sort_by_key(|(t, _)| *t);
        points.dedup_by_key(|(t, _)| *t);
        StepSeries { points }
    }

    /// The same value at every time.
    pub fn constant(value: f64) -> Self {
        StepSeries {
            points: vec![(Timestamp::MIN, value)],
        }
    }

    /// The value in force at `at`.
    pub fn at(&self, at: Timestamp) -> Option<f64> {
        let after = self.points.partition_point(|(t, _)| *t <= at);
        let (_, value) = self.points.get(after.checked_sub(1)?)?;
        value.is_finite().then_some(*value)
    }
}

/// The series a cluster can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterValue {
    CpuCoreHourPrice,
    MemoryGibHourPrice,
    AllocatableCpuMillis,
    AllocatableMemoryBytes,
    RequestedCpuMillis,
    RequestedMemoryBytes,
    CpuUtilization,
    MemoryUtilization,
}

/// The series a workload can have. Its allocation (what it is charged for)
/// is `max(request, usage)`, or whichever of the two exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadValue {
    CpuUsageMillis,
    MemoryUsageBytes,
    CpuRequestMillis,
    MemoryRequestBytes,
}

type WorkloadSeries = HashMap<WorkloadValue, StepSeries>;

/// [`MetricsSource`] answering from in-memory series. A value without a
/// series is `None`; a workload exists at a time when any of its series has
/// a value then.
#[derive(Clone, Debug, Default)]
pub struct MemorySource {
    clusters: BTreeMap<String, HashMap<ClusterValue, StepSeries>>,
    workloads: BTreeMap<String, BTreeMap<WorkloadKey, WorkloadSeries>>,
}

/// Builds a [`MemorySource`].
#[derive(Clone, Debug, Default)]
pub struct MemorySourceBuilder {
    source: MemorySource,
}

impl MemorySourceBuilder {
    /// Declares a cluster (it may have no series at all).
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.source.clusters.entry(cluster.into()).or_default();
        self
    }

    /// Sets one series of a cluster, declaring the cluster.
    pub fn cluster_series(
        mut self,
        cluster: impl Into<String>,
        value: ClusterValue,
        series: StepSeries,
    ) -> Self {
        self.source
            .clusters
            .entry(cluster.into())
            .or_default()
            .insert(value, series);
        self
    }

    /// Sets one series of a workload, declaring its cluster.
    pub fn workload_series(
        mut self,
        cluster: impl Into<String>,
        workload: WorkloadKey,
        value: WorkloadValue,
        series: StepSeries,
    ) -> Self {
        let cluster = cluster.into();
        self.source.clusters.entry(cluster.clone()).or_default();
        self.source
            .workloads
            .entry(cluster)
            .or_default()
            .entry(workload)
            .or_default()
            .insert(value, series);
        self
    }

    pub fn build(self) -> MemorySource {
        self.source
    }
}

impl MemorySource {
    pub fn builder() -> MemorySourceBuilder {
        MemorySourceBuilder::default()
    }

    /// The metrics of `cluster` at `at`, without going through a future.
    pub fn cluster_at(&self, cluster: &str, at: Timestamp) -> Result<ClusterMetrics> {
        let series = self
            .clusters
            .get(cluster)
            .ok_or_else(|| Error::UnknownCluster(cluster.to_owned()))?;
        let get = |v: ClusterValue| series.get(&v).and_then(|s| s.at(at));
        let metrics = ClusterMetrics {
            cpu_core_hour_price: sample::non_negative(get(ClusterValue::CpuCoreHourPrice)),
            memory_gib_hour_price: sample::non_negative(get(ClusterValue::MemoryGibHourPrice)),
            allocatable_cpu_millis: sample::to_u64(get(ClusterValue::AllocatableCpuMillis)),
            allocatable_memory_bytes: sample::to_u64(get(ClusterValue::AllocatableMemoryBytes)),
            requested_cpu_millis: sample::to_u64(get(ClusterValue::RequestedCpuMillis)),
            requested_memory_bytes: sample::to_u64(get(ClusterValue::RequestedMemoryBytes)),
            cpu_utilization: sample::non_negative(get(ClusterValue::CpuUtilization)),
            memory_utilization: sample::non_negative(get(ClusterValue::MemoryUtilization)),
            carbon_intensity: None,
            fresh: false,
        };
        let fresh = metrics != ClusterMetrics::default();
        Ok(ClusterMetrics { fresh, ..metrics })
    }

    /// The workloads of `cluster` at `at`, without going through a future.
    pub fn workloads_at(&self, cluster: &str, at: Timestamp) -> Result<WorkloadMap> {
        if !self.clusters.contains_key(cluster) {
            return Err(Error::UnknownCluster(cluster.to_owned()));
        }
        let Some(workloads) = self.workloads.get(cluster) else {
            return Ok(WorkloadMap::new());
        };
        Ok(workloads
            .iter()
            .filter_map(|(key, series)| {
                let get = |v: WorkloadValue| sample::to_u64(series.get(&v).and_then(|s| s.at(at)));
                let (cpu_usage, memory_usage) = (
                    get(WorkloadValue::CpuUsageMillis),
                    get(WorkloadValue::MemoryUsageBytes),
                );
                let (cpu_request, memory_request) = (
                    get(WorkloadValue::CpuRequestMillis),
                    get(WorkloadValue::MemoryRequestBytes),
                );
                let metrics = WorkloadMetrics {
                    cpu_usage_millis: cpu_usage,
                    memory_usage_bytes: memory_usage,
                    cpu_allocation_millis: max_of(cpu_request, cpu_usage),
                    memory_allocation_bytes: max_of(memory_request, memory_usage),
                    hourly_cost: None,
                };
                (metrics != WorkloadMetrics::default()).then(|| (key.clone(), metrics))
            })
            .collect())
    }
}

fn max_of(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl MetricsSource for MemorySource {
    fn cluster<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ClusterMetrics>> {
        futures::future::ready(self.cluster_at(cluster, at)).boxed()
    }

    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>> {
        futures::future::ready(self.workloads_at(cluster, at)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn step_series_holds_each_value_until_the_next() {
        let s = StepSeries::new([(t(20), 2.0), (t(10), 1.0), (t(30), f64::NAN), (t(20), 5.0)]);
        assert_eq!(s.at(t(9)), None);
        assert_eq!(s.at(t(10)), Some(1.0));
        assert_eq!(s.at(t(19)), Some(1.0));
        assert_eq!(
            s.at(t(20)),
            Some(5.0),
            "the later of two points at one time wins"
        );
        assert_eq!(s.at(t(31)), None, "NaN is a gap");
        assert_eq!(StepSeries::constant(3.0).at(t(0)), Some(3.0));
    }

    #[test]
    fn values_without_series_are_none() {
        let source = MemorySource::builder()
            .cluster("empty")
            .cluster_series(
                "a",
                ClusterValue::CpuCoreHourPrice,
                StepSeries::new([(t(100), 0.03)]),
            )
            .cluster_series(
                "a",
                ClusterValue::AllocatableCpuMillis,
                StepSeries::constant(4000.0),
            )
            .build();
        let a = source.cluster_at("a", t(100)).unwrap();
        assert_eq!(a.cpu_core_hour_price, Some(0.03));
        assert_eq!(a.allocatable_cpu_millis, Some(4000));
        assert_eq!(a.memory_gib_hour_price, None);
        assert!(a.fresh && !a.is_usable());
        let empty = source.cluster_at("empty", t(100)).unwrap();
        assert_eq!(empty, ClusterMetrics::default());
        assert!(matches!(
            source.cluster_at("nope", t(0)),
            Err(Error::UnknownCluster(_))
        ));
    }

    #[test]
    fn workloads_exist_while_a_series_has_a_value_and_allocation_is_the_max() {
        let web = WorkloadKey::new("default", "web");
        let source = MemorySource::builder()
            .workload_series(
                "a",
                web.clone(),
                WorkloadValue::CpuUsageMillis,
                StepSeries::new([(t(10), 300.0)]),
            )
            .workload_series(
                "a",
                web.clone(),
                WorkloadValue::CpuRequestMillis,
                StepSeries::new([(t(10), 500.0)]),
            )
            .workload_series(
                "a",
                web.clone(),
                WorkloadValue::MemoryUsageBytes,
                StepSeries::new([(t(10), 2048.0)]),
            )
            .build();
        assert!(source.workloads_at("a", t(5)).unwrap().is_empty());
        let at_10 = source.workloads_at("a", t(10)).unwrap();
        let w = &at_10[&web];
        assert_eq!(w.cpu_usage_millis, Some(300));
        assert_eq!(w.cpu_allocation_millis, Some(500));
        assert_eq!(w.memory_allocation_bytes, Some(2048));
    }
}
