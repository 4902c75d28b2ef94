//! The PromQL Ferry sends, as templates the operator configuration can
//! override, and how they are combined so that a cluster costs a fixed
//! number of requests whatever its size. Pure: no client.
//!
//! Placeholders, replaced textually:
//! - `{cluster_selector}`: `LABEL="NAME"` for a shared Prometheus (Thanos,
//!   Mimir) with a cluster label, or nothing for a per-cluster Prometheus. It
//!   goes inside a matcher list, where PromQL accepts a trailing comma:
//!   `kube_node_status_allocatable{resource="cpu",{cluster_selector}}`.
//! - `{rate_window}`: the range of `rate()`, default `5m`.
//! - `{pod_deployment}`: the pod → ReplicaSet → Deployment join, and the
//!   pod → StatefulSet one ([`Queries::pod_deployment`]), a vector of 1s
//!   labelled `namespace, pod, deployment` (the workload's name).
//!
//! Defaults follow the metric names of OpenCost (`node_cpu_hourly_cost`,
//! `node_ram_hourly_cost`, `container_*_allocation*`), cAdvisor and
//! kube-state-metrics. OpenCost emits no `cluster` label: with a shared
//! Prometheus the user's relabelling must add the label named by
//! `PrometheusEndpoint::cluster_label`.

use serde::{Deserialize, Serialize};

/// The label that tells the values of a combined query apart.
pub(crate) const VALUE_LABEL: &str = "ferry_value";
const TIME_SUFFIX: &str = ":sample_time";

/// One value: an instant-vector expression and, optionally, an expression
/// giving the time (Unix seconds) of the oldest sample the value depends on.
/// When that time is older than the freshness window, the value is dropped
/// and the cluster marked not fresh.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueQuery {
    pub expr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_time: Option<String>,
}

impl ValueQuery {
    fn new(expr: &str, sample_time: &str) -> Self {
        ValueQuery {
            expr: expr.to_owned(),
            sample_time: Some(sample_time.to_owned()),
        }
    }
}

/// Every query Ferry sends; each can be replaced from the operator's
/// configuration (YAML or JSON, camelCase keys, omitted keys keep their
/// default).
///
/// Cluster values must return at most one series; more than one is treated
/// as no data.
///
/// Workload values are per-container or per-pod expressions labelled
/// `namespace, pod`: Ferry sums them by pod, joins the pods to their
/// Deployment through [`pod_deployment`](Self::pod_deployment) **once** for
/// all four values, and sums by `namespace, deployment`. (One join per value
/// made the query 2.5 times slower with 10,000 pods.) A workload value's
/// `sampleTime` may be per workload (labelled `namespace, deployment`) or one
/// series for the whole cluster, which then holds for every workload; the
/// defaults are cluster-wide (the oldest sample of the source in the
/// cluster), so one stale node blanks the column for every workload, as it
/// blanks the cluster's utilisation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Queries {
    pub rate_window: String,
    pub pod_deployment: String,
    /// Mean over nodes of the price of a core-hour.
    pub cpu_core_hour_price: ValueQuery,
    /// Mean over nodes of the price of a GiB-hour.
    pub memory_gib_hour_price: ValueQuery,
    /// In cores.
    pub allocatable_cpu: ValueQuery,
    /// In bytes.
    pub allocatable_memory: ValueQuery,
    /// In cores.
    pub requested_cpu: ValueQuery,
    /// In bytes.
    pub requested_memory: ValueQuery,
    /// A fraction.
    pub cpu_utilization: ValueQuery,
    /// A fraction.
    pub memory_utilization: ValueQuery,
    /// In cores, by namespace and pod.
    pub workload_cpu_usage: ValueQuery,
    /// In bytes, by namespace and pod.
    pub workload_memory_usage: ValueQuery,
    /// In cores, by namespace and pod: what the workload is charged for.
    pub workload_cpu_allocation: ValueQuery,
    /// In bytes, by namespace and pod.
    pub workload_memory_allocation: ValueQuery,
    /// Grams of CO2 per kWh where the cluster runs; not queried unless set
    /// (`ferry run --carbon-intensity-metric`, or this key). A stale or
    /// missing value is no data: it never makes the cluster not fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carbon_intensity: Option<ValueQuery>,
}

