//! The sender's entry points for the control loop: start a move, count
//! moves in flight, read when a workload last moved.
//!
//! Starting a move only reads the source workload: it must never change it
//! (that waits for the target's `Ready`, in the sender controller).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use kube::runtime::events::{Recorder, Reporter};

use super::cargo::{Cargo, load_cargo, load_claims};
use super::remote::Remote;
use crate::crd::{
    HookKind, IntentAction, MigrationRole, MigrationStrategy, PartialMove, PolicyRef, SourceAction,
    StatefulMoves, WorkloadMigration, WorkloadMigrationSpec,
};
use crate::migration::envelope::{KeyRing, nonce, sign_request, signed_intent};
use crate::migration::error::{Error, Result, is_already_exists};
use crate::migration::hooks::hook;
use crate::migration::names::{
    ANNOTATION_LAST_MIGRATION, LABEL_MIGRATION, LABEL_ROLE, SENDER_FINALIZER, inbox_namespace,
};
use crate::migration::nats::NatsLink;
use crate::migration::progressive::GateMetrics;
use crate::migration::request::{migration_name, request_id};
use crate::migration::sanitize::{Objection, reasons};
use crate::migration::sealed::seal_secrets;
use crate::migration::workload::{self, WorkloadKind, is_stateful};
use crate::peers::PeerSet;
use crate::trust::{ClusterKeys, PublicKeys};

/// Timing of the sender.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Decisions within one bucket map to the same request id.
    pub request_bucket: Duration,
    /// How often the target's request is read while a move is in flight.
    pub poll_interval: Duration,
    /// First retry delay after a failure (doubles per attempt).
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// How long a finished mirror stays before it is deleted (the journal
    /// and Events keep the history).
    pub finished_ttl: Duration,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            request_bucket: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(2),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            finished_ttl: Duration::from_secs(24 * 3600),
        }
    }
}

/// What the sender needs: the local cluster, its own name as peers know it,
/// the peer registry and timing.
#[derive(Clone)]
pub struct SenderContext {
    /// The local cluster (the workload and the mirrors live here).
    pub client: Client,
    /// This cluster's name in the peers' `ClusterPeer` objects (the
    /// request's `sourceCluster`).
    pub local_cluster: String,
    /// Peer clients.
    pub peers: PeerSet,
    /// Timing.
    pub config: SenderConfig,
    /// This cluster's keys: mirrors, requests and intents are signed with
    /// them, and a mirror they did not sign is never acted on.
    pub keys: KeyRing,
    /// Events on mirrors (a refused, unsigned one).
    pub(crate) recorder: Recorder,
    /// Consecutive failures per mirror, for the backoff.
    pub(crate) attempts: Arc<Mutex<BTreeMap<String, u32>>>,
    /// The fleet's broker, for peers with transport `Nats`.
    pub nats: Option<NatsLink>,
    /// Where progressive moves read their health gate.
    pub gate: Option<Arc<dyn GateMetrics>>,
}

impl SenderContext {
    /// A context with default timing.
    pub fn new(client: Client, local_cluster: impl Into<String>, peers: PeerSet) -> Self {
        Self::with_config(client, local_cluster, peers, SenderConfig::default())
    }

    /// A context with the given timing.
    pub fn with_config(
        client: Client,
        local_cluster: impl Into<String>,
        peers: PeerSet,
        config: SenderConfig,
    ) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "ferry-sender".to_owned(),
                instance: None,
            },
        );
        Self {
            client,
            local_cluster: local_cluster.into(),
            peers,
            config,
            keys: KeyRing::default(),
            recorder,
            attempts: Arc::default(),
            nats: None,
            gate: None,
        }
    }

    /// The same context sending to `Nats` peers through `link`.
    pub fn with_nats(mut self, link: NatsLink) -> Self {
        self.nats = Some(link);
        self
    }

    /// The same context reading progressive moves' health gates through
    /// `metrics`.
    pub fn with_gate_metrics(mut self, metrics: Arc<dyn GateMetrics>) -> Self {
        self.gate = Some(metrics);
        self
    }

    /// The same context signing with `keys`.
    pub fn with_keys(mut self, keys: KeyRing) -> Self {
        self.keys = keys;
        self
    }

    /// This cluster's keys, or [`Error::KeysNotLoaded`].
    pub(crate) fn cluster_keys(&self) -> Result<Arc<ClusterKeys>> {
        self.keys.get().ok_or(Error::KeysNotLoaded)
    }
}

