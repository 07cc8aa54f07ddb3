//! BM25 over chunk text with tantivy.
//!
//! The index stores no text (the catalog does); each tantivy document carries the
//! chunk's sequence number (`seq`) and its document-version ordinal (`dv`). The
//! admission filter is applied by a collector on `dv` while hits are collected, so a
//! top-k is always cut from admitted hits only.

use std::path::Path;

use parking_lot::Mutex;
use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::directory::MmapDirectory;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED,
};
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, Term};

use crate::{analyzer, Admit, Result, Scored};

/// One chunk to index.
#[derive(Debug, Clone)]
pub struct TextDoc {
    pub seq: u64,
    pub dv: u32,
    /// Title, section path and chunk text, as one string.
    pub text: String,
}

/// Memory budget of the tantivy writer; bounded so that ingest stays predictable.
const WRITER_HEAP: usize = 64 * 1024 * 1024;

/// A BM25 index of chunks.
pub struct Bm25Index {
    index: Index,
    reader: IndexReader,
    writer: Mutex<Option<IndexWriter>>,
    seq: Field,
    body: Field,
}

fn schema() -> (Schema, Field, Field) {
    let mut b = Schema::builder();
    let seq = b.add_u64_field("seq", INDEXED | FAST);
    b.add_u64_field("dv", FAST);
    let body = b.add_text_field(
        "body",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(analyzer::ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    (b.build(), seq, body)
}

impl Bm25Index {
    /// Opens the index in `dir`, creating it when the directory is empty.
    pub fn open(dir: &Path) -> Result<Bm25Index> {
        std::fs::create_dir_all(dir).map_err(|source| crate::Error::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let (schema, _, _) = schema();
        let mmap = MmapDirectory::open(dir).map_err(tantivy::TantivyError::from)?;
        let index = Index::open_or_create(mmap, schema)?;
        Self::wrap(index)
    }

    /// An index in memory, for tests.
    pub fn in_memory() -> Result<Bm25Index> {
        Self::wrap(Index::create_in_ram(schema().0))
    }

    fn wrap(index: Index) -> Result<Bm25Index> {
        index
            .tokenizers()
            .register(analyzer::ANALYZER, analyzer::analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let s = index.schema();
        Ok(Bm25Index {
            seq: s.get_field("seq")?,
            body: s.get_field("body")?,
            index,
            reader,
            writer: Mutex::new(None),
        })
    }

    fn with_writer<T>(&self, f: impl FnOnce(&mut IndexWriter) -> Result<T>) -> Result<T> {
        let mut guard = self.writer.lock();
        if guard.is_none() {
            *guard = Some(self.index.writer_with_num_threads(1, WRITER_HEAP)?);
        }
        f(guard.as_mut().expect("writer was just created"))
    }

    /// Stages chunks; they become searchable at the next [`Bm25Index::commit`].
    pub fn add(&self, docs: &[TextDoc]) -> Result<()> {
        let dv = self.index.schema().get_field("dv")?;
        self.with_writer(|w| {
            for d in docs {
                w.add_document(
                    doc!(self.seq => d.seq, dv => d.dv as u64, self.body => d.text.as_str()),
                )?;
            }
            Ok(())
        })
    }

    /// Stages removal of chunks by sequence number.
    pub fn delete(&self, seqs: &[u64]) -> Result<()> {
        self.with_writer(|w| {
            for &s in seqs {
                w.delete_term(Term::from_field_u64(self.seq, s));
            }
            Ok(())
        })
    }

    /// Makes staged changes durable and visible, recording `generation` (the catalog
    /// generation these changes bring the index up to) in the commit.
    pub fn commit(&self, generation: u64) -> Result<()> {
        self.with_writer(|w| {
            let mut prepared = w.prepare_commit()?;
            prepared.set_payload(&generation.to_string());
            prepared.commit()?;
            Ok(())
        })?;
        self.reader.reload()?;
        Ok(())
    }

    /// The catalog generation of the last commit (0 for a new index).
    pub fn generation(&self) -> Result<u64> {
        let meta = self.index.load_metas()?;
        Ok(meta
            .payload
            .and_then(|p| p.parse().ok())
            .unwrap_or_default())
    }

    /// Number of live chunks.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` best admitted chunks for `query`.
    pub fn search(&self, query: &str, k: usize, admit: &Admit) -> Result<Vec<Scored>> {
        let mut seen = std::collections::HashSet::new();
        let clauses: Vec<(Occur, Box<dyn Query>)> = analyzer::terms(query)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.body, &t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        if clauses.is_empty() || admit.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let top = if admit.is_everything() {
            searcher.search(&query, &TopDocs::with_limit(k).order_by_score())?
        } else {
            let admit = admit.clone();
            let collector = FilterCollector::new(
                "dv".to_string(),
                move |dv: u64| admit.contains(dv as u32),
                TopDocs::with_limit(k).order_by_score(),
            );
            searcher.search(&query, &collector)?
        };
        let mut out = Vec::with_capacity(top.len());
        let mut columns: Vec<Option<tantivy::columnar::Column<u64>>> =
            vec![None; searcher.segment_readers().len()];
        for (score, addr) in top {
            let col = &mut columns[addr.segment_ord as usize];
            if col.is_none() {
                *col = Some(
                    searcher
                        .segment_reader(addr.segment_ord)
                        .fast_fields()
                        .u64("seq")?,
                );
            }
            if let Some(seq) = col.as_ref().and_then(|c| c.first(addr.doc_id)) {
                out.push(Scored { seq, score });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<TextDoc> {
        vec![
            TextDoc {
                seq: 1,
                dv: 0,
                text: "签收后 15 天内且未拆封，可以申请无理由退货。".into(),
            },
            TextDoc {
                seq: 2,
                dv: 1,
                text: "签收后 7 天内且未拆封，可以申请无理由退货。".into(),
            },
            TextDoc {
                seq: 3,
                dv: 2,
                text: "The payment gateway depends on the risk engine.".into(),
            },
        ]
    }

    #[test]
    fn filter_applies_before_the_cut() {
        let idx = Bm25Index::in_memory().unwrap();
        idx.add(&docs()).unwrap();
        idx.commit(7).unwrap();
        assert_eq!(idx.len(), 3);
        // k = 1 with dv 0 excluded: the admitted match must still be found.
        let hits = idx
            .search("无理由退货 15 天", 1, &Admit::from_ordinals([1, 2]))
            .unwrap();
        assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), vec![2]);
        let hits = idx
            .search("payments depending", 5, &Admit::from_ordinals([0, 1, 2]))
            .unwrap();
        assert_eq!(hits[0].seq, 3);
        assert!(idx
            .search("payments", 5, &Admit::from_ordinals([0, 1]))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn delete_and_generation_persist() {
        let dir = tempfile::tempdir().unwrap();
        {
            let idx = Bm25Index::open(dir.path()).unwrap();
            idx.add(&docs()).unwrap();
            idx.commit(3).unwrap();
            idx.delete(&[3]).unwrap();
            idx.commit(4).unwrap();
        }
        let idx = Bm25Index::open(dir.path()).unwrap();
        assert_eq!(idx.generation().unwrap(), 4);
        assert_eq!(idx.len(), 2);
    }
}