impl Queries {
    /// These queries with the carbon intensity read from the gauge `metric`
    /// (averaged, should it have several series in a cluster), checked for
    /// freshness like the other values. `metric` must be a plain metric
    /// name: it goes into PromQL as it is.
    pub fn with_carbon_intensity_metric(mut self, metric: &str) -> Result<Self, String> {
        let mut chars = metric.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if !valid {
            return Err(format!(
                "{metric:?} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"
            ));
        }
        let series = format!("{metric}{{{{cluster_selector}}}}");
        self.carbon_intensity = Some(ValueQuery::new(
            &format!("avg({series})"),
            &format!("min(timestamp({series}))"),
        ));
        Ok(self)
    }
}

const CONTAINERS: &str = r#"container!="",container!="POD",{cluster_selector}"#;

impl Default for Queries {
    fn default() -> Self {
        let alloc = |resource: &str| {
            format!(r#"kube_node_status_allocatable{{resource="{resource}",{{cluster_selector}}}}"#)
        };
        let requests = |resource: &str| {
            format!(
                r#"kube_pod_container_resource_requests{{resource="{resource}",{{cluster_selector}}}}"#
            )
        };
        let cpu_usage = format!("container_cpu_usage_seconds_total{{{CONTAINERS}}}");
        let mem_usage = format!("container_memory_working_set_bytes{{{CONTAINERS}}}");
        let cpu_alloc = "container_cpu_allocation{{cluster_selector}}";
        let mem_alloc = "container_memory_allocation_bytes{{cluster_selector}}";
        // Workload values are checked against the oldest sample of their
        // source in the whole cluster: one cheap series instead of a second
        // pod → Deployment join per value. A stale node thus blanks the
        // column for every workload of the cluster, as it blanks the
        // cluster's utilisation.
        let oldest = |selector: &str| format!("min(timestamp({selector}))");
        Queries {
            rate_window: "5m".to_owned(),
            // A StatefulSet owns its pods directly: its name stands in the
            // `deployment` label, as a workload's name.
            pod_deployment: concat!(
                r#"max by (namespace, pod, deployment) (("#,
                r#"label_replace(kube_pod_owner{owner_kind="ReplicaSet",{cluster_selector}}, "replicaset", "$1", "owner_name", "(.+)")"#,
                r#" * on(namespace, replicaset) group_left(deployment) "#,
                r#"max by (namespace, replicaset, deployment) ("#,
                r#"label_replace(kube_replicaset_owner{owner_kind="Deployment",{cluster_selector}}, "deployment", "$1", "owner_name", "(.+)")))"#,
                r#" or label_replace(kube_pod_owner{owner_kind="StatefulSet",{cluster_selector}}, "deployment", "$1", "owner_name", "(.+)"))"#,
            )
            .to_owned(),
            cpu_core_hour_price: ValueQuery::new(
                "avg(node_cpu_hourly_cost{{cluster_selector}})",
                "min(timestamp(node_cpu_hourly_cost{{cluster_selector}}))",
            ),
            memory_gib_hour_price: ValueQuery::new(
                "avg(node_ram_hourly_cost{{cluster_selector}})",
                "min(timestamp(node_ram_hourly_cost{{cluster_selector}}))",
            ),
            allocatable_cpu: ValueQuery::new(
                &format!("sum({})", alloc("cpu")),
                &format!("min(timestamp({}))", alloc("cpu")),
            ),
            allocatable_memory: ValueQuery::new(
                &format!("sum({})", alloc("memory")),
                &format!("min(timestamp({}))", alloc("memory")),
            ),
            requested_cpu: ValueQuery::new(
                &format!("sum({})", requests("cpu")),
                &format!("min(timestamp({}))", requests("cpu")),
            ),
            requested_memory: ValueQuery::new(
                &format!("sum({})", requests("memory")),
                &format!("min(timestamp({}))", requests("memory")),
            ),
            cpu_utilization: ValueQuery::new(
                &format!(
                    "sum(rate({cpu_usage}[{{rate_window}}])) / sum({})",
                    alloc("cpu")
                ),
                &format!("min(timestamp({cpu_usage}) or timestamp({}))", alloc("cpu")),
            ),
            memory_utilization: ValueQuery::new(
                &format!("sum({mem_usage}) / sum({})", alloc("memory")),
                &format!("min(timestamp({mem_usage}) or timestamp({}))", alloc("memory")),
            ),
            workload_cpu_usage: ValueQuery::new(
                &format!("rate({cpu_usage}[{{rate_window}}])"),
                &oldest(&cpu_usage),
            ),
            workload_memory_usage: ValueQuery::new(
                &mem_usage,
                &oldest(&mem_usage),
            ),
            workload_cpu_allocation: ValueQuery::new(
                cpu_alloc,
                &oldest(cpu_alloc),
            ),
            workload_memory_allocation: ValueQuery::new(
                mem_alloc,
                &oldest(mem_alloc),
            ),
            carbon_intensity: None,
        }
    }
}

/// The values of a cluster, in the order of [`ClusterValues`](super::ClusterValues).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClusterField {
    CpuPrice,
    MemoryPrice,
    AllocatableCpu,
    AllocatableMemory,
    RequestedCpu,
    RequestedMemory,
    CpuUtilization,
    MemoryUtilization,
    /// Optional: see [`Queries::carbon_intensity`].
    CarbonIntensity,
}

