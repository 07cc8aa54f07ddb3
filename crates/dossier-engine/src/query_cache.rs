//! A bounded cache of query vectors, so that a repeated question skips the embedder.
//!
//! Embedders are deterministic, so a cached vector is exactly the one the embedder would
//! compute again. The key is (tenant, principal, embedder, query text): an entry serves
//! only the principal whose search put it there, so the time a search takes reveals
//! nothing about what other principals — let alone other tenants — have asked. Only
//! vectors the caller actually received are stored; a failed, refused or cancelled
//! embedding leaves nothing behind. Eviction is least-recently-used, by entry count;
//! texts longer than [`MAX_CACHED_QUERY_BYTES`] are never cached, which bounds the
//! memory along with the count.

use std::sync::{Arc, Mutex, MutexGuard};

use dossier_core::lru::Lru;
use dossier_store::Scope;

/// Entries an engine's query-vector cache holds unless told otherwise
/// ([`crate::Engine::set_query_cache_capacity`]).
pub const DEFAULT_QUERY_CACHE_CAPACITY: usize = 4096;

/// Queries longer than this (in bytes) are embedded every time, never cached.
pub const MAX_CACHED_QUERY_BYTES: usize = 2048;

/// What the query-vector cache has done since the engine was opened; see
/// [`crate::Engine::query_cache_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryCacheStats {
    /// Searches whose query vector came from the cache (no embedding call).
    pub hits: u64,
    /// Searches that looked for a cached vector and had to embed (a capacity of 0, or
    /// a text over [`MAX_CACHED_QUERY_BYTES`], counts as a miss too).
    pub misses: u64,
    /// Entries dropped to stay within the capacity.
    pub evictions: u64,
    /// Entries held now.
    pub entries: usize,
    /// The most entries it holds (0: the cache is off).
    pub capacity: usize,
}

/// Whose entry, for which embedder, of which text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    tenant: String,
    principal: String,
    embedder: String,
    text: String,
}