/// One accepted decision.
#[derive(Clone, Debug)]
pub struct MigrationRequest {
    /// The workload's kind: `Deployment`, or `StatefulSet` when `stateful`
    /// enables stateful moves.
    pub kind: String,
    /// The workload's namespace (the same on both sides).
    pub namespace: String,
    /// The workload's name.
    pub name: String,
    /// The target `ClusterPeer` name.
    pub target: String,
    /// When the decision was made (with the uid and target, the request id).
    pub decided_at: jiff::Timestamp,
    /// What happens to the source once the target is ready.
    pub source_action: SourceAction,
    /// How the workload is handed over; `None`: all at once.
    pub strategy: Option<MigrationStrategy>,
    /// Move only this many of the workload's replicas (a partial move);
    /// `None`, or as many as it has: all of them.
    pub replicas: Option<i32>,
    /// May referenced Secrets be copied (the policy's `allowSecretCopy`).
    pub allow_secret_copy: bool,
    /// Whether StatefulSets and Deployments that mount claims may move,
    /// with the hooks that hand their data over (the policy's `stateful`).
    /// `None`: such a workload is refused (`StatefulNotAllowed`).
    pub stateful: Option<StatefulMoves>,
    /// Time from now until the move is rolled back if the target is not ready.
    pub timeout: Duration,
    /// The deciding policy.
    pub policy: Option<PolicyRef>,
    /// The saving per hour the policy expected.
    pub hourly_savings: Option<f64>,
    /// Ask the receiver to check and report only. The operator never sets it
    /// in `DryRun` mode (it writes nothing to peers then); it exists for
    /// checking a receiver's rules.
    pub dry_run: bool,
}

impl MigrationRequest {
    /// A request to move the Deployment `namespace/name` to `target` now,
    /// scaling the source to zero, with a ten-minute deadline.
    pub fn deployment(namespace: &str, name: &str, target: &str) -> Self {
        Self {
            kind: "Deployment".into(),
            namespace: namespace.into(),
            name: name.into(),
            target: target.into(),
            decided_at: jiff::Timestamp::now(),
            source_action: SourceAction::ScaleToZero,
            strategy: None,
            replicas: None,
            allow_secret_copy: false,
            stateful: None,
            timeout: Duration::from_secs(600),
            policy: None,
            hourly_savings: None,
            dry_run: false,
        }
    }
}

/// What [`start_migration`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartOutcome {
    /// The mirror was created (and the target request, unless the peer was
    /// unreachable: the sender controller creates it then).
    Created { name: String },
    /// The same decision was already carried out or is in flight.
    AlreadyExists { name: String },
}