impl ClusterField {
    pub(crate) const ALL: [ClusterField; 9] = [
        ClusterField::CpuPrice,
        ClusterField::MemoryPrice,
        ClusterField::AllocatableCpu,
        ClusterField::AllocatableMemory,
        ClusterField::RequestedCpu,
        ClusterField::RequestedMemory,
        ClusterField::CpuUtilization,
        ClusterField::MemoryUtilization,
        ClusterField::CarbonIntensity,
    ];

    fn name(self) -> &'static str {
        match self {
            ClusterField::CpuPrice => "cpu_core_hour_price",
            ClusterField::MemoryPrice => "memory_gib_hour_price",
            ClusterField::AllocatableCpu => "allocatable_cpu",
            ClusterField::AllocatableMemory => "allocatable_memory",
            ClusterField::RequestedCpu => "requested_cpu",
            ClusterField::RequestedMemory => "requested_memory",
            ClusterField::CpuUtilization => "cpu_utilization",
            ClusterField::MemoryUtilization => "memory_utilization",
            ClusterField::CarbonIntensity => "carbon_intensity",
        }
    }
}

/// The values of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WorkloadField {
    CpuUsage,
    MemoryUsage,
    CpuAllocation,
    MemoryAllocation,
}

impl WorkloadField {
    pub(crate) const ALL: [WorkloadField; 4] = [
        WorkloadField::CpuUsage,
        WorkloadField::MemoryUsage,
        WorkloadField::CpuAllocation,
        WorkloadField::MemoryAllocation,
    ];

    fn name(self) -> &'static str {
        match self {
            WorkloadField::CpuUsage => "cpu_usage",
            WorkloadField::MemoryUsage => "memory_usage",
            WorkloadField::CpuAllocation => "cpu_allocation",
            WorkloadField::MemoryAllocation => "memory_allocation",
        }
    }
}

/// Which part of a combined answer a series belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part<F> {
    Value(F),
    SampleTime(F),
}

impl Queries {
    /// The query of `field`; `None` for an optional value not configured.
    fn cluster_query(&self, field: ClusterField) -> Option<&ValueQuery> {
        Some(match field {
            ClusterField::CpuPrice => &self.cpu_core_hour_price,
            ClusterField::MemoryPrice => &self.memory_gib_hour_price,
            ClusterField::AllocatableCpu => &self.allocatable_cpu,
            ClusterField::AllocatableMemory => &self.allocatable_memory,
            ClusterField::RequestedCpu => &self.requested_cpu,
            ClusterField::RequestedMemory => &self.requested_memory,
            ClusterField::CpuUtilization => &self.cpu_utilization,
            ClusterField::MemoryUtilization => &self.memory_utilization,
            ClusterField::CarbonIntensity => return self.carbon_intensity.as_ref(),
        })
    }

    fn workload_query(&self, field: WorkloadField) -> &ValueQuery {
        match field {
            WorkloadField::CpuUsage => &self.workload_cpu_usage,
            WorkloadField::MemoryUsage => &self.workload_memory_usage,
            WorkloadField::CpuAllocation => &self.workload_cpu_allocation,
            WorkloadField::MemoryAllocation => &self.workload_memory_allocation,
        }
    }

    /// Every cluster value and its sample time in one expression: one
    /// request per cluster.
    pub(crate) fn cluster_expr(&self, cluster_selector: &str) -> String {
        self.combine(
            ClusterField::ALL
                .iter()
                .filter_map(|f| Some((f.name(), self.cluster_query(*f)?))),
            cluster_selector,
        )
    }

