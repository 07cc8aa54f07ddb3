//! `dossier bench`: whole-workload benchmarks (results go into BENCHMARKS.md).

use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum BenchAction {
    /// Placeholder until the synthetic benchmark lands.
    Synthetic,
}

pub fn run(_json: bool, _action: &BenchAction) -> Result<ExitCode> {
    anyhow::bail!("not built yet")
}
