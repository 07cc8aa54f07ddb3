//! The fair embedding queue, driven with a slow fake embedder whose calls are logged
//! and which can be held at a gate. Assertions are about order (the call log), about
//! what never reached the embedder, and about which lane can run while the other is
//! held; the only times are generous upper bounds.

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use dossier_embed::{
    queue_refusal, Cancel, EmbedQueue, Embedder, Error, HashEmbedder, QueueConfig, QueueRefusal,
    Result,
};

/// Sleeps `per_text` for every text, logs every call (`q:TEXT` or `p:T1,T2,...`),
/// blocks a call holding a text that starts with `BLOCK` until [`Fake::open`], and
/// panics on `PANIC`. Vectors are the hashing embedder's, so results can be checked.
struct Fake {
    hash: HashEmbedder,
    per_text: Duration,
    log: Mutex<Vec<String>>,
    opened: Mutex<bool>,
    gate: Condvar,
}

impl Fake {
    fn new(per_text_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            hash: HashEmbedder::new(16),
            per_text: Duration::from_millis(per_text_ms),
            log: Mutex::new(Vec::new()),
            opened: Mutex::new(false),
            gate: Condvar::new(),
        })
    }

    fn enter(&self, kind: &str, texts: &[&str]) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{kind}:{}", texts.join(",")));
        if texts.iter().any(|t| t.starts_with("BLOCK")) {
            let mut open = self.opened.lock().unwrap();
            while !*open {
                open = self.gate.wait(open).unwrap();
            }
        }
        assert!(!texts.contains(&"PANIC"), "told to panic");
        thread::sleep(self.per_text * texts.len() as u32);
    }

    fn open(&self) {
        *self.opened.lock().unwrap() = true;
        self.gate.notify_all();
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn calls_with(&self, prefix: &str) -> usize {
        self.log().iter().filter(|c| c.starts_with(prefix)).count()
    }
}

impl Embedder for Fake {
    fn name(&self) -> &str {
        "fake"
    }
    fn dim(&self) -> usize {
        16
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.enter("p", texts);
        self.hash.embed_passages(texts)
    }
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.enter("q", &[text]);
        self.hash.embed_query(text)
    }
}

/// Polls `done` until it holds; panics (naming `what`) after a generous 20 s.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn queue(fake: &Arc<Fake>, config: QueueConfig) -> EmbedQueue {
    EmbedQueue::new(Arc::clone(fake) as Arc<dyn Embedder>, config)
}

