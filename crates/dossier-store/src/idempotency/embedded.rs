//! Idempotency keys in the embedded catalog (`catalog.redb`): `(principal, key)` → the
//! row, framed as a JSON head (everything but the body) and the body's raw bytes after
//! it, so that a stored response costs its own size.
//!
//! A claim is a redb write transaction: it waits for a commit in progress (redb has one
//! writer), which only write routes ever do.

use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::{decide, Claim, Decision, IdempotencyLog, KeyRow, Limits, StoredResponse};
use crate::catalog::Catalog;
use crate::{Error, Result};

const KEYS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("idempotency_keys");

/// Creates the table (in the transaction that opens the catalog), so that readers always
/// find it, in catalogs written before idempotency keys too.
pub(crate) fn create_table(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(KEYS)?;
    Ok(())
}

#[derive(Serialize, Deserialize)]
struct Head {
    fingerprint: String,
    at_us: i64,
    /// Status, content type and location of a done key.
    done: Option<(u16, Option<String>, Option<String>)>,
}

fn encode(row: &KeyRow) -> Result<Vec<u8>> {
    let head = Head {
        fingerprint: row.fingerprint.clone(),
        at_us: row.at_us,
        done: row
            .done
            .as_ref()
            .map(|r| (r.status, r.content_type.clone(), r.location.clone())),
    };
    let head = serde_json::to_vec(&head)?;
    let body = row.done.as_ref().map_or(&[][..], |r| &r.body[..]);
    let mut out = Vec::with_capacity(4 + head.len() + body.len());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(body);
    Ok(out)
}

/// Whether `key` of `principal` is still the running claim of the request that digests to
/// `fingerprint` (not done, not taken over by another request).
fn still_claimed(
    t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    principal: &str,
    key: &str,
    fingerprint: &str,
) -> Result<bool> {
    Ok(match t.get((principal, key))? {
        Some(v) => {
            let row = decode(v.value())?;
            row.done.is_none() && row.fingerprint == fingerprint
        }
        None => false,
    })
}

fn decode(bytes: &[u8]) -> Result<KeyRow> {
    let bad = || Error::Catalog("idempotency key: damaged row".into());
    let len = u32::from_le_bytes(
        bytes
            .get(..4)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    );
    let end = 4usize.checked_add(len as usize).ok_or_else(bad)?;
    let head: Head = serde_json::from_slice(bytes.get(4..end).ok_or_else(bad)?)?;
    let body = &bytes[end..];
    Ok(KeyRow {
        fingerprint: head.fingerprint,
        at_us: head.at_us,
        done: head
            .done
            .map(|(status, content_type, location)| StoredResponse {
                status,
                content_type,
                location,
                body: body.to_vec(),
            }),
    })
}

impl IdempotencyLog for Catalog {
    fn idem_claim(
        &self,
        principal: &str,
        key: &str,
        fingerprint: &str,
        now_us: i64,
        limits: &Limits,
    ) -> Result<Claim> {
        let tx = self.db.begin_write()?;
        let claim = {
            let mut t = tx.open_table(KEYS)?;
            let found = t
                .get((principal, key))?
                .map(|v| decode(v.value()))
                .transpose()?;
            match decide(found.as_ref(), fingerprint, now_us, limits) {
                Decision::Answer(claim) => claim,
                Decision::Take => {
                    let row = KeyRow {
                        fingerprint: fingerprint.to_string(),
                        at_us: now_us,
                        done: None,
                    };
                    t.insert((principal, key), encode(&row)?.as_slice())?;
                    Claim::Fresh
                }
            }
        };
        if claim == Claim::Fresh {
            tx.commit()?;
        } else {
            tx.abort()?;
        }
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
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(KEYS)?;
            let ours = still_claimed(&t, principal, key, fingerprint)?;
            if ours {
                let row = KeyRow {
                    fingerprint: fingerprint.to_string(),
                    at_us: now_us,
                    done: Some(response.clone()),
                };
                t.insert((principal, key), encode(&row)?.as_slice())?;
            }
            // The principal's done keys: expired ones go, and beyond the bound the
            // oldest. Keys sort by principal first, so this walks only its own.
            let ttl_us = limits.ttl_secs.saturating_mul(1_000_000);
            let mut done: Vec<(i64, String)> = Vec::new();
            for row in t.range((principal, "")..)? {
                let (k, v) = row?;
                let (p, k) = k.value();
                if p != principal {
                    break;
                }
                let r = decode(v.value())?;
                if r.done.is_some() {
                    done.push((r.at_us, k.to_string()));
                }
            }
            done.sort();
            let surplus = done.len().saturating_sub(limits.per_principal);
            for (i, (at, k)) in done.iter().enumerate() {
                if i < surplus || now_us.saturating_sub(*at) > ttl_us {
                    t.remove((principal, k.as_str()))?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn idem_release(&self, principal: &str, key: &str, fingerprint: &str) -> Result<()> {
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(KEYS)?;
            let ours = still_claimed(&t, principal, key, fingerprint)?;
            if ours {
                t.remove((principal, key))?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_damaged_ones_are_errors() {
        let done = KeyRow {
            fingerprint: "f".into(),
            at_us: 7,
            done: Some(StoredResponse {
                status: 202,
                content_type: Some("application/json".into()),
                location: Some("/v1/jobs/3".into()),
                body: vec![0, 255, b'{', b'}'],
            }),
        };
        let flying = KeyRow {
            fingerprint: "g".into(),
            at_us: -1,
            done: None,
        };
        for r in [&done, &flying] {
            assert_eq!(&decode(&encode(r).unwrap()).unwrap(), r);
        }
        for bad in [&b""[..], &[9, 0, 0, 0, b'{'][..], &[255, 255, 255, 255][..]] {
            assert!(decode(bad).is_err());
        }
    }
}
