//! The shadow stage of the index lifecycle (draft → shadow → active → rollback): real
//! queries replayed against a draft generation and the active one side by side, each
//! under its principal's scope, before the draft may serve.
//!
//! Shadowed modes are the ones an index generation decides: `bm25`, `vector`, `hybrid`
//! (graph modes rank on top of `hybrid`, so they move with it). The report gives, per
//! mode, how much of the active top-k the draft returns (overlap@k), both sides'
//! latency and errors; [`Thresholds`] turn it into a verdict the store keeps beside
//! the draft, and `promote` refuses a draft without a passing one unless forced.

use std::collections::HashSet;
use std::time::Instant;

use dossier_core::cancel::Cancel;
use serde::{Deserialize, Serialize};

use crate::eval::percentile;
use crate::{Engine, Error, Mode, Result};

/// One replayed query: who asked, and what.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShadowQuery {
    pub principal: String,
    pub query: String,
}

/// What a draft must show to pass.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Thresholds {
    /// Least mean overlap@k with the active generation, in every mode.
    pub min_overlap: f64,
    /// Most queries the draft may fail where the active one answered.
    pub max_errors: usize,
    /// Most the draft's p99 latency may be, as a multiple of the active one's (noisy
    /// machines: compare within one run, never across runs).
    pub max_p99_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            min_overlap: 0.9,
            max_errors: 0,
            max_p99_ratio: 3.0,
        }
    }
}

/// One mode's comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShadowMode {
    pub mode: String,
    pub queries: usize,
    /// Mean share of the active top-k that the draft also returns.
    pub overlap_at_k: f64,
    pub active_p50_ms: f64,
    pub active_p99_ms: f64,
    pub draft_p50_ms: f64,
    pub draft_p99_ms: f64,
    pub active_errors: usize,
    pub draft_errors: usize,
}

/// A shadow run's report and verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShadowReport {
    pub draft: String,
    pub active: String,
    pub k: usize,
    pub thresholds: Thresholds,
    pub modes: Vec<ShadowMode>,
    /// Queries skipped because their principal is not in the store.
    pub skipped: usize,
    pub passed: bool,
    /// Why it passed or which threshold it missed, in words.
    pub verdict: String,
    pub at: String,
}

/// Most queries one shadow run replays: bounds the work an operator's request causes.
pub const MAX_SHADOW_QUERIES: usize = 2_000;

impl Engine {
    /// Replays `queries` against the draft `draft` (the newest when `None`) and the
    /// active generation, judges the result with `thresholds` and keeps the verdict
    /// beside the draft.
    pub fn shadow(
        &self,
        draft: Option<&str>,
        queries: &[ShadowQuery],
        k: usize,
        thresholds: Thresholds,
    ) -> Result<ShadowReport> {
        if queries.is_empty() {
            return Err(Error::Invalid("no queries to replay".into()));
        }
        if queries.len() > MAX_SHADOW_QUERIES {
            return Err(Error::Invalid(format!(
                "{} queries; a shadow run replays at most {MAX_SHADOW_QUERIES}",
                queries.len()
            )));
        }
        if k == 0 || k > 100 {
            return Err(Error::Invalid("k must be between 1 and 100".into()));
        }
        let draft_snap = self.store().draft_snapshot(draft)?;
        let today = chrono::Local::now().date_naive();
        let cancel = Cancel::default();
        let mut modes = Vec::new();
        let mut skipped = 0;
        for mode in Mode::ALL {
            let (mut overlap, mut n) = (0.0, 0usize);
            let (mut lat_a, mut lat_d) = (Vec::new(), Vec::new());
            let (mut err_a, mut err_d) = (0, 0);
            for q in queries {
                let Ok(scope) = self.scope(&q.principal, today) else {
                    if mode == Mode::Bm25 {
                        skipped += 1;
                    }
                    continue;
                };
                if q.query.trim().is_empty() {
                    continue;
                }
                // The active side takes a fresh snapshot per query, as a request would.
                let active_snap = self.store().snapshot();
                let run = |snap: &dossier_store::Snapshot, lat: &mut Vec<f64>| {
                    let admit = snap.view.admit(&scope);
                    let t = Instant::now();
                    let r = self.rank_in(snap, &scope, &cancel, &q.query, mode, k, &admit);
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                    r
                };
                let a = run(&active_snap, &mut lat_a);
                let d = run(&draft_snap, &mut lat_d);
                match (a, d) {
                    (Ok(a), Ok(d)) => {
                        let ours: HashSet<u64> = d.iter().map(|s| s.seq).collect();
                        let shared = a.iter().filter(|s| ours.contains(&s.seq)).count();
                        overlap += if a.is_empty() {
                            if d.is_empty() {
                                1.0
                            } else {
                                0.0
                            }
                        } else {
                            shared as f64 / a.len() as f64
                        };
                        n += 1;
                    }
                    (Ok(_), Err(_)) => err_d += 1,
                    (Err(_), Ok(_)) => err_a += 1,
                    (Err(_), Err(_)) => {
                        err_a += 1;
                        err_d += 1;
                    }
                }
            }
            lat_a.sort_by(f64::total_cmp);
            lat_d.sort_by(f64::total_cmp);
            modes.push(ShadowMode {
                mode: mode.name().to_string(),
                queries: n,
                overlap_at_k: if n == 0 { 0.0 } else { overlap / n as f64 },
                active_p50_ms: percentile(&lat_a, 0.5),
                active_p99_ms: percentile(&lat_a, 0.99),
                draft_p50_ms: percentile(&lat_d, 0.5),
                draft_p99_ms: percentile(&lat_d, 0.99),
                active_errors: err_a,
                draft_errors: err_d,
            });
        }
        let (passed, verdict) = judge(&modes, &thresholds);
        let report = ShadowReport {
            draft: draft_snap.active.name.clone(),
            active: self.store().active().name.clone(),
            k,
            thresholds,
            modes,
            skipped,
            passed,
            verdict,
            at: chrono::Utc::now().to_rfc3339(),
        };
        drop(draft_snap);
        self.store().save_shadow(
            &report.draft,
            &serde_json::to_value(&report).map_err(|e| Error::Invalid(e.to_string()))?,
        )?;
        Ok(report)
    }
}

