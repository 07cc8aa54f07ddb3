//! A bounded map that drops its least recently used entry: the one eviction rule of
//! the server's answer cache and the engine's query-vector cache.
//!
//! Not thread-safe by itself; each cache puts it behind its own lock, next to what
//! else it guards (counts, generations).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;

/// At most `capacity` entries; using or inserting an entry makes it the most recent.
/// A capacity of 0 keeps nothing.
pub struct Lru<K, V> {
    entries: HashMap<Arc<K>, (V, u64)>,
    /// Last use → key; the first is the least recently used.
    by_use: BTreeMap<u64, Arc<K>>,
    clock: u64,
    capacity: usize,
}

impl<K: Hash + Eq, V: Clone> Lru<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The value kept for `key`, now the most recently used.
    pub fn get(&mut self, key: &K) -> Option<V> {
        let now = self.tick();
        let (k, (value, used)) = self.entries.get_key_value(key)?;
        let (k, value, previous) = (Arc::clone(k), value.clone(), *used);
        self.by_use.remove(&previous);
        self.by_use.insert(now, k);
        if let Some(entry) = self.entries.get_mut(key) {
            entry.1 = now;
        }
        Some(value)
    }

    /// Keeps `value` under `key` (replacing an older value), then drops the least
    /// recently used entries beyond the capacity; returns how many were dropped.
    pub fn insert(&mut self, key: K, value: V) -> usize {
        if self.capacity == 0 {
            return 0;
        }
        let now = self.tick();
        let key = Arc::new(key);
        if let Some((_, used)) = self.entries.insert(Arc::clone(&key), (value, now)) {
            self.by_use.remove(&used);
        }
        self.by_use.insert(now, key);
        self.shrink_to(self.capacity)
    }

    /// Changes the bound, dropping the least recently used entries beyond it; returns
    /// how many were dropped.
    pub fn set_capacity(&mut self, capacity: usize) -> usize {
        self.capacity = capacity;
        self.shrink_to(capacity)
    }

    fn shrink_to(&mut self, n: usize) -> usize {
        let mut dropped = 0;
        while self.entries.len() > n {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.entries.remove(&*oldest);
            dropped += 1;
        }
        dropped
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.by_use.clear();
    }

    /// Keeps only the entries whose key passes `keep`; returns how many were dropped.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) -> usize {
        let before = self.entries.len();
        self.entries.retain(|k, _| keep(k));
        let entries = &self.entries;
        self.by_use.retain(|_, k| entries.contains_key(&**k));
        before - self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_drops_exactly_the_rejected_keys_and_keeps_the_use_order() {
        let mut l = Lru::new(3);
        l.insert("a1", 1);
        l.insert("b1", 2);
        l.insert("a2", 3);
        assert_eq!(l.retain(|k| !k.starts_with('a')), 2);
        assert_eq!(l.len(), 1);
        assert_eq!(l.get(&"a1"), None);
        l.insert("c", 4);
        l.insert("d", 5);
        l.insert("e", 6); // b1 is the oldest left
        assert_eq!(l.get(&"b1"), None);
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn drops_the_least_recently_used() {
        let mut l = Lru::new(2);
        assert_eq!(l.insert("a", 1), 0);
        assert_eq!(l.insert("b", 2), 0);
        assert_eq!(l.get(&"a"), Some(1)); // b is now the oldest
        assert_eq!(l.insert("c", 3), 1);
        assert_eq!(
            (l.get(&"b"), l.get(&"a"), l.get(&"c")),
            (None, Some(1), Some(3))
        );
        assert_eq!(l.insert("a", 10), 0, "replacing is not growing");
        assert_eq!((l.len(), l.get(&"a")), (2, Some(10)));
        assert_eq!(l.by_use.len(), l.entries.len(), "one use record per entry");
        assert_eq!(l.set_capacity(1), 1);
        assert_eq!((l.get(&"a"), l.get(&"c")), (Some(10), None));
        assert_eq!(l.set_capacity(0), 1);
        assert_eq!(l.insert("d", 4), 0);
        assert!(l.is_empty());
        l.set_capacity(3);
        l.insert("e", 5);
        l.clear();
        assert!(l.is_empty() && l.get(&"e").is_none());
    }
}
