//! The audit log in the embedded catalog (`catalog.redb`): entries keyed by their
//! finishing time and a sequence number, so that a page and a prune are range scans,
//! and traces keyed by `(request_id, principal)`.
//!
//! An append is a redb write transaction of its own: it waits for a commit in progress
//! (redb has one writer), which is why the server appends from a thread of its own,
//! never from a request.

use std::ops::Bound;

use chrono::{DateTime, Utc};
use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::{
    micros, truncated, AuditEntry, AuditLog, AuditPage, AuditQuery, AuditRecord, Cursor, Pruned,
};
use crate::catalog::Catalog;
use crate::Result;

/// `(finished_at µs, seq)` → [`AuditEntry`] (JSON).
const ENTRIES: TableDefinition<(i64, u64), &[u8]> = TableDefinition::new("audit_log");
/// `(request_id, principal)` → the request's trace (JSON).
const TRACES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("audit_traces");
/// `next_seq`.
const META: TableDefinition<&str, u64> = TableDefinition::new("audit_meta");

/// An entry's key: finishing time (µs) and sequence number.
type Key = (i64, u64);
/// A trace's key: request id and principal.
type TraceKey = (String, String);

/// Entries removed per prune transaction: a prune shares redb's one writer with
/// commits, so it lets them in between batches.
const PRUNE_BATCH: usize = 5_000;

/// Creates the audit tables (in the transaction that opens the catalog), so that
/// readers always find them, in catalogs written before the audit log too.
pub(crate) fn create_tables(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(ENTRIES)?;
    tx.open_table(TRACES)?;
    tx.open_table(META)?;
    Ok(())
}

impl AuditLog for Catalog {
    fn audit_append(&self, records: &[AuditRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let tx = self.db.begin_write()?;
        {
            let mut meta = tx.open_table(META)?;
            let mut entries = tx.open_table(ENTRIES)?;
            let mut traces = tx.open_table(TRACES)?;
            let mut seq = meta.get("next_seq")?.map_or(0, |v| v.value());
            for r in records {
                let mut e = r.entry.clone();
                e.finished_at = truncated(&e.finished_at);
                e.has_trace = r.trace.is_some();
                if let Some(t) = &r.trace {
                    traces.insert((e.request_id.as_str(), e.principal.as_str()), t.as_slice())?;
                }
                entries.insert(
                    (micros(&e.finished_at), seq),
                    serde_json::to_vec(&e)?.as_slice(),
                )?;
                seq += 1;
            }
            meta.insert("next_seq", seq)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn audit_list(&self, query: &AuditQuery) -> Result<AuditPage> {
        let size = query.page_size();
        let lower = match query.since {
            Some(t) => Bound::Included((micros(&t), 0)),
            None => Bound::Unbounded,
        };
        // The tighter of `until` (exclusive) and the cursor (exclusive).
        let mut upper = query.cursor.map(|c| (c.micros, c.seq));
        if let Some(t) = query.until {
            let u = (micros(&t), 0);
            upper = Some(upper.map_or(u, |c| c.min(u)));
        }
        let upper = upper.map_or(Bound::Unbounded, Bound::Excluded);
        let rx = self.db.begin_read()?;
        let t = rx.open_table(ENTRIES)?;
        let mut page = AuditPage::default();
        let mut last = None;
        // Filters are applied while walking back in time; a page stops at `size`
        // matches, so a selective filter walks further, never beyond the range.
        for row in t.range::<(i64, u64)>((lower, upper))?.rev() {
            let (k, v) = row?;
            let e: AuditEntry = serde_json::from_slice(v.value())?;
            if !query.matches(&e) {
                continue;
            }
            if page.entries.len() == size {
                page.next_cursor = last.map(|c: Cursor| c.encode());
                break;
            }
            let (m, s) = k.value();
            last = Some(Cursor { micros: m, seq: s });
            page.entries.push(e);
        }
        Ok(page)
    }

    fn audit_trace(&self, request_id: &str, principal: &str) -> Result<Option<Vec<u8>>> {
        let rx = self.db.begin_read()?;
        let t = rx.open_table(TRACES)?;
        Ok(t.get((request_id, principal))?.map(|v| v.value().to_vec()))
    }

    fn audit_prune(&self, before: DateTime<Utc>) -> Result<Pruned> {
        let cutoff = (micros(&before), 0u64);
        let mut pruned = Pruned::default();
        loop {
            let tx = self.db.begin_write()?;
            let n;
            {
                let mut entries = tx.open_table(ENTRIES)?;
                let mut traces = tx.open_table(TRACES)?;
                let mut old: Vec<(Key, Option<TraceKey>)> = Vec::new();
                for row in entries.range::<(i64, u64)>(..cutoff)? {
                    let (k, v) = row?;
                    let e: AuditEntry = serde_json::from_slice(v.value())?;
                    old.push((
                        k.value(),
                        e.has_trace.then_some((e.request_id, e.principal)),
                    ));
                    if old.len() == PRUNE_BATCH {
                        break;
                    }
                }
                n = old.len();
                for (k, trace) in old {
                    entries.remove(k)?;
                    pruned.entries += 1;
                    if let Some((rid, p)) = trace {
                        if traces.remove((rid.as_str(), p.as_str()))?.is_some() {
                            pruned.traces += 1;
                        }
                    }
                }
            }
            tx.commit()?;
            if n < PRUNE_BATCH {
                return Ok(pruned);
            }
        }
    }
}
