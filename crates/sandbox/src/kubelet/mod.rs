//! The kubelet stand-in, with the controllers that make workloads look
//! run. Two modes:
//!
//! - instant (the default, `instant.rs`): after a delay, Deployment status
//!   follows the spec; no Pods.
//! - realistic (`KubeletRules`): Deployments and StatefulSets get Pods
//!   (`workloads.rs`), which start, become ready or fail per image rule
//!   (`pods.rs`, `settings.rs`); Services get EndpointSlices
//!   (`endpoints.rs`); Jobs end (`jobs.rs`); claims bind (`volumes.rs`).
//!
//! The realistic mode is one pass over the state after every change and at
//! every time a pod or Job is due to move on; each step writes only what
//! differs, so the kubelet's own writes end in a pass that writes nothing.

mod endpoints;
mod instant;
mod jobs;
mod pods;
mod settings;
mod volumes;
mod workloads;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::object::meta_str;
use crate::store::{EventType, State};

pub use settings::{Exit, ImageRule, KubeletRules, Pull, Readiness};

const DEPLOYMENTS: &str = "apps/deployments";
const STATEFULSETS: &str = "apps/statefulsets";
const PODS: &str = "/pods";
const SERVICES: &str = "/services";
const ENDPOINT_SLICES: &str = "discovery.k8s.io/endpointslices";
const JOBS: &str = "batch/jobs";
const CLAIMS: &str = "/persistentvolumeclaims";

/// Run until aborted.
pub(crate) async fn run(cluster: Arc<Cluster>) {
    let mut changes = cluster.subscribe();
    let mut position = cluster.lock().resource_version();
    let mut clocks = Clocks::default();
    loop {
        changes.borrow_and_update();
        let mut wake = None;
        if let Some(rules) = cluster.kubelet.realistic() {
            wake = realistic_pass(&cluster, &rules, &mut clocks);
            position = cluster.lock().resource_version();
        } else {
            position = instant_pass(&cluster, position);
        }
        let due = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = cluster.kubelet.settings_changed() => {
                if cluster.kubelet.realistic().is_none() {
                    let all: BTreeSet<_> = cluster.lock().range(DEPLOYMENTS, None, None).map(|(k, _)| k.clone()).collect();
                    instant::schedule(&cluster, all);
                    instant_endpoints(&cluster);
                }
            }
            () = due => {}
        }
    }
}

/// The instant mode's EndpointSlices, unless the controller is off.
fn instant_endpoints(cluster: &Cluster) {
    if cluster.kubelet.endpoints() {
        cluster.write(|state| endpoints::sync_instant(state, &cluster.ids));
    }
}

/// Settle the Deployments changed since `position`, and the slices of the
/// Services they or a changed Service concern; the new position.
fn instant_pass(cluster: &Arc<Cluster>, mut position: u64) -> u64 {
    let mut slices_due = false;
    loop {
        let mut due: BTreeSet<(String, String)> = BTreeSet::new();
        let read = cluster.lock().events_after(position, 4096);
        let more = match read {
            Ok(events) => {
                for event in &events {
                    position = event.rv;
                    slices_due |= event.resource == DEPLOYMENTS || event.resource == SERVICES;
                    if event.resource == DEPLOYMENTS && event.type_ != EventType::Deleted {
                        due.insert((
                            event.namespace.clone(),
                            meta_str(&event.object, "name").to_string(),
                        ));
                    }
                }
                events.len() == 4096
            }
            Err(_) => {
                // Fell behind the history: look at every Deployment.
                let state = cluster.lock();
                position = state.resource_version();
                due.extend(state.range(DEPLOYMENTS, None, None).map(|(k, _)| k.clone()));
                slices_due = true;
                false
            }
        };
        instant::schedule(cluster, due);
        if !more {
            if slices_due {
                instant_endpoints(cluster);
            }
            return position;
        }
    }
}

/// What the realistic kubelet remembers between passes: when it first saw
/// each pod and Job (by uid), and the next pod IP to hand out.
#[derive(Debug, Default)]
pub(crate) struct Clocks {
    seen: HashMap<String, Instant>,
    next_ip: u32,
}

impl Clocks {
    /// When the object with `uid` was first seen (now, if never).
    fn since(&mut self, uid: &str) -> Instant {
        *self
            .seen
            .entry(uid.to_string())
            .or_insert_with(Instant::now)
    }

    /// A pod IP no other pod of this cluster got: 10.244.0.0/16.
    fn ip(&mut self) -> String {
        let n = self.next_ip % (250 * 256);
        self.next_ip += 1;
        format!("10.244.{}.{}", n / 250, n % 250 + 2)
    }

    /// Forget objects that are gone.
    fn retain(&mut self, live: &BTreeSet<String>) {
        self.seen.retain(|uid, _| live.contains(uid));
    }
}

/// The earlier of two wake-up times.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One pass of the realistic mode; when the next one is due, if any pod
/// or Job is waiting for time to pass.
fn realistic_pass(cluster: &Cluster, rules: &KubeletRules, clocks: &mut Clocks) -> Option<Instant> {
    let delay = cluster.kubelet.delay();
    let ready = cluster.kubelet.rollouts_ready();
    let node = format!("{}-node", cluster.name);
    cluster.write(|state| {
        volumes::bind(state);
        workloads::run_pods(state, &cluster.ids, &node);
        let context = pods::Context {
            rules,
            delay,
            ready,
            now: Instant::now(),
        };
        let mut wake = pods::advance(state, &context, clocks);
        workloads::update_status(state);
        if cluster.kubelet.endpoints() {
            endpoints::sync(state, &cluster.ids);
        }
        wake = earliest(wake, jobs::run(state, &context, clocks));
        clocks.retain(&live_uids(state));
        wake
    })
}

fn live_uids(state: &State) -> BTreeSet<String> {
    [PODS, JOBS]
        .iter()
        .flat_map(|resource| state.range(resource, None, None))
        .map(|(_, object)| meta_str(object, "uid").to_string())
        .collect()
}
