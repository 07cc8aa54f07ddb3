//! The engine's query-vector cache, on ../shared/scenarios with the hash embedder behind
//! a wrapper that logs every query it is asked to embed: a repeated query reaches the
//! embedder once, another principal or tenant never hits someone else's entry, the bound
//! evicts, and failed or cancelled embeddings are not cached.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use dossier_core::cancel::{Cancel, Cancelled};
use dossier_core::{Embedder, Result};
use dossier_embed::HashEmbedder;
use dossier_engine::{
    Engine, Error, Mode, QueryCacheStats, SearchRequest, SearchResponse,
    DEFAULT_QUERY_CACHE_CAPACITY,
};

/// The hash embedder, logging each query text it embeds; a query starting with `SLOW`
/// takes half a second, and [`Counting::fail_next`] makes the next query fail.
struct Counting {
    hash: HashEmbedder,
    queries: Arc<Mutex<Vec<String>>>,
    fail_next: Arc<AtomicBool>,
}

impl Embedder for Counting {
    fn name(&self) -> &str {
        self.hash.name()
    }
    fn dim(&self) -> usize {
        self.hash.dim()
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.hash.embed_passages(texts)
    }
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.queries.lock().unwrap().push(text.to_string());
        if text.starts_with("SLOW") {
            std::thread::sleep(Duration::from_millis(500));
        }
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err(dossier_core::Error::Embedding("told to fail".into()));
        }
        self.hash.embed_query(text)
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    engine: Engine,
    queries: Arc<Mutex<Vec<String>>>,
    fail_next: Arc<AtomicBool>,
}

impl Fixture {
    /// A store with shop and acme ingested through the counting embedder.
    fn new() -> Fixture {
        let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/scenarios");
        let dir = tempfile::tempdir().unwrap();
        let queries = Arc::new(Mutex::new(Vec::new()));
        let fail_next = Arc::new(AtomicBool::new(false));
        let embedder = Counting {
            hash: HashEmbedder::new(64),
            queries: Arc::clone(&queries),
            fail_next: Arc::clone(&fail_next),
        };
        let engine =
            Engine::with_embedder(dir.path().join("store"), "hash:64", Box::new(embedder)).unwrap();
        let report = engine
            .ingest(&[shared.join("shop"), shared.join("acme")], &mut ())
            .unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        Fixture {
            _dir: dir,
            engine,
            queries,
            fail_next,
        }
    }

    /// How often the embedder was asked to embed `text` as a query.
    fn embedded(&self, text: &str) -> usize {
        self.queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| *q == text)
            .count()
    }

    fn search_until(
        &self,
        who: &str,
        q: &str,
        mode: Mode,
        cancel: &Cancel,
    ) -> dossier_engine::Result<SearchResponse> {
        self.engine.search_until(
            &SearchRequest {
                principal: who.into(),
                query: q.into(),
                mode,
                k: 5,
                now: date("2026-11-30"),
                as_of: None,
                kbs: vec![],
            },
            cancel,
        )
    }

    fn search(&self, who: &str, q: &str) -> SearchResponse {
        self.search_until(who, q, Mode::Vector, &Cancel::new())
            .unwrap()
    }

    fn stats(&self) -> QueryCacheStats {
        self.engine.query_cache_stats()
    }
}

fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

const Q: &str = "耳机无理由退货的签收期限和拆封条件";

#[test]
fn a_repeated_query_reaches_the_embedder_once() {
    let f = Fixture::new();
    assert_eq!(
        f.stats(),
        QueryCacheStats {
            capacity: DEFAULT_QUERY_CACHE_CAPACITY,
            ..Default::default()
        }
    );
    let first = f.search("u7", Q);
    assert!(!first.hits.is_empty());
    let second = f.search("u7", Q);
    assert_eq!(
        first, second,
        "a cached vector ranks exactly as a fresh one"
    );
    assert_eq!(f.embedded(Q), 1);

    // Every mode that embeds the query uses the same entry: hybrid, and the graph
    // modes (whose hybrid half embeds it); bm25 never looks.
    for mode in [Mode::Hybrid, Mode::Graph, Mode::Drift] {
        f.search_until("u7", Q, mode, &Cancel::new()).unwrap();
    }
    f.search_until("u7", Q, Mode::Bm25, &Cancel::new()).unwrap();
    assert_eq!(f.embedded(Q), 1);
    let s = f.stats();
    assert_eq!((s.hits, s.misses, s.entries), (4, 1, 1), "{s:?}");

    // Within documents too.
    f.engine
        .search_within(
            &f.engine.scope("u7", date("2026-11-30")).unwrap(),
            Q,
            Mode::Vector,
            5,
            &["headphone-policy".to_string()],
        )
        .unwrap();
    assert_eq!(f.embedded(Q), 1);
    assert_eq!(f.stats().hits, 5);

    // The text is matched exactly.
    f.search("u7", &format!("{Q} "));
    assert_eq!(f.embedded(&format!("{Q} ")), 1);
    assert_eq!(f.stats().entries, 2);

    // Clearing empties it; the counts stay.
    f.engine.clear_query_cache();
    f.search("u7", Q);
    assert_eq!(f.embedded(Q), 2);
    let s = f.stats();
    assert_eq!((s.hits, s.misses, s.entries), (5, 3, 1), "{s:?}");
}

