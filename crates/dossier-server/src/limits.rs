//! Protection under load: per-tenant request rates and per-tenant concurrency of
//! expensive operations. (Stub: admits everything; filled in by the protection work.)

use std::time::Duration;

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
    /// Deadline of an ask (the agent's wall budget; past it the answer is partial).
    pub ask_deadline: Duration,
    /// Deadline of a search.
    pub search_deadline: Duration,
}

impl Default for LimitConfig {
    fn default() -> LimitConfig {
        LimitConfig {
            rate_per_sec: 50.0,
            burst: 100,
            expensive_concurrency: 8,
            ask_deadline: Duration::from_secs(30),
            search_deadline: Duration::from_secs(10),
        }
    }
}

/// The limits in force for every tenant.
pub struct Limits {
    config: LimitConfig,
}

/// Held while an expensive operation runs; dropping it frees the tenant's slot.
pub struct ExpensivePermit {}

impl Limits {
    pub fn new(config: LimitConfig) -> Limits {
        Limits { config }
    }

    pub fn config(&self) -> &LimitConfig {
        &self.config
    }

    /// Counts one request of `tenant`; `Failure::RateLimited` when over its rate.
    pub fn check_rate(&self, _tenant: &str) -> Result<(), Failure> {
        Ok(())
    }

    /// A slot for one expensive operation of `tenant`, without waiting;
    /// `Failure::Busy` when all its slots are taken.
    pub fn expensive(&self, _tenant: &str) -> Result<ExpensivePermit, Failure> {
        Ok(ExpensivePermit {})
    }
}
