//! The audit log in the shared database: `audit_log` and `audit_traces`
//! (`migrations/V4__audit.sql`). Every replica appends; one prunes at a time
//! ([`AUDIT_PRUNE_LOCK`], a transaction-scoped advisory lock, so a pooled connection
//! never goes back holding it).

use chrono::{DateTime, Utc};

use super::{
    micros, truncated, AuditEntry, AuditLog, AuditPage, AuditQuery, AuditRecord, Cursor, Pruned,
};
use crate::postgres::{pg, PgCatalog};
use crate::Result;

/// The advisory lock key a prune holds (the schema lock is 7305611, the vector fold's
/// 7305612).
pub const AUDIT_PRUNE_LOCK: i64 = 7305613;

impl AuditLog for PgCatalog {
    fn audit_append(&self, records: &[AuditRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        let insert = tx
            .prepare(
                "INSERT INTO audit_log (request_id, principal, tenant, route, status,
                     finished_us, finished_at, body)
                 VALUES ($1, $2, $3, $4, $5, $6::int8, to_timestamp(($6::int8)::float8 / 1e6), $7)",
            )
            .map_err(pg)?;
        let trace = tx
            .prepare(
                "INSERT INTO audit_traces (request_id, principal, finished_us, body)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (request_id, principal)
                 DO UPDATE SET finished_us = EXCLUDED.finished_us, body = EXCLUDED.body",
            )
            .map_err(pg)?;
        for r in records {
            let mut e = r.entry.clone();
            e.finished_at = truncated(&e.finished_at);
            e.has_trace = r.trace.is_some();
            let at = micros(&e.finished_at);
            if let Some(t) = &r.trace {
                tx.execute(&trace, &[&e.request_id, &e.principal, &at, t])
                    .map_err(pg)?;
            }
            let body = serde_json::to_vec(&e)?;
            tx.execute(
                &insert,
                &[
                    &e.request_id,
                    &e.principal,
                    &e.tenant,
                    &e.route,
                    &e.status,
                    &at,
                    &body,
                ],
            )
            .map_err(pg)?;
        }
        tx.commit().map_err(pg)
    }

    fn audit_list(&self, query: &AuditQuery) -> Result<AuditPage> {
        let size = query.page_size();
        let since = query.since.as_ref().map(micros);
        let until = query.until.as_ref().map(micros);
        let (cursor_at, cursor_id) = match query.cursor {
            Some(c) => (
                Some(c.micros),
                Some(i64::try_from(c.seq).unwrap_or(i64::MAX)),
            ),
            None => (None, None),
        };
        let fetch = (size + 1) as i64;
        let mut c = self.client()?;
        let rows = c
            .query(
                "SELECT finished_us, id, body FROM audit_log
                 WHERE ($1::text IS NULL OR principal = $1)
                   AND ($2::text IS NULL OR tenant = $2)
                   AND ($3::text IS NULL OR route = $3)
                   AND ($4::text IS NULL OR status = $4)
                   AND ($5::text IS NULL OR request_id = $5)
                   AND ($6::int8 IS NULL OR finished_us >= $6)
                   AND ($7::int8 IS NULL OR finished_us < $7)
                   AND ($8::int8 IS NULL OR (finished_us, id) < ($8, $9::int8))
                 ORDER BY finished_us DESC, id DESC
                 LIMIT $10",
                &[
                    &query.principal,
                    &query.tenant,
                    &query.route,
                    &query.status,
                    &query.request_id,
                    &since,
                    &until,
                    &cursor_at,
                    &cursor_id,
                    &fetch,
                ],
            )
            .map_err(pg)?;
        let mut page = AuditPage::default();
        for (i, r) in rows.iter().enumerate() {
            if i == size {
                let prev = &rows[i - 1];
                page.next_cursor = Some(
                    Cursor {
                        micros: prev.get(0),
                        seq: prev.get::<_, i64>(1) as u64,
                    }
                    .encode(),
                );
                break;
            }
            let e: AuditEntry = serde_json::from_slice(r.get::<_, &[u8]>(2))?;
            page.entries.push(e);
        }
        Ok(page)
    }

    fn audit_trace(&self, request_id: &str, principal: &str) -> Result<Option<Vec<u8>>> {
        let mut c = self.client()?;
        Ok(c.query_opt(
            "SELECT body FROM audit_traces WHERE request_id = $1 AND principal = $2",
            &[&request_id, &principal],
        )
        .map_err(pg)?
        .map(|r| r.get(0)))
    }

    fn audit_prune(&self, before: DateTime<Utc>) -> Result<Pruned> {
        let cutoff = micros(&before);
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        let mine: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&AUDIT_PRUNE_LOCK])
            .map_err(pg)?
            .get(0);
        if !mine {
            return Ok(Pruned {
                busy: true,
                ..Pruned::default()
            });
        }
        let entries = tx
            .execute("DELETE FROM audit_log WHERE finished_us < $1", &[&cutoff])
            .map_err(pg)?;
        let traces = tx
            .execute(
                "DELETE FROM audit_traces WHERE finished_us < $1",
                &[&cutoff],
            )
            .map_err(pg)?;
        tx.commit().map_err(pg)?;
        Ok(Pruned {
            entries,
            traces,
            busy: false,
        })
    }
}
