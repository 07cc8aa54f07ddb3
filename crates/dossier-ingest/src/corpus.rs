//! Corpus JSONL: one passage per line, `{"id", "title", "text"}`.

use std::collections::HashMap;
use std::path::Path;

use dossier_core::{DocKind, DocumentVersion};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    digest, document, each_line, json_error, Error, IngestOptions, ParsedDocument, Problem, Result,
};

#[derive(Deserialize)]
struct Passage {
    id: Value,
    title: Option<String>,
    text: String,
    tenant: Option<String>,
    kb: Option<String>,
    acl: Option<Vec<String>>,
}

/// Streams a corpus file, handing each passage to `f` as it is read, and returns the
/// problems: a bad line (or a repeated id) is reported with its line number and the
/// other lines still land. `max_file_bytes` bounds each line here, not the file.
pub fn parse_corpus_jsonl(
    path: &Path,
    opts: &IngestOptions,
    mut f: impl FnMut(ParsedDocument),
) -> Vec<Problem> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let read = each_line(path, opts.max_file_bytes, |n, line| {
        let parsed = line.and_then(|l| match l.trim().is_empty() {
            true => Ok(None),
            false => passage(l, &stem, opts).map(Some),
        });
        let problem = match parsed {
            Ok(None) => return,
            Ok(Some(d)) => match seen.get(&d.meta.doc_id) {
                Some(first) => format!(
                    "duplicate passage id {:?} (first on line {first})",
                    d.meta.doc_id
                ),
                None => {
                    seen.insert(d.meta.doc_id.clone(), n);
                    return f(d);
                }
            },
            Err(e) => e.to_string(),
        };
        problems.push(Problem::new(path, Some(n), problem));
    });
    if let Err(e) = read {
        problems.push(Problem::from_error(path, &e));
    }
    problems
}

fn passage(line: &str, stem: &str, opts: &IngestOptions) -> Result<ParsedDocument> {
    let p: Passage = serde_json::from_str(line).map_err(json_error)?;
    let doc_id = match &p.id {
        Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => {
            return Err(Error::invalid(
                None,
                "`id` must be a non-empty string or a number",
            ))
        }
    };
    if doc_id.contains('#') {
        return Err(Error::invalid(None, "`id` must not contain '#'"));
    }
    if p.text.trim().is_empty() {
        return Err(Error::invalid(None, "passage has no text"));
    }
    let meta = DocumentVersion {
        source_uri: format!("corpus://{stem}/{doc_id}"),
        doc_id,
        version: "1".into(),
        title: p.title.unwrap_or_default(),
        tenant: p.tenant.unwrap_or_else(|| opts.default_tenant.clone()),
        kb: p.kb,
        acl: p.acl,
        effective_from: None,
        effective_to: None,
        supersedes: None,
        supersedes_evidence: None,
        depends_on: Vec::new(),
        kind: DocKind::Passage,
        digest: digest(line.as_bytes(), opts),
    };
    Ok(document(meta, &p.text, opts))
}