    /// Every workload value and its sample time in one expression: one
    /// request for all workloads of a cluster, however many there are.
    pub(crate) fn workload_expr(&self, cluster_selector: &str) -> String {
        let values: Vec<(&str, &str)> = WorkloadField::ALL
            .iter()
            .map(|f| (f.name(), self.workload_query(*f).expr.as_str()))
            .collect();
        let mut times = Vec::new();
        for field in WorkloadField::ALL {
            if let Some(time) = &self.workload_query(field).sample_time {
                let tagged = format!("{}{TIME_SUFFIX}", field.name());
                times.push(tag(&self.expand(time, cluster_selector), &tagged));
            }
        }
        let values = self.expand(&Self::per_deployment_template(&values), cluster_selector);
        std::iter::once(values)
            .chain(times)
            .collect::<Vec<_>>()
            .join("\nor\n")
    }

    /// A template (placeholders kept) of per-pod values, `(tag, expression
    /// labelled namespace, pod)`, each summed by pod and tagged, joined to
    /// their Deployment through `{pod_deployment}` once for all of them, and
    /// summed by `namespace, deployment`. Instant and range queries share it.
    pub(crate) fn per_deployment_template(values: &[(&str, &str)]) -> String {
        let per_pod: Vec<String> = values
            .iter()
            .map(|(name, expr)| tag(&format!("sum by (namespace, pod) ({expr})"), name))
            .collect();
        format!(
            "sum by (namespace, deployment, {VALUE_LABEL}) ((\n{}\n) * on(namespace, pod) group_left(deployment) {{pod_deployment}})",
            per_pod.join("\nor\n")
        )
    }

    /// A template (placeholders kept) of values, `(tag, expression)`, each
    /// tagged and combined with `or`: one request for all of them.
    pub(crate) fn tagged_template(values: &[(&str, &str)]) -> String {
        values
            .iter()
            .map(|(name, expr)| tag(expr, name))
            .collect::<Vec<_>>()
            .join("\nor\n")
    }

    /// The tag of a series of a combined answer.
    pub(crate) fn tag_of(labels: &std::collections::BTreeMap<String, String>) -> Option<&str> {
        labels.get(VALUE_LABEL).map(String::as_str)
    }

    fn combine<'a>(
        &self,
        queries: impl Iterator<Item = (&'static str, &'a ValueQuery)>,
        cluster_selector: &str,
    ) -> String {
        let mut parts = Vec::new();
        for (name, query) in queries {
            parts.push(tag(&self.expand(&query.expr, cluster_selector), name));
            if let Some(time) = &query.sample_time {
                let tagged = format!("{name}{TIME_SUFFIX}");
                parts.push(tag(&self.expand(time, cluster_selector), &tagged));
            }
        }
        parts.join("\nor\n")
    }

    /// Replaces the placeholders of `template`.
    pub(crate) fn expand(&self, template: &str, cluster_selector: &str) -> String {
        template
            .replace("{pod_deployment}", &self.pod_deployment)
            .replace("{rate_window}", &self.rate_window)
            .replace("{cluster_selector}", cluster_selector)
    }
}

