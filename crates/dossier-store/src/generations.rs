//! Index generations: BM25 + HNSW built from the catalog, one of them active.
//!
//! Layout under `indexes/`: `ACTIVE.json` names the active generation and the ones
//! before it (for rollback); each generation directory holds `bm25/`, `vectors.hnsw`
//! (with `vectors.hnsw.log`, the deltas appended since that base) and `gen.json`. With a
//! shared store the vectors live in the database and a generation is BM25 only. A draft is built beside the active generation while it serves, then
//! promoted by rewriting `ACTIVE.json` atomically.

use std::path::{Path, PathBuf};

use dossier_index::bm25::{Bm25Index, TextDoc};
use dossier_index::vector::{HnswIndex, HnswParams, LiveIndex};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::catalog::{CatalogBackend, ChangeSet, FoldStats, StoredChunk};
use crate::{io_err, Error, Result};

/// `ACTIVE.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ActivePointer {
    pub active: Option<String>,
    /// Earlier active generations, most recent last.
    pub previous: Vec<String>,
    /// Generations rolled back from: kept for inspection, never promoted implicitly.
    #[serde(default)]
    pub retired: Vec<String>,
}

/// `gen.json` of one generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenMeta {
    /// Catalog generation every chunk of which is in the saved HNSW (BM25 keeps its own
    /// in tantivy). Chunks committed later are in memory, in the index's tail, until
    /// linked and saved; after a restart the change log replays them.
    pub vectors_generation: u64,
    /// Catalog generation both indexes have applied, the vector tail included: rewritten
    /// by every commit (a small file), so operators and tests see commits land.
    #[serde(default)]
    pub applied_generation: u64,
    pub built_at: String,
    pub dim: usize,
}

/// What `dossier index list` shows of a generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenerationInfo {
    pub name: String,
    pub status: String,
    pub catalog_generation: u64,
    pub chunks: u64,
    pub vectors: usize,
    pub built_at: String,
}

/// Where the time of bringing a generation up to date went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ApplyStats {
    /// Reading the added chunks (and vectors) from the catalog.
    pub read_ms: f64,
    /// BM25: deletes, adds and the commit.
    pub text_ms: f64,
    /// Vectors: appending to the index's tail (linking them into the HNSW is
    /// [`Generation::link_vectors`], outside the commit).
    pub vectors_ms: f64,
}

/// An opened generation.
pub struct Generation {
    pub name: String,
    pub dir: PathBuf,
    pub bm25: Bm25Index,
    /// The HNSW and the tail of vectors committed since it last grew.
    pub vectors: RwLock<LiveIndex>,
    /// Held by whoever links the tail and saves: one linker at a time.
    linking: parking_lot::Mutex<()>,
    meta: RwLock<GenMeta>,
}

/// The text BM25 sees for a chunk: its title and section path matter for retrieval.
pub fn index_text(c: &StoredChunk) -> String {
    let ch = &c.chunk;
    let mut s = String::with_capacity(ch.title.len() + ch.text.len() + 16);
    s.push_str(&ch.title);
    s.push('\n');
    // The innermost heading is already the first line of the chunk text.
    if ch.section.len() > 1 {
        s.push_str(&ch.section[..ch.section.len() - 1].join(" / "));
        s.push('\n');
    }
    s.push_str(&ch.text);
    s
}

fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?).map_err(io_err(&tmp))?;
    let f = std::fs::File::open(&tmp).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

pub fn read_pointer(indexes: &Path) -> Result<ActivePointer> {
    let p = indexes.join("ACTIVE.json");
    match std::fs::read(&p) {
        Ok(b) => Ok(serde_json::from_slice(&b)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ActivePointer::default()),
        Err(e) => Err(io_err(&p)(e)),
    }
}

pub fn write_pointer(indexes: &Path, ptr: &ActivePointer) -> Result<()> {
    write_json_atomic(&indexes.join("ACTIVE.json"), ptr)
}

