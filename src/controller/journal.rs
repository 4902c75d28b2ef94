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

/// Writes `entry` under `dir` as `<namespace>_<name>_<timestampMs>.json`.
pub fn write(dir: &Path, entry: &JournalEntry) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let file = format!(
        "{}_{}.json",
        entry.policy.replace('/', "_"),
        entry.snapshot.timestamp_ms
    );
    let path = dir.join(file);
    let partial = path.with_extension("partial");
    let text = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}

/// Reads a journal entry, naming the JSON path of the first problem.
pub fn read_journal(text: &str) -> Result<JournalEntry, String> {
    let mut json = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut json)
        .map_err(|err| format!("at {}: {}", err.path(), err.inner()))
}
