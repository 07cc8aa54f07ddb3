//! Reads JSON-lines `{"text": ..., "query": bool}` on stdin and writes, per line,
//! `{"ids": [...], "vec": [...]}` — for comparing with another engine by hand.
//!
//!     cargo run --release -p dossier-e5 --example e5_dump -- MODEL.bin [--ids-only] < in.jsonl
use std::io::{BufRead, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = dossier_e5::E5Model::open(std::path::Path::new(&args[1]), 0).expect("model");
    let ids_only = args.iter().any(|a| a == "--ids-only");
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
        let vec = if ids_only { Vec::new() } else { model.embed(&[text], kind).remove(0) };
        writeln!(out, "{}", serde_json::json!({"ids": ids, "vec": vec})).unwrap();
    }
}
