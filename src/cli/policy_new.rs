//! `ferry policy new`: writes a policy that builds, in Rust, Python or
//! JavaScript, with a fixture `ferry policy test` passes, from the
//! templates of `policy_templates`. It never overwrites a file.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::Serialize;

use super::exit::{USAGE, fail};

use super::output::OutputArgs;
use super::policy_format::print_structured;
use super::policy_templates::{COMMON, JS, JS_SDK, PYTHON, PYTHON_SDK, RUST, Template};

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The policy's name: lowercase letters, digits and dashes, starting
    /// with a letter (it names the package and starts each decision's reason).
    #[arg(value_name = "NAME", value_parser = policy_name)]
    name: String,
    /// The language to write it in.
    #[arg(long, env = "FERRY_LANG", value_enum)]
    lang: Lang,
    /// Directory to create; `./NAME` when absent. It must not exist, or be empty.
    #[arg(long, env = "FERRY_DIR", value_name = "PATH")]
    dir: Option<PathBuf>,
    /// The policy SDK to build against, in a checkout of Ferry:
    /// `policies/sdk` (Rust), `policies/python/sdk` (Python) or
    /// `policies/js/sdk` (JavaScript). Rust and Python policies refer to it
    /// by a relative path; a JavaScript one gets a copy in `sdk/`, as
    /// componentize-js reads only files under the policy's directory. When
    /// absent, a Rust policy depends on the SDK in Ferry's git repository at
    /// this version's tag, and a Python or JavaScript one gets this
    /// version's SDK copied into `sdk/`.
    #[arg(long, env = "FERRY_SDK_PATH", value_name = "PATH")]
    sdk_path: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Lang {
    Rust,
    Python,
    Js,
}

/// What `-o json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Scaffold {
    name: String,
    lang: Lang,
    dir: String,
    files: Vec<String>,
    /// Run in `dir`.
    build: String,
    module: String,
}

pub(super) fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if let Err(message) = ensure_empty_dir(&dir) {
        return Ok(fail(USAGE, &message));
    }
    let sdk = match &args.sdk_path {
        Some(path) => match sdk_reference(args.lang, path, &dir) {
            Ok(sdk) => sdk,
            Err(message) => return Ok(fail(USAGE, &message)),
        },
        None => bundled_sdk(args.lang),
    };
    let (templates, build, module): (Vec<Template>, &str, String) = match args.lang {
        Lang::Rust => (
            RUST.to_vec(),
            "cargo build --release --target wasm32-wasip2",
            format!(
                "target/wasm32-wasip2/release/{}.wasm",
                args.name.replace('-', "_")
            ),
        ),
        Lang::Python => (
            [
                PYTHON,
                if args.sdk_path.is_none() {
                    PYTHON_SDK
                } else {
                    &[]
                },
            ]
            .concat(),
            "",
            "policy.wasm".to_owned(),
        ),
        Lang::Js => (
            [JS, JS_SDK].concat(),
            "npm run build",
            "policy.wasm".to_owned(),
        ),
    };
    let fill = |text: &str| {
        text.replace("{{name}}", &args.name)
            .replace("{{crate}}", &args.name.replace('-', "_"))
            .replace("{{sdk}}", &sdk.reference)
            .replace("{{sdk_note}}", &sdk.note)
    };
    let mut files = Vec::new();
    for (path, text) in COMMON.iter().chain(&templates) {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        // Copies of the SDK and the contract are written as they are; the
        // JavaScript SDK from `--sdk-path` when given.
        let text = match (&args.sdk_path, *path) {
            (Some(sdk_path), "sdk/ferry-policy.js") => {
                let file = sdk_path.join("ferry-policy.js");
                std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?
            }
            _ if path.starts_with("sdk/") || path.starts_with("wit/") => text.to_string(),
            _ => fill(text),
        };
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        files.push(path.to_string());
    }
    files.sort();
    let build = if args.lang == Lang::Python {
        fill(
            ".venv/bin/componentize-py -d wit -w migration-policy componentize -p {{sdk}} -p . app -o policy.wasm",
        )
    } else {
        build.to_owned()
    };
    let scaffold = Scaffold {
        name: args.name,
        lang: args.lang,
        dir: dir.display().to_string(),
        files,
        build,
        module,
    };
    if !print_structured(args.output.output, &scaffold)? {
        let language = match scaffold.lang {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        };
        println!("wrote a {language} policy in {}:", scaffold.dir);
        for file in &scaffold.files {
            println!("  {file}");
        }
        println!("next, in {} (README.md says more):", scaffold.dir);
        println!("  {}", scaffold.build);
        println!("  ferry policy test {} fixtures", scaffold.module);
    }
    Ok(ExitCode::SUCCESS)
}

