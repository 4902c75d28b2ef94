//! Contract v1 (`ferry:policy@0.1.0`) as a view of contract v2's values: a
//! v1 module gets the v1 fields of the same workloads and clusters, lowered
//! by hand like v2's, with no copy of the snapshot; its decisions come back
//! as contract decisions with none of v2's additions.
//!
//! The `*Shape` records are v1's, for type checking a module only: they
//! are never built. Nothing here runs guest code.

use wasmtime::component::{ComponentType, Lift, Lower};

use super::abi::{CanonicalAbiInfo, InstanceType, InterfaceType};
use crate::contract::{self, Cluster, Label, Resources, Thresholds, Workload};

/// A workload or cluster seen through contract v1: the same value, whose
/// lowering stops at v1's fields.
#[repr(transparent)]
pub struct V1<T>(pub(super) T);

/// `items` seen through contract v1, without a copy.
fn as_v1<T>(items: &[T]) -> &[V1<T>] {
    // SAFETY: `V1<T>` is `repr(transparent)` over `T`, so a slice of one is
    // a slice of the other, with the same length and lifetime.
    unsafe { &*(std::ptr::from_ref(items) as *const [V1<T>]) }
}

/// Contract v1's `cluster`.
#[allow(dead_code)] // Only its type is used, to check a module against.
#[derive(ComponentType)]
#[component(record)]
pub struct ClusterShape {
    name: String,
    region: String,
    labels: Vec<Label>,
    ready: bool,
    allocatable: Resources,
    requested: Resources,
    #[component(name = "cpu-utilization")]
    cpu_utilization: Option<f64>,
    #[component(name = "memory-utilization")]
    memory_utilization: Option<f64>,
    #[component(name = "cpu-core-hour-price")]
    cpu_core_hour_price: Option<f64>,
    #[component(name = "memory-gib-hour-price")]
    memory_gib_hour_price: Option<f64>,
}

/// Contract v1's `workload`.
#[allow(dead_code)] // Only its type is used, to check a module against.
#[derive(ComponentType)]
#[component(record)]
pub struct WorkloadShape {
    namespace: String,
    name: String,
    kind: String,
    cluster: String,
    replicas: u32,
    requests: Resources,
    #[component(name = "cpu-usage-millis")]
    cpu_usage_millis: Option<u64>,
    #[component(name = "memory-usage-bytes")]
    memory_usage_bytes: Option<u64>,
    #[component(name = "hourly-cost")]
    hourly_cost: Option<f64>,
    labels: Vec<Label>,
    #[component(name = "seconds-since-migration")]
    seconds_since_migration: Option<u64>,
}

/// `ComponentType` for a v1 view: the shape's type, checked against v1.
macro_rules! shaped_as {
    ($view:ty, $shape:ty) => {
        // SAFETY: the view is lowered by hand in exactly the shape's
        // canonical layout (`super::layout`'s tests check it).
        unsafe impl ComponentType for $view {
            type Lower = <$shape as ComponentType>::Lower;
            const ABI: CanonicalAbiInfo = <$shape as ComponentType>::ABI;

            fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
                <$shape as ComponentType>::typecheck(ty, types)
            }
        }
    };
}

shaped_as!(V1<Cluster>, ClusterShape);
shaped_as!(V1<Workload>, WorkloadShape);

/// The snapshot a contract v1 module gets.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct SnapshotView<'a> {
    #[component(name = "timestamp-ms")]
    timestamp_ms: u64,
    clusters: &'a [V1<Cluster>],
    workloads: &'a [V1<Workload>],
    thresholds: Thresholds,
    parameters: &'a str,
}

impl<'a> SnapshotView<'a> {
    pub(crate) fn of(snapshot: &'a contract::Snapshot) -> Self {
        SnapshotView {
            timestamp_ms: snapshot.timestamp_ms,
            clusters: as_v1(&snapshot.clusters),
            workloads: as_v1(&snapshot.workloads),
            thresholds: snapshot.thresholds.clone(),
            parameters: &snapshot.parameters,
        }
    }
}

/// The type bindgen checks a v1 module's `decide` against.
pub type Snapshot = SnapshotView<'static>;

/// Contract v1's `decision`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct Decision {
    namespace: String,
    name: String,
    #[component(name = "from-cluster")]
    from_cluster: String,
    #[component(name = "to-cluster")]
    to_cluster: String,
    #[component(name = "hourly-savings")]
    hourly_savings: f64,
    reason: String,
}

impl From<Decision> for contract::Decision {
    /// A v1 decision moves the whole workload, with no hint and no
    /// structured reasons.
    fn from(d: Decision) -> Self {
        contract::Decision {
            namespace: d.namespace,
            name: d.name,
            from_cluster: d.from_cluster,
            to_cluster: d.to_cluster,
            hourly_savings: d.hourly_savings,
            reason: d.reason,
            replicas: None,
            strategy: None,
            reasons: None,
        }
    }
}
