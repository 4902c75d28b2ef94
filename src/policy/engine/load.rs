//! Loading modules: verifying their bytes, compiling each digest once and
//! keeping the result ([`Compiled`]), and what a loaded [`Policy`] is. The
//! disk cache behind compilation belongs to the [`Runtime`]. Runs no guest
//! code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use sha2::{Digest, Sha256};

use super::runtime::{Pre, Runtime};
use crate::policy::bindings::Contract;
use crate::policy::error::{LoadError, PolicyError, Result};
use crate::policy::inspect::{BuiltWith, built_with};
use crate::policy::lower::{self, Keeps};

/// A compiled module, ready to instantiate. Cheap to clone.
#[derive(Clone)]
pub struct Policy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    name: String,
    digest: String,
    size: usize,
    /// What the module promises to keep of its input, which decides how
    /// much of it may share one allocation (see [`lower::Placement`]).
    keeps_input: Keeps,
    /// Built without fuel metering.
    pre: Pre,
    /// The module again, kept for the metered build.
    bytes: Arc<[u8]>,
    /// Built with fuel metering when an evaluation first sets a budget.
    /// An error is kept too: the same bytes would fail the same way.
    metered: OnceLock<std::result::Result<Pre, String>>,
}

impl Policy {
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Hex sha256 of the module bytes.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// What the module declares it keeps of its input until the instance
    /// ends: modules exported with the policy SDK's `policy!` keep it all.
    pub fn keeps_input(&self) -> Keeps {
        self.inner.keeps_input
    }

    /// The contract the module implements.
    pub fn contract(&self) -> Contract {
        self.inner.pre.contract()
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.inner.name)
            .field("digest", &self.inner.digest)
            .finish()
    }
}

/// What `ferry policy check` reports about a module.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModuleInfo {
    pub size: usize,
    pub sha256: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// The contract it implements (`ferry policy check` names its world).
    #[serde(skip)]
    pub contract: Contract,
    /// What it declares it keeps of its input (see [`Policy::keeps_input`]).
    #[serde(rename = "keepsInput")]
    pub keeps_input: Keeps,
    /// The language and toolchain its sections name.
    #[serde(rename = "builtWith")]
    pub built_with: BuiltWith,
}

impl Policy {
    /// Links `bytes`, already verified, as `name`; keeps the bytes for the
    /// metered build.
    fn new(name: &str, digest: String, bytes: &[u8], pre: Pre) -> Self {
        Policy {
            inner: Arc::new(PolicyInner {
                name: name.to_owned(),
                digest,
                size: bytes.len(),
                keeps_input: lower::keeps_input(bytes),
                pre,
                bytes: bytes.into(),
                metered: OnceLock::new(),
            }),
        }
    }

    /// The build without fuel metering.
    pub(super) fn plain(&self) -> &Pre {
        &self.inner.pre
    }

    /// The build with fuel metering, which `runtime` compiles on first use.
    pub(super) fn metered(&self, runtime: &Runtime) -> Result<&Pre> {
        let pre = self.inner.metered.get_or_init(|| {
            runtime
                .prepare(&self.inner.digest, &self.inner.bytes)
                .map_err(|err| err.to_string())
        });
        match pre {
            Ok(pre) => Ok(pre),
            Err(err) => Err(PolicyError::Host(format!(
                "cannot compile the module with fuel metering: {err}"
            ))),
        }
    }

    /// What `ferry policy check` reports about the module of `bytes`, as
    /// `engine` sees its component.
    pub(super) fn info(&self, engine: &wasmtime::Engine, bytes: &[u8]) -> ModuleInfo {
        let component = self.inner.pre.instance_pre().component();
        let ty = component.component_type();
        ModuleInfo {
            size: bytes.len(),
            sha256: self.digest().to_owned(),
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            contract: self.contract(),
            keeps_input: self.keeps_input(),
            built_with: built_with(bytes),
        }
    }
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The modules compiled so far, by digest, at most `max` of them: each with
/// the tick of its last load, so the least recently loaded goes first.
pub(super) struct Compiled {
    max: usize,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_digest: HashMap<String, (Policy, u64)>,
    tick: u64,
}

impl Entries {
    fn touch(&mut self, digest: &str) -> Option<Policy> {
        self.tick += 1;
        let tick = self.tick;
        self.by_digest.get_mut(digest).map(|(policy, used)| {
            *used = tick;
            policy.clone()
        })
    }
}

impl Compiled {
    /// Verifies, compiles with `runtime` and links a module, or returns the
    /// one already compiled for the same bytes. `expected_sha256`, when
    /// given, must match before anything is compiled.
    pub(super) fn load(
        &self,
        runtime: &Runtime,
        max_module_bytes: usize,
        name: &str,
        bytes: &[u8],
        expected_sha256: Option<&str>,
    ) -> Result<Policy, LoadError> {
        if bytes.len() > max_module_bytes {
            return Err(LoadError::TooLarge {
                size: bytes.len(),
                limit: max_module_bytes,
            });
        }
        let digest = sha256_hex(bytes);
        if let Some(expected) = expected_sha256
            && !expected.eq_ignore_ascii_case(&digest)
        {
            return Err(LoadError::DigestMismatch {
                expected: expected.to_owned(),
                actual: digest,
            });
        }
        if let Some(policy) = self.lock().touch(&digest) {
            return Ok(policy);
        }

        let pre = runtime.prepare(&digest, bytes)?;
        let policy = Policy::new(name, digest.clone(), bytes, pre);
        let mut entries = self.lock();
        while entries.by_digest.len() >= self.max.max(1) {
            let oldest = entries
                .by_digest
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(digest, _)| digest.clone());
            match oldest {
                Some(digest) => entries.by_digest.remove(&digest),
                None => break,
            };
        }
        entries.tick += 1;
        let tick = entries.tick;
        entries.by_digest.insert(digest, (policy.clone(), tick));
        Ok(policy)
    }

    /// Forgets compiled modules whose digest is not in `keep`.
    pub(super) fn retain(&self, keep: &[&str]) {
        self.lock()
            .by_digest
            .retain(|digest, _| keep.contains(&digest.as_str()));
    }

    /// The digests held now, for tests and diagnostics.
    pub(super) fn digests(&self) -> Vec<String> {
        let mut digests: Vec<String> = self.lock().by_digest.keys().cloned().collect();
        digests.sort();
        digests
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Compiled {
    pub(super) fn new(max: usize) -> Self {
        Compiled {
            max,
            entries: Mutex::default(),
        }
    }
}
