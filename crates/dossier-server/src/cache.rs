//! The answer cache of search and ask. (Stub: never hits; filled in by the protection
//! work.)
//!
//! **Invariant:** a key holds the caller's whole scope (principal, tenant, groups, the
//! date versions are judged at) and the catalog generation, so an entry is never served
//! to another scope nor after a commit; every commit also empties the cache.

use std::sync::Arc;

use serde_json::Value;

/// What a cached answer is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// `search` or `ask`.
    pub route: &'static str,
    pub principal: String,
    pub tenant: String,
    pub groups: Vec<String>,
    /// The catalog generation the answer was computed at.
    pub generation: u64,
    /// The request with every default filled in, as canonical JSON.
    pub request: String,
}

pub struct Cache {}

impl Cache {
    /// A cache of at most `capacity` answers (0: caching off).
    pub fn new(_capacity: usize) -> Cache {
        Cache {}
    }

    pub fn get(&self, _key: &CacheKey) -> Option<Arc<Value>> {
        None
    }

    pub fn put(&self, _key: CacheKey, _value: Arc<Value>) {}

    /// Drops every entry (called after every commit the server makes).
    pub fn invalidate_all(&self) {}
}
