//! Compiled policy components kept on disk between runs, for the host's
//! [`ArtifactStore`]. The host chooses the keys and checks what it loads;
//! this only keeps files, each written atomically, in a directory that only
//! Ferry writes to, and keeps the directory under a size cap by removing the
//! least recently used entries.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::policy::ArtifactStore;

/// The cap of [`DiskCache::open`]: far above what a few dozen policies'
/// components take (a few MiB each), far below what fills a pod's volume.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

const EXTENSION: &str = "cwasm";

/// A directory of compiled components, one `KEY.cwasm` file each, holding
/// at most `max_bytes` of them.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl DiskCache {
    /// Uses `dir`, creating it if needed, capped at [`DEFAULT_MAX_BYTES`].
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        Self::with_max_bytes(dir, DEFAULT_MAX_BYTES)
    }

    /// Uses `dir`, creating it if needed; storing an entry removes the least
    /// recently used others until the entries take at most `max_bytes`.
    pub fn with_max_bytes(dir: &Path, max_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(DiskCache {
            dir: dir.to_owned(),
            max_bytes,
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.{EXTENSION}"))
    }

    /// Removes the least recently used entries other than `keep` until the
    /// rest fit. A file another process removed first is no error.
    fn evict(&self, keep: &Path) -> std::io::Result<()> {
        let mut entries = Vec::new();
        let mut total = 0u64;
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            total = total.saturating_add(meta.len());
            if path != keep {
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                entries.push((used, meta.len(), path));
            }
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => total = total.saturating_sub(len),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl ArtifactStore for DiskCache {
    fn load(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.path(key);
        if !path.is_file() {
            return None;
        }
        // Read into memory rather than mapped: a file changed underneath a
        // mapping would crash the process.
        let bytes = std::fs::read(&path).ok()?;
        // A hit counts as a use, so eviction takes what no policy loads.
        if let Ok(file) = std::fs::File::options().append(true).open(&path) {
            let _ = file.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    fn store(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.path(key);
        let partial = path.with_extension("partial");
        std::fs::write(&partial, bytes)?;
        std::fs::rename(&partial, &path)?;
        self.evict(&path)
    }

    fn discard(&self, key: &str) {
        let _ = std::fs::remove_file(self.path(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_used(cache: &DiskCache, key: &str, seconds: u64) {
        let file = std::fs::File::options()
            .append(true)
            .open(cache.path(key))
            .unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
            .unwrap();
    }

    #[test]
    fn storing_past_the_cap_removes_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::with_max_bytes(dir.path(), 300).unwrap();
        cache.store("a", &[1; 100]).unwrap();
        cache.store("b", &[2; 100]).unwrap();
        cache.store("c", &[3; 100]).unwrap();
        set_used(&cache, "a", 10);
        set_used(&cache, "b", 30);
        set_used(&cache, "c", 20);
        // A hit on `a` makes it the most recently used.
        assert_eq!(cache.load("a").unwrap(), vec![1; 100]);
        cache.store("d", &[4; 100]).unwrap();
        assert!(cache.load("c").is_none(), "c was the least recently used");
        for key in ["a", "b", "d"] {
            assert!(cache.load(key).is_some(), "{key} stays");
        }
    }

    #[test]
    fn an_entry_larger_than_the_cap_is_kept_alone() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::with_max_bytes(dir.path(), 50).unwrap();
        cache.store("small", &[1; 10]).unwrap();
        cache.store("big", &[2; 100]).unwrap();
        assert!(cache.load("small").is_none());
        assert_eq!(cache.load("big").unwrap().len(), 100);
    }

    #[test]
    fn other_files_in_the_directory_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), [0; 500]).unwrap();
        let cache = DiskCache::with_max_bytes(dir.path(), 100).unwrap();
        cache.store("a", &[1; 80]).unwrap();
        assert!(dir.path().join("notes.txt").exists());
        assert!(cache.load("a").is_some());
    }
}
