//! Scoped access for callers that act on a principal's behalf (the agent): searches
//! restricted to named documents, record lookups, and the record tables' shapes.
//!
//! Record lookups tell the program apart "missing" from "forbidden" so that an audit
//! trace can keep the difference; whoever answers the caller must show both the same.

use std::collections::{BTreeSet, HashSet};

use dossier_core::{RecordRow, RecordSchema};
use dossier_index::Admit;
use dossier_store::Scope;

use crate::graph::query_entities;
use crate::{Engine, GraphNode, Mode, Result, SearchResponse};

/// What a record lookup found. Only the program sees the difference between the
/// last two.
#[derive(Debug, Clone)]
pub enum RecordLookup {
    Found {
        schema: Box<RecordSchema>,
        row: Box<RecordRow>,
    },
    Missing,
    Forbidden,
    /// A live table whose source did not answer (`timeout`) or failed: the fact is
    /// missing, not absent.
    Unavailable {
        timeout: bool,
        message: String,
    },
}

/// `row` as the scope's reader may see it: fields the schema marks sensitive replaced
/// by their mask unless the reader sees sensitive values, and sensitive values in the
/// other fields' text masked.
fn masked_row(scope: &Scope, schema: &RecordSchema, mut row: RecordRow) -> RecordRow {
    if scope.sees_sensitive() {
        return row;
    }
    for (name, value) in row.fields.iter_mut() {
        if schema.sensitive.iter().any(|f| f == name) {
            if !value.is_null() {
                *value = serde_json::Value::String(dossier_core::pii::mask_of(name));
            }
        } else if let Some(m) = scope.masker() {
            m.mask_json(value);
        }
    }
    row
}

/// A record table as the program may know it: its schema and the shapes of its keys
/// (letters kept, digits as `9`: `A123` → `A999`), so that an identifier in a question
/// can be routed to the table it belongs to without listing any row.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub schema: RecordSchema,
    pub key_shapes: BTreeSet<String>,
}

