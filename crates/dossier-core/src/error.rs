//! The core error type: bad input a caller can fix, apart from internal failures.

/// Errors raised by the core rules and by seam implementations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller gave something malformed; the message names it.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// A model or provider failed; the message says which and why.
    #[error("embedding failed: {0}")]
    Embedding(String),
}

/// `Result` with the core [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// An error's message followed by those of its causes (`a: b: c`): a transport error's
/// top-level message alone is often vague.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
