//! `ferry crds`: print every CustomResourceDefinition as YAML, or write one
//! file per CRD (`crds/*.yaml` is produced this way; a test checks for drift).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one `<plural>.ferry.dev.yaml` per CRD into this directory
    /// instead of printing one multi-document stream to stdout.
    #[arg(long, env = "FERRY_OUT_DIR", value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<ExitCode> {
    let crds = ferry::crd::all();
    match args.out_dir {
        None => print!("{}", ferry::crd::to_yaml_stream(&crds)?),
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for crd in &crds {
                let path = dir.join(ferry::crd::file_name(crd));
                std::fs::write(&path, ferry::crd::file_content(crd)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
