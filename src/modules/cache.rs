//! Compiled policy components kept on disk between runs, for the host's
//! [`ArtifactStore`]. The host chooses the keys and checks what it loads;
//! this only keeps files, each written atomically, in a directory that only
//! Ferry writes to.

use std::path::{Path, PathBuf};

use crate::policy::ArtifactStore;

/// A directory of compiled components, one `KEY.cwasm` file each.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// Uses `dir`, creating it if needed.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(DiskCache {
            dir: dir.to_owned(),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.cwasm"))
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
        std::fs::read(&path).ok()
    }

    fn store(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.path(key);
        let partial = path.with_extension("partial");
        std::fs::write(&partial, bytes)?;
        std::fs::rename(&partial, &path)
    }

    fn discard(&self, key: &str) {
        let _ = std::fs::remove_file(self.path(key));
    }
}
