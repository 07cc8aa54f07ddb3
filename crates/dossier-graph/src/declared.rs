//! Relations the sources declare: the version graph from front matter, and the links of
//! record tables. Nothing here is guessed, except the `about` edge from a title's
//! identifier, which is marked as extracted.

use std::collections::{BTreeMap, BTreeSet};

use dossier_core::{DocumentVersion, RecordRow, RecordSchema};
use serde_json::Value;

use crate::link::{split_title, TitleTable};
use crate::model::{
    Alias, EntityKind, Extraction, Mention, Provenance, Relation, Source, RECORDS_PREFIX,
};
use crate::text::{ascii_boundary, cue_before, is_identifier, kebab_kind, IDENTIFIER, KEBAB};

/// The version graph of one tenant's documents:
/// - `ID@V version_of ID`, and `ID@V supersedes ID@OLD` with `supersedes_evidence` kept
///   as the edge's evidence;
/// - `ID depends_on DEP` for each `depends_on`;
/// - the title, and the title less its qualifier, as aliases of the document (each when
///   no other document has that name), so a title written in text (or a question)
///   resolves to the document, and only for readers of it;
/// - `ID about X` for the first identifier or hyphenated name in the title.
///
/// Every fact carries the provenance of the version that declared it; a document or
/// version node is anchored by its own declaration, so a reference to it never makes it
/// visible to someone who may not read it.
pub fn declared_versions(versions: &[DocumentVersion]) -> Extraction {
    let mut out = Extraction::default();
    let mut titles: BTreeMap<(&str, String), BTreeSet<&str>> = BTreeMap::new();
    for v in versions {
        for name in TitleTable::own_names(&v.title) {
            titles
                .entry((&v.tenant, name))
                .or_default()
                .insert(&v.doc_id);
        }
    }
    for v in versions {
        let prov = |source| Provenance {
            tenant: v.tenant.clone(),
            doc_id: v.doc_id.clone(),
            version: v.version.clone(),
            chunk_id: None,
            span: None,
            source,
        };
        let doc = Mention::new(v.doc_id.clone(), EntityKind::Document);
        let ver = Mention::new(v.key().to_string(), EntityKind::Version);
        let rel =
            |from: &Mention, relation: &str, to: Mention, evidence: Option<String>| Relation {
                from: from.clone(),
                relation: relation.into(),
                to,
                provenance: prov(Source::Declared),
                evidence,
            };
        out.mentions.push((doc.clone(), prov(Source::Declared)));
        out.mentions.push((ver.clone(), prov(Source::Declared)));
        out.relations
            .push(rel(&ver, "version_of", doc.clone(), None));
        if let Some(old) = &v.supersedes {
            let old = Mention::new(old.to_string(), EntityKind::Version);
            out.relations
                .push(rel(&ver, "supersedes", old, v.supersedes_evidence.clone()));
        }
        for d in &v.depends_on {
            let to = Mention::new(d.clone(), EntityKind::Document);
            out.relations.push(rel(&doc, "depends_on", to, None));
        }
        // The title, and the title less its qualifier (`Henry Worrall` of `Henry Worrall
        // (artist)`) where no other document's title or base title is that name.
        for (i, name) in TitleTable::own_names(&v.title).into_iter().enumerate() {
            let unique = titles
                .get(&(v.tenant.as_str(), name.clone()))
                .is_some_and(|ids| ids.len() == 1);
            if !unique || (i > 0 && name.chars().count() < 4) {
                continue;
            }
            let (alias, reason) = match i {
                0 => (v.title.clone(), format!("title of document {}", v.doc_id)),
                _ => (
                    split_title(&v.title).to_string(),
                    format!("title of document {} without its qualifier", v.doc_id),
                ),
            };
            out.aliases.push(Alias {
                alias: Mention::new(alias, EntityKind::Title),
                canonical: doc.clone(),
                reason,
                provenance: prov(Source::Declared),
            });
        }
        if let Some(topic) = title_topic(&v.title) {
            let mut r = rel(&doc, "about", topic, None);
            r.provenance.source = Source::Extracted;
            out.relations.push(r);
        }
    }
    out
}

fn title_topic(title: &str) -> Option<Mention> {
    let m = IDENTIFIER
        .find_iter(title)
        .chain(KEBAB.find_iter(title))
        .filter(|m| ascii_boundary(title, m.start(), m.end()))
        .min_by_key(|m| m.start())?;
    let s = m.as_str();
    let kind = cue_before(title, m.start()).unwrap_or_else(|| match is_identifier(s) {
        true => EntityKind::Identifier,
        false => kebab_kind(s),
    });
    Some(Mention::new(s, kind))
}

