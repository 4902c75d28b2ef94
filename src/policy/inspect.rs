//! What a component says about how it was built: the `producers` sections
//! (language, tools and their versions) and the names of its core modules.
//! Needs only the module's bytes: no engine, no guest. What it finds is the
//! module's own claim, shown to its author, and never trusted for anything.

use serde::Serialize;
use wasmparser::{ComponentName, KnownCustom, Name, Parser, Payload};

/// The language and toolchain a component was built with, as far as its
/// sections tell.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BuiltWith {
    /// `Rust`, `Python`, `JavaScript`, or another `language` entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The tool that made the component, with its version when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
    /// Every distinct producers entry, in the order found.
    pub producers: Vec<Producer>,
}

/// One entry of a `producers` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Producer {
    /// `language`, `processed-by` or `sdk`.
    pub field: String,
    pub name: String,
    pub version: String,
}

/// Most producers entries and module names kept: a real toolchain writes a
/// few dozen, and a module could write millions.
const MAX_ENTRIES: usize = 256;

/// Reads the producers sections and core module names of `component`.
/// Unreadable sections are skipped: this is a description, not a check.
pub fn built_with(component: &[u8]) -> BuiltWith {
    let mut producers: Vec<Producer> = Vec::new();
    let mut module_names: Vec<String> = Vec::new();
    for payload in Parser::new(0).parse_all(component) {
        let Ok(Payload::CustomSection(section)) = payload else {
            continue;
        };
        match section.as_known() {
            KnownCustom::Producers(reader) => {
                for field in reader.into_iter().flatten() {
                    for value in field.values.into_iter().flatten() {
                        let producer = Producer {
                            field: field.name.to_owned(),
                            name: value.name.to_owned(),
                            version: value.version.to_owned(),
                        };
                        if producers.len() < MAX_ENTRIES && !producers.contains(&producer) {
                            producers.push(producer);
                        }
                    }
                }
            }
            KnownCustom::Name(reader) => {
                for name in reader.into_iter().flatten() {
                    if let Name::Module { name, .. } = name
                        && module_names.len() < MAX_ENTRIES
                    {
                        module_names.push(name.to_owned());
                    }
                }
            }
            KnownCustom::ComponentName(reader) => {
                for name in reader.into_iter().flatten() {
                    if let ComponentName::CoreModules(map) = name {
                        let room = MAX_ENTRIES.saturating_sub(module_names.len());
                        let names = map.into_iter().flatten().take(room);
                        module_names.extend(names.map(|n| n.name.to_owned()));
                    }
                }
            }
            _ => {}
        }
    }
    let (language, toolchain) = recognise(&producers, &module_names);
    BuiltWith {
        language,
        toolchain,
        producers,
    }
}

/// Names the language and toolchain from what the known toolchains leave
/// behind. The interpreters' components also hold Rust and C modules (the
/// interpreter's own), so they are recognised first.
fn recognise(producers: &[Producer], module_names: &[String]) -> (Option<String>, Option<String>) {
    let find = |field: &str, name: &str| {
        producers
            .iter()
            .find(|p| p.field == field && p.name.eq_ignore_ascii_case(name))
    };
    if let Some(js) = find("processed-by", "ComponentizeJS") {
        return (
            Some("JavaScript".to_owned()),
            Some(
                format!("componentize-js {}", js.version)
                    .trim_end()
                    .to_owned(),
            ),
        );
    }
    let python = module_names
        .iter()
        .find_map(|name| name.strip_prefix("libpython")?.strip_suffix(".so"));
    let componentize_py = module_names
        .iter()
        .any(|name| name.starts_with("componentize_py"));
    if python.is_some() || componentize_py {
        let language = match python {
            Some(version) => format!("Python {version}"),
            None => "Python".to_owned(),
        };
        return (Some(language), Some("componentize-py".to_owned()));
    }
    if find("language", "Rust").is_some() {
        let toolchain = find("processed-by", "rustc").map(|rustc| {
            let version = rustc.version.split_whitespace().next().unwrap_or("");
            format!("rustc {version}").trim_end().to_owned()
        });
        return (Some("Rust".to_owned()), toolchain);
    }
    let language = producers
        .iter()
        .find(|p| p.field == "language")
        .map(|p| p.name.clone());
    (language, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(field: &str, name: &str, version: &str) -> Producer {
        Producer {
            field: field.to_owned(),
            name: name.to_owned(),
            version: version.to_owned(),
        }
    }

    #[test]
    fn javascript_wins_over_the_rust_inside_its_engine() {
        let producers = [
            producer("processed-by", "ComponentizeJS", "0.23.0"),
            producer("language", "Rust", ""),
            producer("processed-by", "rustc", "1.88.0 (6b00bc388 2025-06-23)"),
        ];
        assert_eq!(
            recognise(&producers, &[]),
            (
                Some("JavaScript".to_owned()),
                Some("componentize-js 0.23.0".to_owned())
            )
        );
    }

    #[test]
    fn python_is_known_by_its_interpreter_module() {
        let names = ["libc.so".to_owned(), "libpython3.14.so".to_owned()];
        let producers = [producer("language", "Rust", "")];
        assert_eq!(
            recognise(&producers, &names),
            (
                Some("Python 3.14".to_owned()),
                Some("componentize-py".to_owned())
            )
        );
    }

    #[test]
    fn rust_names_its_compiler_version() {
        let producers = [
            producer("language", "Rust", ""),
            producer("processed-by", "rustc", "1.95.0 (59807616e 2026-04-14)"),
        ];
        assert_eq!(
            recognise(&producers, &[]),
            (Some("Rust".to_owned()), Some("rustc 1.95.0".to_owned()))
        );
    }

    #[test]
    fn an_unknown_toolchain_keeps_its_language_claim() {
        let producers = [producer("language", "Go", "")];
        assert_eq!(recognise(&producers, &[]), (Some("Go".to_owned()), None));
        assert_eq!(recognise(&[], &[]), (None, None));
    }

    #[test]
    fn the_producers_of_a_module_are_read_and_their_number_capped() {
        let languages: String = (0..2 * MAX_ENTRIES)
            .map(|n| format!("(language \"L{n}\" \"1\")"))
            .collect();
        let text = format!("(module (@producers {languages} (processed-by \"rustc\" \"1.95.0\")))");
        let module = wat::parse_str(&text).unwrap();
        let built = built_with(&module);
        assert_eq!(built.producers.len(), MAX_ENTRIES);
        assert_eq!(built.producers[0], producer("language", "L0", "1"));
        assert_eq!(built.language.as_deref(), Some("L0"));
    }

    #[test]
    fn bytes_that_are_not_wasm_describe_nothing() {
        assert_eq!(built_with(b"not wasm"), BuiltWith::default());
    }
}
