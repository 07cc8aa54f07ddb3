//! Protection under load: request rates and concurrency of expensive operations, per
//! tenant and, beside them, per principal (so that one key cannot use up its tenant's
//! share: each principal has its own, smaller bucket and slots, and a request must fit
//! both).
//!
//! - **Rate**: every tenant has a token bucket of `burst` tokens refilled at
//!   `rate_per_sec`; each authenticated request takes one. An empty bucket answers
//!   `429 rate_limited` with `Retry-After` = the seconds until one token is back
//!   (rounded up, so a client that waits that long is admitted).
//! - **Concurrency**: ask, chat, graph-mode search and jobs take one of the tenant's
//!   `expensive_concurrency` slots without waiting; none free answers
//!   `429 too_many_concurrent`. The slot is an [`ExpensivePermit`], freed on drop, so it
//!   can travel into the blocking closure that does the work and is freed even when the
//!   request that started it has already timed out.
//!
//! Tenants come from the store's principals, never from the request, so the maps are
//! bounded by the tenants the store knows; full buckets and idle slot counters are
//! pruned anyway, so a tenant that stops sending costs nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::Failure;

/// How much load one tenant may put on the server.
#[derive(Debug, Clone)]
pub struct LimitConfig {
    /// Sustained requests per second per tenant (every authenticated request counts).
    pub rate_per_sec: f64,
    /// Requests a tenant may send at once above the sustained rate.
    pub burst: u32,
    /// Expensive operations (ask, graph-mode search, chat, jobs) running at once per tenant.
    pub expensive_concurrency: usize,
    /// Sustained requests per second of one principal (within its tenant's).
    pub principal_rate_per_sec: f64,
    /// Requests one principal may send at once above its sustained rate.
    pub principal_burst: u32,
    /// Expensive operations one principal may run at once (within its tenant's).
    pub principal_concurrency: usize,
    /// Deadline of an ask (the agent's wall budget; past it the answer is partial).
    pub ask_deadline: Duration,
    /// Deadline of a search.
    pub search_deadline: Duration,
    /// The most an ask may use (steps, evidence, model tokens, planner rounds); a
    /// request's own `budget` is capped by it.
    pub ask_budget: dossier_agent::Budget,
}

impl Default for LimitConfig {
    fn default() -> LimitConfig {
        LimitConfig {
            rate_per_sec: 50.0,
            burst: 100,
            expensive_concurrency: 8,
            principal_rate_per_sec: 20.0,
            principal_burst: 40,
            principal_concurrency: 4,
            ask_deadline: Duration::from_secs(30),
            search_deadline: Duration::from_secs(10),
            ask_budget: dossier_agent::Budget::default(),
        }
    }
}

/// Buckets kept before full ones are pruned (a full bucket is the same as none).
const PRUNE_AT: usize = 1024;

/// One tenant's token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Whose bucket or slots: a tenant's, or one principal's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Holder {
    Tenant(String),
    Principal(String),
}

/// Expensive operations running, per holder; shared with the permits.
type Running = Arc<Mutex<HashMap<Holder, usize>>>;

/// How many requests the limits turned away, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Over the tenant's rate (`rate_limited`).
    pub rate: u64,
    /// No expensive slot free (`too_many_concurrent`).
    pub concurrency: u64,
}

/// The limits in force for every tenant.
pub struct Limits {
    config: LimitConfig,
    buckets: Mutex<HashMap<Holder, Bucket>>,
    running: Running,
    rejected_rate: AtomicU64,
    rejected_busy: AtomicU64,
    /// Moving average of how long an expensive operation holds its slot, in ms (the
    /// `Retry-After` of `too_many_concurrent`); 0 until one has finished.
    hold_ms: Arc<AtomicU64>,
}

