//! Idempotency keys in the shared database (`migrations/V5__idempotency.sql`). A claim
//! locks the key's row (`SELECT … FOR UPDATE`), or inserts it, in one transaction, so
//! that two replicas given the same key at once never both run the write.

use postgres::Row;

use super::{decide, Claim, Decision, IdempotencyLog, KeyRow, Limits, StoredResponse};
use crate::postgres::{pg, PgCatalog};
use crate::Result;

fn row_of(r: &Row) -> KeyRow {
    let done: bool = r.get("done");
    KeyRow {
        fingerprint: r.get("fingerprint"),
        at_us: r.get("at_us"),
        done: done.then(|| StoredResponse {
            status: r.get::<_, Option<i32>>("status").unwrap_or(200) as u16,
            content_type: r.get("content_type"),
            location: r.get("location"),
            body: r.get::<_, Option<Vec<u8>>>("body").unwrap_or_default(),
        }),
    }
}

impl IdempotencyLog for PgCatalog {
    fn idem_claim(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
        now_us: i64,
        limits: &Limits,
    ) -> Result<Claim> {
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        // A new key: inserted in flight, and it is ours. Otherwise the row, locked.
        let inserted = tx
            .execute(
                "INSERT INTO idempotency_keys (principal, key, fingerprint, at_us)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (principal, key) DO NOTHING",
                &[&principal, &key, &fingerprint, &now_us],
            )
            .map_err(pg)?;
        if inserted == 1 {
            tx.commit().map_err(pg)?;
            return Ok(Claim::Fresh);
        }
        let found = tx
            .query_opt(
                "SELECT fingerprint, at_us, done, status, content_type, location, body
                 FROM idempotency_keys WHERE principal = $1 AND key = $2 FOR UPDATE",
                &[&principal, &key],
            )
            .map_err(pg)?
            .map(|r| row_of(&r));
        let claim = match decide(found.as_ref(), fingerprint, now_us, limits) {
            Decision::Answer(claim) => claim,
            Decision::Take => {
                tx.execute(
                    "INSERT INTO idempotency_keys (principal, key, fingerprint, at_us)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (principal, key) DO UPDATE SET
                         fingerprint = EXCLUDED.fingerprint, at_us = EXCLUDED.at_us,
                         done = false, status = NULL, content_type = NULL,
                         location = NULL, body = NULL",
                    &[&principal, &key, &fingerprint, &now_us],
                )
                .map_err(pg)?;
                Claim::Fresh
            }
        };
        tx.commit().map_err(pg)?;
        Ok(claim)
    }

    fn idem_complete(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        now_us: i64,
        limits: &Limits,
    ) -> Result<()> {
        let mut c = self.client()?;
        let mut tx = c.transaction().map_err(pg)?;
        tx.execute(
            "UPDATE idempotency_keys
             SET done = true, at_us = $4, status = $5, content_type = $6, location = $7,
                 body = $8
             WHERE principal = $1 AND key = $2 AND fingerprint = $3 AND NOT done",
            &[
                &principal,
                &key,
                &fingerprint,
                &now_us,
                &i32::from(response.status),
                &response.content_type,
                &response.location,
                &response.body,
            ],
        )
        .map_err(pg)?;
        let expired = now_us.saturating_sub(limits.ttl_secs.saturating_mul(1_000_000));
        let keep = i64::try_from(limits.per_principal).unwrap_or(i64::MAX);
        tx.execute(
            "DELETE FROM idempotency_keys WHERE principal = $1 AND done AND (at_us < $2
                 OR key IN (SELECT key FROM idempotency_keys WHERE principal = $1 AND done
                            ORDER BY at_us DESC, key OFFSET $3))",
            &[&principal, &expired, &keep],
        )
        .map_err(pg)?;
        tx.commit().map_err(pg)
    }

    fn idem_release(&self, principal: &str, key: &str, fingerprint: &str) -> Result<()> {
        let mut c = self.client()?;
        c.execute(
            "DELETE FROM idempotency_keys
             WHERE principal = $1 AND key = $2 AND fingerprint = $3 AND NOT done",
            &[&principal, &key, &fingerprint],
        )
        .map_err(pg)?;
        Ok(())
    }
}
