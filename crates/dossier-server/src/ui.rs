//! The web UI, served by the same binary. (Stub; filled in by the UI work.)

use axum::Router;

use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
}
