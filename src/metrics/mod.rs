//! Cost and load metrics: what a control cycle knows about each cluster's
//! prices and load, and about the usage and cost of the operator's own
//! workloads.
//!
//! [`MetricsSource`] is the seam. [`PrometheusSource`] reads live data with a
//! fixed number of PromQL queries per cluster; [`MemorySource`] replays
//! step-function series held in memory for the simulator and the demo.
//! [`read_snapshot`] reads every cluster concurrently and fills in workload
//! costs from the cluster's prices.
//!
//! Invariant: a value this layer cannot vouch for (missing series, NaN, ±Inf,
//! several series where one was expected, a sample older than the freshness
//! window) is `None`. It never becomes a number, and in particular never zero.

mod error;
mod memory;
mod prometheus;
mod sample;
mod snapshot;

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;

pub use error::{Error, Result};
pub use memory::{ClusterValue, MemorySource, MemorySourceBuilder, StepSeries, WorkloadValue};
pub use prometheus::{
    MAX_POINTS_PER_REQUEST, PrometheusConfig, PrometheusEndpoint, PrometheusSource, Queries,
    RangeSeries, RetryPolicy, ValueQuery,
};
pub use snapshot::{ClusterMetrics, MetricsSnapshot, WorkloadKey, WorkloadMetrics, read_snapshot};

/// Workload metrics of one cluster, keyed by namespace and Deployment name.
pub type WorkloadMap = BTreeMap<WorkloadKey, WorkloadMetrics>;

/// Where cost and load metrics come from.
///
/// The futures are boxed so that the trait is object safe: the controller and
/// the simulator hold an `Arc<dyn MetricsSource>` and do not care which kind
/// it is. Both methods take a resolved evaluation time; [`read_snapshot`]
/// resolves "now" once so that every value of one snapshot has the same time.
pub trait MetricsSource: Send + Sync {
    /// Prices, capacity and load of `cluster` at `at`.
    ///
    /// An error means the source could not be read at all (unreachable,
    /// timed out, query rejected); a cluster without data is `Ok` with every
    /// value `None` and `fresh == false`.
    fn cluster<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ClusterMetrics>>;

    /// Usage and allocation of the Deployments of `cluster` at `at`.
    ///
    /// [`WorkloadMetrics::hourly_cost`] is left `None` here: [`read_snapshot`]
    /// fills it from the cluster's prices.
    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>>;
}

/// An RFC 3339 time or Unix seconds.
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    let t = text.trim();
    if let Ok(seconds) = t.parse::<i64>() {
        return Timestamp::from_second(seconds).map_err(|e| format!("{t:?}: {e}"));
    }
    t.parse::<Timestamp>().map_err(|e| {
        format!("{t:?} is neither an RFC 3339 time (2026-01-01T00:00:00Z) nor Unix seconds ({e})")
    })
}

#[cfg(test)]
mod time_tests {
    use super::parse_time;

    #[test]
    fn time_is_rfc3339_or_unix_seconds() {
        let a = parse_time("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(a, parse_time("1767225600").unwrap());
        assert!(parse_time("yesterday").is_err());
    }
}