fn texts(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Holds the (single) query worker in a call until `fake.open()`: a query from
/// tenant `z`. The passage lane has its own worker and is not held.
fn block_worker(q: &EmbedQueue, fake: &Arc<Fake>) -> thread::JoinHandle<Result<Vec<f32>>> {
    let q2 = q.clone();
    let h = thread::spawn(move || q2.query("z", "BLOCK", &Cancel::new()));
    wait_until("the query worker to be held", || {
        fake.calls_with("q:BLOCK") == 1
    });
    h
}

/// Holds the (single) passage worker in a call until `fake.open()`: one passage from
/// tenant `z`.
fn block_passage_worker(
    q: &EmbedQueue,
    fake: &Arc<Fake>,
) -> thread::JoinHandle<Result<Vec<Vec<f32>>>> {
    let q2 = q.clone();
    let h = thread::spawn(move || q2.passages("z", &["BLOCK"], &Cancel::new()));
    wait_until("the passage worker to be held", || {
        fake.calls_with("p:BLOCK") == 1
    });
    h
}

#[test]
fn query_is_served_while_a_200_passage_ingest_runs() {
    let fake = Fake::new(3);
    let q = queue(&fake, QueueConfig::default());
    let finished = Arc::new(Mutex::new(Vec::new()));
    let docs = texts("doc", 200);

    let ingest = {
        let (q, finished, docs) = (q.clone(), Arc::clone(&finished), docs.clone());
        thread::spawn(move || {
            let out = q.passages("uploader", &refs(&docs), &Cancel::new());
            finished.lock().unwrap().push("ingest");
            out
        })
    };
    wait_until("the ingest to start", || fake.calls_with("p:") >= 1);
    let before = fake.log().len();
    let search = {
        let (q, finished) = (q.clone(), Arc::clone(&finished));
        thread::spawn(move || {
            let out = q.query("searcher", "where is the refund policy?", &Cancel::new());
            finished.lock().unwrap().push("query");
            out
        })
    };
    let v = search.join().unwrap().unwrap();
    let vs = ingest.join().unwrap().unwrap();

    assert_eq!(*finished.lock().unwrap(), ["query", "ingest"]);
    let log = fake.log();
    let at = log
        .iter()
        .position(|c| c.starts_with("q:"))
        .expect("the query reached the embedder");
    // The query waits for the sub-batch in progress when it was queued, and at most
    // one more that may have started while it was being queued.
    assert!(
        at <= before + 1,
        "query was call {at}, {before} calls before it: {log:?}"
    );
    assert_eq!(
        fake.calls_with("p:"),
        25,
        "200 passages in sub-batches of 8"
    );
    // Sub-batching keeps results whole and in order.
    assert_eq!(vs, fake.hash.embed_passages(&refs(&docs)).unwrap());
    assert_eq!(
        v,
        fake.hash
            .embed_query("where is the refund policy?")
            .unwrap()
    );
}

#[test]
fn queries_round_robin_across_tenants() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    let blocker = block_worker(&q, &fake);
    let mut callers = Vec::new();
    for i in 0..10 {
        let q2 = q.clone();
        callers.push(thread::spawn(move || {
            q2.query("busy", &format!("busy{i}"), &Cancel::new())
        }));
        wait_until("busy's query to queue", || {
            q.stats().queued_queries == i + 1
        });
    }
    let q2 = q.clone();
    callers.push(thread::spawn(move || {
        q2.query("quiet", "quiet0", &Cancel::new())
    }));
    wait_until("quiet's query to queue", || q.stats().queued_queries == 11);
    fake.open();
    blocker.join().unwrap().unwrap();
    for c in callers {
        c.join().unwrap().unwrap();
    }
    let log = fake.log();
    assert_eq!(log.len(), 12, "{log:?}");
    // busy0 was first in line; quiet0 goes right after it, not after busy9.
    assert_eq!(log[..3], ["q:BLOCK", "q:busy0", "q:quiet0"], "{log:?}");
    let busy: Vec<_> = log[3..].to_vec();
    assert_eq!(
        busy,
        (1..10).map(|i| format!("q:busy{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn passage_sub_batches_round_robin_across_tenants() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    let blocker = block_passage_worker(&q, &fake);

    let big = texts("big", 40);
    let q2 = q.clone();
    let big2 = big.clone();
    let a = thread::spawn(move || q2.passages("big", &refs(&big2), &Cancel::new()));
    wait_until("big's 5 sub-batches", || {
        q.stats().queued_passage_batches == 5
    });
    let q2 = q.clone();
    let b = thread::spawn(move || q2.passages("small", &["small0", "small1"], &Cancel::new()));
    wait_until("small's sub-batch", || {
        q.stats().queued_passage_batches == 6
    });
    fake.open();

    blocker.join().unwrap().unwrap();
    assert_eq!(
        a.join().unwrap().unwrap(),
        fake.hash.embed_passages(&refs(&big)).unwrap()
    );
    assert_eq!(b.join().unwrap().unwrap().len(), 2);
    let log = fake.log();
    assert_eq!(log.len(), 7, "{log:?}");
    assert!(log[1].starts_with("p:big0,"), "{log:?}");
    assert_eq!(log[2], "p:small0,small1", "{log:?}");
    assert!(log[3..].iter().all(|c| c.starts_with("p:big")), "{log:?}");
}

#[test]
fn cancelled_jobs_never_reach_the_embedder_and_free_the_queue() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    // Both lanes held, so that everything below stays queued until cancelled.
    let blocker = block_worker(&q, &fake);
    let passage_blocker = block_passage_worker(&q, &fake);

    // Cancelled while queued: the caller gets its error while the worker is still held.
    let token = Cancel::new();
    let (q2, t2) = (q.clone(), token.clone());
    let caller = thread::spawn(move || q2.query("a", "never-cancelled", &t2));
    wait_until("the query to queue", || q.stats().queued_queries == 1);
    token.cancel();
    let err = caller.join().unwrap().unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Cancelled), "{err}");
    assert_eq!(
        q.stats().queued_queries,
        0,
        "the cancelled query left the queue"
    );
    assert_eq!(q.stats().open_jobs, 2, "only the blockers are left");

    // Past its deadline while queued.
    let started = Instant::now();
    let err = q
        .query(
            "a",
            "never-late",
            &Cancel::with_timeout(Duration::from_millis(50)),
        )
        .unwrap_err();
    assert_eq!(
        queue_refusal(&err),
        Some(QueueRefusal::DeadlineExceeded),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // A passages job cancelled while queued, and one cancelled before it was submitted.
    let token = Cancel::new();
    let (q2, t2) = (q.clone(), token.clone());
    let caller = thread::spawn(move || q2.passages("a", &["never-p1", "never-p2"], &t2));
    wait_until("the passages to queue", || {
        q.stats().queued_passage_batches == 1
    });
    token.cancel();
    let err = caller.join().unwrap().unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Cancelled), "{err}");
    let err = q.passages("a", &["never-p3"], &token).unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Cancelled), "{err}");
    assert_eq!(q.stats().queued_passage_batches, 0);

    assert_eq!(
        fake.log(),
        ["q:BLOCK", "p:BLOCK"],
        "nothing else ran while the workers were held"
    );
    fake.open();
    blocker.join().unwrap().unwrap();
    passage_blocker.join().unwrap().unwrap();
    q.query("a", "after", &Cancel::new()).unwrap();
    assert_eq!(fake.log(), ["q:BLOCK", "p:BLOCK", "q:after"]);
}

