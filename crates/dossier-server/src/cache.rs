//! The answer cache of search and ask: at most `capacity` answers, the least recently
//! used dropped first.
//!
//! **Invariant:** a key holds the caller's whole scope (principal, tenant, groups, the
//! date versions are judged at) and the generation of the caller's tenant (the last
//! commit that touched it), so an entry is never served to another scope nor after a
//! commit that changed its tenant; every commit the server makes also drops the
//! entries of the tenants it wrote. The cache keeps, per tenant, to the newest
//! generation it has seen: a key of a newer one drops that tenant's entries, and an
//! answer computed at an older one is not kept. A commit in one tenant leaves every
//! other tenant's answers alone.
//!
//! An answer shaped by load or by a passing failure is not kept either (see
//! [`keepable`]): a search answered by its BM25 fallback past the deadline, an ask
//! whose wall budget ran out or whose tools timed out or failed. Served again from the
//! cache it would outlive the moment that made it partial.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use dossier_core::lru::Lru;
use serde_json::Value;

/// What a cached answer is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// `search` or `ask`.
    pub route: &'static str,
    pub principal: String,
    pub tenant: String,
    pub groups: Vec<String>,
    /// The generation of `tenant` the answer was computed at.
    pub generation: u64,
    /// The request with every default filled in, as canonical JSON.
    pub request: String,
}

/// An answer, and what the audit log keeps of the run that computed it (an ask's
/// unfiltered audit reasons): the note is for the operator's log only and is never part
/// of what [`Cache::get`] returns.
#[derive(Clone)]
struct Kept {
    value: Arc<Value>,
    note: Option<Arc<Value>>,
}

struct Inner {
    answers: Lru<CacheKey, Kept>,
    /// The newest generation seen in a key, per tenant.
    generations: HashMap<String, u64>,
}

impl Inner {
    /// Moves `tenant` to `generation` if it is newer (dropping the tenant's entries);
    /// false when it is older than the newest seen.
    fn at_generation(&mut self, tenant: &str, generation: u64) -> bool {
        let newest = self.generations.get(tenant).copied().unwrap_or(0);
        if generation > newest {
            self.answers.retain(|k| k.tenant != tenant);
            self.generations.insert(tenant.to_string(), generation);
            return true;
        }
        generation == newest
    }
}