fn tag(expr: &str, value: &str) -> String {
    format!(r#"label_replace({expr}, "{VALUE_LABEL}", "{value}", "__name__", ".*")"#)
}

/// `LABEL="VALUE"` with the value escaped as a PromQL string, or nothing.
pub(crate) fn cluster_selector(label: Option<&str>, cluster: &str) -> String {
    match label {
        None => String::new(),
        Some(label) => {
            let escaped = cluster.replace('\\', r"\\").replace('"', r#"\""#);
            format!(r#"{label}="{escaped}""#)
        }
    }
}

/// Which value a series of a combined cluster answer carries.
pub(crate) fn cluster_part(tag: &str) -> Option<Part<ClusterField>> {
    part(tag, &ClusterField::ALL, |f| f.name())
}

/// Which value a series of a combined workload answer carries.
pub(crate) fn workload_part(tag: &str) -> Option<Part<WorkloadField>> {
    part(tag, &WorkloadField::ALL, |f| f.name())
}

fn part<F: Copy>(tag: &str, all: &[F], name: impl Fn(F) -> &'static str) -> Option<Part<F>> {
    let (base, is_time) = match tag.strip_suffix(TIME_SUFFIX) {
        Some(base) => (base, true),
        None => (tag, false),
    };
    let field = *all.iter().find(|f| name(**f) == base)?;
    Some(if is_time {
        Part::SampleTime(field)
    } else {
        Part::Value(field)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_expands_to_label_or_nothing() {
        let q = Queries::default();
        let shared = q.expand(
            &q.allocatable_cpu.expr,
            &cluster_selector(Some("cluster"), "eu-1"),
        );
        assert_eq!(
            shared,
            r#"sum(kube_node_status_allocatable{resource="cpu",cluster="eu-1"})"#
        );
        let own = q.expand(&q.cpu_core_hour_price.expr, &cluster_selector(None, "eu-1"));
        assert_eq!(own, "avg(node_cpu_hourly_cost{})");
    }

    #[test]
    fn the_carbon_intensity_is_queried_only_when_a_metric_is_named() {
        let plain = Queries::default().cluster_expr("");
        assert!(!plain.contains("carbon_intensity"), "{plain}");
        let q = Queries::default()
            .with_carbon_intensity_metric("grid_carbon_intensity")
            .unwrap();
        let shared = q.cluster_expr(r#"cluster="x""#);
        assert!(
            shared.contains(r#"avg(grid_carbon_intensity{cluster="x"})"#),
            "{shared}"
        );
        assert!(
            shared.contains(r#"min(timestamp(grid_carbon_intensity{cluster="x"}))"#),
            "{shared}"
        );
        assert_eq!(
            cluster_part("carbon_intensity"),
            Some(Part::Value(ClusterField::CarbonIntensity))
        );
        // The name goes into PromQL as it is: anything but a name is refused.
        for bad in ["", "9lives", "a{b=\"c\"}", "up or vector(1)", "a-b"] {
            let err = Queries::default()
                .with_carbon_intensity_metric(bad)
                .unwrap_err();
            assert!(err.contains("not a Prometheus metric name"), "{bad}: {err}");
        }
    }

    #[test]
    fn cluster_names_are_escaped_in_the_selector() {
        assert_eq!(cluster_selector(Some("k"), r#"a"b\c"#), r#"k="a\"b\\c""#);
    }

    #[test]
    fn combined_queries_hold_every_value_and_no_placeholder() {
        let q = Queries::default();
        let cluster = q.cluster_expr(r#"cluster="x""#);
        let workloads = q.workload_expr(r#"cluster="x""#);
        for expr in [&cluster, &workloads] {
            assert!(!expr.contains("{cluster_selector}"), "{expr}");
            assert!(!expr.contains("{pod_deployment}"), "{expr}");
            assert!(!expr.contains("{rate_window}"), "{expr}");
        }
        // The carbon intensity is optional, and not configured here.
        for f in &ClusterField::ALL[..8] {
            assert!(cluster.contains(&format!(r#""{}""#, f.name())));
            assert!(cluster.contains(&format!(r#""{}{TIME_SUFFIX}""#, f.name())));
        }
        assert_eq!(workloads.matches("\nor\n").count(), 7);
        assert_eq!(
            workloads.matches("kube_replicaset_owner").count(),
            1,
            "one join for every value"
        );
    }

    #[test]
    fn tags_map_back_to_their_field() {
        assert_eq!(
            cluster_part("allocatable_cpu"),
            Some(Part::Value(ClusterField::AllocatableCpu))
        );
        assert_eq!(
            cluster_part("cpu_utilization:sample_time"),
            Some(Part::SampleTime(ClusterField::CpuUtilization))
        );
        assert_eq!(
            workload_part("memory_allocation"),
            Some(Part::Value(WorkloadField::MemoryAllocation))
        );
        assert_eq!(cluster_part("nonsense"), None);
    }

    #[test]
    fn overrides_load_from_json_and_keep_other_defaults() {
        let q: Queries = serde_json::from_value(serde_json::json!({
            "rateWindow": "2m",
            "cpuCoreHourPrice": {"expr": "avg(my_price{{cluster_selector}})"}
        }))
        .unwrap();
        assert_eq!(q.rate_window, "2m");
        assert_eq!(q.cpu_core_hour_price.sample_time, None);
        assert_eq!(q.allocatable_cpu, Queries::default().allocatable_cpu);
    }
}
