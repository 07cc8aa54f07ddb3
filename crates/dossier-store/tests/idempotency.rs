//! Idempotency keys through the store's own API, on both backends (with
//! `DOSSIER_TEST_POSTGRES` set, on a database of its own): claim, replay, mismatch,
//! release, takeover of an abandoned claim, keys kept apart by principal, the bound on
//! done keys, a reopen, and many threads racing for one key.

use std::sync::Arc;

use dossier_store::idempotency::Limits;
use dossier_store::{testing, IdempotencyClaim as Claim, Store, StoredResponse};

const S: i64 = 1_000_000;

fn open(dir: &std::path::Path) -> Store {
    Store::open(testing::location(dir), "hash:4", "hash-4", 4).unwrap()
}

fn response(n: u8) -> StoredResponse {
    StoredResponse {
        status: 201,
        content_type: Some("application/json".into()),
        location: None,
        // Not UTF-8 on purpose: bodies are kept as bytes.
        body: vec![b'{', n, 0xff, b'}'],
    }
}

const LIMITS: Limits = Limits {
    ttl_secs: 1000,
    lease_secs: 60,
    per_principal: 3,
};

#[test]
fn a_key_runs_its_write_once_and_replays_it_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let c = store.catalog();
    let t0 = 1_000_000 * S;
    assert_eq!(
        c.idem_claim("admin", "k1", "f", t0, &LIMITS).unwrap(),
        Claim::Fresh
    );
    // While it runs: the same write waits, another write with the key is refused.
    assert_eq!(
        c.idem_claim("admin", "k1", "f", t0 + S, &LIMITS).unwrap(),
        Claim::InFlight
    );
    assert_eq!(
        c.idem_claim("admin", "k1", "g", t0 + S, &LIMITS).unwrap(),
        Claim::Mismatch
    );
    // Another principal's identical key is another key.
    assert_eq!(
        c.idem_claim("other", "k1", "f", t0 + S, &LIMITS).unwrap(),
        Claim::Fresh
    );
    c.idem_complete("admin", "k1", "f", &response(1), t0 + 2 * S, &LIMITS)
        .unwrap();
    assert_eq!(
        c.idem_claim("admin", "k1", "f", t0 + 3 * S, &LIMITS)
            .unwrap(),
        Claim::Replay(response(1))
    );
    assert_eq!(
        c.idem_claim("admin", "k1", "g", t0 + 3 * S, &LIMITS)
            .unwrap(),
        Claim::Mismatch
    );
    // Survives a reopen.
    drop(store);
    let store = open(dir.path());
    let c = store.catalog();
    assert_eq!(
        c.idem_claim("admin", "k1", "f", t0 + 4 * S, &LIMITS)
            .unwrap(),
        Claim::Replay(response(1))
    );
    // The other principal's claim was never completed: still in flight for it alone.
    assert_eq!(
        c.idem_claim("other", "k1", "f", t0 + 4 * S, &LIMITS)
            .unwrap(),
        Claim::InFlight
    );
    // Past the TTL the key is free, for any write.
    assert_eq!(
        c.idem_claim("admin", "k1", "g", t0 + 2 * S + 1001 * S, &LIMITS)
            .unwrap(),
        Claim::Fresh
    );
}

#[test]
fn a_failed_write_gives_its_key_back_and_an_abandoned_claim_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let c = store.catalog();
    let t0 = 5_000_000 * S;
    assert_eq!(
        c.idem_claim("admin", "k", "f", t0, &LIMITS).unwrap(),
        Claim::Fresh
    );
    // A release by another write (another fingerprint) is no release.
    c.idem_release("admin", "k", "g").unwrap();
    assert_eq!(
        c.idem_claim("admin", "k", "f", t0 + S, &LIMITS).unwrap(),
        Claim::InFlight
    );
    c.idem_release("admin", "k", "f").unwrap();
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + S, &LIMITS).unwrap(),
        Claim::Fresh
    );
    // Its process died: within the lease the claim holds, after it a retry runs.
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + 60 * S, &LIMITS)
            .unwrap(),
        Claim::InFlight
    );
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + 62 * S, &LIMITS)
            .unwrap(),
        Claim::Fresh
    );
    // A completion by a write that no longer holds the key (another fingerprint) does
    // not land on the claim that does.
    c.idem_complete("admin", "k", "f", &response(9), t0 + 63 * S, &LIMITS)
        .unwrap();
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + 63 * S, &LIMITS)
            .unwrap(),
        Claim::InFlight
    );
    c.idem_complete("admin", "k", "g", &response(2), t0 + 64 * S, &LIMITS)
        .unwrap();
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + 65 * S, &LIMITS)
            .unwrap(),
        Claim::Replay(response(2))
    );
    // A release after completion changes nothing.
    c.idem_release("admin", "k", "g").unwrap();
    assert_eq!(
        c.idem_claim("admin", "k", "g", t0 + 66 * S, &LIMITS)
            .unwrap(),
        Claim::Replay(response(2))
    );
}

#[test]
fn a_principal_keeps_a_bounded_number_of_done_keys_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let c = store.catalog();
    let t0 = 9_000_000 * S;
    for i in 0..6u8 {
        let k = format!("k{i}");
        let at = t0 + i64::from(i) * S;
        assert_eq!(
            c.idem_claim("admin", &k, "f", at, &LIMITS).unwrap(),
            Claim::Fresh
        );
        c.idem_complete("admin", &k, "f", &response(i), at, &LIMITS)
            .unwrap();
    }
    // Another principal's keys are not its to drop.
    assert_eq!(
        c.idem_claim("admin0", "x", "f", t0, &LIMITS).unwrap(),
        Claim::Fresh
    );
    c.idem_complete("admin0", "x", "f", &response(0), t0, &LIMITS)
        .unwrap();
    let now = t0 + 10 * S;
    for i in 0..6u8 {
        let got = c
            .idem_claim("admin", &format!("k{i}"), "f", now, &LIMITS)
            .unwrap();
        if i < 3 {
            assert_eq!(got, Claim::Fresh, "k{i} should have been dropped");
        } else {
            assert_eq!(got, Claim::Replay(response(i)), "k{i}");
        }
    }
    assert_eq!(
        c.idem_claim("admin0", "x", "f", now, &LIMITS).unwrap(),
        Claim::Replay(response(0))
    );
}

#[test]
fn of_many_racing_claims_exactly_one_is_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    let t0 = 3_000_000 * S;
    for round in 0..5 {
        let key = format!("race-{round}");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (store, key) = (store.clone(), key.clone());
                std::thread::spawn(move || {
                    store
                        .catalog()
                        .idem_claim("admin", &key, "f", t0, &LIMITS)
                        .unwrap()
                })
            })
            .collect();
        let claims: Vec<Claim> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            claims.iter().filter(|c| **c == Claim::Fresh).count(),
            1,
            "{claims:?}"
        );
        assert!(claims
            .iter()
            .all(|c| matches!(c, Claim::Fresh | Claim::InFlight)));
    }
}
