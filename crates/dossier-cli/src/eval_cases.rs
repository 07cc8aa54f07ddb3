//! `dossier eval DIR --ask` on a case directory (a `cases.yaml` beside the documents,
//! principals and records it asks about, as ../shared/enterprise-dev and
//! ../shared/scenarios): every case asked and checked by `dossier_agent::cases`, the
//! figures printed by kind and language.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use dossier_agent::cases::{parse_cases, run_case, CaseReport};
use dossier_engine::{Engine, Progress};

/// Whether `dir` is a case directory.
pub fn is_case_dir(dir: &Path) -> bool {
    dir.join("cases.yaml").is_file()
}

/// Everything of the case directory the cases ask about: its documents, principals and
/// records (the paths that exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    ["docs", "principals.yaml", "records"]
        .iter()
        .map(|p| dir.join(p))
        .filter(|p| p.exists())
        .collect()
}

/// Most cases one run takes (each is a whole ask).
const MAX_CASES: usize = 10_000;

pub fn main(
    engine: &Engine,
    dir: &Path,
    limit: Option<usize>,
    model: Option<&dyn dossier_llm::ChatModel>,
    json: bool,
    progress: &mut dyn Progress,
) -> Result<ExitCode> {
    let inputs = inputs(dir);
    if inputs.is_empty() {
        bail!(
            "{}: no docs/, principals.yaml or records/ beside cases.yaml",
            dir.display()
        );
    }
    let ingested = engine.ingest(&inputs, progress)?;
    if !ingested.problems.is_empty() {
        bail!(
            "{}: {} problems ingesting the case directory: {:?}",
            dir.display(),
            ingested.problems.len(),
            ingested.problems
        );
    }
    let text = std::fs::read_to_string(dir.join("cases.yaml"))
        .with_context(|| format!("reading {}/cases.yaml", dir.display()))?;
    let mut cases = parse_cases(&text)?;
    if cases.len() > MAX_CASES {
        bail!("{} cases; at most {MAX_CASES} run at once", cases.len());
    }
    if let Some(n) = limit {
        cases.truncate(n);
    }
    let mut report = CaseReport::default();
    let mut per_case = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        // A case that changes the store (`steps`) is not run here: it needs a store of
        // its own (the scenario test runs those).
        if case.get("steps").is_some() {
            continue;
        }
        let o = run_case(engine, model, case)?;
        if !json {
            eprintln!(
                "[{}/{}] {} {} {:?}{}",
                i + 1,
                cases.len(),
                o.id,
                o.kind,
                o.response.status,
                if o.failures.is_empty() {
                    ""
                } else {
                    "  FAILED"
                }
            );
        }
        per_case.push(serde_json::json!({
            "id": o.id,
            "kind": o.kind,
            "lang": o.lang,
            "status": o.response.status,
            "failures": o.failures,
        }));
        report.add(&o);
    }
    if json {
        crate::print_json(&serde_json::json!({"report": report, "cases": per_case}))?;
    } else {
        println!("{}", report.table());
        for (id, failures) in &report.failed {
            println!("FAILED {id}: {}", failures.join("; "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