/// The rows of one table as entities (named by their key, typed by the table), and their
/// schema links: to a row of another table, to a document (`document: true`), or to a
/// typed entity (`entity: Supplier`), each under the link's relation name. Provenance is
/// `records/<table>` at version `<key>`, so the caller decides visibility row by row.
pub fn declared_records(schema: &RecordSchema, rows: &[RecordRow]) -> Extraction {
    let mut out = Extraction::default();
    let row_kind = table_kind(&schema.table);
    for row in rows {
        let prov = Provenance {
            tenant: schema.tenant.clone(),
            doc_id: format!("{RECORDS_PREFIX}{}", schema.table),
            version: row.key.clone(),
            chunk_id: None,
            span: None,
            source: Source::Declared,
        };
        let me = Mention::new(row.key.clone(), row_kind.clone());
        out.mentions.push((me.clone(), prov.clone()));
        for link in &schema.links {
            let kind = if link.document {
                EntityKind::Document
            } else if let Some(t) = &link.table {
                table_kind(t)
            } else if let Some(e) = &link.entity {
                EntityKind::parse(e)
            } else {
                EntityKind::Concept
            };
            for value in values(row.fields.get(&link.field)) {
                out.relations.push(Relation {
                    from: me.clone(),
                    relation: link.relation.clone(),
                    to: Mention::new(value, kind.clone()),
                    provenance: prov.clone(),
                    evidence: None,
                });
            }
        }
    }
    out
}

/// The kind of a table's rows, from its name (`products` → product).
fn table_kind(table: &str) -> EntityKind {
    match EntityKind::parse(table) {
        EntityKind::Other(_) => EntityKind::Other(table.to_string()),
        k => k,
    }
}

/// The values a link field holds: a string or number, or an array of them.
fn values(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Some(Value::Number(n)) => vec![n.to_string()],
        Some(Value::Array(a)) => a.iter().flat_map(|x| values(Some(x))).collect(),
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dossier_core::{RecordLink, VersionRef};

    fn version(id: &str, v: &str, title: &str) -> DocumentVersion {
        DocumentVersion {
            doc_id: id.into(),
            version: v.into(),
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

    fn rels(x: &Extraction) -> Vec<String> {
        x.relations
            .iter()
            .map(|r| format!("{} {} {}", r.from.text, r.relation, r.to.text))
            .collect()
    }

    #[test]
    fn version_graph_keeps_evidence() {
        let v1 = version("refund", "1", "Refund rules");
        let mut v2 = version("refund", "2", "Refund rules");
        v2.supersedes = VersionRef::parse("refund@1");
        v2.supersedes_evidence = Some("release note R-9: 2 replaces 1".into());
        v2.depends_on = vec!["auth".into()];
        let x = declared_versions(&[v1, v2]);
        assert_eq!(
            rels(&x),
            [
                "refund@1 version_of refund",
                "refund@2 version_of refund",
                "refund@2 supersedes refund@1",
                "refund depends_on auth"
            ]
        );
        let sup = &x.relations[2];
        assert_eq!(
            sup.evidence.as_deref(),
            Some("release note R-9: 2 replaces 1")
        );
        assert_eq!(sup.provenance.version, "2");
        // Both versions share the title of one document: it is that document's alias.
        assert_eq!(x.aliases.len(), 2);
    }

    #[test]
    fn shared_titles_are_no_alias_and_titles_name_their_topic() {
        let x = declared_versions(&[
            version("a", "1", "Same title"),
            version("b", "1", "Same title"),
            version("pm", "1", "事故复盘 INC-7：结算延迟"),
        ]);
        assert_eq!(x.aliases.len(), 1);
        let about = x.relations.iter().find(|r| r.relation == "about").unwrap();
        assert_eq!(about.to, Mention::new("INC-7", EntityKind::Incident));
        assert_eq!(about.provenance.source, Source::Extracted);
    }

    #[test]
    fn record_links_to_rows_documents_and_entities() {
        let schema = RecordSchema {
            table: "items".into(),
            tenant: "t".into(),
            key: "id".into(),
            owner_field: None,
            read_groups: vec![],
            date_fields: vec![],
            links: vec![
                RecordLink {
                    field: "order".into(),
                    table: Some("orders".into()),
                    document: false,
                    entity: None,
                    relation: "in_order".into(),
                },
                RecordLink {
                    field: "terms".into(),
                    table: None,
                    document: true,
                    entity: None,
                    relation: "governed_by".into(),
                },
                RecordLink {
                    field: "maker".into(),
                    table: None,
                    document: false,
                    entity: Some("Supplier".into()),
                    relation: "supplied_by".into(),
                },
            ],
            sensitive: vec![],
            source: None,
            key_shapes: vec![],
        };
        let row: RecordRow = RecordRow {
            table: "items".into(),
            key: "I-1".into(),
            fields: serde_json::from_str(
                r#"{"id":"I-1","order":"O-5","terms":"terms-doc","maker":["V-1","V-2"]}"#,
            )
            .unwrap(),
        };
        let x = declared_records(&schema, &[row]);
        assert_eq!(
            rels(&x),
            [
                "I-1 in_order O-5",
                "I-1 governed_by terms-doc",
                "I-1 supplied_by V-1",
                "I-1 supplied_by V-2"
            ]
        );
        let kinds: Vec<EntityKind> = x.relations.iter().map(|r| r.to.kind.clone()).collect();
        assert_eq!(
            kinds[..3],
            [
                EntityKind::Order,
                EntityKind::Document,
                EntityKind::Supplier
            ]
        );
        assert_eq!(x.relations[0].provenance.doc_id, "records/items");
        assert_eq!(x.relations[0].provenance.version, "I-1");
        assert_eq!(x.mentions[0].0.kind, EntityKind::Other("items".into()));
    }
}