impl Generation {
    /// Opens (or creates empty) the generation in `dir`.
    pub fn open(name: &str, dir: &Path, dim: usize) -> Result<Generation> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let bm25 = Bm25Index::open(&dir.join("bm25"))?;
        let meta_path = dir.join("gen.json");
        let meta: GenMeta = match std::fs::read(&meta_path) {
            Ok(b) => serde_json::from_slice(&b)?,
            Err(_) => GenMeta {
                vectors_generation: 0,
                applied_generation: 0,
                built_at: chrono::Utc::now().to_rfc3339(),
                dim,
            },
        };
        let hnsw_path = dir.join("vectors.hnsw");
        let vectors = if meta.vectors_generation > 0 && hnsw_path.exists() {
            HnswIndex::load(&hnsw_path)?
        } else {
            HnswIndex::new(dim, HnswParams::default())
        };
        Ok(Generation {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            bm25,
            vectors: RwLock::new(LiveIndex::new(vectors, meta.vectors_generation)),
            linking: parking_lot::Mutex::new(()),
            meta: RwLock::new(meta),
        })
    }

    pub fn meta(&self) -> GenMeta {
        self.meta.read().clone()
    }

    /// Catalog generation both indexes reflect (in memory: the vector tail counts).
    pub fn generation(&self) -> Result<u64> {
        Ok(self.bm25.generation()?.min(self.vectors.read().through()))
    }

    /// Links up to `max_rows` vectors of the tail into the HNSW, then saves it (a delta
    /// appended to its log) and records how far the saved file reaches. Planning runs
    /// under shared access, so searches and commits wait only for each batch's lists
    /// to be written. Returns at once, `busy`, when another thread is linking.
    pub fn link_vectors(&self, max_rows: usize) -> Result<FoldStats> {
        let t = std::time::Instant::now();
        let Some(_linking) = self.linking.try_lock() else {
            return Ok(FoldStats {
                busy: true,
                pending: self.vectors.read().tail_len() as u64,
                ..FoldStats::default()
            });
        };
        let mut folded = 0usize;
        while folded < max_rows {
            let Some(plan) = self.vectors.read().plan(max_rows - folded) else {
                break;
            };
            folded += self.vectors.write().apply(plan)?;
        }
        let (saved_through, pending) = {
            let v = self.vectors.read();
            if folded > 0 {
                v.graph().save(&self.dir.join("vectors.hnsw"))?;
            }
            (v.linked_through(), v.tail_len() as u64)
        };
        if saved_through > self.meta.read().vectors_generation {
            let mut meta = self.meta.write();
            meta.vectors_generation = saved_through;
            write_json_atomic(&self.dir.join("gen.json"), &*meta)?;
        }
        Ok(FoldStats {
            folded: folded as u64,
            pending,
            rebuilt: false,
            busy: false,
            ms: t.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// Applies change sets (in order) to whichever index is behind; says where the time
    /// went.
    pub fn apply(&self, catalog: &dyn CatalogBackend, changes: &[ChangeSet]) -> Result<ApplyStats> {
        let bm25_gen = self.bm25.generation()?;
        let vec_gen = self.vectors.read().through();
        let mut stats = ApplyStats::default();
        let Some(last) = changes.last().map(|c| c.generation) else {
            return Ok(stats);
        };
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1000.0;
        // A catalog that searches vectors itself (pgvector) needs no HNSW here.
        let own_vectors = !catalog.searches_vectors();
        let mut texts = Vec::new();
        for ch in changes {
            let (do_text, do_vec) = (
                ch.generation > bm25_gen,
                ch.generation > vec_gen && own_vectors,
            );
            if !do_text && !do_vec {
                continue;
            }
            if do_text {
                self.bm25.delete(&ch.removed)?;
            }
            let mut pending = Vec::new();
            let t = std::time::Instant::now();
            catalog.for_each_chunk(Some(&ch.added), &mut |c, v| {
                if do_text {
                    texts.push(TextDoc {
                        seq: c.seq,
                        dv: c.dv,
                        text: index_text(&c),
                    });
                }
                if do_vec {
                    pending.push((c.seq, c.dv, v));
                }
                Ok(())
            })?;
            stats.read_ms += ms(t);
            let t = std::time::Instant::now();
            if do_vec {
                self.vectors.write().append(ch.generation, pending)?;
            }
            stats.vectors_ms += ms(t);
            let t = std::time::Instant::now();
            if !texts.is_empty() {
                self.bm25.add(&texts)?;
                texts.clear();
            }
            stats.text_ms += ms(t);
        }
        let t = std::time::Instant::now();
        if last > bm25_gen {
            self.bm25.commit(last)?;
        }
        stats.text_ms += ms(t);
        let t = std::time::Instant::now();
        if last > vec_gen {
            self.vectors.write().mark(last);
            // With vectors in the database there is nothing to link: the generation
            // is durable as soon as BM25 is. Otherwise the linker records it once the
            // vectors are in the saved HNSW.
            let mut meta = self.meta.write();
            if !own_vectors {
                meta.vectors_generation = last;
            }
            meta.applied_generation = meta.applied_generation.max(last);
            write_json_atomic(&self.dir.join("gen.json"), &*meta)?;
        }
        stats.vectors_ms += ms(t);
        Ok(stats)
    }

    /// Brings the generation up to the catalog: replays the change log, or reports
    /// that it cannot (the log does not reach back far enough).
    pub fn catch_up(&self, catalog: &dyn CatalogBackend) -> Result<bool> {
        let from = self.generation()?;
        match catalog.changes_since(from)? {
            Some(changes) => {
                self.apply(catalog, &changes)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Fills an empty generation from a catalog snapshot (a full rebuild).
    pub fn build_from(
        &self,
        catalog: &dyn CatalogBackend,
        mut progress: impl FnMut(u64),
    ) -> Result<()> {
        if !self.bm25.is_empty() || !self.vectors.read().is_empty() {
            return Err(Error::Invalid(format!(
                "generation {} is not empty; build into a new one",
                self.name
            )));
        }
        let own_vectors = !catalog.searches_vectors();
        let mut texts = Vec::with_capacity(4096);
        let mut pending = Vec::with_capacity(4096);
        let mut vectors = HnswIndex::new(self.vectors.read().graph().dim(), HnswParams::default());
        let mut n = 0u64;
        let generation = catalog.for_each_chunk(None, &mut |c, v| {
            texts.push(TextDoc {
                seq: c.seq,
                dv: c.dv,
                text: index_text(&c),
            });
            if own_vectors {
                pending.push((c.seq, c.dv, v));
            }
            if texts.len() == 4096 {
                self.bm25.add(&texts)?;
                vectors.add_batch(&pending)?;
                texts.clear();
                pending.clear();
            }
            n += 1;
            progress(n);
            Ok(())
        })?;
        vectors.add_batch(&pending)?;
        self.bm25.add(&texts)?;
        self.bm25.commit(generation)?;
        if own_vectors {
            vectors.save(&self.dir.join("vectors.hnsw"))?;
        }
        *self.vectors.write() = LiveIndex::new(vectors, generation);
        let mut meta = self.meta.write();
        meta.vectors_generation = generation;
        meta.applied_generation = generation;
        meta.built_at = chrono::Utc::now().to_rfc3339();
        write_json_atomic(&self.dir.join("gen.json"), &*meta)?;
        Ok(())
    }

    pub fn info(&self, status: &str) -> Result<GenerationInfo> {
        let meta = self.meta();
        Ok(GenerationInfo {
            name: self.name.clone(),
            status: status.to_string(),
            catalog_generation: self.generation()?,
            chunks: self.bm25.len(),
            vectors: self.vectors.read().len(),
            built_at: meta.built_at,
        })
    }
}
