//! The module a policy runs, and its replacement when the source or digest
//! changes: a new module must load and pass a smoke evaluation on an empty
//! snapshot before it replaces the old one, which keeps running until then.
//! What the last replacement said is kept for the `ModuleLoaded` condition.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::Mutex;

use crate::crd::{ModuleLocation, ValidatedPolicy};
use crate::modules::source::{self, SourceError};
use crate::policy::{Engine, Limits, LoadError, Policy, PolicyError};
use crate::snapshot::{self, Terms};

/// Why a module could not (yet) take over. The reason names are the
/// `ModuleLoaded` condition's reasons.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("cannot fetch the module: {0}")]
    Fetch(#[from] SourceError),
    #[error("{0}")]
    Load(#[from] LoadError),
    #[error("the module failed its smoke evaluation on an empty snapshot: {class}: {error}")]
    SmokeTest {
        class: &'static str,
        #[source]
        error: PolicyError,
    },
}

impl ModuleError {
    /// The `ModuleLoaded=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ModuleError::Fetch(err) => err.reason(),
            ModuleError::Load(LoadError::DigestMismatch { .. }) => "DigestMismatch",
            ModuleError::Load(LoadError::TooLarge { .. }) => "TooLarge",
            ModuleError::Load(_) => "LoadFailed",
            ModuleError::SmokeTest { .. } => "SmokeTestFailed",
        }
    }

    /// Whether trying again without a spec change may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, ModuleError::Fetch(err) if err.is_transient())
    }
}

/// A loaded module and where it came from.
#[derive(Clone, Debug)]
pub struct ActiveModule {
    pub policy: Policy,
    pub sha256: String,
    pub location: ModuleLocation,
    /// For an OCI module: the reference it was pulled by, pinned by digest.
    pub reference: Option<String>,
}

/// What [`ModuleSlot::ensure`] did.
#[derive(Debug)]
pub enum Reload {
    /// The wanted module already runs.
    Unchanged,
    /// A new module took over (from the one with this digest, if any).
    Replaced { previous: Option<String> },
    /// The wanted module could not take over; the previous one, if any,
    /// keeps running.
    Failed(ModuleError),
}

/// One policy's module, replaced only by one that works.
#[derive(Debug, Default)]
pub struct ModuleSlot {
    active: Option<ActiveModule>,
}

impl ModuleSlot {
    pub fn active(&self) -> Option<&ActiveModule> {
        self.active.as_ref()
    }

    /// Makes the module `wanted` names the active one, if it loads and
    /// passes its smoke evaluation. An OCI module's tag is resolved here,
    /// when the module is loaded: the active one keeps its digest until the
    /// source in the spec changes.
    pub async fn ensure(
        &mut self,
        engine: &Engine,
        fetch: &FetchScope<'_>,
        namespace: &str,
        name: &str,
        wanted: &ValidatedPolicy,
    ) -> Reload {
        if self.active.as_ref().is_some_and(|a| {
            a.location == wanted.module && wanted.sha256.as_ref().is_none_or(|sha| *sha == a.sha256)
        }) {
            return Reload::Unchanged;
        }
        match load_and_smoke_test(engine, fetch, namespace, name, wanted).await {
            Ok((policy, sha256, reference)) => {
                let previous = self.active.take().map(|a| a.sha256);
                self.active = Some(ActiveModule {
                    policy,
                    sha256,
                    location: wanted.module.clone(),
                    reference,
                });
                Reload::Replaced { previous }
            }
            Err(err) => Reload::Failed(err),
        }
    }
}

/// Where module bytes are read: the client, the operator's namespace (for
/// an OCI module's Secrets) and the size limit.
#[derive(Clone, Copy)]
pub struct FetchScope<'a> {
    pub client: &'a kube::Client,
    pub operator_namespace: &'a str,
    pub max_module_bytes: usize,
}

/// What the last module reload of each policy said, for its condition.
#[derive(Clone, Debug)]
pub(crate) struct ModuleState {
    pub(crate) loaded: bool,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

/// Each policy's last [`ModuleState`], by `namespace/name`.
#[derive(Debug, Default)]
pub(crate) struct ModuleStates(Mutex<HashMap<String, ModuleState>>);

impl ModuleStates {
    /// Remembers what the module slot did, for the `ModuleLoaded` condition.
    pub(crate) async fn note(
        &self,
        namespace: &str,
        name: &str,
        reload: &Reload,
        active: Option<&str>,
    ) {
        let state = match reload {
            Reload::Unchanged => return,
            Reload::Replaced { previous } => ModuleState {
                loaded: true,
                reason: "Loaded",
                message: match (previous, active) {
                    (Some(old), Some(new)) => {
                        format!("module {} replaced {}", short(new), short(old))
                    }
                    (_, Some(new)) => format!("module {} loaded", short(new)),
                    _ => "module loaded".to_owned(),
                },
            },
            Reload::Failed(err) => ModuleState {
                loaded: false,
                reason: err.reason(),
                message: match active {
                    Some(old) => format!("{err}; module {} keeps running", short(old)),
                    None => err.to_string(),
                },
            },
        };
        self.0
            .lock()
            .await
            .insert(format!("{namespace}/{name}"), state);
    }

    /// What the last reload of the policy `key` said, if it said anything.
    pub(crate) async fn get(&self, key: &str) -> Option<ModuleState> {
        self.0.lock().await.get(key).cloned()
    }

    /// Forgets the policies not in `live` (deleted ones).
    pub(crate) async fn retain(&self, live: &HashSet<String>) {
        self.0.lock().await.retain(|key, _| live.contains(key));
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// The policy, the sha256 of its bytes and, for an OCI module, the pinned
/// reference.
async fn load_and_smoke_test(
    engine: &Engine,
    fetch: &FetchScope<'_>,
    namespace: &str,
    name: &str,
    wanted: &ValidatedPolicy,
) -> Result<(Policy, String, Option<String>), ModuleError> {
    let fetched = source::fetch(
        fetch.client,
        fetch.operator_namespace,
        namespace,
        &wanted.module,
        fetch.max_module_bytes,
    )
    .await?;
    // The spec's digest when it names one (it must then match what the
    // registry's manifest names), else the manifest's.
    let Some(digest) = wanted.sha256.clone().or(fetched.sha256) else {
        return Err(LoadError::Compile("no digest pins the module".to_owned()).into());
    };
    let loader = engine.clone();
    let label = format!("{namespace}/{name}");
    let bytes = fetched.bytes;
    let expected = digest.clone();
    let policy = tokio::task::spawn_blocking(move || loader.load(&label, &bytes, Some(&expected)))
        .await
        .map_err(|err| LoadError::Compile(format!("the compile task failed: {err}")))??;
    // No clusters and no workloads: the module only has to answer.
    let smoke = snapshot::assemble(
        u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0),
        Vec::new(),
        None,
        Vec::new(),
        Terms {
            thresholds: wanted.thresholds.clone(),
            parameters: wanted.parameters_json.clone(),
        },
    );
    let limits = Limits {
        timeout: wanted.limits.timeout,
        memory_bytes: wanted.limits.memory_bytes,
        fuel: wanted.limits.fuel,
        ..Limits::default()
    };
    engine
        // The smoke evaluation counts against the policy's own fair share.
        .evaluate_for(
            &format!("{namespace}/{name}"),
            &policy,
            Arc::new(smoke),
            limits,
        )
        .await
        .map_err(|error| ModuleError::SmokeTest {
            class: error.class(),
            error,
        })?;
    Ok((policy, digest, fetched.pinned))
}
