//! The shared core of one sandbox instance: its state, change notification
//! and the fault-injection settings. Survives stop/restart of the server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::auth::rbac::Authorizer;
use crate::error::ApiError;
use crate::kubelet::KubeletRules;
use crate::object::{Ids, splitmix64};
use crate::store::State;

/// Everything an instance's server tasks share.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) token: String,
    /// The client CA and token key that other credentials are checked with.
    pub(crate) keys: crate::auth::Keys,
    pub(crate) ids: Ids,
    pub(crate) faults: Faults,
    pub(crate) kubelet: Kubelet,
    pub(crate) bookmark_interval: Duration,
    /// Decides every request; re-reads the RBAC objects after each write
    /// that changes them.
    pub(crate) authorizer: Authorizer,
    /// Where allowed requests are recorded, when `FERRY_SANDBOX_AUTHZ_LOG`
    /// asks for it (read once, here).
    pub(crate) authz_record: Option<crate::auth::record::Recorder>,
    state: Mutex<State>,
    /// The latest committed resource version; watchers wait on it.
    changes: watch::Sender<u64>,
}

impl Cluster {
    pub(crate) fn new(
        name: String,
        token: String,
        keys: crate::auth::Keys,
        seed: u64,
        history_limit: usize,
        kubelet: Kubelet,
        bookmark_interval: Duration,
    ) -> Self {
        let authz_record = crate::auth::record::Recorder::from_env(&name);
        Self {
            name,
            token,
            keys,
            ids: Ids::new(seed),
            faults: Faults::new(seed),
            kubelet,
            bookmark_interval,
            authorizer: Authorizer::default(),
            authz_record,
            state: Mutex::new(State::new(history_limit)),
            changes: watch::channel(0).0,
        }
    }

    /// Lock the state. A panic in another request cannot leave the state
    /// half-written (every mutation is one `put`/`remove`), so poisoning is
    /// ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Run a mutation and what it leads to (garbage collection, namespace
    /// finalization), then wake the watchers if anything was committed. A
    /// change to RBAC objects (by the mutation or by what it led to, such as
    /// a namespace's roles going with it) refreshes the authorizer before the
    /// lock is released, so no request is judged by rules older than a write.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.lock();
        let before = state.resource_version();
        let rbac_before = state.rbac_changes();
        let out = f(&mut state);
        crate::controllers::reconcile(&mut state);
        if state.rbac_changes() != rbac_before {
            self.authorizer.refresh(&mut state);
        }
        let after = state.resource_version();
        drop(state);
        if after != before {
            self.changes.send_replace(after);
        }
        out
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// Fault injection for one instance: added latency and a rate of failed
/// writes. Cloning shares the settings. Draws are deterministic for a seed.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Mutex<FaultSettings>>,
}

#[derive(Debug)]
struct FaultSettings {
    latency: Duration,
    error_rate: f64,
    conflict_rate: f64,
    rng: u64,
}

impl Faults {
    fn new(seed: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(FaultSettings {
                latency: Duration::ZERO,
                error_rate: 0.0,
                conflict_rate: 0.0,
                rng: seed,
            })),
        }
    }

    fn settings(&self) -> MutexGuard<'_, FaultSettings> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delay every request by `latency` before it is handled.
    pub fn set_latency(&self, latency: Duration) {
        self.settings().latency = latency;
    }

    /// Answer this fraction (0.0–1.0) of writes with 500 `InternalError`.
    pub fn set_error_rate(&self, rate: f64) {
        self.settings().error_rate = rate.clamp(0.0, 1.0);
    }

    /// Answer this fraction (0.0–1.0) of writes with 409 `Conflict`.
    pub fn set_conflict_rate(&self, rate: f64) {
        self.settings().conflict_rate = rate.clamp(0.0, 1.0);
    }

    /// Restart the sequence of random draws from `seed`.
    pub fn set_seed(&self, seed: u64) {
        self.settings().rng = seed;
    }

    /// Remove every injected fault.
    pub fn clear(&self) {
        let mut s = self.settings();
        s.latency = Duration::ZERO;
        s.error_rate = 0.0;
        s.conflict_rate = 0.0;
    }

    pub(crate) fn latency(&self) -> Duration {
        self.settings().latency
    }

    /// The injected failure for this write, if any.
    pub(crate) fn on_write(&self) -> Option<ApiError> {
        let mut s = self.settings();
        if s.error_rate <= 0.0 && s.conflict_rate <= 0.0 {
            return None;
        }
        s.rng = splitmix64(s.rng);
        let draw = (s.rng >> 11) as f64 / (1u64 << 53) as f64;
        if draw < s.error_rate {
            Some(ApiError::internal("injected fault: internal error"))
        } else if draw < s.error_rate + s.conflict_rate {
            Some(ApiError::conflict("", "", "", "injected fault: conflict"))
        } else {
            None
        }
    }
}