#[test]
fn cancel_stops_a_passages_job_between_sub_batches() {
    let fake = Fake::new(2);
    let q = queue(&fake, QueueConfig::default());
    let token = Cancel::new();
    let docs = texts("doc", 200);
    let (q2, t2) = (q.clone(), token.clone());
    let ingest = thread::spawn(move || q2.passages("a", &refs(&docs), &t2));
    wait_until("two sub-batches", || fake.calls_with("p:") >= 2);
    token.cancel();
    let err = ingest.join().unwrap().unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Cancelled), "{err}");
    wait_until("the worker to go idle", || q.stats().running == 0);
    let ran = fake.calls_with("p:");
    assert!(ran < 25, "{ran} of 25 sub-batches ran after the cancel");
    let stats = q.stats();
    assert_eq!((stats.queued_passage_batches, stats.open_jobs), (0, 0));
    q.query("a", "after", &Cancel::new()).unwrap();
    assert_eq!(
        fake.calls_with("p:"),
        ran,
        "no sub-batch ran after the cancel"
    );
}

#[test]
fn queue_bound_refuses_per_tenant_and_lane() {
    let fake = Fake::new(0);
    let config = QueueConfig {
        max_per_tenant: 2,
        ..QueueConfig::default()
    };
    let q = queue(&fake, config);
    let blocker = block_worker(&q, &fake);
    let passage_blocker = block_passage_worker(&q, &fake);
    let mut callers = Vec::new();
    for i in 0..2 {
        let q2 = q.clone();
        callers.push(thread::spawn(move || {
            q2.query("a", &format!("a{i}"), &Cancel::new()).map(|_| ())
        }));
        wait_until("a's query to queue", || q.stats().queued_queries == i + 1);
    }
    let err = q.query("a", "a-too-many", &Cancel::new()).unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Busy), "{err}");
    assert!(err.to_string().contains("\"a\""), "names the tenant: {err}");

    // Another tenant, and the same tenant's other lane, have their own room.
    let q2 = q.clone();
    callers.push(thread::spawn(move || {
        q2.query("b", "b0", &Cancel::new()).map(|_| ())
    }));
    let q2 = q.clone();
    callers.push(thread::spawn(move || {
        q2.passages("a", &["a-passage"], &Cancel::new()).map(|_| ())
    }));
    wait_until("b's query and a's passage to queue", || {
        let s = q.stats();
        (s.queued_queries, s.queued_passage_batches) == (3, 1)
    });
    fake.open();
    blocker.join().unwrap().unwrap();
    passage_blocker.join().unwrap().unwrap();
    for c in callers {
        c.join().unwrap().unwrap();
    }
    assert_eq!(fake.calls_with("q:a-too-many"), 0);
    // Once answered, a's places are free again.
    q.query("a", "a-again", &Cancel::new()).unwrap();
}