/// Answers of search and ask, by [`CacheKey`].
pub struct Cache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl Cache {
    /// A cache of at most `capacity` answers (0: caching off).
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            inner: Mutex::new(Inner {
                answers: Lru::new(capacity),
                generations: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update leaves the maps consistent before anything can panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most answers kept (0: caching off).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Answers kept now.
    pub fn len(&self) -> usize {
        self.lock().answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer kept for exactly this key, marking it recently used.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<Value>> {
        self.get_noted(key).map(|(v, _)| v)
    }

    /// [`Cache::get`], with the note kept beside the answer (for the audit log).
    pub(crate) fn get_noted(&self, key: &CacheKey) -> Option<(Arc<Value>, Option<Arc<Value>>)> {
        if self.capacity == 0 {
            return None;
        }
        let mut inner = self.lock();
        if !inner.at_generation(&key.tenant, key.generation) {
            return None;
        }
        inner.answers.get(key).map(|k| (k.value, k.note))
    }

    /// Keeps `value` under `key`, dropping the least recently used answers beyond the
    /// capacity. An answer of an older catalog generation than the newest seen is not
    /// kept (a commit happened while it was computed), nor one that is not
    /// [`keepable`].
    pub fn put(&self, key: CacheKey, value: Arc<Value>) {
        self.put_noted(key, value, None);
    }

    /// [`Cache::put`], keeping `note` beside the answer for [`Cache::get_noted`].
    pub(crate) fn put_noted(&self, key: CacheKey, value: Arc<Value>, note: Option<Arc<Value>>) {
        if self.capacity == 0 || !keepable(&value) {
            return;
        }
        let mut inner = self.lock();
        if !inner.at_generation(&key.tenant, key.generation) {
            return;
        }
        inner.answers.insert(key, Kept { value, note });
    }

    /// Drops every entry.
    pub fn invalidate_all(&self) {
        self.lock().answers.clear();
    }

    /// Drops the entries of `tenant` (called after every commit the server makes in it).
    pub fn invalidate_tenant(&self, tenant: &str) {
        self.lock().answers.retain(|k| k.tenant != tenant);
    }
}

/// Whether an answer may be kept: not when it was shaped by load or a passing failure.
/// That is a search marked `degraded`, or an ask whose trace shows the wall budget
/// reached, a tool call that timed out or failed, or a fallback other than a budget
/// limit on steps or calls (those are the same on every run, so the answer is too).
pub fn keepable(value: &Value) -> bool {
    if value.get("degraded").is_some_and(|d| !d.is_null()) {
        return false;
    }
    let Some(trace) = value.get("trace") else {
        return true;
    };
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let wall = strings(trace.pointer("/budget/limits_reached"))
        .iter()
        .any(|l| l.contains("wall time"));
    let failed_step = trace
        .get("steps")
        .and_then(Value::as_array)
        .is_some_and(|steps| {
            steps
                .iter()
                .any(|s| matches!(s["status"].as_str(), Some("timeout" | "error")))
        });
    let fallback = strings(trace.get("degraded"))
        .iter()
        .any(|d| !d.starts_with("budget stopped"));
    !(wall || failed_step || fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(principal: &str, generation: u64, request: &str) -> CacheKey {
        CacheKey {
            route: "search",
            principal: principal.into(),
            tenant: "shop".into(),
            groups: vec!["customer".into()],
            generation,
            request: request.into(),
        }
    }

    fn val(n: u64) -> Arc<Value> {
        Arc::new(json!({ "n": n }))
    }

    #[test]
    fn keeps_the_most_recently_used() {
        let c = Cache::new(2);
        c.put(key("u7", 1, "a"), val(1));
        c.put(key("u7", 1, "b"), val(2));
        // Using `a` makes `b` the oldest.
        assert_eq!(c.get(&key("u7", 1, "a")).unwrap()["n"], 1);
        c.put(key("u7", 1, "c"), val(3));
        assert_eq!(c.len(), 2);
        assert!(c.get(&key("u7", 1, "b")).is_none());
        assert_eq!(c.get(&key("u7", 1, "a")).unwrap()["n"], 1);
        assert_eq!(c.get(&key("u7", 1, "c")).unwrap()["n"], 3);
        // Replacing a key keeps one entry for it.
        c.put(key("u7", 1, "c"), val(4));
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&key("u7", 1, "c")).unwrap()["n"], 4);
    }

    #[test]
    fn never_shares_across_keys() {
        let c = Cache::new(8);
        c.put(key("u7", 1, "a"), val(1));
        assert!(c.get(&key("u8", 1, "a")).is_none());
        let mut other_groups = key("u7", 1, "a");
        other_groups.groups.push("support".into());
        assert!(c.get(&other_groups).is_none());
        let mut other_route = key("u7", 1, "a");
        other_route.route = "ask";
        assert!(c.get(&other_route).is_none());
        assert!(c.get(&key("u7", 1, "a")).is_some());
    }

    #[test]
    fn a_newer_generation_empties_it_and_older_answers_are_not_kept() {
        let c = Cache::new(8);
        c.put(key("u7", 1, "a"), val(1));
        c.put(key("u8", 1, "a"), val(2));
        assert!(c.get(&key("u7", 2, "a")).is_none());
        assert!(c.is_empty());
        // Computed before the commit, stored after it: dropped.
        c.put(key("u8", 1, "a"), val(2));
        assert!(c.is_empty());
        c.put(key("u8", 2, "a"), val(3));
        assert_eq!(c.get(&key("u8", 2, "a")).unwrap()["n"], 3);
    }

    #[test]
    fn answers_shaped_by_load_are_not_kept() {
        let c = Cache::new(8);
        let plain = json!({"hits": [], "trace": {"steps": [{"status": "ok"}], "degraded": [],
            "budget": {"limits_reached": []}}});
        assert!(keepable(&plain));
        // A step limit is the same on every run.
        let steps_limit = json!({"trace": {"steps": [], "degraded": ["budget stopped record: {}"],
            "budget": {"limits_reached": ["steps (16)"]}}});
        assert!(keepable(&steps_limit));
        for bad in [
            json!({"hits": [], "degraded": {"from": "graph", "to": "bm25"}}),
            json!({"trace": {"steps": [], "degraded": ["budget stopped record: {}"],
                "budget": {"limits_reached": ["wall time (1ms)"]}}}),
            json!({"trace": {"steps": [{"status": "timeout"}], "degraded": [],
                "budget": {"limits_reached": []}}}),
            json!({"trace": {"steps": [], "degraded": ["wall time ran out: answering from what was found"],
                "budget": {"limits_reached": []}}}),
        ] {
            assert!(!keepable(&bad), "{bad}");
            c.put(key("u7", 1, &bad.to_string()), Arc::new(bad.clone()));
        }
        assert!(c.is_empty());
        c.put(key("u7", 1, "plain"), Arc::new(plain));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn zero_capacity_keeps_nothing_and_invalidate_empties() {
        let off = Cache::new(0);
        off.put(key("u7", 1, "a"), val(1));
        assert!(off.get(&key("u7", 1, "a")).is_none());
        assert!(off.is_empty());
        let c = Cache::new(4);
        c.put(key("u7", 1, "a"), val(1));
        c.put(key("u7", 1, "b"), val(2));
        c.invalidate_all();
        assert!(c.is_empty());
        assert!(c.get(&key("u7", 1, "a")).is_none());
        // Still usable afterwards.
        c.put(key("u7", 1, "a"), val(1));
        assert!(c.get(&key("u7", 1, "a")).is_some());
    }
}
