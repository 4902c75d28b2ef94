//! Logging, shared by every subcommand: to stderr, so that stdout carries
//! only a command's result; coloured only when stderr is a terminal.
//!
//! The filter comes from the first of `--log-level` (`FERRY_LOG_LEVEL`),
//! `FERRY_LOG`, `RUST_LOG`, else `warn`. A bare level (`debug`) is Ferry's
//! own: its libraries (wasmtime, cranelift, kube, hyper) stay at `warn`
//! unless the level is quieter still. Anything else is a `tracing` filter
//! used as written (`info,kube=debug`). `RUST_LOG` is always read as a
//! filter, as every Rust program reads it.

use std::io::IsTerminal as _;

use clap::{Args, ValueEnum};

/// Ferry's own crates, the targets a bare level applies to.
const OWN_TARGETS: &[&str] = &["ferry", "ferry_sandbox"];
/// The level of everything else under a bare level more verbose than it.
const LIBRARY_LEVEL: &str = "warn";
const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Ferry's log level (`error`, `warn`, `info`, `debug`, `trace`; the
    /// libraries it uses stay at `warn`), or a `tracing` filter such as
    /// `info,kube=debug`. Default: `FERRY_LOG`, else `RUST_LOG`, else `warn`.
    #[arg(
        long = "log-level",
        env = "FERRY_LOG_LEVEL",
        value_name = "LEVEL",
        global = true
    )]
    pub level: Option<String>,
    /// Log line format.
    #[arg(long = "log-format", env = "FERRY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter directives the flags and environment ask for.
fn directives(args: &LogArgs) -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(level) = args.level.clone().or_else(|| env("FERRY_LOG")) {
        return expand(level.trim());
    }
    env("RUST_LOG").unwrap_or_else(|| "warn".to_owned())
}

/// A bare level becomes Ferry's level, with the libraries at most at `warn`.
fn expand(level: &str) -> String {
    let lower = level.to_ascii_lowercase();
    let Some(rank) = LEVELS.iter().position(|l| *l == lower) else {
        return level.to_owned();
    };
    let warn_rank = LEVELS.iter().position(|l| *l == LIBRARY_LEVEL).unwrap_or(2);
    let libraries = if rank > warn_rank {
        LIBRARY_LEVEL
    } else {
        LEVELS[rank]
    };
    let mut text = libraries.to_owned();
    for target in OWN_TARGETS {
        text.push_str(&format!(",{target}={lower}"));
    }
    text
}

/// Installs the subscriber; a filter that does not parse is a usage error.
pub fn init_logging(args: &LogArgs) -> Result<(), String> {
    let directives = directives(args);
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .map_err(|err| format!("log filter {directives:?} does not parse: {err}"))?;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match args.format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn a_bare_level_is_ferrys_and_leaves_libraries_at_warn() {
        assert_eq!(expand("debug"), "warn,ferry=debug,ferry_sandbox=debug");
        assert_eq!(expand("INFO"), "warn,ferry=info,ferry_sandbox=info");
        assert_eq!(expand("error"), "error,ferry=error,ferry_sandbox=error");
    }

    #[test]
    fn a_filter_is_used_as_written() {
        assert_eq!(expand("info,kube=debug"), "info,kube=debug");
        assert_eq!(expand("ferry=trace"), "ferry=trace");
    }
}
