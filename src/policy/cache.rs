//! Compiled components kept on disk between runs.
//!
//! A file is loaded only from Ferry's own cache directory, and only when its
//! name carries both the module's sha256 and the key of this engine's
//! configuration: a compiled artefact from any other engine, version or
//! module is never deserialised.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_key: String,
}

impl DiskCache {
    pub(crate) fn new(dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut hasher = std::hash::DefaultHasher::new();
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(DiskCache {
            dir: dir.to_owned(),
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.{}.cwasm", self.engine_key))
    }

    /// The compiled component for `digest`, if this engine cached it.
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        if !path.is_file() {
            return None;
        }
        // Read into memory rather than mapped: a file changed underneath a
        // mapping would crash the process.
        let bytes = std::fs::read(&path).ok()?;
        // SAFETY: the file was written by `store` below, in Ferry's own cache
        // directory, under a name that binds it to this module's digest and
        // this engine's configuration; wasmtime checks its header as well.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "dropping unusable cache entry");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes the compiled component atomically; a failure only costs a
    /// recompile next time.
    pub(crate) fn store(&self, digest: &str, component: &Component) {
        let result = component
            .serialize()
            .map_err(|err| std::io::Error::other(err.to_string()))
            .and_then(|bytes| {
                let path = self.path(digest);
                let partial = path.with_extension("partial");
                std::fs::write(&partial, bytes)?;
                std::fs::rename(&partial, &path)
            });
        if let Err(err) = result {
            tracing::warn!(digest, error = %err, "cannot write compiled policy to the cache");
        }
    }
}