#[test]
fn embedder_impls_route_through_the_queue() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    let docs = texts("doc", 20);
    let as_dyn: Box<dyn Embedder> = Box::new(q.clone());
    assert_eq!((as_dyn.name(), as_dyn.dim()), ("fake", 16));
    assert_eq!(
        as_dyn.embed_passages(&refs(&docs)).unwrap(),
        fake.hash.embed_passages(&refs(&docs)).unwrap()
    );
    assert_eq!(
        as_dyn.embed_query("hello").unwrap(),
        fake.hash.embed_query("hello").unwrap()
    );
    assert!(as_dyn.embed_passages(&[]).unwrap().is_empty());
    let tenant = q.as_embedder("t1");
    assert_eq!(tenant.tenant(), "t1");
    assert_eq!(
        tenant.embed_query("hi").unwrap(),
        fake.hash.embed_query("hi").unwrap()
    );
    let cancelled = Cancel::new();
    cancelled.cancel();
    let err = tenant.with_cancel(cancelled).embed_query("no").unwrap_err();
    assert_eq!(queue_refusal(&err), Some(QueueRefusal::Cancelled));
    // 20 passages in sub-batches of 8; two queries (the cancelled one never ran).
    assert_eq!(fake.calls_with("p:"), 3);
    assert_eq!(fake.calls_with("q:"), 2);
}

#[test]
fn a_panicking_embedder_fails_the_job_not_the_worker() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    let err = q
        .passages("a", &["ok", "PANIC"], &Cancel::new())
        .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_eq!(
        queue_refusal(&err),
        None,
        "an embedder failure, not a refusal"
    );
    assert!(q.query("a", "still alive", &Cancel::new()).is_ok());
    assert_eq!(queue_refusal(&Error::Invalid("x".into())), None);
}

#[test]
fn several_workers_and_many_callers_get_their_own_answers() {
    let fake = Fake::new(1);
    let config = QueueConfig {
        workers: 3,
        sub_batch: 3,
        ..QueueConfig::default()
    };
    let q = queue(&fake, config);
    let handles: Vec<_> = (0..12)
        .map(|i| {
            let q = q.clone();
            thread::spawn(move || {
                let tenant = format!("t{}", i % 4);
                let docs = texts(&format!("c{i}-"), 10);
                let got = q.passages(&tenant, &refs(&docs), &Cancel::new()).unwrap();
                let query = format!("query {i}");
                let v = q.query(&tenant, &query, &Cancel::new()).unwrap();
                (docs, got, query, v)
            })
        })
        .collect();
    let hash = HashEmbedder::new(16);
    for h in handles {
        let (docs, got, query, v) = h.join().unwrap();
        assert_eq!(got, hash.embed_passages(&refs(&docs)).unwrap());
        assert_eq!(v, hash.embed_query(&query).unwrap());
    }
    assert_eq!(q.stats(), Default::default());
}