/// Starts moving a workload: checks it, writes the mirror (role `Source`)
/// locally, then the request (role `Target`) in this cluster's inbox in the
/// target peer. Repeating
/// a decision returns [`StartOutcome::AlreadyExists`]; a different active
/// move of the same workload is [`Error::ActiveMigration`].
///
/// The mirror is written first: a request in the target without a mirror
/// would have no sender to finish or roll it back.
#[tracing::instrument(skip_all, fields(workload = %format!("{}/{}", req.namespace, req.name), target = %req.target))]
pub async fn start_migration(ctx: &SenderContext, req: MigrationRequest) -> Result<StartOutcome> {
    let Some(kind) = WorkloadKind::named(&req.kind) else {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!(
                "only Deployments and StatefulSets can move, not {}",
                req.kind
            ),
        )
        .into());
    };
    let source = read_workload(ctx, &req, kind).await?;
    let remote = Remote::for_peer(ctx, &req.target)?;
    let uid = source.uid().unwrap_or_default();
    let id = request_id(&uid, &req.target, req.decided_at, ctx.config.request_bucket);
    let name = migration_name(&req.name, &id);

    let mirrors: Api<WorkloadMigration> = Api::namespaced(ctx.client.clone(), &req.namespace);
    if let Some(outcome) = earlier_move(&mirrors, &req, &name).await? {
        return Ok(outcome);
    }
    let mut manifest = serde_json::to_value(&source).map_err(|e| Error::InvalidRequest {
        name: name.clone(),
        message: e.to_string(),
    })?;
    manifest["apiVersion"] = "apps/v1".into();
    manifest["kind"] = kind.as_str().into();
    let cargo = load_cargo(
        &ctx.client,
        &req.namespace,
        req.allow_secret_copy,
        &manifest,
        &name,
    )
    .await?;
    let keys = ctx.cluster_keys()?;

    let stateful = is_stateful(&cargo.workload);
    let mut spec = mirror_spec(ctx, &req, id, cargo)?;
    if stateful {
        stateful_move(ctx, &req, &mut spec).await?;
    } else if let Some(partial) = partial_move(&req, &manifest)? {
        spec.workload["spec"]["replicas"] = partial.replicas.into();
        spec.partial = Some(partial);
    }
    // The hooks' time comes on top of the time a move may take.
    for hook in spec
        .hooks
        .iter()
        .flat_map(|h| [&h.export, &h.import])
        .flatten()
    {
        if let Ok(time) = jiff::SignedDuration::try_from(hook.timeout()) {
            spec.deadline = Time(
                spec.deadline
                    .0
                    .saturating_add(time)
                    .unwrap_or(spec.deadline.0),
            );
        }
    }
    // A progressive move's pauses come on top of the time a move may take.
    if let Ok(Some(plan)) = crate::migration::progressive::plan(&spec) {
        let pauses = plan.pause.saturating_mul(plan.steps().unsigned_abs());
        if let Ok(pauses) = jiff::SignedDuration::try_from(pauses) {
            spec.deadline = Time(
                spec.deadline
                    .0
                    .saturating_add(pauses)
                    .unwrap_or(spec.deadline.0),
            );
        }
    }
    spec.transport = Some(remote.transport());
    sign_request(&keys, &mut spec).map_err(|source| Error::Untrusted {
        what: "cannot sign the mirror".into(),
        source,
    })?;
    let mut mirror = request_object(&name, &req.namespace, spec);
    // The finalizer from the start: deleting the mirror mid-flight must
    // withdraw the request from the target first.
    mirror.metadata.finalizers = Some(vec![SENDER_FINALIZER.to_owned()]);
    match mirrors.create(&PostParams::default(), &mirror).await {
        Ok(_) => {}
        Err(e) if is_already_exists(&e) => return Ok(StartOutcome::AlreadyExists { name }),
        Err(e) => return Err(Error::kube("create the local WorkloadMigration", e)),
    }
    // A stateful move exports its data first: the sender controller sends
    // the request once the export hook has completed.
    if hook(&mirror.spec, HookKind::Export).is_some() {
        return Ok(StartOutcome::Created { name });
    }
    // Fast path; on failure the sender controller creates it from the mirror.
    let seal_to = ctx
        .peers
        .get(&req.target)
        .and_then(|p| p.spec.public_keys.first().cloned());
    let delivered = match target_request(&mirror, &keys, seal_to.as_ref()) {
        Ok(target) => remote.create(&target).await,
        Err(error) => Err(error),
    };
    if let Err(error) = delivered {
        tracing::info!(%error, name, "target request not created yet; the sender retries");
    }
    Ok(StartOutcome::Created { name })
}

/// The part of the workload a request for `req.replicas` moves: `None` for
/// the whole of it. A partial move leaves replicas in the source, so it
/// cannot delete the source.
fn partial_move(req: &MigrationRequest, manifest: &Value) -> Result<Option<PartialMove>> {
    let of = i32::try_from(workload::replicas(manifest)).unwrap_or(i32::MAX);
    let Some(replicas) = req.replicas.filter(|r| *r < of) else {
        return Ok(None);
    };
    let invalid = |message: String| Error::InvalidRequest {
        name: format!("{}/{}", req.namespace, req.name),
        message,
    };
    if replicas < 1 {
        return Err(invalid(format!(
            "a move carries at least one replica, not {replicas}"
        )));
    }
    if req.source_action == SourceAction::Delete {
        return Err(invalid(format!(
            "moving {replicas} of {of} replicas leaves the rest in the source, which sourceAction Delete would remove; use ScaleToZero or Keep"
        )));
    }
    Ok(Some(PartialMove { replicas, of }))
}

