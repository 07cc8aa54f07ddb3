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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

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

struct Entry {
    vector: Arc<[f32]>,
    /// When it was last used; its place in [`Lru::order`].
    tick: u64,
}

#[derive(Default)]
struct Lru {
    map: HashMap<Arc<Key>, Entry>,
    /// Last use → key, oldest first.
    order: BTreeMap<u64, Arc<Key>>,
    tick: u64,
    capacity: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

impl Lru {
    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn evict_to(&mut self, n: usize) {
        while self.map.len() > n {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            self.map.remove(&key);
            self.evictions += 1;
        }
    }
}

/// The engine's query-vector cache (thread-safe; see the module documentation).
pub(crate) struct QueryCache {
    lru: Mutex<Lru>,
}

impl QueryCache {
    pub(crate) fn new(capacity: usize) -> QueryCache {
        QueryCache {
            lru: Mutex::new(Lru {
                capacity,
                ..Lru::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // A panic while holding the lock leaves the map consistent (no step of the
        // methods below can panic half-way through an update that matters).
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
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
        let mut lru = self.lock();
        if lru.capacity == 0 || !Self::cacheable(text) {
            lru.misses += 1;
            return None;
        }
        let key = Self::key(tenant, principal, embedder, text);
        let tick = lru.next_tick();
        let Some(entry) = lru.map.get_mut(&key) else {
            lru.misses += 1;
            return None;
        };
        let old = std::mem::replace(&mut entry.tick, tick);
        let vector = Arc::clone(&entry.vector);
        if let Some(k) = lru.order.remove(&old) {
            lru.order.insert(tick, k);
        }
        lru.hits += 1;
        Some(vector)
    }

    fn put_as(
        &self,
        tenant: &str,
        principal: &str,
        embedder: &str,
        text: &str,
        vector: Arc<[f32]>,
    ) {
        let mut lru = self.lock();
        if lru.capacity == 0 || !Self::cacheable(text) {
            return;
        }
        let key = Arc::new(Self::key(tenant, principal, embedder, text));
        let tick = lru.next_tick();
        if let Some(old) = lru.map.insert(Arc::clone(&key), Entry { vector, tick }) {
            // Two searches missed on the same key at once; the later one wins.
            lru.order.remove(&old.tick);
        }
        lru.order.insert(tick, key);
        let capacity = lru.capacity;
        lru.evict_to(capacity);
    }

    /// Changes the bound, evicting the least recently used entries beyond it; 0 turns
    /// the cache off (and empties it).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut lru = self.lock();
        lru.capacity = capacity;
        lru.evict_to(capacity);
    }

    /// Drops every entry (the counts stay).
    pub(crate) fn clear(&self) {
        let mut lru = self.lock();
        lru.map.clear();
        lru.order.clear();
    }

    pub(crate) fn stats(&self) -> QueryCacheStats {
        let lru = self.lock();
        QueryCacheStats {
            hits: lru.hits,
            misses: lru.misses,
            evictions: lru.evictions,
            entries: lru.map.len(),
            capacity: lru.capacity,
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
