//! Background maintenance: the work a commit leaves for later, done beside requests
//! rather than inside them.
//!
//! A commit appends its vectors to the index's tail (embedded) or writes them
//! unindexed (pgvector); searches scan that tail exactly, so nothing committed is ever
//! missing, but every search pays for the tail's length. This loop links the tail into
//! the HNSW in bounded steps, so a commit costs what it adds and the tail stays short.
//! On a shared store only one replica folds at a time (the database's advisory lock);
//! the others find it busy and wait for the next tick.
//!
//! A commit in a tenant also leaves that tenant's graph behind. A second loop rebuilds
//! such graphs (with the views and community reports their recent readers used) and
//! swaps them in, while requests keep answering from the previous graph filtered
//! against the current document view ([`Engine::serve_stale_graphs`]). The graph is
//! derived, per replica, from the shared catalog: each replica refreshes its own.
//!
//! Audit retention is not here: the server runs it (`lib.rs`, `audit::retain`), since
//! it exports what it deletes.

use std::sync::Arc;

use dossier_engine::Engine;

/// Rows linked per blocking step: bounds how long one step holds a blocking thread
/// (about a second at 100k chunks embedded, a few seconds of pgvector maintenance).
const LINK_STEP: usize = 1024;

/// Starts the loops; they run until the returned task is aborted.
pub(crate) fn spawn(
    engine: Arc<Engine>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    engine.serve_stale_graphs(true);
    let vectors = link_vectors(engine.clone(), every);
    let graphs = refresh_graphs(engine.clone(), every);
    tokio::spawn(async move {
        // Aborting this task drops the guards, which abort the loops.
        let _guards = (AbortOnDrop(vectors), AbortOnDrop(graphs));
        std::future::pending::<()>().await;
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Rebuilds the graphs commits left behind, one refresh at a time.
fn refresh_graphs(engine: Arc<Engine>, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::time::sleep(every).await;
            let e = engine.clone();
            match tokio::task::spawn_blocking(move || e.refresh_graphs()).await {
                Ok(Ok(_)) => failing = false,
                Ok(Err(err)) => {
                    if !failing {
                        eprintln!("dossier-server: refreshing a tenant graph failed: {err}");
                    }
                    failing = true;
                }
                Err(_) => {}
            }
        }
    })
}

/// Links committed vectors into the searched index in bounded steps.
fn link_vectors(engine: Arc<Engine>, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::time::sleep(every).await;
            // Step until the tail is empty or another process holds the fold.
            loop {
                let e = engine.clone();
                match tokio::task::spawn_blocking(move || e.store().link_vectors(LINK_STEP)).await {
                    Ok(Ok(step)) => {
                        failing = false;
                        if step.busy || step.folded == 0 || step.pending == 0 {
                            break;
                        }
                    }
                    Ok(Err(err)) => {
                        if !failing {
                            eprintln!("dossier-server: linking committed vectors failed: {err}");
                        }
                        failing = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
    })
}