/// Held while an expensive operation runs; dropping it frees the tenant's slot.
pub struct ExpensivePermit {
    running: Running,
    holders: [Holder; 2],
    since: Instant,
    hold_ms: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves only counters behind; keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Limits {
    pub fn new(config: LimitConfig) -> Limits {
        Limits {
            config,
            buckets: Mutex::new(HashMap::new()),
            running: Arc::new(Mutex::new(HashMap::new())),
            rejected_rate: AtomicU64::new(0),
            rejected_busy: AtomicU64::new(0),
            hold_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn config(&self) -> &LimitConfig {
        &self.config
    }

    /// Counts one request of `principal` in `tenant`; `Failure::RateLimited` when over
    /// either's rate (nothing is taken from either then).
    pub fn check_rate(&self, tenant: &str, principal: &str) -> Result<(), Failure> {
        self.check_rate_at(tenant, principal, Instant::now())
    }

    /// [`Limits::check_rate`] at a given instant (an instant earlier than a bucket's
    /// last one refills nothing).
    fn check_rate_at(&self, tenant: &str, principal: &str, now: Instant) -> Result<(), Failure> {
        let c = &self.config;
        let holders = [
            (
                Holder::Tenant(tenant.to_string()),
                c.rate_per_sec,
                f64::from(c.burst.max(1)),
            ),
            (
                Holder::Principal(principal.to_string()),
                c.principal_rate_per_sec,
                f64::from(c.principal_burst.max(1)),
            ),
        ];
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= PRUNE_AT {
            let (tenant_rate, tenant_burst) = (holders[0].1, holders[0].2);
            let (own_rate, own_burst) = (holders[1].1, holders[1].2);
            buckets.retain(|h, b| match h {
                Holder::Tenant(_) => refilled(b, now, tenant_rate, tenant_burst) < tenant_burst,
                Holder::Principal(_) => refilled(b, now, own_rate, own_burst) < own_burst,
            });
        }
        // Both must hold a token; the longest wait is the one to tell.
        let mut wait: Option<(u64, bool)> = None;
        for (h, rate, burst) in &holders {
            let b = buckets.entry(h.clone()).or_insert(Bucket {
                tokens: *burst,
                at: now,
            });
            b.tokens = refilled(b, now, *rate, *burst);
            b.at = now.max(b.at);
            if b.tokens < 1.0 {
                let secs = secs_until_token(1.0 - b.tokens, *rate);
                let principal = matches!(h, Holder::Principal(_));
                if wait.is_none_or(|(w, _)| secs > w) {
                    wait = Some((secs, principal));
                }
            }
        }
        if let Some((retry_after_secs, principal)) = wait {
            drop(buckets);
            self.rejected_rate.fetch_add(1, Ordering::Relaxed);
            return Err(Failure::RateLimited {
                retry_after_secs,
                principal,
            });
        }
        for (h, ..) in &holders {
            if let Some(b) = buckets.get_mut(h) {
                b.tokens -= 1.0;
            }
        }
        Ok(())
    }

    /// A slot for one expensive operation of `principal` in `tenant`, without waiting;
    /// `Failure::Busy` when all of either's slots are taken.
    pub fn expensive(&self, tenant: &str, principal: &str) -> Result<ExpensivePermit, Failure> {
        let holders = [
            Holder::Tenant(tenant.to_string()),
            Holder::Principal(principal.to_string()),
        ];
        let limits = [
            self.config.expensive_concurrency,
            self.config.principal_concurrency,
        ];
        let mut running = lock(&self.running);
        let full = holders
            .iter()
            .zip(limits)
            .find(|(h, limit)| running.get(*h).copied().unwrap_or(0) >= *limit);
        if let Some((h, _)) = full {
            let principal = matches!(h, Holder::Principal(_));
            drop(running);
            self.rejected_busy.fetch_add(1, Ordering::Relaxed);
            let hold = self.hold_ms.load(Ordering::Relaxed);
            return Err(Failure::Busy {
                // The typical time a slot is held, at least a second, at most a minute.
                retry_after_secs: hold.div_ceil(1000).clamp(1, 60),
                principal,
            });
        }
        for h in &holders {
            *running.entry(h.clone()).or_insert(0) += 1;
        }
        drop(running);
        Ok(ExpensivePermit {
            running: self.running.clone(),
            holders,
            since: Instant::now(),
            hold_ms: self.hold_ms.clone(),
        })
    }

    /// Expensive operations of `tenant` running now.
    pub fn running(&self, tenant: &str) -> usize {
        lock(&self.running)
            .get(&Holder::Tenant(tenant.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Expensive operations running now, all tenants together.
    pub fn running_total(&self) -> usize {
        lock(&self.running)
            .iter()
            .filter(|(h, _)| matches!(h, Holder::Tenant(_)))
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests turned away since start, by reason.
    pub fn rejections(&self) -> Rejections {
        Rejections {
            rate: self.rejected_rate.load(Ordering::Relaxed),
            concurrency: self.rejected_busy.load(Ordering::Relaxed),
        }
    }
}

/// The bucket's tokens at `now` (capped at `burst`).
fn refilled(b: &Bucket, now: Instant, rate: f64, burst: f64) -> f64 {
    let dt = now.saturating_duration_since(b.at).as_secs_f64();
    (b.tokens + dt * rate).min(burst)
}

// A permit moves into `spawn_blocking` closures: it must stay `Send + 'static`.
const _: fn() = || {
    fn check<T: Send + 'static>() {}
    check::<ExpensivePermit>();
};

/// Whole seconds until `missing` tokens are back at `rate` per second: at least 1
/// (`Retry-After` has whole seconds, and 0 would invite an immediate retry), at most
/// [`MAX_RETRY_AFTER`] (a rate of zero never refills).
fn secs_until_token(missing: f64, rate: f64) -> u64 {
    let secs = (missing.max(0.0) / rate).ceil();
    if secs.is_nan() || secs >= MAX_RETRY_AFTER as f64 {
        MAX_RETRY_AFTER
    } else {
        (secs as u64).max(1)
    }
}

/// The longest `Retry-After` the rate limit sends (a day).
pub const MAX_RETRY_AFTER: u64 = 86_400;

impl Drop for ExpensivePermit {
    fn drop(&mut self) {
        let mut running = lock(&self.running);
        for h in &self.holders {
            if let Some(n) = running.get_mut(h) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    running.remove(h);
                }
            }
        }
        drop(running);
        // Moving average (1/8 weight for the newest) of the time slots are held.
        let took = self.since.elapsed().as_millis().min(u128::from(u32::MAX)) as u64;
        let _ = self
            .hold_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == 0 { took } else { (old * 7 + took) / 8 })
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tenant limits as given; principals' own quotas out of the way.
    fn limits(rate: f64, burst: u32, slots: usize) -> Limits {
        Limits::new(LimitConfig {
            rate_per_sec: rate,
            burst,
            expensive_concurrency: slots,
            principal_rate_per_sec: 1e9,
            principal_burst: u32::MAX,
            principal_concurrency: usize::MAX,
            ..LimitConfig::default()
        })
    }

    fn retry_after(r: Result<(), Failure>) -> u64 {
        match r {
            Err(Failure::RateLimited {
                retry_after_secs, ..
            }) => retry_after_secs,
            other => panic!("expected rate_limited, got {other:?}"),
        }
    }

    #[test]
    fn a_bucket_admits_its_burst_then_refills_at_the_rate() {
        let l = limits(2.0, 3, 1);
        let t0 = Instant::now();
        for _ in 0..3 {
            l.check_rate_at("shop", "u", t0).unwrap();
        }
        // Empty: one token is back after 0.5 s, which rounds up to 1 s.
        assert_eq!(retry_after(l.check_rate_at("shop", "u", t0)), 1);
        // Another tenant has its own bucket.
        l.check_rate_at("acme", "u", t0).unwrap();
        // 0.5 s later exactly one token is back.
        let t1 = t0 + Duration::from_millis(500);
        l.check_rate_at("shop", "u", t1).unwrap();
        assert!(l.check_rate_at("shop", "u", t1).is_err());
        // A long pause refills to the burst, not beyond.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            l.check_rate_at("shop", "u", t2).unwrap();
        }
        assert!(l.check_rate_at("shop", "u", t2).is_err());
        assert_eq!(l.rejections().rate, 3);
        assert_eq!(l.rejections().concurrency, 0);
    }

    #[test]
    fn retry_after_is_the_time_until_one_token() {
        let l = limits(0.1, 1, 1);
        let t0 = Instant::now();
        l.check_rate_at("shop", "u", t0).unwrap();
        assert_eq!(retry_after(l.check_rate_at("shop", "u", t0)), 10);
        // 4 s later 0.4 of a token is back: 6 s to go.
        assert_eq!(
            retry_after(l.check_rate_at("shop", "u", t0 + Duration::from_secs(4))),
            6
        );
        // Waiting what it said admits the request.
        l.check_rate_at("shop", "u", t0 + Duration::from_secs(10))
            .unwrap();
        // A rate of zero never refills: the longest retry-after, not a panic.
        let z = limits(0.0, 1, 1);
        z.check_rate_at("shop", "u", t0).unwrap();
        assert_eq!(
            retry_after(z.check_rate_at("shop", "u", t0)),
            MAX_RETRY_AFTER
        );
    }

    #[test]
    fn full_buckets_are_pruned() {
        let l = limits(1000.0, 5, 1);
        let t0 = Instant::now();
        // A tenant's bucket and its principal's, per request.
        for i in 0..PRUNE_AT / 2 {
            l.check_rate_at(&format!("t{i}"), &format!("p{i}"), t0)
                .unwrap();
        }
        assert_eq!(lock(&l.buckets).len(), PRUNE_AT);
        // A second later every bucket is full again: the next request prunes them.
        l.check_rate_at("new", "u", t0 + Duration::from_secs(1))
            .unwrap();
        assert_eq!(lock(&l.buckets).len(), 2);
    }

    #[test]
    fn expensive_slots_are_per_tenant_and_freed_on_drop() {
        let l = limits(1.0, 1, 2);
        let a = l.expensive("shop", "u-shop").unwrap();
        let b = l.expensive("shop", "u-shop").unwrap();
        match l.expensive("shop", "u-shop") {
            Err(Failure::Busy {
                retry_after_secs,
                principal: false,
            }) => assert!(retry_after_secs >= 1),
            other => panic!("expected busy, got {:?}", other.err()),
        }
        assert_eq!(l.running("shop"), 2);
        // Another tenant is not affected.
        let c = l.expensive("acme", "u-acme").unwrap();
        assert_eq!(l.running_total(), 3);
        drop(a);
        let a2 = l.expensive("shop", "u-shop").unwrap();
        // A permit may be dropped on another thread (it travels into spawn_blocking).
        std::thread::spawn(move || drop(b)).join().unwrap();
        drop((a2, c));
        assert_eq!(l.running_total(), 0);
        // No counter is left behind for idle tenants.
        assert!(lock(&l.running).is_empty());
        assert_eq!(l.rejections().concurrency, 1);
    }

    #[test]
    fn a_principal_has_its_own_rate_inside_its_tenants() {
        let l = Limits::new(LimitConfig {
            rate_per_sec: 1.0,
            burst: 5,
            principal_rate_per_sec: 1.0,
            principal_burst: 2,
            ..LimitConfig::default()
        });
        let t0 = Instant::now();
        l.check_rate_at("shop", "u7", t0).unwrap();
        l.check_rate_at("shop", "u7", t0).unwrap();
        // u7's own bucket is empty; the answer names the principal, not the tenant.
        match l.check_rate_at("shop", "u7", t0) {
            Err(Failure::RateLimited {
                principal: true,
                retry_after_secs: 1,
            }) => {}
            other => panic!("expected the principal's rate_limited, got {other:?}"),
        }
        // The refusal took nothing from the tenant: three more of its requests fit.
        for who in ["u8", "u8", "zhang"] {
            l.check_rate_at("shop", who, t0).unwrap();
        }
        // Now the tenant's is empty too, for everyone in it.
        match l.check_rate_at("shop", "oncall", t0) {
            Err(Failure::RateLimited {
                principal: false, ..
            }) => {}
            other => panic!("expected the tenant's rate_limited, got {other:?}"),
        }
        assert_eq!(l.rejections().rate, 2);
    }

    #[test]
    fn a_principal_has_its_own_expensive_slots_inside_its_tenants() {
        let l = Limits::new(LimitConfig {
            expensive_concurrency: 3,
            principal_concurrency: 1,
            ..LimitConfig::default()
        });
        let a = l.expensive("shop", "u7").unwrap();
        match l.expensive("shop", "u7") {
            Err(Failure::Busy {
                principal: true, ..
            }) => {}
            other => panic!("expected the principal's busy, got {:?}", other.err()),
        }
        let b = l.expensive("shop", "u8").unwrap();
        let c = l.expensive("shop", "zhang").unwrap();
        match l.expensive("shop", "oncall") {
            Err(Failure::Busy {
                principal: false, ..
            }) => {}
            other => panic!("expected the tenant's busy, got {:?}", other.err()),
        }
        assert_eq!(l.running("shop"), 3);
        drop((a, b, c));
        assert!(lock(&l.running).is_empty());
        l.expensive("shop", "u7").unwrap();
    }
}