/// The local workload the request names, of `kind`.
async fn read_workload(
    ctx: &SenderContext,
    req: &MigrationRequest,
    kind: WorkloadKind,
) -> Result<DynamicObject> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &req.namespace, &kind.resource());
    api.get_opt(&req.name)
        .await
        .map_err(|e| Error::kube("read the workload", e))?
        .ok_or_else(|| Error::WorkloadNotFound {
            kind: req.kind.clone(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
        })
}

/// Makes `spec` a stateful move, if the policy allows one: the claims the
/// workload mounts travel (to be created empty in the target), with the
/// policy's hooks. It moves whole and all at once: a StatefulSet's
/// ordinals, or a claim a Deployment's replicas share, cannot be split
/// between clusters.
async fn stateful_move(
    ctx: &SenderContext,
    req: &MigrationRequest,
    spec: &mut WorkloadMigrationSpec,
) -> Result<()> {
    let Some(stateful) = req.stateful.as_ref().filter(|s| s.enabled) else {
        return Err(Objection::new(
            reasons::STATEFUL_NOT_ALLOWED,
            format!(
                "{} {}/{} keeps state (a StatefulSet, or a PersistentVolumeClaim it mounts) and the policy does not set stateful.enabled",
                req.kind, req.namespace, req.name
            ),
        )
        .into());
    };
    let of = workload::replicas(&spec.workload);
    if req.replicas.is_some_and(|r| i64::from(r) < of) {
        return Err(Error::InvalidRequest {
            name: format!("{}/{}", req.namespace, req.name),
            message: format!(
                "a stateful workload moves whole; moving {} of its {of} replicas is refused",
                req.replicas.unwrap_or_default()
            ),
        });
    }
    spec.strategy = None;
    spec.claims = load_claims(&ctx.client, &req.namespace, &spec.workload).await?;
    spec.hooks = Some(stateful.hooks.clone()).filter(|h| !h.is_empty());
    Ok(())
}

/// What an earlier decision already started: this very request
/// ([`StartOutcome::AlreadyExists`]), or another active move of the same
/// workload ([`Error::ActiveMigration`]). `None`: nothing, go on.
async fn earlier_move(
    mirrors: &Api<WorkloadMigration>,
    req: &MigrationRequest,
    name: &str,
) -> Result<Option<StartOutcome>> {
    let existing = mirrors
        .list(&ListParams::default().labels(&format!("{LABEL_ROLE}=source")))
        .await
        .map_err(|e| Error::kube("list the local WorkloadMigrations", e))?;
    if existing.items.iter().any(|m| m.name_any() == name) {
        return Ok(Some(StartOutcome::AlreadyExists {
            name: name.to_owned(),
        }));
    }
    if let Some(active) = existing.items.iter().find(|m| {
        m.spec.role == MigrationRole::Source
            && workload_name(m) == Some(req.name.as_str())
            && !m.status.as_ref().is_some_and(|s| s.phase.is_terminal())
    }) {
        return Err(Error::ActiveMigration {
            namespace: req.namespace.clone(),
            workload: req.name.clone(),
            existing: active.name_any(),
        });
    }
    Ok(None)
}

/// The mirror's spec (role `Source`), with the deadline counted from now,
/// a fresh nonce and the time of issue; unsigned.
fn mirror_spec(
    ctx: &SenderContext,
    req: &MigrationRequest,
    id: String,
    cargo: Cargo,
) -> Result<WorkloadMigrationSpec> {
    let nonce = nonce().map_err(|source| Error::Untrusted {
        what: "cannot draw a nonce".into(),
        source,
    })?;
    let deadline = jiff::Timestamp::now()
        + jiff::SignedDuration::try_from(req.timeout)
            .unwrap_or(jiff::SignedDuration::from_hours(1));
    Ok(WorkloadMigrationSpec {
        request_id: id,
        source_cluster: ctx.local_cluster.clone(),
        target_cluster: req.target.clone(),
        target_namespace: req.namespace.clone(),
        workload: cargo.workload,
        config_maps: cargo.config_maps,
        secrets: cargo.secrets,
        dependents: cargo.dependents,
        claims: Vec::new(),
        hooks: None,
        source_action: req.source_action,
        strategy: req.strategy.clone().filter(|s| s.is_progressive()),
        partial: None,
        deadline: Time(deadline),
        dry_run: req.dry_run,
        role: MigrationRole::Source,
        policy: req.policy.clone(),
        hourly_savings: req.hourly_savings,
        intent: None,
        transport: None,
        nonce,
        issued_at: Some(Time(jiff::Timestamp::now())),
        signature: None,
    })
}

