//! The demo's closing summary: where each workload runs, what the
//! placement costs, and a headline that says what the figure covers.
//!
//! The headline compares the final placement with staying put, both at the
//! final prices, once the clusters have settled (nothing in flight, every
//! policy content): the outcome of the run, not a moment inside a move.
//! Beside it, the average cost per hour over the whole run, spike
//! included, says what the run cost on the way there. When the clusters did
//! not settle in time, the headline says so, and why the figure is a
//! moment rather than an outcome.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, ResourceExt};

use super::narrate::Narrator;
use super::setup::{Cluster, WORKLOAD_NAMESPACE};
use super::{ClusterPlan, DemoMetrics, Options, Summary};

/// What the watch saw, for the summary.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    pub completed: usize,
    pub completed_off_spot: usize,
    pub refused: usize,
    /// Seconds of run, from the price clock's start to the end of the watch.
    pub run_seconds: f64,
    /// When the clusters settled (seconds), if they did.
    pub settled_at: Option<f64>,
    /// Moves not finished when the watch ended.
    pub in_flight: usize,
    /// The placement's cost per hour, averaged over the run.
    pub average_cost: f64,
    /// The starting placement's cost per hour over the same run.
    pub average_unmoved: f64,
}

/// Where each workload of the demo namespace runs (replicas > 0).
pub(crate) async fn placement(clusters: &[Cluster]) -> BTreeMap<String, String> {
    let mut placement = BTreeMap::new();
    for cluster in clusters {
        let deployments: Api<Deployment> =
            Api::namespaced(cluster.client.clone(), WORKLOAD_NAMESPACE);
        if let Ok(list) = deployments.list(&Default::default()).await {
            for deployment in list.iter().filter(|d| d.spec.replicas.unwrap_or(1) > 0) {
                placement.insert(
                    format!("{WORKLOAD_NAMESPACE}/{}", deployment.name_any()),
                    cluster.name.to_owned(),
                );
            }
        }
    }
    placement
}

/// Cost per hour of a placement at the prices of `at`.
pub(crate) fn cost(
    placement: &BTreeMap<String, String>,
    metrics: &DemoMetrics,
    at: jiff::Timestamp,
) -> f64 {
    placement
        .iter()
        .filter_map(|(workload, cluster)| {
            let name = workload.rsplit('/').next()?;
            let (_, replicas, cpu, memory, _) = super::setup::workload_spec(name)?;
            let (core_hour, gib_hour) = metrics.prices(cluster, at)?;
            let cores = f64::from(replicas) * f64::from(cpu) / 1000.0;
            let gib = f64::from(replicas) * f64::from(memory) / 1024.0;
            Some(cores * core_hour + gib * gib_hour)
        })
        .sum()
}

/// Percent of `base` that `saving` is.
fn percent(saving: f64, base: f64) -> f64 {
    if base > 0.0 {
        saving / base * 100.0
    } else {
        0.0
    }
}

/// Prints the summary and returns it with every line printed.
pub(crate) fn summarize(
    plans: &[ClusterPlan],
    metrics: &DemoMetrics,
    options: &Options,
    (start, initial): (jiff::Timestamp, &BTreeMap<String, String>),
    watched: &Watched,
    last: &BTreeMap<String, String>,
    mut narrator: Narrator,
) -> Summary {
    let now = jiff::Timestamp::now();
    let before = cost(initial, metrics, start);
    let after = cost(last, metrics, now);
    let unmoved = cost(initial, metrics, now);
    narrator.headline("Summary");
    for plan in plans {
        let here: Vec<&str> = last
            .iter()
            .filter(|(_, cluster)| cluster.as_str() == plan.name)
            .map(|(workload, _)| workload.as_str())
            .collect();
        narrator.say(&format!(
            "{:<9} runs {}",
            plan.name,
            if here.is_empty() {
                "nothing".to_owned()
            } else {
                here.join(", ")
            }
        ));
    }
    narrator.say(&format!(
        "migrations completed: {} ({} off the spiking pool); distinct refusals: {}",
        watched.completed, watched.completed_off_spot, watched.refused
    ));
    narrator.say(&format!(
        "the run: {:.0}s, the spot price spike at {:.0}s, {}",
        watched.run_seconds,
        options.spike_at.as_secs_f64(),
        match watched.settled_at {
            Some(at) => format!("settled at {at:.0}s"),
            None => format!("not settled ({} moves still in flight)", watched.in_flight),
        }
    ));
    narrator.say(&format!("cost per hour before:              {before:8.4}"));
    narrator.say(&format!("cost per hour now, had none moved: {unmoved:8.4}"));
    narrator.say(&format!("cost per hour now, after Ferry:    {after:8.4}"));
    narrator.say(&format!(
        "average over the run, spike included: {:.4}/h after Ferry, {:.4}/h had none moved ({:.0}%)",
        watched.average_cost,
        watched.average_unmoved,
        percent(watched.average_unmoved - watched.average_cost, watched.average_unmoved)
    ));
    let saving = unmoved - after;
    narrator.say(&headline(saving, percent(saving, unmoved), watched));
    Summary {
        before,
        after,
        unmoved,
        placement: last.clone(),
        completed_migrations: watched.completed,
        refused_decisions: watched.refused,
        settled: watched.settled_at.is_some(),
        lines: narrator.into_lines(),
    }
}

/// The last line: the saving once settled, or why there is no outcome yet.
fn headline(saving: f64, percent: f64, watched: &Watched) -> String {
    let figure = format!("{saving:.4}/h ({percent:.0}%)");
    match watched.settled_at {
        Some(_) if saving >= 0.0 => {
            format!("saving against staying put, once settled: {figure}")
        }
        Some(_) => format!(
            "saving against staying put, once settled: {figure}: every policy is content \
             with this placement (they price in spot's risk premium and each move's cost, \
             which this figure leaves out)"
        ),
        None => format!(
            "saving against staying put at this moment: {figure}: not an outcome, the clusters \
             were still moving workloads when the demo stopped ({} in flight); \
             a longer --seconds lets them settle",
            watched.in_flight
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsettled_run_says_its_figure_is_not_an_outcome() {
        let watched = Watched {
            in_flight: 2,
            ..Watched::default()
        };
        let line = headline(-0.3, -69.0, &watched);
        assert!(
            line.contains("not an outcome") && line.contains("2 in flight"),
            "{line}"
        );
        let settled = Watched {
            settled_at: Some(30.0),
            ..Watched::default()
        };
        assert!(headline(0.2, 31.0, &settled).contains("once settled: 0.2000/h (31%)"));
    }
}
