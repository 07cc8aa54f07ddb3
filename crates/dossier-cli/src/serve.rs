//! `dossier serve`: the HTTP API over the store (see the dossier-server crate).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use dossier_engine::Engine;
use dossier_server::{AppState, KeyStore};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// API keys (YAML: `- {key_sha256: HEX, principal: ID, admin: false}`); re-read
    /// when the file changes or on SIGHUP.
    #[arg(long, env = "DOSSIER_KEYS")]
    keys: PathBuf,
}

pub fn run(engine: Engine, args: &ServeArgs) -> Result<ExitCode> {
    let keys = KeyStore::load(&args.keys)?;
    let state = AppState::new(Arc::new(engine), Arc::new(keys));
    dossier_server::serve_blocking(args.addr, state)
        .with_context(|| format!("serving on {}", args.addr))?;
    Ok(ExitCode::SUCCESS)
}
