//! Background maintenance: the work a commit leaves for later, done beside requests
//! rather than inside them.
//!
//! A commit appends its vectors to the index's tail (embedded) or writes them
//! unindexed (pgvector); searches scan that tail exactly, so nothing committed is ever
//! missing, but every search pays for the tail's length. This loop links the tail into
//! the HNSW in bounded steps, so a commit costs what it adds and the tail stays short.
//! On a shared store only one replica folds at a time (the database's advisory lock);
//! the others find it busy and wait for the next tick.

use std::sync::Arc;

use dossier_engine::Engine;

/// Rows linked per blocking step: bounds how long one step holds a blocking thread
/// (about a second at 100k chunks embedded, a few seconds of pgvector maintenance).
const LINK_STEP: usize = 1024;

/// Starts the loop; it runs until the task is aborted.
pub(crate) fn spawn(
    engine: Arc<Engine>,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
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
