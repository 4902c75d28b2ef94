//! `ferry completion bash|zsh|fish`: the shell completion script, from the
//! same command definition that parses the flags.

use std::process::ExitCode;

use clap::Args;
use clap_complete::Shell;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    let mut command = super::command();
    clap_complete::generate(args.shell, &mut command, "ferry", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
