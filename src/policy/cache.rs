//! Compiled components kept between runs, behind [`ArtifactStore`]: the
//! host says what to keep under which key, and a store (on disk,
//! [`crate::modules::DiskCache`]) keeps the bytes. The host deserialises
//! only what comes back under a key that binds it to the module's sha256
//! and to this engine's configuration, so an artefact from any other
//! engine, version or module is never loaded.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept between runs. Only Ferry's own
/// stores implement it: whatever [`ArtifactStore::load`] returns is
/// deserialised as native code.
pub trait ArtifactStore: Send + Sync + std::fmt::Debug {
    /// The bytes stored under `key`, if any.
    fn load(&self, key: &str) -> Option<Vec<u8>>;
    /// Keeps `bytes` under `key`, replacing what was there.
    fn store(&self, key: &str, bytes: &[u8]) -> std::io::Result<()>;
    /// Forgets `key`: its bytes could not be used.
    fn discard(&self, key: &str);
}

/// One engine's view of a store: its keys carry the engine's configuration.
pub(crate) struct CompiledCache {
    store: Arc<dyn ArtifactStore>,
    engine_key: String,
}

impl CompiledCache {
    pub(crate) fn new(store: Arc<dyn ArtifactStore>, engine: &Engine) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        engine.precompile_compatibility_hash().hash(&mut hasher);
        CompiledCache {
            store,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    fn key(&self, digest: &str) -> String {
        format!("{digest}.{}", self.engine_key)
    }

    /// The compiled component for `digest`, if this engine cached it.
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let key = self.key(digest);
        let bytes = self.store.load(&key)?;
        // SAFETY: the bytes come from Ferry's own store, under a key that
        // binds them to this module's digest and this engine's
        // configuration; wasmtime checks their header as well.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(key, error = %err, "dropping unusable cache entry");
                self.store.discard(&key);
                None
            }
        }
    }

    /// Keeps the compiled component; a failure only costs a recompile next
    /// time.
    pub(crate) fn store(&self, digest: &str, component: &Component) {
        let result = component
            .serialize()
            .map_err(|err| std::io::Error::other(err.to_string()))
            .and_then(|bytes| self.store.store(&self.key(digest), &bytes));
        if let Err(err) = result {
            tracing::warn!(digest, error = %err, "cannot write compiled policy to the cache");
        }
    }
}
