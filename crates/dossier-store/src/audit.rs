//! The audit log: one entry per search and ask the server answered (who, when, under
//! which scope, what was asked or its digest, which tools ran and how they ended, the
//! evidence and citations, the status, and the unfiltered audit reasons the caller was
//! not told), plus the agent's trace of each ask, kept by request id and principal so
//! that `GET /v1/traces/{id}` survives a restart.
//!
//! Both backends keep it beside their catalog, behind the catalog seam
//! ([`crate::CatalogBackend`] requires [`AuditLog`]): the embedded one in redb tables of
//! `catalog.redb` (`embedded`), the shared one in the `audit_log` and `audit_traces`
//! tables of the database (`shared`). The audit log is not part of the catalog's
//! change log: an append is no commit, moves no generation and invalidates nothing.
//!
//! **Who reads it:** only operators (the server's `GET /v1/audit` needs an operator key;
//! `dossier audit` needs the store itself). An entry may name documents or rows the
//! caller could not see — that is what the unfiltered reasons are for. A stored trace is
//! read back only by [`AuditLog::audit_trace`], which takes the principal that must own
//! it: another principal's trace and no trace read the same (`None`).

mod embedded;
mod shared;

pub(crate) use embedded::create_tables;
pub use shared::AUDIT_PRUNE_LOCK;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::Result;

/// Entries a page holds unless the query says otherwise.
pub const DEFAULT_PAGE: usize = 100;
/// The most entries one page may hold.
pub const MAX_PAGE: usize = 1000;

/// One audited request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// The request's id (`x-request-id`); an ask's trace is kept under it.
    pub request_id: String,
    /// When the request finished (UTC, microseconds).
    pub finished_at: DateTime<Utc>,
    /// The principal of the API key.
    pub principal: String,
    /// The principal's tenant and groups as the store held them for this request.
    pub tenant: String,
    pub groups: Vec<String>,
    /// The knowledge bases the request was limited to (the principal's own, narrowed
    /// by the request's `kb`); absent: all of the tenant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kbs: Option<Vec<String>>,
    /// `/v1/search`, `/v1/ask` or `/v1/chat/completions` (MCP tool calls run as these).
    pub route: String,
    /// The business date and the as-of date the request was judged at, as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<NaiveDate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<NaiveDate>,
    /// The search mode (search), or `global` (an ask in that mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The answer's status (`answered`, `partial`, `insufficient_evidence`,
    /// `unavailable`), a search's `ok` or `degraded`, or the error code of a request that
    /// failed (`too_many_concurrent`, `deadline_exceeded`, …).
    pub status: String,
    /// The HTTP status the request was answered with.
    pub http_status: u16,
    /// BLAKE3 of the question (ask, chat) or query (search), hex: always kept, so that
    /// repeats can be found without the text.
    pub question_blake3: String,
    /// The question or query itself: only when the server keeps texts
    /// (`--audit-questions text`); absent by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Answered from the answer cache: the tools, evidence and reasons are those of the
    /// run that computed the answer.
    pub cached: bool,
    /// The agent's tool calls in order, each with the status the tool returned
    /// (unfiltered: `forbidden` where the caller was told `no_hit`).
    pub tools: Vec<AuditTool>,
    /// Evidence the request brought: chunk ids (`DOC@VERSION#N`), and `table/key` for
    /// record rows; a search's hits in rank order.
    pub evidence: Vec<String>,
    /// The chunk ids the answer cites, each once, in the order of first citation.
    pub citations: Vec<String>,
    /// What the caller was not told (see [`AuditReason`]).
    pub reasons: Vec<AuditReason>,
    /// Whether the agent's trace of the request is kept with it.
    pub has_trace: bool,
}

/// One tool call of an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditTool {
    pub name: String,
    /// `ok`, `no_hit`, `timeout`, `forbidden` or `error`, as the tool returned it.
    pub status: String,
}

/// A step whose caller was told less than happened: the tool's own status and note
/// (e.g. `forbidden` with the record that exists but is someone else's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditReason {
    /// Index into the trace's steps.
    pub step: usize,
    pub action: String,
    pub status: String,
    pub note: String,
}

/// An entry to append, with the request's trace (JSON) when it has one.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    pub entry: AuditEntry,
    pub trace: Option<Vec<u8>>,
}