#[test]
fn another_principal_or_tenant_never_hits_the_entry() {
    let f = Fixture::new();
    f.search("u7", Q);
    assert_eq!(f.embedded(Q), 1);
    // Same tenant, another principal (same groups, even): its own miss.
    f.search("u8", Q);
    assert_eq!(f.embedded(Q), 2);
    // Another tenant.
    f.search("acme-admin", Q);
    assert_eq!(f.embedded(Q), 3);
    let s = f.stats();
    assert_eq!((s.hits, s.misses, s.entries), (0, 3, 3), "{s:?}");
    // Each now hits its own entry.
    for who in ["u7", "u8", "acme-admin"] {
        f.search(who, Q);
    }
    assert_eq!(f.embedded(Q), 3);
    assert_eq!(f.stats().hits, 3);
}

#[test]
fn the_bound_evicts_the_least_recently_used() {
    let f = Fixture::new();
    f.engine.set_query_cache_capacity(2);
    f.search("u7", "refund a");
    f.search("u7", "refund b");
    f.search("u7", "refund a"); // hit: a is now the most recent
    f.search("u7", "refund c"); // evicts b
    let s = f.stats();
    assert_eq!(
        (s.hits, s.misses, s.entries, s.evictions, s.capacity),
        (1, 3, 2, 1, 2),
        "{s:?}"
    );
    f.search("u7", "refund a");
    f.search("u7", "refund c");
    assert_eq!((f.embedded("refund a"), f.embedded("refund c")), (1, 1));
    f.search("u7", "refund b");
    assert_eq!(f.embedded("refund b"), 2, "b was evicted");

    // Shrinking evicts at once; 0 turns the cache off.
    f.engine.set_query_cache_capacity(1);
    assert_eq!(f.stats().entries, 1);
    f.engine.set_query_cache_capacity(0);
    assert_eq!(f.stats().entries, 0);
    f.search("u7", "refund b");
    f.search("u7", "refund b");
    assert_eq!(f.embedded("refund b"), 4);
}

#[test]
fn failed_and_cancelled_embeddings_are_not_cached() {
    let f = Fixture::new();

    // An embedder failure.
    f.fail_next.store(true, Ordering::SeqCst);
    let err = f
        .search_until("u7", "flaky", Mode::Vector, &Cancel::new())
        .unwrap_err();
    assert!(matches!(err, Error::Model(_)), "{err:?}");
    assert_eq!(f.stats().entries, 0);
    f.search("u7", "flaky");
    assert_eq!(f.embedded("flaky"), 2, "the failure was not cached");
    f.search("u7", "flaky");
    assert_eq!(f.embedded("flaky"), 2);

    // Cancelled before it was embedded: it never reaches the embedder.
    let cancelled = Cancel::new();
    cancelled.cancel();
    let err = f
        .search_until("u7", "never", Mode::Vector, &cancelled)
        .unwrap_err();
    assert!(
        matches!(err, Error::Cancelled(Cancelled::Cancelled)),
        "{err:?}"
    );
    assert_eq!(f.embedded("never"), 0);

    // Past its deadline while the embedder computes: the caller gives up, the worker
    // finishes the call, and its vector is dropped rather than cached.
    let err = f
        .search_until(
            "u7",
            "SLOW question",
            Mode::Vector,
            &Cancel::with_timeout(Duration::from_millis(50)),
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::Cancelled(Cancelled::DeadlineExceeded)),
        "{err:?}"
    );
    let start = Instant::now();
    while f.engine.embed_queue().stats().running > 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "worker stuck");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(f.embedded("SLOW question"), 1);
    assert_eq!(f.stats().entries, 1, "only flaky's vector is cached");
    f.search("u7", "SLOW question");
    assert_eq!(
        f.embedded("SLOW question"),
        2,
        "the cancelled one was not cached"
    );
    f.search("u7", "SLOW question");
    assert_eq!(f.embedded("SLOW question"), 2);
}
