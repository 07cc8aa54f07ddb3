//! `dossier bench graph`: graph build and community detection at scale, on generated
//! chunks whose text carries the identifiers and relation phrases the extraction rules
//! read (products supplied by suppliers, suppliers affected by events, services that
//! depend on services and are owned by teams), in Chinese and English, and that name other
//! documents by their titles (English and Chinese, some with a qualifier) for the
//! mention linker. Nothing is stored: this measures the title table, extraction (with
//! linking), resolution, a principal's view, hierarchical Leiden and the extractive
//! reports.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use dossier_core::{Chunk, DocKind, DocumentVersion};
use dossier_engine::dossier_graph::{extract, CommunityOptions, TenantGraph, TitleTable};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

#[derive(Args)]
pub struct GraphBenchArgs {
    /// Chunks of the one tenant whose graph is built.
    #[arg(long, default_value_t = 250_000)]
    chunks: usize,
    /// Distinct products; suppliers, events, services and teams scale with it.
    #[arg(long, default_value_t = 50_000)]
    products: usize,
    /// Reports written (the largest communities), to time report building.
    #[arg(long, default_value_t = 1000)]
    reports: usize,
}

#[derive(Serialize)]
struct Report {
    chunks: usize,
    generate_s: f64,
    /// The title table: every document's names, then the aliases its own text gives.
    titles_s: f64,
    extract_s: f64,
    build_s: f64,
    view_s: f64,
    communities_s: f64,
    reports_s: f64,
    entities: usize,
    relations: usize,
    /// `mentions_document` edges the linker wrote.
    links: usize,
    communities: usize,
    levels: usize,
    reports_built: usize,
}

const EN_WORDS: [&str; 12] = [
    "Harbour", "Payment", "Northern", "Ledger", "Signal", "Granite", "Orchard", "Beacon", "Copper",
    "Meridian", "Falcon", "Summit",
];
const ZH_WORDS: [&str; 12] = [
    "支付", "网关", "结算", "仓储", "物流", "风控", "会员", "订单", "库存", "账务", "清算", "客服",
];

/// The title of document `d`: English or Chinese, every fifth with a qualifier (which
/// makes its base name shared with its neighbour's, for the linker to tell apart).
fn title(d: usize) -> String {
    let (a, b) = (d % 12, (d / 12) % 12);
    let n = d / 5;
    match (d % 2, d % 5) {
        (0, 0) => format!("{} {} Runbook {n} (draft)", EN_WORDS[a], EN_WORDS[b]),
        (0, _) => format!("{} {} Runbook {n}", EN_WORDS[a], EN_WORDS[b]),
        (_, 0) => format!("{}{}手册{n}（草案）", ZH_WORDS[a], ZH_WORDS[b]),
        _ => format!("{}{}手册{n}", ZH_WORDS[a], ZH_WORDS[b]),
    }
}

fn chunk(i: usize, text: String) -> Chunk {
    let doc = format!("doc-{}", i / 4);
    Chunk {
        chunk_id: Chunk::make_id(&doc, "v1", (i % 4) as u32),
        doc_id: doc,
        version: "v1".into(),
        ordinal: (i % 4) as u32,
        section: vec![],
        byte_start: 0,
        byte_end: text.len(),
        text,
        source_uri: String::new(),
        tenant: "t0".into(),
        kb: None,
        acl: None,
        title: title(i / 4),
    }
}

pub fn run(a: &GraphBenchArgs, json: bool) -> Result<ExitCode> {
    if a.chunks == 0 || a.products == 0 {
        bail!("--chunks and --products must be positive");
    }
    let t = Instant::now();
    let mut rng = StdRng::seed_from_u64(7);
    let (suppliers, events, services, teams) = (
        (a.products / 10).max(1),
        (a.products / 100).max(1),
        (a.products / 5).max(2),
        (a.products / 50).max(1),
    );
    let chunks: Vec<Chunk> = (0..a.chunks)
        .map(|i| {
            let p = rng.gen_range(0..a.products);
            let s = rng.gen_range(0..suppliers);
            let docs = a.chunks.div_ceil(4);
            let named = title(rng.gen_range(0..docs));
            let text = match i % 4 {
                0 => format!("P-{p} 的电池模组由供应商 S-{s} 供应。售后按政策处理，参见{named}。"),
                1 => format!(
                    "供应商 S-{s} 受到事件 E-{} 影响。其他批次未发现问题。",
                    rng.gen_range(0..events)
                ),
                2 => format!(
                    "svc-{} depends on svc-{}. It is owned by team-{}. See {named}.",
                    rng.gen_range(0..services),
                    rng.gen_range(0..services),
                    rng.gen_range(0..teams)
                ),
                _ => format!(
                    "Incident INC-{} affected svc-{}; it was resolved by CHG-{}.",
                    rng.gen_range(0..a.products),
                    rng.gen_range(0..services),
                    rng.gen_range(0..a.products)
                ),
            };
            chunk(i, text)
        })
        .collect();
    let generate_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let versions: Vec<DocumentVersion> = (0..a.chunks.div_ceil(4))
        .map(|d| DocumentVersion {
            doc_id: format!("doc-{d}"),
            version: "v1".into(),
            title: title(d),
            tenant: "t0".into(),
            kb: None,
            acl: None,
            effective_from: None,
            effective_to: None,
            supersedes: None,
            supersedes_evidence: None,
            depends_on: vec![],
            source_uri: String::new(),
            kind: DocKind::Markdown,
            digest: String::new(),
        })
        .collect();
    let mut titles = TitleTable::new(&versions);
    titles.learn_aliases(&chunks);
    let titles_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let x = extract(&chunks, &titles);
    let extract_s = t.elapsed().as_secs_f64();
    let links = x
        .relations
        .iter()
        .filter(|r| r.relation == "mentions_document")
        .count();
    let t = Instant::now();
    let mut g = TenantGraph::new("t0");
    g.add(x)?;
    let build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let view = g.view(&|_| true);
    let view_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let communities = view.communities(&CommunityOptions::default());
    let communities_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let texts: std::collections::HashMap<&str, &str> = chunks
        .iter()
        .map(|c| (c.chunk_id.as_str(), c.text.as_str()))
        .collect();
    let mut by_size: Vec<&_> = communities.iter().collect();
    by_size.sort_by_key(|c| std::cmp::Reverse(c.entities.len()));
    let built = by_size
        .iter()
        .take(a.reports)
        .map(|c| view.report(c, &|id| texts.get(id).map(|s| s.to_string()), 6))
        .filter(|r| !r.summary.is_empty())
        .count();
    let reports_s = t.elapsed().as_secs_f64();
    let r = Report {
        chunks: chunks.len(),
        generate_s,
        titles_s,
        extract_s,
        build_s,
        view_s,
        communities_s,
        reports_s,
        entities: view.entities().len(),
        relations: view.edges().len(),
        links,
        communities: communities.len(),
        levels: communities.iter().map(|c| c.level + 1).max().unwrap_or(0),
        reports_built: built,
    };
    if json {
        crate::print_json(&r)?;
    } else {
        println!(
            "{} chunks: titles {:.1} s, extract {:.1} s ({} links), build {:.1} s, view {:.1} s, Leiden {:.1} s ({} communities over {} levels), {} reports in {:.1} s; {} entities, {} relations",
            r.chunks, r.titles_s, r.extract_s, r.links, r.build_s, r.view_s, r.communities_s,
            r.communities, r.levels, r.reports_built, r.reports_s, r.entities, r.relations
        );
    }
    Ok(ExitCode::SUCCESS)
}