/// Which entries to list, newest first. Every filter given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    pub principal: Option<String>,
    pub tenant: Option<String>,
    pub route: Option<String>,
    pub status: Option<String>,
    pub request_id: Option<String>,
    /// Finished at or after.
    pub since: Option<DateTime<Utc>>,
    /// Finished before.
    pub until: Option<DateTime<Utc>>,
    /// Entries per page (0: [`DEFAULT_PAGE`]; at most [`MAX_PAGE`]).
    pub limit: usize,
    /// Continue after the last entry of an earlier page.
    pub cursor: Option<Cursor>,
}

impl AuditQuery {
    /// The page size the backends use.
    pub fn page_size(&self) -> usize {
        match self.limit {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        }
    }

    /// Whether `e` passes the filters (the time bounds and cursor included).
    pub(crate) fn matches(&self, e: &AuditEntry) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.principal, &e.principal)
            && eq(&self.tenant, &e.tenant)
            && eq(&self.route, &e.route)
            && eq(&self.status, &e.status)
            && eq(&self.request_id, &e.request_id)
            // At the log's precision, as the backends' ranges compare.
            && self.since.is_none_or(|t| micros(&e.finished_at) >= micros(&t))
            && self.until.is_none_or(|t| micros(&e.finished_at) < micros(&t))
    }
}

/// One page of entries, and where the next one starts (`None`: this was the last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `cursor` for the next (older) page.
    pub next_cursor: Option<String>,
}

/// A position in the log: an entry's finishing time (microseconds since the epoch) and
/// its sequence number among entries of the same backend. Pages run newest first; a
/// page after a cursor holds only entries strictly older than it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub micros: i64,
    pub seq: u64,
}

impl Cursor {
    /// The opaque text a client passes back.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.micros, self.seq)
    }

    /// A cursor this module wrote; `None` for anything else.
    pub fn parse(s: &str) -> Option<Cursor> {
        let (m, n) = s.split_once('.')?;
        let ok = |t: &str| !t.is_empty() && t.len() <= 20;
        if !ok(m) || !ok(n) {
            return None;
        }
        Some(Cursor {
            micros: m.parse().ok()?,
            seq: n.parse().ok()?,
        })
    }
}

/// What a prune removed; `busy` when another process was pruning (nothing done).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    pub entries: u64,
    pub traces: u64,
    pub busy: bool,
}

/// The audit log of a store (see the module documentation).
pub trait AuditLog: Send + Sync {
    /// Appends `records` (their times truncated to microseconds) in one transaction.
    fn audit_append(&self, records: &[AuditRecord]) -> Result<()>;
    /// One page of entries matching `query`, newest first.
    fn audit_list(&self, query: &AuditQuery) -> Result<AuditPage>;
    /// The trace kept for `request_id` if `principal` made that request; `None` for
    /// another principal's and for an id never seen alike.
    fn audit_trace(&self, request_id: &str, principal: &str) -> Result<Option<Vec<u8>>>;
    /// Deletes the entries (and their traces) that finished before `before`. On a
    /// shared store one process prunes at a time: a call that finds another pruning
    /// returns `busy` at once.
    fn audit_prune(&self, before: DateTime<Utc>) -> Result<Pruned>;
}

/// BLAKE3 of `text`, hex.
pub fn digest(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// Microseconds since the epoch (what both backends order and prune by).
pub(crate) fn micros(t: &DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// `t` at the precision the log keeps (Postgres keeps microseconds).
pub(crate) fn truncated(t: &DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros(t)).unwrap_or(*t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let c = Cursor {
            micros: 1_767_225_600_123_456,
            seq: 42,
        };
        assert_eq!(Cursor::parse(&c.encode()), Some(c));
        let neg = Cursor { micros: -5, seq: 0 };
        assert_eq!(Cursor::parse(&neg.encode()), Some(neg));
        for bad in [
            "",
            ".",
            "1.",
            ".1",
            "a.b",
            "1.2.3",
            "1.-2",
            "99999999999999999999999.1",
        ] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn page_sizes_are_bounded() {
        let q = |limit| AuditQuery {
            limit,
            ..AuditQuery::default()
        };
        assert_eq!(q(0).page_size(), DEFAULT_PAGE);
        assert_eq!(q(7).page_size(), 7);
        assert_eq!(q(MAX_PAGE * 10).page_size(), MAX_PAGE);
    }
}
