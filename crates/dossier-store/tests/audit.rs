//! The audit log through the store's own API, on both backends (with
//! `DOSSIER_TEST_POSTGRES` set, each test runs on a database of its own): pages newest
//! first with filters and cursors, traces only for their principal and across a reopen,
//! retention, and one pruner at a time on a shared store.

use chrono::{DateTime, Duration, Utc};
use dossier_store::audit::{digest, Cursor};
use dossier_store::{
    testing, AuditEntry, AuditQuery, AuditReason, AuditRecord, AuditTool, Store, StoreLocation,
};

fn open(dir: &std::path::Path) -> Store {
    Store::open(testing::location(dir), "hash:4", "hash-4", 4).unwrap()
}

fn entry(rid: &str, principal: &str, route: &str, at: DateTime<Utc>) -> AuditEntry {
    AuditEntry {
        request_id: rid.into(),
        finished_at: at,
        principal: principal.into(),
        tenant: if principal == "ops" { "acme" } else { "shop" }.into(),
        groups: vec!["customer".into()],
        kbs: None,
        route: route.into(),
        now: None,
        as_of: None,
        mode: None,
        status: if route == "/v1/search" {
            "ok"
        } else {
            "answered"
        }
        .into(),
        http_status: 200,
        question_blake3: digest(rid),
        question: None,
        cached: false,
        tools: vec![AuditTool {
            name: "record".into(),
            status: "forbidden".into(),
        }],
        evidence: vec!["a@1#0".into()],
        citations: vec![],
        reasons: vec![AuditReason {
            step: 0,
            action: "record".into(),
            status: "forbidden".into(),
            note: "orders/A123 belongs to another principal".into(),
        }],
        has_trace: false,
    }
}

fn record(e: AuditEntry, trace: bool) -> AuditRecord {
    let trace = trace.then(|| format!("{{\"request_id\": \"{}\"}}", e.request_id).into_bytes());
    AuditRecord { entry: e, trace }
}

/// Every page of `q`, following the cursors.
fn all_pages(s: &Store, q: &AuditQuery) -> Vec<Vec<String>> {
    let mut q = q.clone();
    let mut pages = Vec::new();
    loop {
        let page = s.catalog().audit_list(&q).unwrap();
        pages.push(page.entries.iter().map(|e| e.request_id.clone()).collect());
        match page.next_cursor {
            Some(c) => q.cursor = Some(Cursor::parse(&c).expect("a cursor the log wrote")),
            None => return pages,
        }
    }
}

#[test]
fn entries_page_newest_first_through_every_filter() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let generation = s.catalog().generation().unwrap();
    let t0 = Utc::now() - Duration::hours(10);
    let at = |h: i64| t0 + Duration::hours(h);
    // Two share an instant: the sequence orders them.
    let entries = [
        entry("r0", "u7", "/v1/ask", at(0)),
        entry("r1", "u8", "/v1/search", at(1)),
        entry("r2", "u7", "/v1/search", at(2)),
        entry("r3", "ops", "/v1/chat/completions", at(3)),
        entry("r4", "u8", "/v1/ask", at(3)),
        entry("r5", "u7", "/v1/ask", at(4)),
    ];
    // Appended in two batches, out of time order.
    let (a, b) = entries.split_at(3);
    s.catalog()
        .audit_append(
            &b.iter()
                .cloned()
                .map(|e| record(e, false))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    s.catalog()
        .audit_append(
            &a.iter()
                .cloned()
                .map(|e| record(e, false))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    // An append is no commit.
    assert_eq!(s.catalog().generation().unwrap(), generation);

    let all = AuditQuery {
        limit: 2,
        ..AuditQuery::default()
    };
    assert_eq!(
        all_pages(&s, &all),
        vec![vec!["r5", "r4"], vec!["r3", "r2"], vec!["r1", "r0"]]
    );
    // Entries come back as written (times at the log's microsecond precision).
    let page = s.catalog().audit_list(&AuditQuery::default()).unwrap();
    assert_eq!(page.next_cursor, None);
    let mut want = entries[0].clone();
    want.finished_at =
        DateTime::from_timestamp_micros(want.finished_at.timestamp_micros()).unwrap();
    assert_eq!(page.entries.last(), Some(&want));

    let ids =
        |q: AuditQuery| -> Vec<String> { all_pages(&s, &AuditQuery { limit: 1, ..q }).concat() };
    let q = AuditQuery::default;
    assert_eq!(
        ids(AuditQuery {
            principal: Some("u7".into()),
            ..q()
        }),
        ["r5", "r2", "r0"]
    );
    assert_eq!(
        ids(AuditQuery {
            route: Some("/v1/search".into()),
            ..q()
        }),
        ["r2", "r1"]
    );
    assert_eq!(
        ids(AuditQuery {
            tenant: Some("acme".into()),
            ..q()
        }),
        ["r3"]
    );
    assert_eq!(
        ids(AuditQuery {
            status: Some("answered".into()),
            principal: Some("u8".into()),
            ..q()
        }),
        ["r4"]
    );
    assert_eq!(
        ids(AuditQuery {
            request_id: Some("r2".into()),
            ..q()
        }),
        ["r2"]
    );
    // since inclusive, until exclusive.
    assert_eq!(
        ids(AuditQuery {
            since: Some(at(1)),
            until: Some(at(3)),
            ..q()
        }),
        ["r2", "r1"]
    );
    assert!(ids(AuditQuery {
        since: Some(at(5)),
        ..q()
    })
    .is_empty());
    assert!(ids(AuditQuery {
        principal: Some("nobody".into()),
        ..q()
    })
    .is_empty());
}

#[test]
fn a_trace_is_read_back_only_by_its_principal_and_outlives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.catalog()
            .audit_append(&[
                record(entry("r1", "u7", "/v1/ask", Utc::now()), true),
                record(entry("r2", "u7", "/v1/search", Utc::now()), false),
            ])
            .unwrap();
    }
    let s = open(dir.path());
    let c = s.catalog();
    let got = c.audit_trace("r1", "u7").unwrap().expect("u7's trace");
    assert_eq!(got, b"{\"request_id\": \"r1\"}".to_vec());
    // Another principal's and none at all: the same answer.
    assert_eq!(c.audit_trace("r1", "u8").unwrap(), None);
    assert_eq!(c.audit_trace("r9", "u7").unwrap(), None);
    assert_eq!(
        c.audit_trace("r2", "u7").unwrap(),
        None,
        "a search has no trace"
    );
    let page = c.audit_list(&AuditQuery::default()).unwrap();
    let has: Vec<(String, bool)> = page
        .entries
        .iter()
        .map(|e| (e.request_id.clone(), e.has_trace))
        .collect();
    assert_eq!(has, [("r2".to_string(), false), ("r1".to_string(), true)]);
}

