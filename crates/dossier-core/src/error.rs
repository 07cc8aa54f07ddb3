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
