//! The decision journal: with `--journal-dir`, each cycle writes what the
//! policy saw, which module answered, what it answered and what the
//! guardrails made of it, as one JSON file. `ferry policy eval MODULE
//! --input ENTRY.json` replays the entry and says whether the module gives
//! the same decisions.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::contract::{Decision, Snapshot};

/// One cycle, as written to the journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalEntry {
    /// `namespace/name` of the policy.
    pub policy: String,
    /// Hex sha256 of the module that answered.
    pub module_sha256: String,
    /// `Enforce` or `DryRun`, as the cycle ran.
    pub mode: String,
    pub snapshot: Snapshot,
    /// What the host accepted from the module, before the guardrails.
    pub decisions: Vec<Decision>,
    /// What the host rejected, with reasons.
    pub rejected: Vec<RefusalRecord>,
    /// What passed the guardrails.
    pub accepted: Vec<Decision>,
    /// What the guardrails refused, with reasons.
    pub refused: Vec<RefusalRecord>,
}

/// A decision the host rejected or the guardrails refused, flattened to
/// the decision and the sentence that said why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefusalRecord {
    pub decision: Decision,
    pub reason: String,
}

/// How many entries of each policy [`write`] keeps by default: a day of
/// cycles at a one-minute interval and then some.
pub const DEFAULT_KEEP: usize = 2000;

/// Writes `entry` under `dir` as `<namespace>_<name>_<timestampMs>.json`,
/// then removes that policy's oldest entries beyond the newest `keep`.
pub fn write(dir: &Path, entry: &JournalEntry, keep: usize) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let prefix = format!("{}_", entry.policy.replace('/', "_"));
    let path = dir.join(format!("{prefix}{}.json", entry.snapshot.timestamp_ms));
    let partial = path.with_extension("partial");
    let text = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, &path)?;
    rotate(dir, &prefix, keep.max(1))?;
    Ok(path)
}

/// Removes the oldest `<prefix><timestampMs>.json` files beyond `keep`.
/// Only names of exactly that shape count, so another policy whose name
/// starts the same (`shop_web` against `shop_web_2`) is never touched.
fn rotate(dir: &Path, prefix: &str, keep: usize) -> std::io::Result<()> {
    let mut entries: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let stamp = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".json"))
            .and_then(|ms| ms.parse::<u64>().ok());
        if let Some(stamp) = stamp {
            entries.push((stamp, path));
        }
    }
    if entries.len() <= keep {
        return Ok(());
    }
    entries.sort();
    let excess = entries.len() - keep;
    for (_, path) in entries.into_iter().take(excess) {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads a journal entry, naming the JSON path of the first problem.
pub fn read_journal(text: &str) -> Result<JournalEntry, String> {
    let mut json = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut json)
        .map_err(|err| format!("at {}: {}", err.path(), err.inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(policy: &str, at_ms: u64) -> JournalEntry {
        JournalEntry {
            policy: policy.to_owned(),
            module_sha256: "0".repeat(64),
            mode: "DryRun".to_owned(),
            snapshot: Snapshot {
                timestamp_ms: at_ms,
                ..Snapshot::default()
            },
            decisions: Vec::new(),
            rejected: Vec::new(),
            accepted: Vec::new(),
            refused: Vec::new(),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn each_policy_keeps_its_newest_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        // Written out of order: the timestamp decides what is oldest.
        for at in [30, 10, 40, 20] {
            write(dir.path(), &entry("shop/web", at), 2).unwrap();
        }
        write(dir.path(), &entry("shop/web_2", 1), 2).unwrap();
        std::fs::write(dir.path().join("shop_web_notes.json"), "{}").unwrap();
        assert_eq!(
            names(dir.path()),
            [
                "shop_web_2_1.json",
                "shop_web_30.json",
                "shop_web_40.json",
                "shop_web_notes.json"
            ]
        );
        let kept = std::fs::read_to_string(dir.path().join("shop_web_40.json")).unwrap();
        assert_eq!(read_journal(&kept).unwrap(), entry("shop/web", 40));
    }
}
