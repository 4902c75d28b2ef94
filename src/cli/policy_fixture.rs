//! The fixtures of `ferry policy test`: one YAML or JSON file each, with a
//! snapshot (inline, or the path of a snapshot file beside it), optional
//! parameters, and what the module must answer. Reading a fixture runs no
//! module; every problem names the file and the line or field.

use std::fmt;
use std::path::{Path, PathBuf};

use ferry::contract::Snapshot;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Relative tolerance on savings when a fixture sets none: the one the
/// example policies' cross-language tests use.
pub(super) const DEFAULT_SAVINGS_TOLERANCE: f64 = 1e-9;

/// A fixture, read and checked, with its snapshot in hand.
#[derive(Debug)]
pub(super) struct Fixture {
    pub(super) path: PathBuf,
    pub(super) description: Option<String>,
    pub(super) snapshot: Snapshot,
    pub(super) expect: Expect,
}

/// A fixture file as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FixtureFile {
    #[serde(default)]
    description: Option<String>,
    snapshot: SnapshotSource,
    /// Replaces the snapshot's `parameters`: a mapping, as in
    /// `MigrationPolicy.spec.parameters`.
    #[serde(default)]
    parameters: Option<serde_json::Value>,
    expect: Expect,
}

/// What the module must answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Expect {
    /// Exactly these moves, in any order; `[]` expects none.
    #[serde(default)]
    pub(super) decisions: Option<Vec<ExpectedDecision>>,
    /// Exactly these decisions refused by Ferry's validation; absent, none.
    #[serde(default)]
    pub(super) rejected: Vec<ExpectedRejection>,
    /// The module refuses the snapshot (returns an error): `true`, or a
    /// text its message must contain.
    #[serde(default)]
    pub(super) refusal: Option<Refusal>,
    /// Relative tolerance on `savings`.
    #[serde(default = "default_tolerance")]
    pub(super) savings_tolerance: f64,
}

fn default_tolerance() -> f64 {
    DEFAULT_SAVINGS_TOLERANCE
}

/// One move the module must make.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ExpectedDecision {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) from: String,
    pub(super) to: String,
    /// Replicas moved: those a partial move names, else all of the workload's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) replicas: Option<u32>,
    /// Hourly savings, within the fixture's tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) savings: Option<f64>,
}

/// One decision Ferry's validation must refuse; the fields given must match.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ExpectedRejection {
    pub(super) namespace: String,
    pub(super) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) to: Option<String>,
    /// The rule, as `ferry policy eval` names it: `unknownTarget`,
    /// `targetNotReady`, `duplicateWorkload`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) rule: Option<String>,
}

/// A refusal the module must give.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub(super) enum Refusal {
    /// Any message.
    Any(bool),
    /// A message containing this text.
    Containing(String),
}

/// Where a fixture's snapshot is.
#[derive(Debug)]
enum SnapshotSource {
    Inline(Box<Snapshot>),
    /// Relative to the fixture's directory.
    File(String),
}

/// Why fixtures could not be read. Each names the file and where in it.
#[derive(Debug, thiserror::Error)]
pub(super) enum FixtureError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: u64,
        column: u64,
        message: String,
    },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: String,
        field: &'static str,
        message: String,
    },
    #[error("{dir} holds no fixtures (*.yaml, *.yml or *.json)")]
    Empty { dir: String },
}

/// The fixture files of `path`: the file itself, or the `.yaml`, `.yml` and
/// `.json` files directly in the directory, by name.
pub(super) fn fixture_files(path: &Path) -> Result<Vec<PathBuf>, FixtureError> {
    let read_error = |source| FixtureError::Read {
        path: path.display().to_string(),
        source,
    };
    if path.metadata().map_err(read_error)?.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read_error)? {
        let file = entry.map_err(read_error)?.path();
        let hidden = file
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'));
        let fixture = matches!(
            file.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        );
        if fixture && !hidden && file.is_file() {
            files.push(file);
        }
    }
    if files.is_empty() {
        return Err(FixtureError::Empty {
            dir: path.display().to_string(),
        });
    }
    files.sort();
    Ok(files)
}

/// Reads one fixture and its snapshot.
pub(super) fn read_fixture(path: &Path) -> Result<Fixture, FixtureError> {
    let shown = path.display().to_string();
    let file: FixtureFile = parse_file(path)?;
    let invalid = |field, message: &str| FixtureError::Invalid {
        path: shown.clone(),
        field,
        message: message.to_owned(),
    };
    check_expect(&file.expect).map_err(|(field, message)| invalid(field, message))?;
    let mut snapshot = match file.snapshot {
        SnapshotSource::Inline(snapshot) => *snapshot,
        SnapshotSource::File(relative) => {
            let dir = path.parent().unwrap_or(Path::new("."));
            parse_file(&dir.join(relative))?
        }
    };
    if let Some(parameters) = file.parameters {
        if !parameters.is_object() {
            return Err(invalid(
                "parameters",
                "must be a mapping, as in MigrationPolicy.spec.parameters",
            ));
        }
        snapshot.parameters = parameters.to_string();
    }
    Ok(Fixture {
        path: path.to_owned(),
        description: file.description,
        snapshot,
        expect: file.expect,
    })
}

