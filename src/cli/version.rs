//! `ferry version`: what was built, from what, with what, as the build
//! script recorded it ([`BUILD`], which `ferry_build_info` reports too).

use std::process::ExitCode;

use clap::Args;
use ferry::controller::BUILD;

use super::output::{self, OutputArgs};

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: VersionArgs) -> anyhow::Result<ExitCode> {
    output::print(args.output.output, &BUILD, || {
        format!(
            "ferry {}\ncommit:  {}\nrustc:   {}\ntarget:  {}\nprofile: {}\n",
            BUILD.version,
            BUILD.git_commit.unwrap_or("unknown"),
            BUILD.rustc,
            BUILD.target,
            BUILD.profile,
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