/// The verdict: every mode must replay some query, overlap enough, fail no more than
/// allowed where the active side answered, and stay within the latency ratio.
fn judge(modes: &[ShadowMode], t: &Thresholds) -> (bool, String) {
    let mut misses = Vec::new();
    for m in modes {
        if m.queries == 0 {
            misses.push(format!("{}: no query replayed", m.mode));
            continue;
        }
        if m.overlap_at_k < t.min_overlap {
            misses.push(format!(
                "{}: overlap@k {:.3} < {:.3}",
                m.mode, m.overlap_at_k, t.min_overlap
            ));
        }
        if m.draft_errors.saturating_sub(m.active_errors) > t.max_errors {
            misses.push(format!("{}: {} draft errors", m.mode, m.draft_errors));
        }
        // Below a millisecond the ratio is noise.
        if m.active_p99_ms >= 1.0 && m.draft_p99_ms > t.max_p99_ratio * m.active_p99_ms {
            misses.push(format!(
                "{}: p99 {:.1} ms > {:.1} × {:.1} ms",
                m.mode, m.draft_p99_ms, t.max_p99_ratio, m.active_p99_ms
            ));
        }
    }
    if misses.is_empty() {
        (true, "every mode within its thresholds".into())
    } else {
        (false, misses.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(overlap: f64, errors: usize, p99: (f64, f64)) -> ShadowMode {
        ShadowMode {
            mode: "bm25".into(),
            queries: 10,
            overlap_at_k: overlap,
            active_p50_ms: 1.0,
            active_p99_ms: p99.0,
            draft_p50_ms: 1.0,
            draft_p99_ms: p99.1,
            active_errors: 0,
            draft_errors: errors,
        }
    }

    #[test]
    fn each_threshold_can_fail_a_draft_on_its_own() {
        let t = Thresholds::default();
        assert!(judge(&[mode(1.0, 0, (5.0, 6.0))], &t).0);
        assert!(!judge(&[mode(0.89, 0, (5.0, 6.0))], &t).0);
        assert!(!judge(&[mode(1.0, 1, (5.0, 6.0))], &t).0);
        assert!(!judge(&[mode(1.0, 0, (5.0, 16.0))], &t).0);
        // Sub-millisecond latencies are not compared.
        assert!(judge(&[mode(1.0, 0, (0.2, 0.9))], &t).0);
        let mut none = mode(1.0, 0, (5.0, 6.0));
        none.queries = 0;
        assert!(!judge(&[none], &t).0);
    }
}
