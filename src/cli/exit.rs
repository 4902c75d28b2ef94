//! Exit codes and error printing, the same for every subcommand.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success |
//! | 1 | error: a cluster, a Prometheus or a file could not be used |
//! | 2 | usage error: bad flags or unusable input (clap uses 2 as well) |
//! | 3 | policy failure: a module that does not load or does not answer |
//!
//! An error prints once: its message, then each cause that adds something,
//! never a `Debug` dump (kube's `ApiError` carries one in its `Display`).

use std::process::ExitCode;

/// An error that is not the user's input nor the policy's.
pub const ERROR: u8 = 1;
/// Bad flags or input the command cannot use.
pub const USAGE: u8 = 2;
/// A policy module that failed to load or to answer.
pub const POLICY_FAILED: u8 = 3;

/// The exit codes as `--help` shows them, after every command's help.
pub const HELP: &str = "\
Exit codes:
  0  success
  1  error (a cluster, Prometheus or file could not be used)
  2  usage error (bad flags or input)
  3  policy failure (the module did not load or did not answer)";

/// Prints `error: message` with the cause chain, and returns `code`.
pub fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

/// Prints an error with its causes, one `caused by:` line each.
pub fn print_error(err: &anyhow::Error) {
    eprint!("{}", render(err.chain()));
}

/// Prints `error: context: X` and the causes of a library error.
pub fn print_cause(context: &str, err: &(dyn std::error::Error + 'static)) {
    let chain = std::iter::successors(Some(err), |e| e.source());
    eprint!(
        "{}",
        render(chain).replacen("error: ", &format!("error: {context}: "), 1)
    );
}

/// `error: X` and `  caused by: Y` lines. A cause whose text the line
/// before already contains is skipped, so nothing prints twice.
pub fn render<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut status_described = false;
    for err in chain {
        // The Status under a kube API error is already in its line.
        if std::mem::take(&mut status_described) {
            continue;
        }
        let text = match err.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) => {
                status_described = true;
                api_status(status)
            }
            _ => err.to_string(),
        };
        if lines.last().is_some_and(|last| last.contains(&text)) {
            continue;
        }
        if let Some(last) = lines.last_mut()
            && text.contains(last.as_str())
        {
            *last = text;
            continue;
        }
        lines.push(text);
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let prefix = if i == 0 { "error: " } else { "  caused by: " };
        out.push_str(prefix);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A kube API error as the server's code, reason and message, rather than
/// the `Debug` form its `Display` carries.
fn api_status(status: &kube::core::Status) -> String {
    let reason = if status.reason.is_empty() {
        "(no reason)"
    } else {
        status.reason.as_str()
    };
    let message = if status.message.is_empty() {
        "(no message)"
    } else {
        status.message.as_str()
    };
    format!(
        "the API server answered {} {reason}: {message}",
        status.code
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner: connection refused")]
    struct Inner(#[source] std::io::Error);

    #[test]
    fn each_cause_prints_once_on_its_own_line() {
        let err = anyhow::Error::new(Outer(Inner(std::io::Error::other("connection refused"))))
            .context("reading metrics");
        assert_eq!(
            render(err.chain()),
            "error: reading metrics\n  caused by: outer\n  caused by: inner: connection refused\n"
        );
    }

    #[test]
    fn a_kube_api_error_prints_the_servers_message_not_a_debug_dump() {
        let status = kube::core::Status::failure(
            "the server could not find the requested resource",
            "NotFound",
        )
        .with_code(404);
        let err = anyhow::Error::new(kube::Error::Api(Box::new(status)))
            .context("listing MigrationPolicies");
        let text = render(err.chain());
        assert_eq!(
            text,
            "error: listing MigrationPolicies\n  caused by: the API server answered 404 NotFound: the server could not find the requested resource\n"
        );
        assert!(!text.contains("Status {"), "{text}");
    }
}
