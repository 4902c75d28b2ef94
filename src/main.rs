//! The `ferry` command: parses the command line and hands each subcommand to
//! the library. Everything that can be tested lives in the library.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    if cli.command.prints_for_a_pipe() {
        end_quietly_on_a_closed_pipe();
    }
    if let Err(message) = cli::init_logging(&cli.log) {
        eprintln!("error: {message}");
        return ExitCode::from(cli::EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli.command)) {
        Ok(code) => code,
        Err(err) => {
            cli::print_error(&err);
            ExitCode::FAILURE
        }
    }
}

/// A command whose output is cut short by its reader (`ferry policy eval … |
/// head`) ends as other Unix tools do, killed by SIGPIPE, instead of
/// panicking in the middle of a print. Only for the commands that print and
/// end: the long-running ones keep Rust's default of ignoring the signal.
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: called before any other thread starts; SIG_DFL is a valid
    // action for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