#[test]
fn a_query_never_waits_behind_a_running_passage_batch() {
    let fake = Fake::new(0);
    let q = queue(&fake, QueueConfig::default());
    // A passage sub-batch that runs until released, with more of the job queued behind
    // it, and another tenant's ingest queued too.
    let docs: Vec<String> = ["BLOCK".to_string()]
        .into_iter()
        .chain(texts("doc", 20))
        .collect();
    let (q2, docs2) = (q.clone(), docs.clone());
    let ingest = thread::spawn(move || q2.passages("uploader", &refs(&docs2), &Cancel::new()));
    wait_until("the passage batch to be running", || {
        fake.calls_with("p:BLOCK") == 1
    });
    let (q2, more) = (q.clone(), texts("other", 8));
    let other = thread::spawn(move || q2.passages("other", &refs(&more), &Cancel::new()));
    wait_until("the ingest to queue", || {
        q.stats().queued_passage_batches == 3
    });

    // The query is answered while the batch is still held; a generous deadline would
    // turn a wait behind it into a refusal rather than a hang.
    let started = Instant::now();
    let v = q
        .query(
            "searcher",
            "refund policy",
            &Cancel::with_timeout(Duration::from_secs(10)),
        )
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(v, fake.hash.embed_query("refund policy").unwrap());
    assert!(!ingest.is_finished(), "the passage batch is still held");
    let stats = q.stats();
    assert_eq!(
        (stats.running, stats.running_queries),
        (1, 0),
        "only the held batch runs: {stats:?}"
    );
    assert_eq!(stats.queued_passage_batches, 3, "{stats:?}");
    assert_eq!(
        fake.log(),
        [
            "p:BLOCK,doc0,doc1,doc2,doc3,doc4,doc5,doc6",
            "q:refund policy"
        ]
    );

    fake.open();
    assert_eq!(
        ingest.join().unwrap().unwrap(),
        fake.hash.embed_passages(&refs(&docs)).unwrap()
    );
    assert_eq!(other.join().unwrap().unwrap().len(), 8);
    assert_eq!(q.stats(), Default::default());
}

#[test]
fn several_query_workers_embed_queries_at_once() {
    let fake = Fake::new(0);
    let config = QueueConfig {
        query_workers: 2,
        ..QueueConfig::default()
    };
    let q = queue(&fake, config);
    let callers: Vec<_> = ["BLOCK-a", "BLOCK-b"]
        .into_iter()
        .map(|text| {
            let q = q.clone();
            thread::spawn(move || q.query("t", text, &Cancel::new()))
        })
        .collect();
    wait_until("both queries to be running", || {
        fake.calls_with("q:BLOCK") == 2
    });
    assert_eq!(q.stats().running_queries, 2);
    // A third waits for a query worker; the passage lane is not held by either.
    let q2 = q.clone();
    let third = thread::spawn(move || q2.query("t", "third", &Cancel::new()));
    wait_until("the third query to queue", || q.stats().queued_queries == 1);
    q.passages("t", &["p0", "p1"], &Cancel::new()).unwrap();
    assert_eq!(fake.calls_with("q:third"), 0);

    fake.open();
    for c in callers {
        c.join().unwrap().unwrap();
    }
    third.join().unwrap().unwrap();
    assert_eq!(fake.calls_with("q:"), 3);
}

#[test]
fn dropping_the_last_handle_stops_the_workers_of_both_lanes() {
    let fake = Fake::new(0);
    let config = QueueConfig {
        workers: 2,
        query_workers: 2,
        ..QueueConfig::default()
    };
    let q = queue(&fake, config);
    let tenant = q.as_embedder("t");
    q.query("t", "hello", &Cancel::new()).unwrap();
    tenant.embed_passages(&["a", "b"]).unwrap();
    drop(q);
    // The tenant embedder keeps the queue (and its workers) alive.
    assert_eq!(tenant.embed_query("still").unwrap().len(), 16);
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        drop(tenant); // joins all four workers
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the workers stopped when the last handle was dropped");
    assert_eq!(
        Arc::strong_count(&fake),
        1,
        "the workers let go of the embedder"
    );
}
