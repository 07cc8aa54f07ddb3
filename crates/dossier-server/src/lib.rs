//! Dossier's HTTP API (`dossier serve`): one [`dossier_engine::Engine`] behind axum.
//!
//! This crate owns the wire: routing, authentication by API key, request ids, the JSON
//! error body and the OpenAPI description. It holds no retrieval logic; every answer is
//! the engine's (or the agent's) answer for the caller's principal.
//!
//! **Invariants:**
//! - **Identity comes only from the API key.** `Authorization: Bearer KEY` is hashed
//!   (SHA-256) and looked up in the keys file; the principal id bound to that hash is the
//!   caller. Request bodies reject unknown fields, so a body cannot even name a
//!   principal, and no other header is consulted. Tenant and groups then come from the
//!   store's principals, as everywhere else.
//! - **Errors are mapped to HTTP in one place** ([`error`]): each failure has one
//!   status, one stable `code` and one `type`, and every error body carries the request
//!   id. "Not found" never echoes what was asked for, so an invisible entity and an
//!   unknown one read the same.
//! - **Blocking calls never run on the async runtime**: every engine or agent call,
//!   and every key lookup (which may re-read the keys file), goes through
//!   `tokio::task::spawn_blocking`.
//! - Keys are read at start and re-read when the keys file changes (checked on every
//!   authenticated request) or on SIGHUP, so keys rotate without a restart. A keys file
//!   that fails to parse on reload leaves the previous keys in force (and is logged).

mod auth;
pub mod error;
mod openapi;
mod request_id;
mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use dossier_engine::Engine;

pub use auth::{hash_key, Caller, KeyEntry, KeyStore, KeysError};
pub use error::{ApiError, ErrorBody, Failure};
pub use openapi::ApiDoc;
pub use request_id::RequestId;
pub use routes::{AskBody, GraphQuery, Health, SearchBody};

/// What every handler shares: the engine and the API keys.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub keys: Arc<KeyStore>,
}

impl AppState {
    pub fn new(engine: Arc<Engine>, keys: Arc<KeyStore>) -> AppState {
        AppState { engine, keys }
    }
}

/// Every route of the API, with request ids on every response.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/v1/search", post(routes::search))
        .route("/v1/ask", post(routes::ask))
        .route("/v1/graph/entity/{name}", get(routes::graph_entity))
        .route("/openapi.json", get(openapi::openapi_json))
        .fallback(routes::no_route)
        .method_not_allowed_fallback(routes::wrong_method)
        .layer(axum::middleware::from_fn(request_id::assign))
        .with_state(state)
}

/// Binds `addr` and serves until `shutdown` resolves (in-flight requests finish).
pub async fn serve(
    addr: SocketAddr,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(listener, state, shutdown).await
}

/// Serves on an already bound listener (tests bind port 0 and read the address first).
/// Re-reads the keys file on SIGHUP while it runs.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let hup = reload_on_hangup(state.keys.clone());
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    if let Some(h) = hup {
        h.abort();
    }
    result
}

#[cfg(unix)]
fn reload_on_hangup(keys: Arc<KeyStore>) -> Option<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "dossier-server: SIGHUP not available ({e}); keys reload on file change only"
            );
            return None;
        }
    };
    Some(tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let keys = keys.clone();
            let outcome = tokio::task::spawn_blocking(move || keys.reload()).await;
            match outcome {
                Ok(Ok(n)) => eprintln!("dossier-server: SIGHUP: {n} keys loaded"),
                Ok(Err(e)) => eprintln!("dossier-server: SIGHUP: keys not reloaded: {e}"),
                Err(e) => eprintln!("dossier-server: SIGHUP: reload failed: {e}"),
            }
        }
    }))
}

#[cfg(not(unix))]
fn reload_on_hangup(_keys: Arc<KeyStore>) -> Option<tokio::task::JoinHandle<()>> {
    None
}

/// Runs the server on its own multi-threaded runtime until Ctrl-C or SIGTERM (for the
/// CLI, which has no runtime of its own).
pub fn serve_blocking(addr: SocketAddr, state: AppState) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "dossier: serving on http://{} ({} keys)",
            listener.local_addr()?,
            state.keys.len()
        );
        serve_on(listener, state, stop_signal()).await
    })
}

async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
