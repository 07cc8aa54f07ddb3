//! Corpus JSONL: one passage per line, `{"id", "title", "text"}`.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use dossier_core::{DocKind, DocumentVersion};
use serde::Deserialize;
use serde_json::Value;

use crate::guard::{self, Problems};
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
    f: impl FnMut(ParsedDocument),
) -> Vec<Problem> {
    match crate::open_regular(path) {
        Ok((file, _)) => parse_reader(path, std::io::BufReader::new(file), opts, f),
        Err(e) => vec![Problem::from_error(path, &e)],
    }
}

/// [`parse_corpus_jsonl`] from any reader; `path` names the corpus.
pub(crate) fn parse_reader(
    path: &Path,
    r: impl BufRead,
    opts: &IngestOptions,
    mut f: impl FnMut(ParsedDocument),
) -> Vec<Problem> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Problems::new(path);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let read = each_line(r, opts.max_file_bytes, |n, line| {
        let parsed = line.and_then(|l| match l.trim().is_empty() {
            true => Ok(None),
            false => passage(l, &stem, opts).map(Some),
        });
        let problem = match parsed {
            Ok(None) => return true,
            Ok(Some(d)) => match seen.get(&d.meta.doc_id) {
                Some(first) => format!(
                    "duplicate passage id {:?} (first on line {first})",
                    d.meta.doc_id
                ),
                None => {
                    seen.insert(d.meta.doc_id.clone(), n);
                    f(d);
                    return true;
                }
            },
            Err(e) => e.to_string(),
        };
        problems.push(Some(n), problem);
        true
    });
    if let Err(e) = read {
        problems.push(e.line(), e.to_string());
    }
    problems.finish()
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
    guard::id("`id`", &doc_id, None)?;
    if doc_id.contains('#') {
        return Err(Error::invalid(None, "`id` must not contain '#'"));
    }
    if p.text.trim().is_empty() {
        return Err(Error::invalid(None, "passage has no text"));
    }
    guard::check_text(&p.text)?;
    let tenant = p.tenant.unwrap_or_else(|| opts.default_tenant.clone());
    guard::tenant("`tenant`", &tenant, None)?;
    if let Some(kb) = &p.kb {
        guard::id("`kb`", kb, None)?;
    }
    for g in p.acl.iter().flatten() {
        guard::id("`acl` group", g, None)?;
    }
    let meta = DocumentVersion {
        source_uri: format!("corpus://{stem}/{doc_id}"),
        doc_id,
        version: "1".into(),
        title: p.title.unwrap_or_default(),
        tenant,
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
    document(meta, &p.text, None, opts)
}
