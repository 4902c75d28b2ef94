//! `ferry version`: what was built, from what, with what. The build script
//! records the commit (when it knows it), the compiler and the target.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::output::{self, OutputArgs};

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    output: OutputArgs,
}

/// How this binary was built.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub version: &'static str,
    /// The commit built, when the build knew it (a git checkout built in
    /// release mode, or `FERRY_GIT_COMMIT` set at build time).
    pub git_commit: Option<&'static str>,
    pub rustc: &'static str,
    pub target: &'static str,
    pub profile: &'static str,
}

pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    git_commit: option_env!("FERRY_BUILD_GIT_COMMIT"),
    rustc: env!("FERRY_BUILD_RUSTC"),
    target: env!("FERRY_BUILD_TARGET"),
    profile: env!("FERRY_BUILD_PROFILE"),
};

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
