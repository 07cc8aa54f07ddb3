//! What every fuzz target checks besides "no panic, no hang, no runaway memory": the
//! items that come out are well formed.

use dossier_core::ids::check_id;
use dossier_core::Chunk;
use dossier_ingest::{IngestOptions, Item, Problem, RecordTable};

/// The options the targets read with: the defaults, but small chunks so that short
/// inputs are split too.
pub fn opts() -> IngestOptions {
    IngestOptions {
        max_chunk_chars: 40,
        ..IngestOptions::default()
    }
}

fn id(kind: &str, s: &str) {
    if let Err(e) = check_id(kind, s) {
        panic!("an id that check_id refuses got through: {e}");
    }
}

/// Panics on an item or problem that breaks a reader's promises.
pub fn check(items: &[Item], problems: &[Problem], opts: &IngestOptions) {
    for p in problems {
        assert!(!p.message.is_empty(), "a problem without a message: {p:?}");
    }
    for item in items {
        match item {
            Item::Document(d) => {
                let m = &d.meta;
                id("doc id", &m.doc_id);
                id("version", &m.version);
                id("tenant", &m.tenant);
                m.kb.iter().for_each(|k| id("kb", k));
                m.acl.iter().flatten().for_each(|g| id("acl", g));
                m.depends_on.iter().for_each(|d| id("depends_on", d));
                assert!(!d.chunks.is_empty(), "a document without chunks");
                for (i, c) in d.chunks.iter().enumerate() {
                    assert_eq!(c.ordinal as usize, i);
                    assert_eq!(c.chunk_id, Chunk::make_id(&m.doc_id, &m.version, c.ordinal));
                    assert!(c.byte_start < c.byte_end);
                    assert_eq!(c.text.len(), c.byte_end - c.byte_start);
                    assert_eq!(c.text, c.text.trim(), "a chunk with edge whitespace");
                    assert!(c.text.chars().count() <= opts.max_chunk_chars.max(1));
                    assert_eq!((&c.tenant, &c.kb, &c.acl), (&m.tenant, &m.kb, &m.acl));
                }
                for w in d.chunks.windows(2) {
                    assert!(w[0].byte_end <= w[1].byte_start, "overlapping chunks");
                }
            }
            Item::Records(t) => check_table(t),
            Item::Principals { principals, .. } => {
                for p in principals {
                    id("principal", &p.id);
                    id("principal tenant", &p.tenant);
                    p.groups.iter().for_each(|g| id("group", g));
                }
            }
        }
    }
}

pub fn check_table(t: &RecordTable) {
    id("table", &t.schema.table);
    id("tenant", &t.schema.tenant);
    id("key", &t.schema.key);
    t.schema
        .read_groups
        .iter()
        .for_each(|g| id("read group", g));
    let mut keys = std::collections::HashSet::new();
    for r in &t.rows {
        id("row key", &r.key);
        assert_eq!(r.table, t.schema.table);
        assert!(keys.insert(&r.key), "duplicate row key {:?}", r.key);
    }
}