struct Inner {
    lru: Lru<Key, Arc<[f32]>>,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// The engine's query-vector cache (thread-safe; see the module documentation).
pub(crate) struct QueryCache {
    inner: Mutex<Inner>,
}

impl QueryCache {
    pub(crate) fn new(capacity: usize) -> QueryCache {
        QueryCache {
            inner: Mutex::new(Inner {
                lru: Lru::new(capacity),
                hits: 0,
                misses: 0,
                evictions: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the map consistent (no step of the
        // methods below can panic half-way through an update that matters).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(tenant: &str, principal: &str, embedder: &str, text: &str) -> Key {
        Key {
            tenant: tenant.to_string(),
            principal: principal.to_string(),
            embedder: embedder.to_string(),
            text: text.to_string(),
        }
    }

    fn cacheable(text: &str) -> bool {
        text.len() <= MAX_CACHED_QUERY_BYTES
    }

    /// The cached vector of `text` for this scope's principal and `embedder`, counting
    /// a hit or a miss.
    pub(crate) fn get(&self, scope: &Scope, embedder: &str, text: &str) -> Option<Arc<[f32]>> {
        self.get_as(scope.tenant(), scope.principal_id(), embedder, text)
    }

    /// Stores a vector the embedder computed and the caller received.
    pub(crate) fn put(&self, scope: &Scope, embedder: &str, text: &str, vector: Arc<[f32]>) {
        self.put_as(scope.tenant(), scope.principal_id(), embedder, text, vector)
    }

    fn get_as(
        &self,
        tenant: &str,
        principal: &str,
        embedder: &str,
        text: &str,
    ) -> Option<Arc<[f32]>> {
        let mut inner = self.lock();
        let found = if Self::cacheable(text) {
            inner.lru.get(&Self::key(tenant, principal, embedder, text))
        } else {
            None
        };
        match found {
            Some(_) => inner.hits += 1,
            None => inner.misses += 1,
        }
        found
    }

    fn put_as(
        &self,
        tenant: &str,
        principal: &str,
        embedder: &str,
        text: &str,
        vector: Arc<[f32]>,
    ) {
        if !Self::cacheable(text) {
            return;
        }
        let mut inner = self.lock();
        // Two searches that missed on the same key at once: the later one wins.
        let dropped = inner
            .lru
            .insert(Self::key(tenant, principal, embedder, text), vector);
        inner.evictions += dropped as u64;
    }

    /// Changes the bound, evicting the least recently used entries beyond it; 0 turns
    /// the cache off (and empties it).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut inner = self.lock();
        let dropped = inner.lru.set_capacity(capacity);
        inner.evictions += dropped as u64;
    }

    /// Drops every entry (the counts stay).
    pub(crate) fn clear(&self) {
        self.lock().lru.clear();
    }

    pub(crate) fn stats(&self) -> QueryCacheStats {
        let inner = self.lock();
        QueryCacheStats {
            hits: inner.hits,
            misses: inner.misses,
            evictions: inner.evictions,
            entries: inner.lru.len(),
            capacity: inner.lru.capacity(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Arc<[f32]> {
        Arc::from(vec![x, x])
    }

    fn get(c: &QueryCache, tenant: &str, principal: &str, text: &str) -> Option<f32> {
        c.get_as(tenant, principal, "hash-64", text).map(|v| v[0])
    }

    fn put(c: &QueryCache, tenant: &str, principal: &str, text: &str, x: f32) {
        c.put_as(tenant, principal, "hash-64", text, v(x));
    }

    #[test]
    fn keyed_by_tenant_principal_embedder_and_exact_text() {
        let c = QueryCache::new(16);
        put(&c, "shop", "u7", "refund", 1.0);
        assert_eq!(get(&c, "shop", "u7", "refund"), Some(1.0));
        assert_eq!(get(&c, "shop", "u8", "refund"), None);
        assert_eq!(get(&c, "acme", "u7", "refund"), None);
        assert_eq!(get(&c, "shop", "u7", "refund "), None);
        assert_eq!(get(&c, "shop", "u7", "Refund"), None);
        assert_eq!(c.get_as("shop", "u7", "e5", "refund"), None);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries, s.capacity), (1, 5, 1, 16));
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let c = QueryCache::new(2);
        put(&c, "t", "p", "a", 1.0);
        put(&c, "t", "p", "b", 2.0);
        assert_eq!(get(&c, "t", "p", "a"), Some(1.0)); // a is now the newest
        put(&c, "t", "p", "c", 3.0); // evicts b
        assert_eq!(get(&c, "t", "p", "b"), None);
        assert_eq!(get(&c, "t", "p", "a"), Some(1.0));
        assert_eq!(get(&c, "t", "p", "c"), Some(3.0));
        let s = c.stats();
        assert_eq!((s.entries, s.evictions), (2, 1));

        // Putting a key twice keeps one entry.
        put(&c, "t", "p", "c", 4.0);
        assert_eq!(get(&c, "t", "p", "c"), Some(4.0));
        assert_eq!(c.stats().entries, 2);

        c.set_capacity(1);
        assert_eq!(c.stats().entries, 1);
        assert_eq!(get(&c, "t", "p", "c"), Some(4.0), "the most recent stays");
        c.set_capacity(0);
        put(&c, "t", "p", "c", 5.0);
        assert_eq!(get(&c, "t", "p", "c"), None, "capacity 0 is off");
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn long_texts_are_not_cached() {
        let c = QueryCache::new(4);
        let long = "x".repeat(MAX_CACHED_QUERY_BYTES + 1);
        put(&c, "t", "p", &long, 1.0);
        assert_eq!(get(&c, "t", "p", &long), None);
        assert_eq!(c.stats().entries, 0);
        let edge = "x".repeat(MAX_CACHED_QUERY_BYTES);
        put(&c, "t", "p", &edge, 1.0);
        assert_eq!(get(&c, "t", "p", &edge), Some(1.0));
    }

    #[test]
    fn clear_keeps_the_counts() {
        let c = QueryCache::new(4);
        put(&c, "t", "p", "a", 1.0);
        assert_eq!(get(&c, "t", "p", "a"), Some(1.0));
        c.clear();
        assert_eq!(get(&c, "t", "p", "a"), None);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 1, 0));
    }
}
