//! BM25 over chunk text with tantivy.
//!
//! The index stores no text (the catalog does); each tantivy document carries the
//! chunk's sequence number (`seq`) and its document-version ordinal (`dv`). The
//! admission filter is applied by a collector on `dv` while hits are collected, so a
//! top-k is always cut from admitted hits only.
//!
//! **Scores depend only on admitted text.** BM25's document frequencies, document
//! count and average length are computed over the admitted set ([`AdmittedStats`]),
//! not the whole index: otherwise a caller could learn, from the score of a hit they
//! may read, how often a rare term occurs in text they may not (another tenant's, or a
//! restricted document's), and deleted chunks would count too.

use std::path::Path;

use std::collections::HashMap;

use parking_lot::Mutex;
use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::directory::MmapDirectory;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED,
};
use tantivy::{
    doc, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term, TERMINATED,
};

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
    /// Document count and token total of admitted sets, by (admission set, searcher
    /// generation): both are a pass over every live chunk, the same for every query
    /// of a scope until the next commit.
    totals: Mutex<HashMap<(u64, u64), (u64, u64)>>,
}

/// Admission sets whose totals are kept before the map is emptied.
const TOTALS_CACHE: usize = 256;

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
            totals: Mutex::new(HashMap::new()),
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
        let stats = self.admitted_stats(&searcher, admit)?;
        let top = if admit.is_everything() {
            searcher.search_with_statistics_provider(
                &query,
                &TopDocs::with_limit(k).order_by_score(),
                &stats,
            )?
        } else {
            let admit = admit.clone();
            let collector = FilterCollector::new(
                "dv".to_string(),
                move |dv: u64| admit.contains(dv as u32),
                TopDocs::with_limit(k).order_by_score(),
            );
            searcher.search_with_statistics_provider(&query, &collector, &stats)?
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
        // Equal scores in sequence order, never in segment order: the segments' layout
        // is shaped by every document of the index, the reader's or not.
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
        Ok(out)
    }
}

impl Bm25Index {
    /// BM25's inverse document frequency of each analyzer term, over the chunks `admit`
    /// lets through only (so a term's weight says nothing of text outside the scope):
    /// `ln(1 + (N - n + 0.5) / (n + 0.5))`. A term no admitted chunk has gets the
    /// highest weight.
    pub fn idf(&self, terms: &[String], admit: &Admit) -> Result<Vec<f32>> {
        let searcher = self.reader.searcher();
        let stats = self.admitted_stats(&searcher, admit)?;
        let n_docs = stats.total_num_docs()? as f32;
        terms
            .iter()
            .map(|t| {
                let n = stats.doc_freq(&Term::from_field_text(self.body, t))? as f32;
                Ok((1.0 + (n_docs - n + 0.5) / (n + 0.5)).ln())
            })
            .collect()
    }

    /// The BM25 statistics of the chunks `admit` lets through, on this searcher.
    fn admitted_stats<'a>(
        &self,
        searcher: &'a Searcher,
        admit: &'a Admit,
    ) -> Result<AdmittedStats<'a>> {
        let key = (admit.id(), searcher.generation().generation_id());
        let cached = self.totals.lock().get(&key).copied();
        let (docs, tokens) = match cached {
            Some(t) => t,
            None => {
                let t = admitted_totals(searcher, self.body, admit)?;
                let mut totals = self.totals.lock();
                if totals.len() >= TOTALS_CACHE {
                    totals.clear();
                }
                totals.insert(key, t);
                t
            }
        };
        Ok(AdmittedStats {
            searcher,
            admit,
            docs,
            tokens,
        })
    }
}

/// Live admitted chunks and their tokens in `body` (from the field norms, which is
/// what BM25 itself uses for a chunk's length).
fn admitted_totals(searcher: &Searcher, body: Field, admit: &Admit) -> Result<(u64, u64)> {
    let (mut docs, mut tokens) = (0u64, 0u64);
    for seg in searcher.segment_readers() {
        let dv = seg.fast_fields().u64("dv")?;
        let norms = seg.get_fieldnorms_reader(body)?;
        for doc in seg.doc_ids_alive() {
            if dv.first(doc).is_some_and(|d| admit.contains(d as u32)) {
                docs += 1;
                tokens += u64::from(norms.fieldnorm(doc));
            }
        }
    }
    Ok((docs, tokens))
}

/// BM25 statistics over the admitted set only (see the module docs).
pub struct AdmittedStats<'a> {
    searcher: &'a Searcher,
    admit: &'a Admit,
    docs: u64,
    tokens: u64,
}

impl Bm25StatisticsProvider for AdmittedStats<'_> {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        // One text field is scored; at least 1 so an average length is defined.
        Ok(self.tokens.max(1))
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for seg in self.searcher.segment_readers() {
            let index = seg.inverted_index(term.field())?;
            let Some(mut postings) = index.read_postings(term, IndexRecordOption::Basic)? else {
                continue;
            };
            let dv = seg.fast_fields().u64("dv")?;
            let alive = seg.alive_bitset();
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if alive.is_none_or(|a| a.is_alive(doc))
                    && dv.first(doc).is_some_and(|d| self.admit.contains(d as u32))
                {
                    n += 1;
                }
                doc = postings.advance();
            }
        }
        // Never more than the document count (BM25's idf requires it).
        Ok(n.min(self.docs.max(1)))
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

    /// Scores must not reveal text outside the admitted set: the same admitted chunk
    /// scores the same whether or not unreadable chunks with the query's terms exist.
    #[test]
    fn scores_depend_only_on_admitted_text() {
        let mine = TextDoc {
            seq: 1,
            dv: 0,
            text: "quarterly settlement report for the zephyr account".into(),
        };
        let filler = |seq: u64, dv: u32| TextDoc {
            seq,
            dv,
            text: format!("ordinary filler text number {seq} about invoices"),
        };
        let alone = Bm25Index::in_memory().unwrap();
        let mut docs = vec![mine.clone(), filler(2, 0), filler(3, 0)];
        alone.add(&docs).unwrap();
        alone.commit(1).unwrap();
        // Same admitted chunks, plus many unadmitted ones full of the rare term.
        let crowded = Bm25Index::in_memory().unwrap();
        for i in 0..50 {
            docs.push(TextDoc {
                seq: 100 + i,
                dv: 1,
                text: "zephyr zephyr secret merger zephyr".into(),
            });
        }
        crowded.add(&docs).unwrap();
        crowded.commit(1).unwrap();
        let admit = Admit::from_ordinals([0]);
        let a = alone.search("zephyr settlement", 3, &admit).unwrap();
        let b = crowded.search("zephyr settlement", 3, &admit).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a, b, "unadmitted text changed an admitted score");
        // Deleted chunks do not count either.
        crowded.delete(&(100..150).collect::<Vec<_>>()).unwrap();
        crowded.commit(2).unwrap();
        let everything = Admit::from_ordinals([0]).covering_everything(true);
        let c = crowded.search("zephyr settlement", 3, &everything).unwrap();
        assert_eq!(a, c, "deleted text changed a score");
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
