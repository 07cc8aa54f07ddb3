//! `dossier bench graph`: graph build and community detection at scale, on generated
//! chunks whose text carries the identifiers and relation phrases the extraction rules
//! read (products supplied by suppliers, suppliers affected by events, services that
//! depend on services and are owned by teams), in Chinese and English. Nothing is
//! stored: this measures extraction, resolution, a principal's view, hierarchical
//! Leiden and the extractive reports.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use dossier_core::Chunk;
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
    extract_s: f64,
    build_s: f64,
    view_s: f64,
    communities_s: f64,
    reports_s: f64,
    entities: usize,
    relations: usize,
    communities: usize,
    levels: usize,
    reports_built: usize,
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
        title: String::new(),
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
            let text = match i % 4 {
                0 => format!("P-{p} 的电池模组由供应商 S-{s} 供应。售后按政策处理。"),
                1 => format!(
                    "供应商 S-{s} 受到事件 E-{} 影响。其他批次未发现问题。",
                    rng.gen_range(0..events)
                ),
                2 => format!(
                    "svc-{} depends on svc-{}. It is owned by team-{}.",
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
    let x = extract(&chunks, &TitleTable::new(&[]));
    let extract_s = t.elapsed().as_secs_f64();
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
        extract_s,
        build_s,
        view_s,
        communities_s,
        reports_s,
        entities: view.entities().len(),
        relations: view.edges().len(),
        communities: communities.len(),
        levels: communities.iter().map(|c| c.level + 1).max().unwrap_or(0),
        reports_built: built,
    };
    if json {
        crate::print_json(&r)?;
    } else {
        println!(
            "{} chunks: extract {:.1} s, build {:.1} s, view {:.1} s, Leiden {:.1} s ({} communities over {} levels), {} reports in {:.1} s; {} entities, {} relations",
            r.chunks, r.extract_s, r.build_s, r.view_s, r.communities_s, r.communities, r.levels,
            r.reports_built, r.reports_s, r.entities, r.relations
        );
    }
    Ok(ExitCode::SUCCESS)
}
