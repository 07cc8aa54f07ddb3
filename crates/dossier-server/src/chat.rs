//! `POST /v1/chat/completions`: an OpenAI-compatible front to `ask`. (Stub; filled in by
//! the chat work.)

use axum::Router;

use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
}
