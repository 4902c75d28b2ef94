//! Cost and load metrics: what a control cycle knows about each cluster's
//! prices and load, and about the usage and cost of the operator's own
//! workloads.
//!
//! [`MetricsSource`] is the seam. [`PrometheusSource`] reads live data with a
//! fixed number of PromQL queries per cluster; [`MemorySource`] replays
//! step-function series held in memory for the simulator and the demo.
//! [`read`] reads every cluster concurrently and fills in workload
//! costs from the cluster's prices.
//!
//! Invariant: a value this layer cannot vouch for (missing series, NaN, ±Inf,
//! several series where one was expected, a sample older than the freshness
//! window) is `None`. It never becomes a number, and in particular never zero.

mod error;
mod memory;
mod prometheus;
mod reading;
mod sample;

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use jiff::Timestamp;

pub use crate::units::time::parse as parse_time;
pub use error::{Error, Result};
pub use memory::{ClusterValue, MemorySource, MemorySourceBuilder, StepSeries, WorkloadValue};
pub use prometheus::{
    MAX_POINTS_PER_REQUEST, PrometheusConfig, PrometheusEndpoint, PrometheusSource, Queries,
    RangeSeries, RetryPolicy, ValueQuery,
};
pub use reading::{ClusterMetrics, Reading, WorkloadKey, WorkloadMetrics, read};

/// Workload metrics of one cluster, keyed by namespace and Deployment name.
pub type WorkloadMap = BTreeMap<WorkloadKey, WorkloadMetrics>;

/// Where cost and load metrics come from.
///
/// The futures are boxed so that the trait is object safe: the controller and
/// the simulator hold an `Arc<dyn MetricsSource>` and do not care which kind
/// it is. Both methods take a resolved evaluation time; [`read`]
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
    /// [`WorkloadMetrics::hourly_cost`] is left `None` here: [`read`]
    /// fills it from the cluster's prices.
    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>>;

    /// Every value of the PromQL `query` evaluated now in `cluster`'s
    /// Prometheus (a progressive move's health gate). Sources that are not
    /// Prometheus answer [`Error::NoQueries`].
    fn instant_values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> BoxFuture<'a, Result<Vec<f64>>> {
        let _ = (cluster, query);
        Box::pin(async { Err(Error::NoQueries) })
    }
}
