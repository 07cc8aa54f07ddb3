//! Reads JSON-lines `{"text": ..., "query": bool}` on stdin and writes, per line,
//! `{"ids": [...], "vec": [...]}` — for comparing with another engine by hand.
//!
//!     cargo run --release -p dossier-e5 --example e5_dump -- MODEL.bin [--ids-only] < in.jsonl
use std::io::{BufRead, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = dossier_e5::E5Model::open(std::path::Path::new(&args[1]), 0).expect("model");
    let ids_only = args.iter().any(|a| a == "--ids-only");
    if args.iter().any(|a| a == "--speed") {
        // Passages in batches of 8 (as the embedding queue sends them), then queries.
        let texts: Vec<String> = std::io::stdin()
            .lock()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        model.embed(&refs[..8], dossier_e5::Kind::Passage);
        let t = std::time::Instant::now();
        for c in refs.chunks(8) {
            model.embed(c, dossier_e5::Kind::Passage);
        }
        println!(
            "native batch8 {:.1} passages/s",
            refs.len() as f64 / t.elapsed().as_secs_f64()
        );
        let qs = [
            "who directed the film that won the award in 1998?",
            "印控克什米尔地区寺庙踩踏事故死亡人数",
        ];
        let mut lat: Vec<f64> = (0..40)
            .map(|i| {
                let t = std::time::Instant::now();
                model.embed(&[qs[i % 2]], dossier_e5::Kind::Query);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        lat.sort_by(f64::total_cmp);
        println!("native query p50 {:.2} ms", lat[20]);
        return;
    }
    let out = std::io::stdout();
    let mut out = out.lock();
    for line in std::io::stdin().lock().lines() {
        let v: serde_json::Value = serde_json::from_str(&line.expect("line")).expect("json");
        let text = v["text"].as_str().unwrap_or_default();
        let kind = if v["query"].as_bool().unwrap_or(false) {
            dossier_e5::Kind::Query
        } else {
            dossier_e5::Kind::Passage
        };
        let ids = model.token_ids(text, kind);
        let vec = if ids_only {
            Vec::new()
        } else {
            model.embed(&[text], kind).remove(0)
        };
        writeln!(out, "{}", serde_json::json!({"ids": ids, "vec": vec})).unwrap();
    }
}