/// The shape of an identifier: ASCII digits become `9`, letters are uppercased and kept.
pub fn key_shape(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_digit() {
                '9'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

impl Engine {
    /// Searches only the named documents (the versions of them the scope admits).
    /// `mode` must be one of the basic modes.
    pub fn search_within(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
        doc_ids: &[String],
    ) -> Result<SearchResponse> {
        self.search_within_until(scope, query, mode, k, doc_ids, &Default::default())
    }

    /// [`Engine::search_within`] under `cancel` (see [`Engine::search_until`]).
    pub fn search_within_until(
        &self,
        scope: &Scope,
        query: &str,
        mode: Mode,
        k: usize,
        doc_ids: &[String],
        cancel: &dossier_core::cancel::Cancel,
    ) -> Result<SearchResponse> {
        if mode.is_graph() {
            return Err(crate::Error::Invalid(format!(
                "search within documents takes bm25, vector or hybrid, not {}",
                mode.name()
            )));
        }
        // One snapshot: the admission set, the indexes and the check of the hits.
        let snap = self.store.snapshot();
        let view = &snap.view;
        let wanted: HashSet<&str> = doc_ids.iter().map(String::as_str).collect();
        let admitted: Vec<u32> = (0..view.len())
            .filter(|&i| wanted.contains(view.entry(i).meta.doc_id.as_str()))
            .filter(|&i| view.admits(i, scope))
            .map(|i| view.entry(i).dv)
            .collect();
        let admit = Admit::from_ordinals(admitted);
        let query = &*scope.mask(query);
        let ranked = self.rank_in(&snap, scope, cancel, query, mode, k, &admit)?;
        self.hydrate_in(view, scope, &ranked, k)
    }

    /// One record by table and key, judged for the scope's principal and groups.
    pub fn record(&self, scope: &Scope, table: &str, key: &str) -> Result<RecordLookup> {
        let catalog = self.store.catalog();
        let Some(schema) = catalog.record_schema(scope.tenant(), table)? else {
            return Ok(RecordLookup::Missing);
        };
        if schema.source.is_some() {
            // Live: the source filters by the caller itself, so a row it may not read
            // comes back as no row (there is no "forbidden" to tell apart).
            let sources = self
                .sources
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let reader = dossier_sources::Reader {
                principal: scope.principal_id(),
                tenant: scope.tenant(),
                groups: scope.groups(),
            };
            return Ok(match sources.fetch(&schema, key, &reader) {
                Ok(dossier_sources::Fetched::Row(fields)) => {
                    let row = RecordRow {
                        table: schema.table.clone(),
                        key: key.to_string(),
                        fields,
                    };
                    let row = masked_row(scope, &schema, row);
                    RecordLookup::Found {
                        schema: Box::new(schema),
                        row: Box::new(row),
                    }
                }
                Ok(dossier_sources::Fetched::Missing) => RecordLookup::Missing,
                Err(u) => RecordLookup::Unavailable {
                    timeout: matches!(u, dossier_sources::Unavailable::Timeout(_)),
                    message: u.message().to_string(),
                },
            });
        }
        let Some(row) = catalog.record(scope.tenant(), table, key)? else {
            return Ok(RecordLookup::Missing);
        };
        if !schema.row_readable_by(&row, scope.principal_id(), scope.groups()) {
            return Ok(RecordLookup::Forbidden);
        }
        let row = masked_row(scope, &schema, row);
        Ok(RecordLookup::Found {
            schema: Box::new(schema),
            row: Box::new(row),
        })
    }

    /// The record tables of the scope's tenant with the shapes of their keys.
    /// Whether `table` of `tenant` is read live from its source (so an answer built on
    /// it may not be cached: the source changes without a commit).
    pub fn is_live_table(&self, tenant: &str, table: &str) -> bool {
        self.store
            .catalog()
            .record_schema(tenant, table)
            .ok()
            .flatten()
            .is_some_and(|s| s.source.is_some())
    }

    pub fn record_tables_of(&self, tenant: &str) -> Result<Vec<TableInfo>> {
        Ok(self
            .store
            .catalog()
            .record_tables()?
            .into_iter()
            .filter(|(s, _)| s.tenant == tenant)
            .map(|(schema, rows)| TableInfo {
                // A live table names its key shapes; a snapshot's are its keys'.
                key_shapes: rows
                    .iter()
                    .map(|r| key_shape(&r.key))
                    .chain(schema.key_shapes.iter().cloned())
                    .collect(),
                schema,
            })
            .collect())
    }

    /// Entities of the scope's graph view named in `text`, longest name first.
    pub fn entities_in(&self, scope: &Scope, text: &str) -> Result<Vec<GraphNode>> {
        let view = self.graph_view(scope)?;
        Ok(query_entities(&view, text)
            .into_iter()
            .filter_map(|id| view.entity(&id))
            .map(|e| GraphNode {
                id: e.id.key.clone(),
                name: e.name.clone(),
                kind: e.kind.clone(),
            })
            .collect())
    }
}

impl Engine {
    /// Chunks by id, hydrated for the scope (so checked against tenant, ACL and the
    /// version in force); ids the scope may not read, or that name no stored chunk, are
    /// left out. Looked up in the current document view (an id is
    /// `DOC@VERSION#ORDINAL`), so a chunk is found as soon as its commit is.
    pub fn chunks_by_id(&self, scope: &Scope, ids: &[String]) -> Result<Vec<crate::Hit>> {
        let view = self.store.view();
        let mut ranked: Vec<dossier_index::Scored> = Vec::new();
        for id in ids {
            let Some((name, ordinal)) = id.rsplit_once('#') else {
                continue;
            };
            let Ok(ordinal) = ordinal.parse::<usize>() else {
                continue;
            };
            // Ids and versions may hold '@': try every split; the hydrated chunk's own
            // id decides below.
            for (at, _) in name.match_indices('@') {
                let (doc, version) = (&name[..at], &name[at + 1..]);
                if let Some(seq) = view
                    .find(scope.tenant(), doc, version)
                    .and_then(|i| view.entry(i).seqs.get(ordinal))
                {
                    ranked.push(dossier_index::Scored {
                        seq: *seq,
                        score: 1.0,
                    });
                }
            }
        }
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let mut hits = self.hydrate_in(&view, scope, &ranked, ranked.len())?.hits;
        hits.retain(|h| wanted.contains(h.chunk_id.as_str()));
        Ok(hits)
    }
}

impl Engine {
    /// Chunks of a tenant's stored document versions (all of them: this is for
    /// administrative passes such as model extraction, not for answering anyone).
    pub fn tenant_chunks(&self, tenant: &str, limit: usize) -> Result<Vec<dossier_core::Chunk>> {
        let view = self.store.view();
        let seqs: Vec<u64> = view
            .entries()
            .filter(|e| e.meta.tenant == tenant)
            .flat_map(|e| e.seqs.iter().copied())
            .take(limit)
            .collect();
        Ok(self
            .store
            .catalog()
            .chunks(&seqs)?
            .into_iter()
            .map(|c| c.chunk)
            .collect())
    }
}

/// The section a cited chunk belongs to, in the exact version the chunk is of.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SectionView {
    pub doc_id: String,
    pub version: String,
    pub title: String,
    /// The heading path, outermost first, and as one label.
    pub section_path: Vec<String>,
    pub section: String,
    /// The page of a paged source (PDF) the section is on; its chunks are that page's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    pub source_uri: String,
    /// The version's status on the scope's date: `active`, `deprecated` or
    /// `not_yet_in_force`.
    pub status: String,
    /// The chunk that was asked for.
    pub chunk_id: String,
    /// Every chunk of the section, in document order.
    pub chunks: Vec<SectionChunk>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SectionChunk {
    pub chunk_id: String,
    pub text: String,
}

impl Engine {
    /// The section of chunk `chunk_id` (`DOC@VERSION#N`) in that exact version, if the
    /// scope's principal may read the version (tenant and ACL). The version need not be
    /// in force on the scope's date: a citation names the version it quotes. Unknown and
    /// unreadable read the same (`NotFound`).
    pub fn section_of(&self, scope: &Scope, chunk_id: &str) -> Result<SectionView> {
        let missing = || crate::Error::NotFound("no such section".into());
        let (doc_version, _) = chunk_id.rsplit_once('#').ok_or_else(missing)?;
        let (doc, version) = doc_version.rsplit_once('@').ok_or_else(missing)?;
        let view = self.store.view();
        let i = view
            .find(scope.tenant(), doc, version)
            .filter(|&i| scope.may_read(&view.entry(i).meta))
            .ok_or_else(missing)?;
        let entry = &view.entry(i);
        let chunks: Vec<dossier_core::Chunk> = self
            .store
            .catalog()
            .chunks(&entry.seqs)?
            .into_iter()
            .map(|c| c.chunk)
            .collect();
        let cited = chunks
            .iter()
            .find(|c| c.chunk_id == chunk_id)
            .ok_or_else(missing)?;
        let status = view.validity(i).status_on(scope.at());
        let mut section: Vec<&dossier_core::Chunk> = chunks
            .iter()
            .filter(|c| c.section == cited.section)
            .collect();
        section.sort_by_key(|c| c.ordinal);
        Ok(SectionView {
            doc_id: entry.meta.doc_id.clone(),
            version: entry.meta.version.clone(),
            title: scope.mask(&cited.title).into_owned(),
            section_path: cited
                .section
                .iter()
                .map(|s| scope.mask(s).into_owned())
                .collect(),
            section: scope.mask(&cited.section_label()).into_owned(),
            page: cited.page(),
            source_uri: cited.source_uri.clone(),
            status: status.into(),
            chunk_id: chunk_id.into(),
            chunks: section
                .into_iter()
                .map(|c| SectionChunk {
                    chunk_id: c.chunk_id.clone(),
                    text: scope.mask(&c.text).into_owned(),
                })
                .collect(),
        })
    }
}

/// A document version as a listing shows it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DocumentInfo {
    pub doc_id: String,
    pub version: String,
    pub title: String,
    pub source_uri: String,
    /// On the scope's date: `active`, `deprecated` or `not_yet_in_force`.
    pub status: String,
    pub effective_from: Option<chrono::NaiveDate>,
    /// The end of the version's validity, from its own `effective_to` or a confirmed
    /// supersession.
    pub valid_to: Option<chrono::NaiveDate>,
    pub chunks: usize,
}

impl Engine {
    /// The document versions the scope's principal may read (tenant and ACL; every
    /// version, in force or not), optionally of one document id, ordered by id and date.
    pub fn documents_visible(
        &self,
        scope: &Scope,
        doc_id: Option<&str>,
    ) -> Result<Vec<DocumentInfo>> {
        let view = self.store.view();
        let mut out: Vec<DocumentInfo> = (0..view.len())
            .filter(|&i| doc_id.is_none_or(|d| view.entry(i).meta.doc_id == d))
            .filter(|&i| scope.may_read(&view.entry(i).meta))
            .map(|i| {
                let e = &view.entry(i);
                let v = &view.validity(i);
                DocumentInfo {
                    doc_id: e.meta.doc_id.clone(),
                    version: e.meta.version.clone(),
                    title: e.meta.title.clone(),
                    source_uri: e.meta.source_uri.clone(),
                    status: v.status_on(scope.at()).into(),
                    effective_from: e.meta.effective_from,
                    valid_to: v.to,
                    chunks: e.seqs.len(),
                }
            })
            .collect();
        out.sort_by(|a, b| {
            (a.doc_id.as_str(), a.effective_from, a.version.as_str()).cmp(&(
                b.doc_id.as_str(),
                b.effective_from,
                b.version.as_str(),
            ))
        });
        Ok(out)
    }

    /// Whether the scope's principal may read `doc_id@version` (tenant and ACL).
    pub fn may_read_version(&self, scope: &Scope, doc_id: &str, version: &str) -> bool {
        let view = self.store.view();
        view.find(scope.tenant(), doc_id, version)
            .is_some_and(|i| scope.may_read(&view.entry(i).meta))
    }
}
