//! Cooperative cancellation: a cheap, clonable token that work checks between steps.
//!
//! A [`Cancel`] is shared by whoever may give up on a piece of work (a request handler
//! whose client went away, a deadline) and the code doing it (a queue, a loop over
//! batches). Cancelling is a flag: nothing is interrupted, the work checks
//! [`Cancel::check`] at its own safe points and stops there.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A cancellation token. Clones share one flag: cancelling any clone cancels them all.
///
/// A token may carry a deadline; once it has passed the token counts as cancelled
/// ([`Cancelled::DeadlineExceeded`]) without anyone calling [`Cancel::cancel`].
/// `Cancel::default()` is a token that is never cancelled unless asked to be.
#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    deadline: Option<Instant>,
}

/// Why a [`Cancel`] token stopped the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cancelled {
    /// [`Cancel::cancel`] was called.
    Cancelled,
    /// The token's deadline passed.
    DeadlineExceeded,
}

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline exceeded",
        })
    }
}

impl std::error::Error for Cancelled {}

impl Cancel {
    /// A token without a deadline, cancelled only by [`Cancel::cancel`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A token that also counts as cancelled from `deadline` on.
    pub fn with_deadline(deadline: Instant) -> Self {
        Self {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                deadline: Some(deadline),
            }),
        }
    }

    /// A token whose deadline is `timeout` from now (saturating far in the future).
    pub fn with_timeout(timeout: Duration) -> Self {
        let now = Instant::now();
        match now.checked_add(timeout) {
            Some(deadline) => Self::with_deadline(deadline),
            None => Self::new(),
        }
    }

    /// Cancels the work sharing this token (and every clone of it). Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
    }

    /// The deadline, if the token has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.inner.deadline
    }

    /// Time left before the deadline: `None` without one, zero once it has passed.
    pub fn remaining(&self) -> Option<Duration> {
        self.inner
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// True once [`Cancel::cancel`] was called or the deadline has passed.
    pub fn is_cancelled(&self) -> bool {
        self.check().is_err()
    }

    /// `Err` with the reason once the work should stop; an explicit cancel wins over an
    /// expired deadline.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.inner.cancelled.load(Ordering::Acquire) {
            return Err(Cancelled::Cancelled);
        }
        match self.inner.deadline {
            Some(d) if Instant::now() >= d => Err(Cancelled::DeadlineExceeded),
            _ => Ok(()),
        }
    }

    /// True when `self` and `other` are clones of one token.
    pub fn same_token(&self, other: &Cancel) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.inner.cancelled.load(Ordering::Relaxed))
            .field("deadline", &self.inner.deadline)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Cancel::new();
        let b = a.clone();
        assert_eq!(a.check(), Ok(()));
        assert!(!b.is_cancelled());
        b.cancel();
        assert_eq!(a.check(), Err(Cancelled::Cancelled));
        assert!(a.is_cancelled() && a.same_token(&b));
        assert!(!a.same_token(&Cancel::new()));
        assert_eq!(a.deadline(), None);
        assert_eq!(a.remaining(), None);
    }

    #[test]
    fn deadline_counts_as_cancelled() {
        let past = Cancel::with_deadline(Instant::now());
        assert_eq!(past.check(), Err(Cancelled::DeadlineExceeded));
        assert_eq!(past.remaining(), Some(Duration::ZERO));
        past.cancel();
        assert_eq!(past.check(), Err(Cancelled::Cancelled));

        let future = Cancel::with_timeout(Duration::from_secs(3600));
        assert_eq!(future.check(), Ok(()));
        assert!(future.remaining().unwrap() > Duration::from_secs(3500));
        // A timeout past what Instant can hold means no deadline, not a panic.
        assert_eq!(Cancel::with_timeout(Duration::MAX).deadline(), None);
    }

    #[test]
    fn reasons_read_well() {
        assert_eq!(Cancelled::Cancelled.to_string(), "cancelled");
        assert_eq!(Cancelled::DeadlineExceeded.to_string(), "deadline exceeded");
    }
}
