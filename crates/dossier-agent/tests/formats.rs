//! The scenario corpus as an organisation's real files: every Markdown document turned
//! into DOCX and into PDF by LibreOffice (its front matter moved to a `FILE.meta.yaml`
//! sidecar) and every record table into CSV. On each corpus every case of
//! scenarios.yaml must hold, citing the same documents, versions and sections as the
//! Markdown corpus does, and every PDF citation must name its page.
//!
//! Needs LibreOffice (to make the files) and poppler (to read PDFs):
//! `scripts/setup-office`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use dossier_agent::AskResponse;
use dossier_engine::Engine;

fn soffice() -> &'static str {
    for p in ["soffice", "libreoffice"] {
        if Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return p;
        }
    }
    panic!("LibreOffice not found: run scripts/setup-office");
}

/// Markdown headings and paragraphs (all the scenario documents use) as HTML.
fn html_of(title: &str, body: &str) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut out = format!(
        "<html><head><meta charset=\"utf-8\"><title>{}</title></head><body>\n",
        esc(title)
    );
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let level = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level) && line[level..].starts_with(' ') {
            out += &format!("<h{level}>{}</h{level}>\n", esc(line[level..].trim()));
        } else {
            out += &format!("<p>{}</p>\n", esc(line));
        }
    }
    out + "</body></html>\n"
}

/// Converts every file of `dir` with `ext_in` to `filter`, in one LibreOffice run with a
/// profile of its own (two runs on one profile refuse each other).
fn convert(dir: &Path, ext_in: &str, filter: &str) {
    let profile = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext_in))
        .collect();
    files.sort();
    let out = Command::new(soffice())
        .arg(format!(
            "-env:UserInstallation=file://{}",
            profile.path().display()
        ))
        .args(["--headless", "--convert-to", filter, "--outdir"])
        .arg(dir)
        .args(&files)
        .output()
        .expect("run LibreOffice");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// JSON rows as CSV, columns in the order first seen.