/// A `WorkloadMigration` object with the labels every request carries.
pub(crate) fn request_object(
    name: &str,
    namespace: &str,
    spec: WorkloadMigrationSpec,
) -> WorkloadMigration {
    let role = match spec.role {
        MigrationRole::Source => "source",
        MigrationRole::Target => "target",
    };
    let mut wm = WorkloadMigration::new(name, spec);
    wm.metadata.namespace = Some(namespace.to_owned());
    wm.metadata.labels = Some(BTreeMap::from([
        (LABEL_MIGRATION.to_owned(), name.to_owned()),
        (LABEL_ROLE.to_owned(), role.to_owned()),
    ]));
    wm
}

/// The target's copy of a mirror, as it sits in this cluster's inbox in the
/// peer: signed as the request, Secrets sealed to the peer's key, asking it
/// to proceed.
pub(crate) fn target_request(
    mirror: &WorkloadMigration,
    keys: &ClusterKeys,
    seal_to: Option<&PublicKeys>,
) -> Result<WorkloadMigration> {
    let untrusted = |source| Error::Untrusted {
        what: "cannot sign or seal the request".into(),
        source,
    };
    let mut spec = mirror.spec.clone();
    spec.role = MigrationRole::Target;
    if !spec.secrets.is_empty() {
        // Secret data leaves this cluster only sealed to the target's key.
        let Some(to) = seal_to else {
            return Err(Error::InvalidRequest {
                name: mirror.name_any(),
                message: format!(
                    "ClusterPeer {} lists no publicKeys to seal Secrets to",
                    spec.target_cluster
                ),
            });
        };
        seal_secrets(to, &mut spec).map_err(untrusted)?;
    }
    sign_request(keys, &mut spec).map_err(untrusted)?;
    spec.intent =
        Some(signed_intent(keys, &spec, IntentAction::Proceed, 1, None).map_err(untrusted)?);
    let namespace = inbox_namespace(&spec.source_cluster);
    Ok(request_object(&mirror.name_any(), &namespace, spec))
}

/// The workload name a request carries.
pub(crate) fn workload_name(wm: &WorkloadMigration) -> Option<&str> {
    wm.spec
        .workload
        .pointer("/metadata/name")
        .and_then(Value::as_str)
}

/// How many moves this cluster has in flight: local mirrors (role `Source`)
/// in a non-terminal phase, in every namespace. For the guardrails' `maxInFlight`.
pub async fn count_in_flight(client: &Client) -> Result<usize> {
    let api: Api<WorkloadMigration> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(&format!("{LABEL_ROLE}=source")))
        .await
        .map_err(|e| Error::kube("list the local WorkloadMigrations", e))?;
    Ok(list
        .items
        .iter()
        .filter(|m| m.spec.role == MigrationRole::Source)
        .filter(|m| !m.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        .count())
}

/// When the workload last moved (out of or into this cluster), from its
/// `ferry.dev/last-migration` annotation; for the guardrails' cooldown.
pub fn last_migration_time(meta: &ObjectMeta) -> Option<jiff::Timestamp> {
    meta.annotations
        .as_ref()?
        .get(ANNOTATION_LAST_MIGRATION)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_migration_reads_the_annotation() {
        let mut meta = ObjectMeta::default();
        assert_eq!(last_migration_time(&meta), None);
        meta.annotations = Some(BTreeMap::from([(
            ANNOTATION_LAST_MIGRATION.to_owned(),
            "2025-03-01T10:00:00Z".to_owned(),
        )]));
        assert_eq!(
            last_migration_time(&meta),
            Some("2025-03-01T10:00:00Z".parse().unwrap())
        );
    }
}
