//! Test fixtures shared by the crate's unit tests.

use dossier_core::{Chunk, DocumentVersion};

/// Version `v1` of document `id` in tenant `t`.
pub(crate) fn version(id: &str, title: &str) -> DocumentVersion {
    DocumentVersion {
        doc_id: id.into(),
        version: "v1".into(),
        title: title.into(),
        tenant: "t".into(),
        kb: None,
        acl: None,
        effective_from: None,
        effective_to: None,
        supersedes: None,
        supersedes_evidence: None,
        depends_on: vec![],
        source_uri: String::new(),
        kind: dossier_core::DocKind::Markdown,
        digest: String::new(),
    }
}

/// The first chunk of version `v1` of document `doc` in tenant `t`.
pub(crate) fn chunk(doc: &str, title: &str, section: &[&str], text: &str) -> Chunk {
    Chunk {
        chunk_id: Chunk::make_id(doc, "v1", 0),
        doc_id: doc.into(),
        version: "v1".into(),
        ordinal: 0,
        section: section.iter().map(|s| s.to_string()).collect(),
        text: text.into(),
        byte_start: 0,
        byte_end: text.len(),
        source_uri: String::new(),
        tenant: "t".into(),
        kb: None,
        acl: None,
        title: title.into(),
    }
}