/// How a scaffold names its SDK: the text its templates carry, and a note
/// for its README.
struct SdkReference {
    reference: String,
    note: String,
}

/// A policy given no SDK path: Rust's comes by git, Python's and
/// JavaScript's are copied beside it.
fn bundled_sdk(lang: Lang) -> SdkReference {
    let version = env!("CARGO_PKG_VERSION");
    match lang {
        Lang::Rust => {
            let repository = env!("CARGO_PKG_REPOSITORY");
            SdkReference {
                reference: format!("{{ git = \"{repository}\", tag = \"v{version}\" }}"),
                note: format!(
                    "`ferry-policy-sdk` from {repository} at tag v{version}; to build against a checkout, point Cargo.toml at its `policies/sdk`"
                ),
            }
        }
        Lang::Python => SdkReference {
            reference: "sdk".to_owned(),
            note: format!("a copy of Ferry {version}'s in `sdk/`"),
        },
        Lang::Js => SdkReference {
            reference: "./sdk/ferry-policy.js".to_owned(),
            note: format!("a copy of Ferry {version}'s in `sdk/`"),
        },
    }
}

/// The SDK at `path` as the scaffold in `dir` refers to it: by a path
/// relative to `dir`, checked to hold the language's SDK.
fn sdk_reference(lang: Lang, path: &Path, dir: &Path) -> Result<SdkReference, String> {
    let marker = match lang {
        Lang::Rust => "Cargo.toml",
        Lang::Python => "ferry_policy/__init__.py",
        Lang::Js => "ferry-policy.js",
    };
    if !path.join(marker).is_file() {
        return Err(format!(
            "--sdk-path {} holds no {marker}: give the {} directory of a Ferry checkout",
            path.display(),
            match lang {
                Lang::Rust => "policies/sdk",
                Lang::Python => "policies/python/sdk",
                Lang::Js => "policies/js/sdk",
            }
        ));
    }
    let absolute = |p: &Path| {
        std::fs::canonicalize(p).map_err(|err| format!("cannot resolve {}: {err}", p.display()))
    };
    let relative = relative_path(&absolute(dir)?, &absolute(path)?);
    let shown = relative.display().to_string();
    let note = format!("from {shown}");
    let reference = match lang {
        Lang::Rust => format!("{{ path = \"{}\" }}", toml_escape(&shown)),
        Lang::Python => shell_word(&shown),
        // componentize-js reads only files under the directory it builds
        // in: the policy gets a copy of the SDK, made from the one given.
        Lang::Js => {
            return Ok(SdkReference {
                reference: "./sdk/ferry-policy.js".to_owned(),
                note: format!(
                    "`sdk/ferry-policy.js`, a copy of {shown}/ferry-policy.js; componentize-js reads only files under the policy's directory, so copy it again to update it"
                ),
            });
        }
    };
    Ok(SdkReference { reference, note })
}

/// Creates `dir`, or accepts it when it exists and is empty.
fn ensure_empty_dir(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "{} exists and is not empty; `ferry policy new` overwrites nothing",
                    dir.display()
                ));
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display())),
        Err(err) => Err(format!("cannot use {}: {err}", dir.display())),
    }
}

/// `to` relative to `from`, both absolute.
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf =
        std::iter::repeat_n(Component::ParentDir, from.len() - common).collect();
    path.extend(&to[common..]);
    if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path
    }
}

fn toml_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// `text` as one word of a POSIX shell command.
fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A package name every language's tools accept.
fn policy_name(text: &str) -> Result<String, String> {
    let valid = text.len() <= 64
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.ends_with('-');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(
            "use lowercase letters, digits and dashes, starting with a letter, at most 64"
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_to_the_common_ancestor() {
        assert_eq!(
            relative_path(
                Path::new("/tmp/x/policy"),
                Path::new("/src/ferry/policies/sdk")
            ),
            PathBuf::from("../../../src/ferry/policies/sdk")
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b/sdk")),
            PathBuf::from("sdk")
        );
        assert_eq!(
            relative_path(Path::new("/a"), Path::new("/a")),
            PathBuf::from(".")
        );
    }

    #[test]
    fn names_are_package_names() {
        assert!(policy_name("cheapest-2").is_ok());
        for bad in ["", "2fast", "Big", "a_b", "trailing-", "a b", "../x"] {
            assert!(policy_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shell_words_quote_what_a_shell_would_split() {
        assert_eq!(shell_word("../sdk"), "../sdk");
        assert_eq!(shell_word("my sdk's"), r"'my sdk'\''s'");
    }
}
