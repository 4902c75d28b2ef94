//! Leader election on a coordination.k8s.io Lease.
//!
//! A replica holds the lease while it renews it within the lease duration;
//! another takes over only after the holder's renewal has lapsed. Every
//! write carries the lease's resourceVersion, so two candidates racing for
//! it cannot both win. A leader that cannot renew in time stops its work
//! before the lease can lapse for the others.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use super::telemetry::Telemetry;

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub lease_name: String,
    /// Namespace of the Lease (the operator's own).
    pub namespace: String,
    /// Who this replica is (the pod name, or host and process).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_interval: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "ferry".to_owned());
        LeaderConfig {
            lease_name: "ferry-leader".to_owned(),
            namespace: "ferry-system".to_owned(),
            identity: format!("{host}-{}", std::process::id()),
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
        }
    }
}

/// How long a stopping leader waits for its work to finish.
const DRAIN: Duration = Duration::from_secs(10);

/// Runs `work()` whenever this replica holds the lease, and stops it when
/// the lease is lost. When `stop` turns true it waits (at most [`DRAIN`])
/// for the work to finish, hands the lease back so a standby can take over
/// at once, and returns.
pub async fn run_while_leader<F, Fut>(
    client: kube::Client,
    config: LeaderConfig,
    telemetry: Arc<Telemetry>,
    work: F,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
    // Dropping this future (shutdown) must stop the work it started.
    let mut running: Option<AbortOnDrop> = None;
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        let leading = match try_acquire(&leases, &config).await {
            Ok(leading) => {
                if leading {
                    last_renewed = tokio::time::Instant::now();
                }
                leading
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot read or renew the leader lease");
                // Keep working only while the last renewal is surely valid.
                running.is_some()
                    && last_renewed.elapsed() + config.renew_interval < config.lease_duration
            }
        };
        match (leading, running.is_some()) {
            (true, false) => {
                tracing::info!(identity = %config.identity, "became the leader");
                telemetry.leader.set(1);
                running = Some(AbortOnDrop(tokio::spawn(work())));
            }
            (false, true) => {
                tracing::warn!(identity = %config.identity, "lost the leader lease; stopping controllers");
                telemetry.leader.set(0);
                running = None;
            }
            _ => {}
        }
        if running.as_ref().is_some_and(|task| task.0.is_finished()) {
            // The controllers ended on their own: start them again.
            running = None;
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(config.renew_interval) => {}
            () = stopped(&mut stop) => {
                if let Some(mut task) = running.take() {
                    let _ = tokio::time::timeout(DRAIN, &mut task.0).await;
                    release(&leases, &config).await;
                }
                telemetry.leader.set(0);
                return;
            }
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: drop it at once.
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Gives the lease up, if we still hold it, so another replica need not
/// wait for it to lapse.
async fn release(leases: &Api<Lease>, config: &LeaderConfig) {
    let Ok(Some(mut lease)) = leases.get_opt(&config.lease_name).await else {
        return;
    };
    let Some(spec) = lease.spec.as_mut() else {
        return;
    };
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    spec.renew_time = None;
    match leases
        .replace(&config.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => tracing::info!(identity = %config.identity, "released the leader lease"),
        Err(err) => tracing::warn!(error = %err, "cannot release the leader lease; it will lapse"),
    }
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One attempt to take or keep the lease; `Ok(true)` while we hold it.
async fn try_acquire(leases: &Api<Lease>, config: &LeaderConfig) -> kube::Result<bool> {
    let now = jiff::Timestamp::now();
    let duration_seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = leases.get_opt(&config.lease_name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.lease_name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration_seconds),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
    let held_for = spec
        .lease_duration_seconds
        .map_or(config.lease_duration, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0))
        });
    let lapsed = spec.renew_time.as_ref().is_none_or(|renewed| {
        now.duration_since(renewed.0)
            .try_into()
            .is_ok_and(|since: Duration| since > held_for)
    });
    if !ours && !lapsed {
        return Ok(false);
    }
    if !ours {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(MicroTime(now));
    spec.lease_duration_seconds = Some(duration_seconds);
    // The resourceVersion read above makes this write lose to any other.
    match leases
        .replace(&config.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
}