/// The kubelet stand-in's settings: how long a rollout takes, whether it
/// ever becomes ready, and whether workloads run as Pods (the realistic
/// mode). Cloning shares the settings.
#[derive(Debug, Clone)]
pub struct Kubelet {
    inner: Arc<KubeletSettings>,
}

#[derive(Debug)]
struct KubeletSettings {
    delay: Mutex<Duration>,
    ready: AtomicBool,
    /// Whether the EndpointSlice controller runs.
    endpoints: AtomicBool,
    /// `Some` in realistic mode: pods, EndpointSlices, Jobs and volumes.
    realistic: Mutex<Option<Arc<KubeletRules>>>,
    changed: Notify,
}

impl Kubelet {
    pub(crate) fn new(delay: Duration, ready: bool) -> Self {
        Self {
            inner: Arc::new(KubeletSettings {
                delay: Mutex::new(delay),
                ready: AtomicBool::new(ready),
                endpoints: AtomicBool::new(true),
                realistic: Mutex::new(None),
                changed: Notify::new(),
            }),
        }
    }

    /// Time from a Deployment change to its status reflecting it (0 = at once).
    pub fn set_delay(&self, delay: Duration) {
        *self.inner.delay.lock().unwrap_or_else(|p| p.into_inner()) = delay;
    }

    /// Whether rollouts become ready; `false` leaves them unavailable (for
    /// failure tests). Changing it re-evaluates every Deployment.
    pub fn set_rollouts_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::SeqCst);
        self.inner.changed.notify_one();
    }

    /// Whether the EndpointSlice controller runs (on by default). Off, the
    /// slices stay as they are, as when the controller is down: a new
    /// Service gets none and ready replicas do not show. Turning it on
    /// brings every slice in line at once.
    pub fn set_endpoints(&self, on: bool) {
        self.inner.endpoints.store(on, Ordering::SeqCst);
        self.inner.changed.notify_one();
    }

    pub(crate) fn endpoints(&self) -> bool {
        self.inner.endpoints.load(Ordering::SeqCst)
    }

    /// Run workloads realistically: Deployments and StatefulSets get Pods
    /// that start, become ready or fail as `rules` say, Services get
    /// EndpointSlices, Jobs end, PersistentVolumeClaims bind. Every
    /// workload is looked at again at once.
    pub fn set_realistic(&self, rules: KubeletRules) {
        *self.realistic_lock() = Some(Arc::new(rules));
        self.inner.changed.notify_one();
    }

    /// Back to the instant mode (the default): Deployment status follows
    /// the spec after the delay, with no Pods. Pods already made stay.
    pub fn set_instant(&self) {
        *self.realistic_lock() = None;
        self.inner.changed.notify_one();
    }

    /// Whether the realistic mode is on.
    pub fn is_realistic(&self) -> bool {
        self.realistic_lock().is_some()
    }

    pub(crate) fn realistic(&self) -> Option<Arc<KubeletRules>> {
        self.realistic_lock().clone()
    }

    fn realistic_lock(&self) -> MutexGuard<'_, Option<Arc<KubeletRules>>> {
        self.inner
            .realistic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn delay(&self) -> Duration {
        *self.inner.delay.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn rollouts_ready(&self) -> bool {
        self.inner.ready.load(Ordering::SeqCst)
    }

    pub(crate) async fn settings_changed(&self) {
        self.inner.changed.notified().await;
    }
}
