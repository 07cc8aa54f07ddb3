//! `dossier migrate --to DEST`: copies a whole store to another location — embedded
//! directory to PostgreSQL and back, or directory to directory, database to database —
//! and proves the copy by comparing both sides afterwards.
//!
//! Only the catalog travels: it is the source of truth, and everything else is derived
//! from it (index generations are rebuilt from the destination's change log; graphs,
//! reports and caches are rebuilt on use). Document-version ordinals and chunk sequence
//! numbers are the destination's own — nothing outside a catalog refers to them — so the
//! copy and the check speak of documents by tenant, id and version, and of chunks by
//! their document and position.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use dossier_engine::Progress;
use dossier_store::catalog::{CommitBatch, NewDocument};
use dossier_store::postgres::PgCatalog;
use dossier_store::{CatalogBackend, DocEntry, Manifest, Store, StoreLocation, FORMAT_VERSION};
use serde::Serialize;
use serde_json::Value;

#[derive(clap::Args)]
pub struct MigrateArgs {
    /// Where to copy the store (the global --store) to: a directory, or a
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DB` database. It must not hold a store yet
    /// (a directory must be absent or empty); it is created with the source's embedder.
    #[arg(long, value_name = "DEST")]
    to: String,
    /// With a database destination: where this process builds the destination's lexical
    /// index (default: under the user's cache, named after the database). The global
    /// --index-dir is not used for it: that is the source's, and two stores must never
    /// share an index directory.
    #[arg(long, value_name = "DIR")]
    to_index_dir: Option<PathBuf>,
}

/// Most document versions one destination commit carries.
const DOC_BATCH: usize = 500;
/// Most chunks one destination commit carries (a few long documents can outweigh
/// hundreds of short ones), so that memory stays bounded whatever the store's size.
const CHUNK_BATCH: usize = 5_000;
/// Most record rows, principals, decisions or candidates one commit carries. A record
/// table is never split (a table in a commit replaces its stored rows), so one large
/// table still goes whole.
const ROW_BATCH: usize = 10_000;

/// Exit status when the copy finished but did not verify: the two sides differ, or the
/// destination's index does not reflect its catalog.
const EXIT_DIFFERS: u8 = 3;

/// The kinds the check compares, in report order.
const KINDS: [&str; 7] = [
    "document_versions",
    "chunks",
    "record_tables",
    "records",
    "principals",
    "decisions",
    "model_candidates",
];

/// One kind of catalog content on both sides.
#[derive(Debug, Serialize)]
struct KindCheck {
    kind: &'static str,
    source: u64,
    destination: u64,
    source_digest: String,
    destination_digest: String,
    equal: bool,
}

/// The destination's active index generation as this process left it.
#[derive(Debug, Serialize)]
struct IndexCheck {
    dir: PathBuf,
    generation: u64,
    chunks: u64,
    /// HNSW vectors: a database destination searches vectors itself and keeps none.
    vectors: usize,
    ok: bool,
}

/// What one migration did, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    from: String,
    to: String,
    from_backend: &'static str,
    to_backend: &'static str,
    embedder_spec: String,
    embedder_model: String,
    dim: usize,
    /// Destination commits written.
    commits: u64,
    /// True when every kind is equal on both sides and the index reflects the catalog.
    verified: bool,
    /// The kinds that differ, and `index` when the index does not reflect the catalog
    /// (empty when verified).
    differs: Vec<&'static str>,
    kinds: Vec<KindCheck>,
    /// The destination's active index after the copy, and whether it reflects the
    /// destination's catalog (every chunk, the last generation).
    index: IndexCheck,
    /// The source's catalog generation before the copy and at the check: when they
    /// differ, someone wrote to the source meanwhile.
    source_generation: [u64; 2],
    copy_s: f64,
    index_s: f64,
    verify_s: f64,
    total_s: f64,
}

fn backend(l: &StoreLocation) -> &'static str {
    if l.is_shared() {
        "postgres"
    } else {
        "embedded"
    }
}

/// `dossier migrate`: copy, index, verify, report.
pub fn run(source: &StoreLocation, args: &MigrateArgs, json: bool) -> Result<ExitCode> {
    let started = Instant::now();
    let dest = StoreLocation::parse(&args.to).with_index_dir(args.to_index_dir.clone());
    let (from, to) = (source.shown(), dest.shown());

    let (manifest, src) = open_source(source)?;
    check_destination(&dest)?;
    let generation_before = src.generation()?;

    // The destination is bound to the source's embedding model, so its vectors stay
    // meaningful next to the query vectors later runs compute.
    let store = Store::open(
        dest.clone(),
        &manifest.embedder_spec,
        &manifest.embedder_model,
        manifest.dim,
    )
    .with_context(|| format!("creating store {to}"))?;
    // Another process may have created a store there since the check above.
    if store.catalog().generation()? != 0 {
        bail!("{to} received data while the migration was starting; nothing was copied");
    }
    let left = || {
        format!(
            "copying {from} to {to}; {to} is left incomplete: {}",
            match &dest {
                StoreLocation::Dir(_) => "remove the directory before trying again",
                StoreLocation::Postgres { .. } =>
                    "drop and recreate the database before trying again",
            }
        )
    };

    let t = Instant::now();
    let commits = copy(
        src.as_ref(),
        store.catalog(),
        manifest.dim,
        &mut crate::Bar::new(),
    )
    .with_context(left)?;
    let copy_s = t.elapsed().as_secs_f64();

    // Build the destination's lexical (and, embedded, vector) index now rather than on
    // its first use, so the store is ready to serve when the command returns.
    eprintln!("migrate: indexing {to}");
    let t = Instant::now();
    store.refresh().with_context(left)?;
    let index_s = t.elapsed().as_secs_f64();
    let index = check_index(&store)?;

    eprintln!("migrate: verifying {to} against {from}");
    let t = Instant::now();
    let kinds = compare(
        &digests(src.as_ref()).with_context(|| format!("reading {from} back"))?,
        &digests(store.catalog()).with_context(|| format!("reading {to} back"))?,
    );
    let generation_after = src.generation()?;
    let verify_s = t.elapsed().as_secs_f64();

    let mut differs: Vec<&'static str> =
        kinds.iter().filter(|k| !k.equal).map(|k| k.kind).collect();
    if !index.ok {
        differs.push("index");
    }
    let report = Report {
        from,
        to,
        from_backend: backend(source),
        to_backend: backend(&dest),
        embedder_spec: manifest.embedder_spec.clone(),
        embedder_model: manifest.embedder_model.clone(),
        dim: manifest.dim,
        commits,
        verified: differs.is_empty(),
        differs,
        kinds,
        index,
        source_generation: [generation_before, generation_after],
        copy_s,
        index_s,
        verify_s,
        total_s: started.elapsed().as_secs_f64(),
    };
    if json {
        crate::print_json(&report)?;
    } else {
        print_text(&report);
    }
    if report.verified {
        return Ok(ExitCode::SUCCESS);
    }
    let contents: Vec<&str> = report
        .kinds
        .iter()
        .filter(|k| !k.equal)
        .map(|k| k.kind)
        .collect();
    if !contents.is_empty() {
        let why = if generation_before != generation_after {
            format!(
                " (the source was written during the migration: generation {generation_before} → {generation_after})"
            )
        } else {
            String::new()
        };
        eprintln!(
            "error: {} differ between {} and {}{why}; {} is left as it is for inspection",
            contents.join(", "),
            report.from,
            report.to,
            report.to
        );
    }
    if !report.index.ok {
        let i = &report.index;
        eprintln!(
            "error: the index at {} does not reflect {} (generation {} with {} chunks; the catalog is at generation {} with {} chunks), most likely because another store left it there; the copy itself is complete. Remove {} (derived data, rebuilt on next use)",
            i.dir.display(),
            report.to,
            i.generation,
            i.chunks,
            store.catalog().generation()?,
            store.catalog().chunk_count()?,
            store.dir().join("indexes").display()
        );
    }
    Ok(ExitCode::from(EXIT_DIFFERS))
}

/// Whether the destination's active index reflects its catalog: the last generation and
/// every chunk (and, when it keeps them, every vector). An index directory that another
/// store left behind — a database dropped and recreated under the same URL, or an index
/// directory named twice — believes itself further along than the new catalog, and
/// replaying the change log into it changes nothing; this is where that shows.
fn check_index(store: &Store) -> Result<IndexCheck> {
    let active = store.active();
    let info = active.info("active")?;
    let catalog = store.catalog();
    let chunks = catalog.chunk_count()?;
    let vectors_ok = catalog.searches_vectors() || info.vectors as u64 == chunks;
    Ok(IndexCheck {
        dir: active.dir.clone(),
        generation: info.catalog_generation,
        chunks: info.chunks,
        vectors: info.vectors,
        ok: info.catalog_generation == catalog.generation()? && info.chunks == chunks && vectors_ok,
    })
}

fn print_text(r: &Report) {
    println!(
        "migrated {} ({}) to {} ({}): embedder {} (dim {}), {} commits",
        r.from, r.from_backend, r.to, r.to_backend, r.embedder_model, r.dim, r.commits
    );
    println!(
        "{:<18} {:>10} {:>12}  {:<16}  equal",
        "kind", "source", "destination", "digest"
    );
    for k in &r.kinds {
        println!(
            "{:<18} {:>10} {:>12}  {:<16}  {}",
            k.kind,
            k.source,
            k.destination,
            &k.source_digest[..16],
            if k.equal { "yes" } else { "NO" }
        );
    }
    println!(
        "index {} at generation {}: {} chunks, {} vectors{}",
        r.index.dir.display(),
        r.index.generation,
        r.index.chunks,
        r.index.vectors,
        if r.index.ok {
            ""
        } else {
            " — does NOT reflect the catalog"
        }
    );
    println!(
        "copy {:.2} s, index {:.2} s, verify {:.2} s, total {:.2} s",
        r.copy_s, r.index_s, r.verify_s, r.total_s
    );
}

/// The source's manifest and catalog. Only the catalog is opened — not a [`Store`] —
/// so that reading a shared database does not build a lexical index nobody will use,
/// and reading a directory leaves its index generations untouched.
fn open_source(source: &StoreLocation) -> Result<(Manifest, Arc<dyn CatalogBackend>)> {
    let shown = source.shown();
    let Some((m, catalog)) =
        Store::open_catalog(source).with_context(|| format!("opening store {shown}"))?
    else {
        bail!("no Dossier store at {shown} to migrate (pass the source as --store)");
    };
    if m.format_version != FORMAT_VERSION {
        bail!(
            "store {shown} has format version {}, this build reads {FORMAT_VERSION}",
            m.format_version
        );
    }
    Ok((m, catalog))
}

/// Refuses a destination that already holds a store (or, for a directory, anything at
/// all): a migration only ever creates, so it can never mix two stores or overwrite one.
fn check_destination(dest: &StoreLocation) -> Result<()> {
    let shown = dest.shown();
    let refuse = || {
        anyhow!(
            "{shown} already holds a Dossier store; migrate only creates new stores — choose another destination or remove that store first"
        )
    };
    match dest {
        StoreLocation::Dir(dir) => {
            if Store::read_manifest(dir)
                .with_context(|| format!("checking destination {shown}"))?
                .is_some()
            {
                return Err(refuse());
            }
            if dir.exists() {
                let mut entries = std::fs::read_dir(dir)
                    .with_context(|| format!("checking destination {shown}"))?;
                if entries.next().is_some() {
                    bail!(
                        "destination {shown} is not empty; migrate into a new or empty directory"
                    );
                }
            }
        }
        StoreLocation::Postgres { url, .. } => {
            let pg = PgCatalog::connect(url)
                .with_context(|| format!("connecting to destination {shown}"))?;
            if pg.manifest()?.is_some() || pg.generation()? != 0 {
                return Err(refuse());
            }
        }
    }
    Ok(())
}

/// Copies every document version with its chunks and vectors, then record tables,
/// principals, review decisions and model candidates, from `src` into the empty catalog
/// `dst`. Returns the number of commits written.
///
/// Documents go in the order of their source ordinals, so the destination numbers them
/// in the same relative order: anything that breaks ties by ordinal (ranking, the HNSW
/// build) then behaves as it did on the source.
fn copy(
    src: &dyn CatalogBackend,
    dst: &dyn CatalogBackend,
    dim: usize,
    progress: &mut dyn Progress,
) -> Result<u64> {
    let mut docs = src.documents()?;
    docs.sort_by_key(|d| d.dv);
    let chunks: usize = docs.iter().map(|d| d.seqs.len()).sum();
    eprintln!(
        "migrate: copying {} document versions ({chunks} chunks)",
        docs.len()
    );
    let mut commits = 0u64;
    progress.start("copying", docs.len() as u64);
    let mut rest = &docs[..];
    while !rest.is_empty() {
        let (group, next) = rest.split_at(batch_len(rest));
        rest = next;
        let documents = read_documents(src, group, dim)?;
        dst.commit(CommitBatch {
            documents,
            ..CommitBatch::default()
        })?;
        commits += 1;
        progress.advance(group.len() as u64);
    }
    progress.finish();
    drop(docs);

    let mut tables = src.record_tables()?;
    while !tables.is_empty() {
        let mut rows = 0;
        let n = tables
            .iter()
            .take_while(|(_, r)| {
                rows += r.len();
                rows <= ROW_BATCH
            })
            .count()
            .max(1);
        let rest = tables.split_off(n);
        dst.commit(CommitBatch {
            tables: std::mem::replace(&mut tables, rest),
            ..CommitBatch::default()
        })?;
        commits += 1;
    }
    for part in src.principals()?.chunks(ROW_BATCH) {
        dst.commit(CommitBatch {
            // The one principal rule, as the operator: ids a store took before the
            // rule tightened (a tenant that is a path) stop the migration by name.
            principals: dossier_store::principals::by_operator(part.to_vec())
                .map_err(|e| anyhow::anyhow!("principals: {e}"))?,
            ..CommitBatch::default()
        })?;
        commits += 1;
    }
    for part in src.decisions()?.chunks(ROW_BATCH) {
        dst.commit(CommitBatch {
            decisions: part.to_vec(),
            ..CommitBatch::default()
        })?;
        commits += 1;
    }
    for part in src.model_candidates()?.chunks(ROW_BATCH) {
        dst.commit(CommitBatch {
            candidates: part.to_vec(),
            ..CommitBatch::default()
        })?;
        commits += 1;
    }
    Ok(commits)
}

/// How many of `docs` the next commit takes: up to [`DOC_BATCH`] documents and
/// [`CHUNK_BATCH`] chunks, and at least one document however many chunks it has.
fn batch_len(docs: &[DocEntry]) -> usize {
    let mut chunks = 0;
    let n = docs
        .iter()
        .take(DOC_BATCH)
        .take_while(|d| {
            chunks += d.seqs.len();
            chunks <= CHUNK_BATCH
        })
        .count();
    n.max(1).min(docs.len())
}

/// The chunks and vectors of `group`, read in one pass, as documents to commit.
fn read_documents(
    src: &dyn CatalogBackend,
    group: &[DocEntry],
    dim: usize,
) -> Result<Vec<NewDocument>> {
    let seqs: Vec<u64> = group.iter().flat_map(|d| d.seqs.iter().copied()).collect();
    let mut found = HashMap::with_capacity(seqs.len());
    src.for_each_chunk(Some(&seqs), &mut |c, v| {
        found.insert(c.seq, (c.chunk, v));
        Ok(())
    })?;
    let mut out = Vec::with_capacity(group.len());
    for d in group {
        let m = &d.meta;
        let mut chunks = Vec::with_capacity(d.seqs.len());
        let mut vectors = Vec::with_capacity(d.seqs.len());
        for s in &d.seqs {
            // Documents and chunks are read in separate snapshots: a chunk missing here
            // was removed by a writer after the document list was taken.
            let (c, v) = found.remove(s).ok_or_else(|| {
                anyhow!(
                    "chunk {s} of {}@{} (tenant {}) is gone from the source: was it written to during the migration?",
                    m.doc_id,
                    m.version,
                    m.tenant
                )
            })?;
            // Checked here so that a damaged source fails with its document named,
            // not deep inside the destination's insert.
            if v.len() != dim {
                bail!(
                    "chunk {} of {}@{} (tenant {}) has a vector of dimension {}, the store's is {dim}",
                    c.chunk_id,
                    m.doc_id,
                    m.version,
                    m.tenant,
                    v.len()
                );
            }
            chunks.push(c);
            vectors.push(v);
        }
        out.push(NewDocument {
            meta: m.clone(),
            chunks,
            vectors,
        });
    }
    Ok(out)
}

/// An order-independent digest of a multiset of items: the sum, modulo 2^256, of each
/// item's SHA-256. Adding is commutative, so both sides can be read in whatever order
/// their backend returns rows, in one streaming pass, without sorting or holding the
/// items; equal items counted twice still count twice. (A sum of hashes is no defence
/// against someone crafting collisions, which is not what this check is for: it
/// catches lost, duplicated or altered rows.)
#[derive(Debug, Clone, Default, PartialEq)]
struct Multiset {
    count: u64,
    /// Little-endian 64-bit limbs.
    sum: [u64; 4],
}

impl Multiset {
    fn add(&mut self, item: &str) {
        let h = sha256(item);
        let mut carry = false;
        for (i, limb) in self.sum.iter_mut().enumerate() {
            let x = u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            let (s1, c1) = limb.overflowing_add(x);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *limb = s2;
            carry = c1 || c2;
        }
        self.count += 1;
    }

    /// The digest shown in reports: the kind and count are hashed in, so two kinds or
    /// an empty and a non-empty set never share a digest.
    fn digest(&self, kind: &str) -> String {
        let mut s = format!("{kind}\n{}\n", self.count);
        for limb in self.sum.iter().rev() {
            let _ = write!(s, "{limb:016x}");
        }
        dossier_server::hash_key(&s)
    }
}

/// SHA-256 of `s`. Taken from the API-key hasher (a plain SHA-256 with hex output) because
/// this crate has no hash function of its own to depend on.
fn sha256(s: &str) -> [u8; 32] {
    let hex = dossier_server::hash_key(s);
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).expect("hex digest");
    }
    out
}

/// `v` as JSON with every object's keys sorted: the same value always gives the same
/// text, whichever backend it was read from and in whatever key order it was stored.
fn canonical<T: Serialize>(v: &T) -> Result<String> {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(&serde_json::to_value(v)?, &mut out);
    Ok(out)
}

/// Field separator inside a digested item (the catalog's own key separator).
const SEP: char = '\u{1f}';

/// Count and digest of every kind in `catalog`, in [`KINDS`] order.
///
/// Documents are digested with their metadata and chunk count; chunks with the
/// document they belong to, their position in it, the chunk itself and the exact bits of
/// their vector — never with ordinals or sequence numbers, which each catalog assigns.
fn digests(catalog: &dyn CatalogBackend) -> Result<Vec<(u64, String)>> {
    let mut sets: Vec<Multiset> = vec![Multiset::default(); KINDS.len()];
    let docs = catalog.documents()?;
    let mut by_dv: HashMap<u32, usize> = HashMap::with_capacity(docs.len());
    for (i, d) in docs.iter().enumerate() {
        by_dv.insert(d.dv, i);
        sets[0].add(&format!("{}{SEP}{}", canonical(&d.meta)?, d.seqs.len()));
    }
    let mut item = String::new();
    catalog.for_each_chunk(None, &mut |c, v| {
        item.clear();
        match by_dv.get(&c.dv).map(|&i| &docs[i]) {
            Some(d) => {
                // Sequence numbers grow within a document, so a binary search finds the
                // position; the linear scan is only for a catalog that broke that.
                let at = d
                    .seqs
                    .binary_search(&c.seq)
                    .ok()
                    .or_else(|| d.seqs.iter().position(|&s| s == c.seq));
                let m = &d.meta;
                let _ = write!(item, "{}{SEP}{}{SEP}{}{SEP}", m.tenant, m.doc_id, m.version);
                match at {
                    Some(p) => {
                        let _ = write!(item, "{p}");
                    }
                    None => item.push('?'),
                }
            }
            // A chunk no document lists: digested apart, so a copy (which only
            // copies listed chunks) shows up as different rather than equal.
            None => item.push_str("(no document)"),
        }
        item.push(SEP);
        item.push_str(&canonical(&c.chunk).map_err(|e| {
            dossier_store::Error::Invalid(format!("chunk {}: {e}", c.chunk.chunk_id))
        })?);
        item.push(SEP);
        for x in &v {
            let _ = write!(item, "{:08x}", x.to_bits());
        }
        sets[1].add(&item);
        Ok(())
    })?;
    for (schema, rows) in catalog.record_tables()? {
        sets[2].add(&canonical(&schema)?);
        for r in &rows {
            sets[3].add(&format!(
                "{}{SEP}{}{SEP}{}",
                schema.tenant,
                schema.table,
                canonical(r)?
            ));
        }
    }
    for p in catalog.principals()? {
        sets[4].add(&canonical(&p)?);
    }
    for d in catalog.decisions()? {
        sets[5].add(&canonical(&d)?);
    }
    for c in catalog.model_candidates()? {
        sets[6].add(&canonical(&c)?);
    }
    Ok(sets
        .iter()
        .zip(KINDS)
        .map(|(s, k)| (s.count, s.digest(k)))
        .collect())
}

/// Both sides' counts and digests, kind by kind.
fn compare(src: &[(u64, String)], dst: &[(u64, String)]) -> Vec<KindCheck> {
    KINDS
        .iter()
        .zip(src.iter().zip(dst))
        .map(|(&kind, ((sn, sd), (dn, dd)))| KindCheck {
            kind,
            source: *sn,
            destination: *dn,
            source_digest: sd.clone(),
            destination_digest: dd.clone(),
            equal: sn == dn && sd == dd,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dossier_core::review::{Decision, ModelCandidate, Subject, Verdict};
    use dossier_core::{Chunk, DocKind, DocumentVersion, Principal, RecordRow, RecordSchema};
    use dossier_store::principals::by_operator;
    use dossier_store::Catalog;

    struct Quiet;
    impl Progress for Quiet {
        fn start(&mut self, _: &str, _: u64) {}
        fn advance(&mut self, _: u64) {}
        fn finish(&mut self) {}
    }

    const DIM: usize = 4;

    fn doc(tenant: &str, id: &str, version: &str, chunks: usize) -> NewDocument {
        let meta = DocumentVersion {
            doc_id: id.into(),
            version: version.into(),
            title: format!("{id} title"),
            tenant: tenant.into(),
            kb: None,
            acl: Some(vec!["g".into()]),
            effective_from: None,
            effective_to: None,
            supersedes: None,
            supersedes_evidence: None,
            depends_on: vec![],
            source_uri: format!("file://{id}"),
            kind: DocKind::Markdown,
            digest: format!("d-{id}-{version}"),
        };
        let chunks: Vec<Chunk> = (0..chunks)
            .map(|i| Chunk {
                chunk_id: Chunk::make_id(id, version, i as u32),
                doc_id: id.into(),
                version: version.into(),
                ordinal: i as u32,
                section: vec![format!("§{i}")],
                text: format!("text {i} of {id}"),
                byte_start: i * 10,
                byte_end: i * 10 + 9,
                source_uri: meta.source_uri.clone(),
                tenant: tenant.into(),
                kb: None,
                acl: meta.acl.clone(),
                title: meta.title.clone(),
            })
            .collect();
        let vectors = (0..chunks.len())
            .map(|i| vec![i as f32, 0.5, -1.0, id.len() as f32])
            .collect();
        NewDocument {
            meta,
            chunks,
            vectors,
        }
    }

    fn rest() -> CommitBatch {
        let mut fields = serde_json::Map::new();
        fields.insert("z".into(), Value::from(1));
        fields.insert("a".into(), Value::from("x"));
        let subject = Subject::Relation {
            from: "a".into(),
            relation: "uses".into(),
            to: "b".into(),
            chunk_id: "a@1#0".into(),
        };
        CommitBatch {
            tables: vec![(
                RecordSchema {
                    table: "orders".into(),
                    tenant: "t".into(),
                    key: "id".into(),
                    owner_field: None,
                    read_groups: vec!["*".into()],
                    date_fields: vec![],
                    links: vec![],
                    sensitive: vec![],
                    source: None,
                    key_shapes: vec![],
                },
                vec![RecordRow {
                    table: "orders".into(),
                    key: "A1".into(),
                    fields,
                }],
            )],
            principals: by_operator([Principal {
                id: "u".into(),
                tenant: "t".into(),
                groups: vec!["g".into()],
                kbs: None,
            }])
            .unwrap(),
            decisions: vec![Decision {
                id: subject.id("t"),
                tenant: "t".into(),
                subject: subject.clone(),
                verdict: Verdict::Rejected,
                by: "alice".into(),
                at: "2026-01-01T00:00:00Z".into(),
                note: "no".into(),
            }],
            candidates: vec![ModelCandidate {
                id: subject.id("t"),
                tenant: "t".into(),
                subject,
                confidence: 0.7,
                model: "m".into(),
                at: "2026-01-01T00:00:00Z".into(),
            }],
            ..CommitBatch::default()
        }
    }

    fn catalog(dir: &tempfile::TempDir, name: &str) -> Catalog {
        Catalog::open(&dir.path().join(name)).unwrap()
    }

    fn equal_kinds(a: &dyn CatalogBackend, b: &dyn CatalogBackend) -> Vec<&'static str> {
        compare(&digests(a).unwrap(), &digests(b).unwrap())
            .into_iter()
            .filter(|k| !k.equal)
            .map(|k| k.kind)
            .collect()
    }

    #[test]
    fn a_copy_has_equal_digests_however_it_was_committed() {
        let dir = tempfile::tempdir().unwrap();
        let src = catalog(&dir, "src.redb");
        // A replaced version and a deleted document leave gaps in the source's ordinals
        // and sequence numbers that the copy does not have.
        src.commit(CommitBatch {
            documents: vec![doc("t", "a", "1", 3), doc("t", "b", "1", 1)],
            ..CommitBatch::default()
        })
        .unwrap();
        src.commit(CommitBatch {
            documents: vec![doc("t", "a", "1", 2), doc("u", "c", "2", 0)],
            deletes: vec![("t".into(), "b".into(), None)],
            ..CommitBatch::default()
        })
        .unwrap();
        src.commit(rest()).unwrap();

        let dst = catalog(&dir, "dst.redb");
        let commits = copy(&src, &dst, DIM, &mut Quiet).unwrap();
        assert_eq!(commits, 5);
        assert_eq!(equal_kinds(&src, &dst), Vec::<&str>::new());
        let counts: Vec<u64> = digests(&dst).unwrap().iter().map(|d| d.0).collect();
        assert_eq!(counts, [2, 2, 1, 1, 1, 1, 1]);

        // The same content committed in another order and batching digests the same.
        let other = catalog(&dir, "other.redb");
        other.commit(rest()).unwrap();
        other
            .commit(CommitBatch {
                documents: vec![doc("u", "c", "2", 0)],
                ..CommitBatch::default()
            })
            .unwrap();
        other
            .commit(CommitBatch {
                documents: vec![doc("t", "a", "1", 2)],
                ..CommitBatch::default()
            })
            .unwrap();
        assert_eq!(equal_kinds(&src, &other), Vec::<&str>::new());
    }

    #[test]
    fn one_changed_bit_is_named_by_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (catalog(&dir, "a.redb"), catalog(&dir, "b.redb"));
        let mut changed = doc("t", "a", "1", 2);
        a.commit(CommitBatch {
            documents: vec![changed.clone()],
            ..rest()
        })
        .unwrap();
        changed.vectors[1][2] = f32::from_bits((-1.0f32).to_bits() ^ 1);
        let mut batch = rest();
        let mut p = batch.principals[0].principal().clone();
        p.groups.push("h".into());
        batch.principals = by_operator([p]).unwrap();
        batch.documents = vec![changed];
        b.commit(batch).unwrap();
        assert_eq!(equal_kinds(&a, &b), ["chunks", "principals"]);
    }

    #[test]
    fn chunks_are_digested_with_their_place_in_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (catalog(&dir, "a.redb"), catalog(&dir, "b.redb"));
        let d = doc("t", "a", "1", 2);
        let mut swapped = d.clone();
        swapped.chunks.swap(0, 1);
        swapped.vectors.swap(0, 1);
        for (c, d) in [(&a, d), (&b, swapped)] {
            c.commit(CommitBatch {
                documents: vec![d],
                ..CommitBatch::default()
            })
            .unwrap();
        }
        assert_eq!(equal_kinds(&a, &b), ["chunks"]);
    }

    #[test]
    fn a_vector_of_another_dimension_is_refused_with_its_document() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (catalog(&dir, "a.redb"), catalog(&dir, "b.redb"));
        src.commit(CommitBatch {
            documents: vec![doc("t", "a", "1", 1)],
            ..CommitBatch::default()
        })
        .unwrap();
        let e = copy(&src, &dst, 8, &mut Quiet).unwrap_err().to_string();
        assert!(e.contains("a@1") && e.contains("dimension 4"), "{e}");
    }

    #[test]
    fn batches_are_bounded_by_documents_and_chunks_but_never_empty() {
        let entry = |n: usize| DocEntry {
            meta: doc("t", "a", "1", 0).meta,
            dv: 0,
            seqs: (0..n as u64).collect(),
            sketch: vec![],
        };
        let many: Vec<DocEntry> = (0..DOC_BATCH + 3).map(|_| entry(1)).collect();
        assert_eq!(batch_len(&many), DOC_BATCH);
        let long = [entry(CHUNK_BATCH - 1), entry(2), entry(1)];
        assert_eq!(batch_len(&long), 1);
        assert_eq!(batch_len(&[entry(CHUNK_BATCH * 3), entry(1)]), 1);
        assert_eq!(batch_len(&[entry(3), entry(4)]), 2);
        assert_eq!(batch_len(&[]), 0);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":[{"q":1,"p":2}],"x":"é"}}"#).unwrap();
        assert_eq!(
            canonical(&a).unwrap(),
            r#"{"a":{"x":"é","y":[{"p":2,"q":1}]},"b":1}"#
        );
    }

    #[test]
    fn the_multiset_digest_ignores_order_but_not_multiplicity() {
        let digest = |items: &[&str]| {
            let mut m = Multiset::default();
            for i in items {
                m.add(i);
            }
            m.digest("k")
        };
        assert_eq!(digest(&["a", "b", "c"]), digest(&["c", "a", "b"]));
        assert_ne!(digest(&["a", "b"]), digest(&["a", "b", "b"]));
        assert_ne!(digest(&["a", "a"]), digest(&[]));
        assert_ne!(digest(&[]), {
            let m = Multiset::default();
            m.digest("other")
        });
    }
}
