//! The authorization record: when the environment variable
//! `FERRY_SANDBOX_AUTHZ_LOG` names a directory, each sandbox appends the
//! requests RBAC allowed to a file of its own there, one JSON object a line
//! (user, verb, API group, resource, subresource, namespace), so that a
//! later step can compare what Ferry's identities really used with what the
//! chart grants them.
//!
//! It must stay cheap when the variable is unset (read once per sandbox,
//! then one `Option` check a request), must never change a decision, and
//! must never fail a request: a write error is logged and recording stops.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::attributes::{Attributes, UserInfo};

/// The environment variable naming the directory the records go to.
pub(crate) const ENV: &str = "FERRY_SANDBOX_AUTHZ_LOG";

/// Distinguishes the files of the sandboxes one process starts (their names
/// may repeat: every test has its `east`).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One sandbox's record file.
#[derive(Debug)]
pub(crate) struct Recorder {
    path: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `None` once a write failed: recording stops rather than failing
    /// requests.
    file: Option<File>,
    /// Lines already written: a controller repeats the same few requests
    /// thousands of times, and the comparison needs each only once.
    seen: HashSet<String>,
}

impl Recorder {
    /// The recorder the environment asks for, if any.
    pub(crate) fn from_env(sandbox: &str) -> Option<Self> {
        let dir = std::env::var_os(ENV).filter(|dir| !dir.is_empty())?;
        match Self::create(Path::new(&dir), sandbox) {
            Ok(recorder) => Some(recorder),
            Err(error) => {
                tracing::warn!(%error, dir = ?dir, "cannot record authorization decisions");
                None
            }
        }
    }

    /// A new file in `dir` for the sandbox named `sandbox`.
    pub(crate) fn create(dir: &Path, sandbox: &str) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let name: String = sandbox
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{n}-{name}.jsonl", std::process::id()));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Self {
            path,
            inner: Mutex::new(Inner {
                file: Some(file),
                seen: HashSet::new(),
            }),
        })
    }

    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.path
    }

    /// Note that `user` was allowed `attributes`. Non-resource requests are
    /// recorded with their path in place of a resource.
    pub(crate) fn allowed(&self, user: &UserInfo, attributes: &Attributes) {
        let line = if attributes.resource_request {
            json!({
                "user": user.name,
                "verb": attributes.verb,
                "apiGroup": attributes.api_group,
                "resource": attributes.resource,
                "subresource": attributes.subresource,
                "namespace": attributes.namespace,
            })
        } else {
            json!({
                "user": user.name,
                "verb": attributes.verb,
                "nonResourceURL": attributes.path,
            })
        }
        .to_string();
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if inner.seen.contains(&line) {
            return;
        }
        let Some(file) = inner.file.as_mut() else {
            return;
        };
        if let Err(error) = writeln!(file, "{line}") {
            tracing::warn!(%error, path = ?self.path, "authorization record stopped");
            inner.file = None;
            return;
        }
        inner.seen.insert(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            name: name.to_owned(),
            ..UserInfo::default()
        }
    }

    #[test]
    fn each_allowed_request_is_one_json_line_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::create(dir.path(), "east/1").unwrap();
        let mut get = Attributes::resource("get", "apps", "deployments", "ns", "web");
        get.subresource = "scale".to_owned();
        recorder.allowed(&user("alice"), &get);
        recorder.allowed(&user("alice"), &get);
        let list = Attributes::resource("list", "", "pods", "", "");
        recorder.allowed(&user("bob"), &list);

        let name = recorder.path().file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with("-east_1.jsonl"), "{name}");
        let text = std::fs::read_to_string(recorder.path()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                json!({"user": "alice", "verb": "get", "apiGroup": "apps",
                       "resource": "deployments", "subresource": "scale", "namespace": "ns"}),
                json!({"user": "bob", "verb": "list", "apiGroup": "",
                       "resource": "pods", "subresource": "", "namespace": ""}),
            ]
        );
    }

    #[test]
    fn two_sandboxes_of_one_name_write_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = Recorder::create(dir.path(), "east").unwrap();
        let b = Recorder::create(dir.path(), "east").unwrap();
        assert_ne!(a.path(), b.path());
    }
}