/// What a fixture's `expect` may not say, as (field, problem).
fn check_expect(expect: &Expect) -> Result<(), (&'static str, &'static str)> {
    if expect.decisions.is_none() && expect.rejected.is_empty() && expect.refusal.is_none() {
        return Err((
            "expect",
            "says nothing: give `decisions` (`[]` for none), `rejected` or `refusal`",
        ));
    }
    if expect.refusal.is_some() && (expect.decisions.is_some() || !expect.rejected.is_empty()) {
        return Err((
            "expect.refusal",
            "a refused snapshot has no decisions: leave out `decisions` and `rejected`",
        ));
    }
    if expect.refusal == Some(Refusal::Any(false)) {
        return Err((
            "expect.refusal",
            "`false` expects nothing; leave it out, or give `true` or a text",
        ));
    }
    if !expect.savings_tolerance.is_finite() || expect.savings_tolerance < 0.0 {
        return Err(("expect.savingsTolerance", "must be a finite number >= 0"));
    }
    Ok(())
}

/// Parses a YAML or JSON file (`.json` by its extension) into `T`, with the
/// line and column, and for JSON the field path, of the first problem.
fn parse_file<T: de::DeserializeOwned>(path: &Path) -> Result<T, FixtureError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Read {
        path: shown.clone(),
        source,
    })?;
    if path.extension().is_some_and(|e| e == "json") {
        let mut json = serde_json::Deserializer::from_str(&text);
        return serde_path_to_error::deserialize(&mut json).map_err(|err| {
            let field = err.path().to_string();
            let inner = err.into_inner();
            let (line, column) = (inner.line(), inner.column());
            let message = inner.to_string();
            let suffix = format!(" at line {line} column {column}");
            let message = message.strip_suffix(&suffix).unwrap_or(&message);
            FixtureError::Syntax {
                path: shown,
                line: line as u64,
                column: column as u64,
                message: if field == "." {
                    message.to_owned()
                } else {
                    format!("at {field}: {message}")
                },
            }
        });
    }
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(&text, options).map_err(|err| {
        let location = err.location().unwrap_or(serde_saphyr::Location::UNKNOWN);
        let message = err.to_string();
        // The position is printed first; the parser's own copy goes.
        let suffix = format!(" at line {}, column {}", location.line(), location.column());
        let message = message.strip_suffix(&suffix).unwrap_or(&message).to_owned();
        let (line, column) = unknown_field_line(&text, &message, location.line())
            .unwrap_or((location.line(), location.column()));
        FixtureError::Syntax {
            path: shown,
            line,
            column,
            message,
        }
    })
}

/// Where an unknown key is written. The YAML parser places the error of an
/// unknown field at the start of its mapping; the key itself is the first
/// line from there that starts with it (as `key:` or `- key:`).
fn unknown_field_line(text: &str, message: &str, from_line: u64) -> Option<(u64, u64)> {
    let field = message.strip_prefix("unknown field `")?.split('`').next()?;
    let skip = usize::try_from(from_line.saturating_sub(1)).ok()?;
    text.lines()
        .enumerate()
        .skip(skip)
        .find_map(|(index, line)| {
            let key = line.trim_start().trim_start_matches("- ");
            let indent = line.len() - key.len();
            let is_key = key
                .strip_prefix(field)
                .is_some_and(|rest| rest.trim_start().starts_with(':'));
            is_key.then(|| (index as u64 + 1, indent as u64 + 1))
        })
}

impl<'de> Deserialize<'de> for SnapshotSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SourceVisitor;
        impl<'de> Visitor<'de> for SourceVisitor {
            type Value = SnapshotSource;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a snapshot (a mapping) or the path of a snapshot file")
            }
            fn visit_str<E: de::Error>(self, path: &str) -> Result<Self::Value, E> {
                Ok(SnapshotSource::File(path.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Snapshot::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|snapshot| SnapshotSource::Inline(Box::new(snapshot)))
            }
        }
        deserializer.deserialize_any(SourceVisitor)
    }
}

impl<'de> Deserialize<'de> for Refusal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RefusalVisitor;
        impl Visitor<'_> for RefusalVisitor {
            type Value = Refusal;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`true` or a text the refusal's message contains")
            }
            fn visit_bool<E: de::Error>(self, any: bool) -> Result<Self::Value, E> {
                Ok(Refusal::Any(any))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Refusal::Containing(text.to_owned()))
            }
        }
        deserializer.deserialize_any(RefusalVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_found_below_the_start_of_its_mapping() {
        let text = "expect:\n  decisions:\n    - namespace: shop\n      form: dear\n";
        let message = "unknown field `form`, expected one of namespace, name";
        assert_eq!(unknown_field_line(text, message, 3), Some((4, 7)));
        assert_eq!(unknown_field_line(text, "invalid type", 3), None);
        assert_eq!(unknown_field_line(text, "unknown field `absent`", 1), None);
    }
}
