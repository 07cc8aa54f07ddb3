//! Idempotency keys of the server's write routes: a write sent again with the same
//! `Idempotency-Key` by the same principal is answered with the first one's response,
//! not run twice — across restarts and, on a shared store, across replicas.
//!
//! A key is the principal's own: `(principal, key)`. Another principal's identical key
//! is another key, so nothing about one principal's writes reaches another.
//!
//! Life of a key: **claimed** (in flight) when a write with it starts; **done** with the
//! response when the write succeeded (2xx); **released** (gone) when it failed, since a
//! failed write changed nothing and may run again. A claim whose process died is taken
//! over after [`Limits::lease_secs`]; a done key is forgotten after
//! [`Limits::ttl_secs`]; a principal keeps at most [`Limits::per_principal`] done keys
//! (the oldest go first).
//!
//! Both backends keep the keys beside their catalog ([`crate::CatalogBackend`] requires
//! [`IdempotencyLog`]): the embedded one in a redb table of `catalog.redb`, the shared
//! one in the `idempotency_keys` table. Like the audit log, they are not part of the
//! change log: a claim is no commit and invalidates nothing.

mod embedded;
mod shared;

pub(crate) use embedded::create_table;

use serde::{Deserialize, Serialize};

use crate::Result;

/// How long keys live and how many a principal keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Seconds a done key replays its response.
    pub ttl_secs: i64,
    /// Seconds after which a claim still in flight is taken to be abandoned (its
    /// process died) and a retry may run the write.
    pub lease_secs: i64,
    /// Done keys a principal keeps; beyond it the oldest are dropped.
    pub per_principal: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ttl_secs: 24 * 3600,
            lease_secs: 15 * 60,
            per_principal: 1000,
        }
    }
}

/// The response of a write that succeeded, as a replay sends it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub body: Vec<u8>,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is now this request's: run the write, then `complete` or `release`.
    Fresh,
    /// The same write is running now (here or on another replica).
    InFlight,
    /// The same write succeeded before: send this again.
    Replay(StoredResponse),
    /// The key was used for a different write (another route or body).
    Mismatch,
}

/// A key as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyRow {
    pub fingerprint: String,
    /// When it was claimed (in flight) or completed (done), µs since the epoch.
    pub at_us: i64,
    pub done: Option<StoredResponse>,
}

/// What a claim does with the row it found: the one rule both backends apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write a new in-flight row for this request.
    Take,
    Answer(Claim),
}

pub(crate) fn decide(
    found: Option<&KeyRow>,
    fingerprint: &str,
    now_us: i64,
    limits: &Limits,
) -> Decision {
    let Some(row) = found else {
        return Decision::Take;
    };
    let age_us = now_us.saturating_sub(row.at_us);
    match &row.done {
        // An expired key is no key: whatever it was used for, it starts afresh.
        Some(_) if age_us > limits.ttl_secs.saturating_mul(1_000_000) => Decision::Take,
        _ if row.fingerprint != fingerprint => Decision::Answer(Claim::Mismatch),
        Some(response) => Decision::Answer(Claim::Replay(response.clone())),
        None if age_us > limits.lease_secs.saturating_mul(1_000_000) => Decision::Take,
        None => Decision::Answer(Claim::InFlight),
    }
}

/// The idempotency keys of a store (see the module documentation).
pub trait IdempotencyLog: Send + Sync {
    /// Claims `key` of `principal` for a write whose request digests to `fingerprint`.
    fn idem_claim(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
        now_us: i64,
        limits: &Limits,
    ) -> Result<Claim>;
    /// Records the response of the write that claimed `key` (a no-op if the claim was
    /// taken over meanwhile), and drops the principal's expired and surplus keys.
    fn idem_complete(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        now_us: i64,
        limits: &Limits,
    ) -> Result<()>;
    /// Gives back the claim of a write that failed (a no-op unless it is still this
    /// request's claim).
    fn idem_release(&self, principal: &str, key: &str, fingerprint: &str) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    fn row(fp: &str, at_s: i64, done: bool) -> KeyRow {
        KeyRow {
            fingerprint: fp.into(),
            at_us: at_s * S,
            done: done.then(|| StoredResponse {
                status: 201,
                content_type: Some("application/json".into()),
                location: None,
                body: b"{}".to_vec(),
            }),
        }
    }

    #[test]
    fn a_key_is_taken_replayed_refused_or_taken_over_by_its_age() {
        let l = Limits {
            ttl_secs: 100,
            lease_secs: 10,
            per_principal: 5,
        };
        let now = 1_000 * S;
        assert_eq!(decide(None, "a", now, &l), Decision::Take);
        // Done: replayed for its own write, refused for another, forgotten once expired.
        assert!(matches!(
            decide(Some(&row("a", 950, true)), "a", now, &l),
            Decision::Answer(Claim::Replay(r)) if r.status == 201
        ));
        assert_eq!(
            decide(Some(&row("a", 950, true)), "b", now, &l),
            Decision::Answer(Claim::Mismatch)
        );
        assert_eq!(
            decide(Some(&row("a", 899, true)), "b", now, &l),
            Decision::Take
        );
        // In flight: waits within its lease, is taken over after it, and another
        // write never takes it.
        assert_eq!(
            decide(Some(&row("a", 995, false)), "a", now, &l),
            Decision::Answer(Claim::InFlight)
        );
        assert_eq!(
            decide(Some(&row("a", 989, false)), "a", now, &l),
            Decision::Take
        );
        assert_eq!(
            decide(Some(&row("a", 989, false)), "b", now, &l),
            Decision::Answer(Claim::Mismatch)
        );
        // A clock that went back is no reason to take a claim over.
        assert_eq!(
            decide(Some(&row("a", 2_000, false)), "a", now, &l),
            Decision::Answer(Claim::InFlight)
        );
    }
}