fn csv_of(jsonl: &str) -> String {
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut cols: Vec<String> = Vec::new();
    for r in &rows {
        for k in r.keys() {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    let cell = |v: Option<&serde_json::Value>| -> String {
        let s = match v {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s
        }
    };
    let mut out = cols.join(",") + "\n";
    for r in &rows {
        out += &cols
            .iter()
            .map(|c| cell(r.get(c)))
            .collect::<Vec<_>>()
            .join(",");
        out += "\n";
    }
    out
}

/// The scenario corpus with documents as `format` ("docx" or "pdf") and tables as CSV.
fn corpus(root: &Path, format: &str) -> Vec<PathBuf> {
    let shared = common::shared();
    let stage = tempfile::tempdir().unwrap();
    let mut placed = Vec::new();
    for tenant in ["shop", "acme"] {
        let src = shared.join(tenant);
        let dst = root.join(tenant);
        for entry in walk(&src) {
            let rel = entry.strip_prefix(&src).unwrap();
            let target = dst.join(rel);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            let name = rel.file_name().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&entry).unwrap();
            if let Some(stem) = name.strip_suffix(".md") {
                let rest = text.strip_prefix("---\n").expect("front matter");
                let (yaml, body) = rest.split_once("\n---\n").expect("front matter end");
                let title = yaml
                    .lines()
                    .find_map(|l| l.strip_prefix("title:"))
                    .unwrap_or(stem)
                    .trim();
                std::fs::write(
                    stage.path().join(format!("{stem}.html")),
                    html_of(title, body),
                )
                .unwrap();
                std::fs::write(
                    target.with_file_name(format!("{stem}.{format}.meta.yaml")),
                    yaml.to_string() + "\n",
                )
                .unwrap();
                placed.push((stem.to_string(), target.parent().unwrap().to_path_buf()));
            } else if let Some(stem) = name.strip_suffix(".jsonl") {
                std::fs::write(target.with_file_name(format!("{stem}.csv")), csv_of(&text))
                    .unwrap();
            } else {
                std::fs::copy(&entry, &target).unwrap();
            }
        }
    }
    convert(stage.path(), "html", "docx:MS Word 2007 XML");
    if format == "pdf" {
        convert(stage.path(), "docx", "pdf:writer_pdf_Export");
    }
    for (stem, dir) in placed {
        let file = format!("{stem}.{format}");
        std::fs::copy(stage.path().join(&file), dir.join(&file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    vec![root.join("shop"), root.join("acme")]
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if !p
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .eq_ignore_ascii_case("readme.md")
        {
            out.push(p);
        }
    }
    out
}

fn open(store: &Path, roots: &[PathBuf]) -> Engine {
    let engine = Engine::open(
        dossier_engine::dossier_store::testing::location(store),
        "e5",
    )
    .expect("e5 model (run scripts/setup-models)");
    let r = engine.ingest(roots, &mut ()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    engine
}

/// What a response cites, with the page taken out of the section (Markdown has none).
fn cited(r: &AskResponse) -> BTreeSet<(String, String, String)> {
    r.citations
        .iter()
        .map(|c| {
            let section = match c.page {
                Some(_) => c
                    .section
                    .split_once(" › ")
                    .map_or(c.section.as_str(), |x| x.1),
                None => c.section.as_str(),
            };
            (c.doc_id.clone(), c.version.clone(), section.to_string())
        })
        .collect()
}

fn every_case_as(format: &str) {
    let files = tempfile::tempdir().unwrap();
    let roots = corpus(files.path(), format);
    let md_store = tempfile::tempdir().unwrap();
    let md = common::open_scenarios(md_store.path());
    let store = tempfile::tempdir().unwrap();
    let converted = open(store.path(), &roots);
    let mut failed = Vec::new();
    let mut pdf_citations = 0;
    for case in &common::cases() {
        let (own_md, own_conv);
        let (md, conv) = if case.get("steps").is_some() {
            own_md = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            own_conv = (
                common::open_scenarios(own_md.0.path()),
                open(own_md.1.path(), &roots),
            );
            (&own_conv.0, &own_conv.1)
        } else {
            (&md, &converted)
        };
        let want = common::run_case(md, None, case);
        let got = common::run_case(conv, None, case);
        let mut why = got.failures.clone();
        if got.response.status != want.response.status {
            why.push(format!(
                "status {:?}, from Markdown {:?}",
                got.response.status, want.response.status
            ));
        }
        if cited(&got.response) != cited(&want.response) {
            why.push(format!(
                "cites {:?}, from Markdown {:?}",
                cited(&got.response),
                cited(&want.response)
            ));
        }
        for c in &got.response.citations {
            if format == "pdf" {
                pdf_citations += 1;
                match c.page {
                    Some(p) if p >= 1 && c.section.starts_with(&format!("p. {p}")) => {}
                    _ => why.push(format!("citation without its page: {c:?}")),
                }
            } else if c.page.is_some() {
                why.push(format!("a DOCX citation names a page: {c:?}"));
            }
        }
        eprintln!(
            "{format} {:<28} {:?} {} citations{}",
            got.id,
            got.response.status,
            got.response.citations.len(),
            if why.is_empty() {
                String::new()
            } else {
                format!("  FAILED: {why:?}")
            }
        );
        if !why.is_empty() {
            eprintln!(
                "  answer: {}\n  from Markdown: {}",
                got.response.answer, want.response.answer
            );
            failed.push((got.id, why));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    if format == "pdf" {
        assert!(pdf_citations > 10, "only {pdf_citations} PDF citations");
    }
}

#[test]
fn every_scenario_case_holds_on_docx_files() {
    every_case_as("docx");
}

#[test]
fn every_scenario_case_holds_on_pdf_files_and_cites_pages() {
    every_case_as("pdf");
}