#[test]
fn entries_past_the_retention_are_pruned_and_newer_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let now = Utc::now();
    let days = |d: i64| now - Duration::days(d);
    s.catalog()
        .audit_append(&[
            record(entry("old-1", "u7", "/v1/ask", days(400)), true),
            record(entry("old-2", "u8", "/v1/search", days(91)), false),
            record(entry("new-1", "u7", "/v1/ask", days(89)), true),
            record(entry("new-2", "u8", "/v1/search", now), false),
        ])
        .unwrap();
    let pruned = s.catalog().audit_prune(days(90)).unwrap();
    assert!(!pruned.busy);
    assert_eq!((pruned.entries, pruned.traces), (2, 1));
    let left: Vec<String> = s
        .catalog()
        .audit_list(&AuditQuery::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.request_id)
        .collect();
    assert_eq!(left, ["new-2", "new-1"]);
    assert_eq!(s.catalog().audit_trace("old-1", "u7").unwrap(), None);
    assert!(s.catalog().audit_trace("new-1", "u7").unwrap().is_some());
    // Nothing more to do.
    let again = s.catalog().audit_prune(days(90)).unwrap();
    assert_eq!((again.entries, again.traces), (0, 0));
}

/// Many entries past the retention (more than one prune batch on the embedded store).
#[test]
fn a_large_prune_removes_every_old_entry() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let old = Utc::now() - Duration::days(200);
    let records: Vec<AuditRecord> = (0..12_000)
        .map(|i| record(entry(&format!("r{i}"), "u7", "/v1/search", old), i % 3 == 0))
        .collect();
    for chunk in records.chunks(4_000) {
        s.catalog().audit_append(chunk).unwrap();
    }
    s.catalog()
        .audit_append(&[record(entry("kept", "u7", "/v1/ask", Utc::now()), false)])
        .unwrap();
    let pruned = s
        .catalog()
        .audit_prune(Utc::now() - Duration::days(90))
        .unwrap();
    assert_eq!((pruned.entries, pruned.traces), (12_000, 4_000));
    let left = s.catalog().audit_list(&AuditQuery::default()).unwrap();
    assert_eq!(left.entries.len(), 1);
}

/// On a shared store one process prunes at a time: while another holds the prune lock,
/// a prune does nothing and says so.
#[test]
fn only_one_process_prunes_a_shared_log_at_a_time() {
    if !testing::on_postgres() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.catalog()
        .audit_append(&[record(
            entry("old", "u7", "/v1/ask", Utc::now() - Duration::days(100)),
            false,
        )])
        .unwrap();
    let StoreLocation::Postgres { url, .. } = testing::location(dir.path()) else {
        unreachable!()
    };
    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&dossier_store::audit::AUDIT_PRUNE_LOCK],
    )
    .unwrap();
    let busy = s
        .catalog()
        .audit_prune(Utc::now() - Duration::days(90))
        .unwrap();
    assert!(busy.busy);
    assert_eq!(busy.entries, 0);
    tx.rollback().unwrap();
    let done = s
        .catalog()
        .audit_prune(Utc::now() - Duration::days(90))
        .unwrap();
    assert!(!done.busy);
    assert_eq!(done.entries, 1);
}
