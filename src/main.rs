//! The `ferry` command: parses the command line and hands each subcommand to
//! the library. Everything that can be tested lives in the library.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
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
