//! The on-disk form of an [`HnswIndex`]: a base file plus an append-only log.
//!
//! A commit adds a few hundred chunks to an index of millions; rewriting the whole file
//! for it made every commit cost what the store holds. So a save appends one *record*
//! with what changed since the previous save, and the base is rewritten (compaction)
//! only when the log would outgrow half of it. That bounds both the amortised write
//! cost and the replay work at load by a constant factor of what changed.
//!
//! Rows and nodes are never removed (a deleted chunk's ordinal just stops being
//! admitted), so a record only ever adds nodes and replaces link lists.
//!
//! # Base, `<path>` (little-endian throughout)
//!
//! ```text
//! "DHNSW002"  base id u64  dim u64  n u64  m u64  ef_construction u64  ef_search u64
//! exact_below f32  entry u64 (u64::MAX: none)
//! seqs n×u64  dvs n×u32  vectors n×dim×f32
//! adjacency, per node: layers u32, per layer: count u32, count × neighbour u32
//! crc32 of everything above
//! ```
//!
//! `DHNSW001` files (the same without base id and checksum) still load; no log
//! extends one, so the first save after loading one writes a `DHNSW002` base.
//!
//! # Log, `<path>.log`
//!
//! ```text
//! header   "DHNSWL01"  base id u64  crc32 of those 16 bytes
//! record   "DREC"  len u64  crc32 of tag and len
//!          payload (len bytes)
//!          crc32 of payload  "DEND" (the commit marker)
//! payload  n_before u64  n_after u64  entry u64
//!          seqs, dvs, vectors and adjacency of nodes n_before..n_after, as in the base
//!          changed u64, per changed node: id u32 (< n_before) and its whole adjacency
//! ```
//!
//! The base id ties a log to one base. Compaction renames the new base in before it
//! removes the old log; a crash between the two leaves a log whose id no longer
//! matches, which load ignores (its records are in the new base).
//!
//! # Torn tails
//!
//! A save syncs its record before it returns, and the store records the catalog
//! generation the index reflects only after that, so a crash mid-append leaves at most
//! one damaged record, the last, whose changes the catalog's change log replays. Load
//! stops at a damaged record and ignores it when no intact record header follows it
//! anywhere in the file. When one does, the damaged record is one an earlier save
//! reported durable, and skipping it would silently lose chunks the store believes
//! indexed: that is [`Error::Corrupt`], like a damaged base. The next save cuts an
//! ignored tail off before appending.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rand::SeedableRng;

use super::{HnswIndex, HnswParams};
use crate::{Error, Result};

const MAGIC_V1: &[u8; 8] = b"DHNSW001";
const MAGIC_BASE: &[u8; 8] = b"DHNSW002";
const MAGIC_LOG: &[u8; 8] = b"DHNSWL01";
const REC_TAG: &[u8; 4] = b"DREC";
const END_TAG: &[u8; 4] = b"DEND";
const LOG_HEADER: u64 = 20;
const REC_HEADER: u64 = 16;
const REC_TRAILER: u64 = 8;
/// Insertion caps a node's level at 16.
const MAX_LAYERS: u64 = 17;
/// A save rewrites the base instead of appending once the log would pass this
/// percentage of the base's size.
const COMPACT_PERCENT: u64 = 50;
/// Bytes converted or checksummed per step, so that no array is copied whole.
const STEP: usize = 1 << 16;

/// What the index knows of its files: kept in memory only, never serialised.
#[derive(Debug, Default)]
pub(super) struct Persist {
    on_disk: Option<OnDisk>,
    /// One bit per node already on disk whose link lists changed since (allocated on
    /// the first change after a save).
    dirty: Vec<u64>,
}

#[derive(Debug, Clone)]
struct OnDisk {
    path: PathBuf,
    /// `None` for a `DHNSW001` base, which no log may extend.
    base_id: Option<u64>,
    base_len: u64,
    /// Bytes of the log holding its header and intact records; 0 when there is no
    /// usable log, and the next append starts a fresh one.
    log_len: u64,
    /// Nodes the files hold.
    nodes: usize,
}

impl Persist {
    /// Notes that `node`'s link lists changed.
    pub(super) fn touch(&mut self, node: u32) {
        let Some(d) = &self.on_disk else {
            return;
        };
        let node = node as usize;
        // A node added since the save is written whole by the next one anyway.
        if node >= d.nodes {
            return;
        }
        if self.dirty.is_empty() {
            self.dirty = vec![0; d.nodes.div_ceil(64)];
        }
        self.dirty[node / 64] |= 1 << (node % 64);
    }

    fn dirty_nodes(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for (w, &word) in self.dirty.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                out.push((w * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        out
    }
}

/// `<path>.log`.
pub(super) fn log_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".log");
    PathBuf::from(s)
}

/// Why a file could not be read: the file system, or the bytes.
#[derive(Debug)]
enum Fail {
    Io(io::Error),
    Bad(&'static str),
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Self {
        Fail::Io(e)
    }
}

impl Fail {
    fn at(self, path: &Path) -> Error {
        let path = path.display().to_string();
        match self {
            Fail::Io(source) => Error::Io { path, source },
            Fail::Bad(reason) => Error::Corrupt {
                path,
                reason: reason.to_string(),
            },
        }
    }
}

type Parsed<T> = std::result::Result<T, Fail>;

/// A bounded, checksummed reader: nothing is read, or allocated, past `left` bytes.
struct Src<R> {
    r: R,
    left: u64,
    crc: crc32fast::Hasher,
    /// Reused by [`Src::values`]: a load reads one small list per node and layer.
    buf: Vec<u8>,
}

impl<R: Read> Src<R> {
    fn new(r: R, left: u64) -> Src<R> {
        Src {
            r,
            left,
            crc: crc32fast::Hasher::new(),
            buf: Vec::new(),
        }
    }

    fn fill(&mut self, buf: &mut [u8]) -> Parsed<()> {
        if buf.len() as u64 > self.left {
            return Err(Fail::Bad("truncated"));
        }
        self.r.read_exact(buf)?;
        self.crc.update(buf);
        self.left -= buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Parsed<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    fn u32(&mut self) -> Parsed<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Parsed<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// `count` values, allocated only once the bytes left are known to hold them.
    fn values<const N: usize, T>(&mut self, count: u64, from: fn([u8; N]) -> T) -> Parsed<Vec<T>> {
        let bytes = count
            .checked_mul(N as u64)
            .filter(|&b| b <= self.left)
            .ok_or(Fail::Bad("a length runs past the end of the file"))?;
        let mut out = Vec::with_capacity(count as usize);
        let mut buf = std::mem::take(&mut self.buf);
        // STEP is a multiple of every N used, so no value straddles two steps.
        buf.resize((bytes as usize).min(STEP), 0);
        let mut rest = bytes as usize;
        while rest > 0 {
            let take = rest.min(buf.len());
            self.fill(&mut buf[..take])?;
            for c in buf[..take].chunks_exact(N) {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                out.push(from(a));
            }
            rest -= take;
        }
        self.buf = buf;
        Ok(out)
    }
}

/// A checksumming writer that counts what it wrote.
struct Sink<W> {
    w: W,
    crc: crc32fast::Hasher,
    written: u64,
    buf: Vec<u8>,
}

impl<W: Write> Sink<W> {
    fn new(w: W) -> Sink<W> {
        Sink {
            w,
            crc: crc32fast::Hasher::new(),
            written: 0,
            buf: Vec::new(),
        }
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc.update(b);
        self.written += b.len() as u64;
        self.w.write_all(b)
    }

    fn u32(&mut self, x: u32) -> io::Result<()> {
        self.put(&x.to_le_bytes())
    }

    fn u64(&mut self, x: u64) -> io::Result<()> {
        self.put(&x.to_le_bytes())
    }

    /// Writes an array a step at a time (per-value writes would checksum 4 bytes a call).
    fn values<const N: usize, T: Copy>(
        &mut self,
        xs: &[T],
        to: fn(T) -> [u8; N],
    ) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        for chunk in xs.chunks(STEP / N) {
            buf.clear();
            for &x in chunk {
                buf.extend_from_slice(&to(x));
            }
            self.put(&buf)?;
        }
        self.buf = buf;
        Ok(())
    }

    fn adjacency(&mut self, layers: &[Vec<u32>]) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&(layers.len() as u32).to_le_bytes());
        for list in layers {
            buf.extend_from_slice(&(list.len() as u32).to_le_bytes());
            for n in list {
                buf.extend_from_slice(&n.to_le_bytes());
            }
        }
        self.put(&buf)?;
        self.buf = buf;
        Ok(())
    }

    /// The writer back, with the checksum and count of what went through it.
    fn finish(self) -> (W, u32, u64) {
        (self.w, self.crc.finalize(), self.written)
    }
}

fn adjacency_len(layers: &[Vec<u32>]) -> u64 {
    4 + layers.iter().map(|l| 4 + 4 * l.len() as u64).sum::<u64>()
}

fn entry_code(entry: Option<u32>) -> u64 {
    entry.map_or(u64::MAX, u64::from)
}

fn entry_of(code: u64, nodes: usize) -> Parsed<Option<u32>> {
    if code == u64::MAX {
        Ok(None)
    } else if code < nodes as u64 {
        Ok(Some(code as u32))
    } else {
        Err(Fail::Bad("entry point out of range"))
    }
}

/// The base header's fields after its magic (and base id).
fn put_header<W: Write>(idx: &HnswIndex, s: &mut Sink<W>) -> io::Result<()> {
    s.u64(idx.rows.dim as u64)?;
    s.u64(idx.len() as u64)?;
    s.u64(idx.params.m as u64)?;
    s.u64(idx.params.ef_construction as u64)?;
    s.u64(idx.params.ef_search as u64)?;
    s.put(&idx.params.exact_below.to_le_bytes())?;
    s.u64(entry_code(idx.entry))
}

/// Rows and adjacency of nodes `from..`.
fn put_nodes<W: Write>(idx: &HnswIndex, s: &mut Sink<W>, from: usize) -> io::Result<()> {
    let rows = &idx.rows;
    s.values(&rows.seqs[from..], u64::to_le_bytes)?;
    s.values(&rows.dvs[from..], u32::to_le_bytes)?;
    s.values(&rows.data[from * rows.dim..], f32::to_le_bytes)?;
    for node in &idx.links[from..] {
        s.adjacency(node)?;
    }
    Ok(())
}

fn log_header(base_id: u64) -> [u8; LOG_HEADER as usize] {
    let mut h = [0u8; LOG_HEADER as usize];
    h[..8].copy_from_slice(MAGIC_LOG);
    h[8..16].copy_from_slice(&base_id.to_le_bytes());
    let crc = crc32fast::hash(&h[..16]);
    h[16..].copy_from_slice(&crc.to_le_bytes());
    h
}

fn parse_log_header(h: &[u8; LOG_HEADER as usize]) -> Option<u64> {
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[8..16]);
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&h[16..]);
    (&h[..8] == MAGIC_LOG && crc32fast::hash(&h[..16]) == u32::from_le_bytes(crc))
        .then_some(u64::from_le_bytes(id))
}

fn record_header(len: u64) -> [u8; REC_HEADER as usize] {
    let mut h = [0u8; REC_HEADER as usize];
    h[..4].copy_from_slice(REC_TAG);
    h[4..12].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The payload length a record header announces, if `h` starts with an intact one.
fn parse_record_header(h: &[u8]) -> Option<u64> {
    if h.len() < REC_HEADER as usize || &h[..4] != REC_TAG {
        return None;
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&h[4..12]);
    let mut crc = [0u8; 4];
    crc.copy_from_slice(&h[12..16]);
    (crc32fast::hash(&h[..12]) == u32::from_le_bytes(crc)).then_some(u64::from_le_bytes(len))
}

/// Size of the payload of a record for nodes `n0..` and the `dirty` ones below.
fn record_len(idx: &HnswIndex, n0: usize, dirty: &[u32]) -> u64 {
    let added = (idx.len() - n0) as u64;
    let row = 8 + 4 + 4 * idx.rows.dim as u64;
    24 + added * row
        + idx.links[n0..]
            .iter()
            .map(|l| adjacency_len(l))
            .sum::<u64>()
        + 8
        + dirty
            .iter()
            .map(|&n| 4 + adjacency_len(&idx.links[n as usize]))
            .sum::<u64>()
}

fn write_record<W: Write>(
    idx: &HnswIndex,
    w: &mut W,
    n0: usize,
    dirty: &[u32],
    len: u64,
) -> io::Result<()> {
    w.write_all(&record_header(len))?;
    let mut s = Sink::new(&mut *w);
    s.u64(n0 as u64)?;
    s.u64(idx.len() as u64)?;
    s.u64(entry_code(idx.entry))?;
    put_nodes(idx, &mut s, n0)?;
    s.u64(dirty.len() as u64)?;
    for &node in dirty {
        s.u32(node)?;
        s.adjacency(&idx.links[node as usize])?;
    }
    let (_, crc, written) = s.finish();
    if written != len {
        // Without its trailer the record reads as a torn tail, and is cut off next time.
        return Err(io::Error::other(
            "vector log record came out a different size",
        ));
    }
    w.write_all(&crc.to_le_bytes())?;
    w.write_all(END_TAG)
}

/// Makes a rename or a new file in `path`'s directory durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Writes a whole base atomically (temporary file, sync, rename) and drops the log.
/// Returns the new base's id and length.
fn write_base(idx: &HnswIndex, path: &Path, old_id: Option<u64>) -> io::Result<(u64, u64)> {
    // A fresh id per base: it is what ties a log to the base it extends.
    let id = loop {
        let id: u64 = rand::random();
        if Some(id) != old_id {
            break id;
        }
    };
    let tmp = path.with_extension("tmp");
    let f = File::create(&tmp)?;
    let mut s = Sink::new(BufWriter::with_capacity(1 << 20, f));
    s.put(MAGIC_BASE)?;
    s.u64(id)?;
    put_header(idx, &mut s)?;
    put_nodes(idx, &mut s, 0)?;
    let (mut w, crc, written) = s.finish();
    w.write_all(&crc.to_le_bytes())?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    sync_dir(path)?;
    // Only after the rename: until then the old base and this log are the index. Should
    // the removal fail, the stale log's base id no longer matches, so load ignores it
    // and the next append overwrites it.
    let _ = std::fs::remove_file(log_path(path));
    Ok((id, written + 4))
}

/// The id of the `DHNSW002` base at `path`, if it is still `len` bytes long.
fn base_id_on_disk(path: &Path, len: u64) -> Option<u64> {
    let mut f = File::open(path).ok()?;
    if f.metadata().ok()?.len() != len {
        return None;
    }
    let (mut magic, mut id) = ([0u8; 8], [0u8; 8]);
    f.read_exact(&mut magic).ok()?;
    f.read_exact(&mut id).ok()?;
    (&magic == MAGIC_BASE).then_some(u64::from_le_bytes(id))
}

/// The log at `path` ready to append at `len`, if it is still the one this index last
/// wrote or read.
fn open_log(path: &Path, base_id: u64, len: u64) -> Option<File> {
    let mut f = OpenOptions::new().read(true).write(true).open(path).ok()?;
    let on_disk = f.metadata().ok()?.len();
    let mut head = [0u8; LOG_HEADER as usize];
    f.read_exact(&mut head).ok()?;
    if on_disk < len || parse_log_header(&head) != Some(base_id) {
        return None;
    }
    if on_disk > len {
        // A torn record from a save that failed or was cut short: a record appended
        // after it would never be read.
        f.set_len(len).ok()?;
        f.sync_data().ok()?;
    }
    f.seek(SeekFrom::Start(len)).ok()?;
    Some(f)
}

/// Appends what changed since the files were written; the log's new length, or `None`
/// when a whole base must be written instead (the files are not what this index
/// last saw, or the log would grow past its share of the base).
fn append(idx: &HnswIndex, d: &OnDisk, base_id: u64, dirty: &[u32]) -> io::Result<Option<u64>> {
    if base_id_on_disk(&d.path, d.base_len) != Some(base_id) {
        return Ok(None);
    }
    let log = log_path(&d.path);
    let fresh = d.log_len == 0;
    let existing = if fresh {
        None
    } else {
        match open_log(&log, base_id, d.log_len) {
            Some(f) => Some(f),
            None => return Ok(None),
        }
    };
    if idx.len() == d.nodes && dirty.is_empty() {
        return Ok(Some(d.log_len));
    }
    let len = record_len(idx, d.nodes, dirty);
    let start = if fresh { LOG_HEADER } else { d.log_len };
    let end = start + REC_HEADER + len + REC_TRAILER;
    if end.saturating_mul(100) > d.base_len.saturating_mul(COMPACT_PERCENT) {
        return Ok(None);
    }
    let file = match existing {
        Some(f) => f,
        // Truncating: a stale log from an interrupted compaction may be there.
        None => OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&log)?,
    };
    let mut w = BufWriter::with_capacity(1 << 20, &file);
    if fresh {
        w.write_all(&log_header(base_id))?;
    }
    write_record(idx, &mut w, d.nodes, dirty, len)?;
    w.into_inner().map_err(|e| e.into_error())?;
    file.sync_data()?;
    if fresh {
        sync_dir(&log)?;
    }
    Ok(Some(end))
}

pub(super) fn save(idx: &HnswIndex, path: &Path) -> Result<()> {
    let mut st = idx.persist.lock();
    let appendable = st
        .on_disk
        .clone()
        .filter(|d| d.path == path)
        .and_then(|d| Some((d.base_id?, d)));
    if let Some((base_id, d)) = appendable {
        let dirty = st.dirty_nodes();
        let appended =
            append(idx, &d, base_id, &dirty).map_err(|e| Fail::Io(e).at(&log_path(path)))?;
        if let Some(log_len) = appended {
            st.on_disk = Some(OnDisk {
                log_len,
                nodes: idx.len(),
                ..d
            });
            st.dirty = Vec::new();
            return Ok(());
        }
    }
    let old_id = st.on_disk.as_ref().and_then(|d| d.base_id);
    let (base_id, base_len) = write_base(idx, path, old_id).map_err(|e| Fail::Io(e).at(path))?;
    st.on_disk = Some(OnDisk {
        path: path.to_path_buf(),
        base_id: Some(base_id),
        base_len,
        log_len: 0,
        nodes: idx.len(),
    });
    st.dirty = Vec::new();
    Ok(())
}

pub(super) fn load(path: &Path) -> Result<HnswIndex> {
    let (mut idx, base_id, base_len) = read_base(path).map_err(|e| e.at(path))?;
    let log = log_path(path);
    let log_len = match base_id {
        Some(id) => replay(&mut idx, &log, id).map_err(|e| e.at(&log))?,
        None => 0,
    };
    check_graph(&idx).map_err(|e| e.at(path))?;
    let n = idx.len();
    idx.params.seed = HnswParams::default().seed ^ n as u64;
    idx.rng = rand::rngs::StdRng::seed_from_u64(idx.params.seed);
    *idx.persist.get_mut() = Persist {
        on_disk: Some(OnDisk {
            path: path.to_path_buf(),
            base_id,
            base_len,
            log_len,
            nodes: n,
        }),
        dirty: Vec::new(),
    };
    Ok(idx)
}

/// The base: the index it holds, its id (`None` for `DHNSW001`) and its length.
fn read_base(path: &Path) -> Parsed<(HnswIndex, Option<u64>, u64)> {
    let f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut src = Src::new(BufReader::with_capacity(1 << 20, f), file_len);
    let magic: [u8; 8] = src.array().map_err(|_| Fail::Bad("truncated header"))?;
    let v2 = match &magic {
        MAGIC_BASE => true,
        MAGIC_V1 => false,
        _ => {
            return Err(Fail::Bad(
                "not a Dossier HNSW file (or an unknown format version)",
            ))
        }
    };
    let base_id = if v2 { Some(src.u64()?) } else { None };
    let dim = src.u64()?;
    let n = src.u64()?;
    let m = src.u64()?;
    let ef_construction = src.u64()?;
    let ef_search = src.u64()?;
    let exact_below = f32::from_le_bytes(src.array()?);
    let entry = src.u64()?;
    // Far beyond any sensible setting; a forged value would make later inserts reserve
    // absurd capacity or overflow the candidate-list arithmetic.
    if m > 1 << 16 || ef_construction > 1 << 24 || ef_search > 1 << 24 {
        return Err(Fail::Bad("implausible parameters"));
    }
    let dim = usize::try_from(dim).map_err(|_| Fail::Bad("implausible dimension"))?;
    let params = HnswParams {
        m: m as usize,
        ef_construction: ef_construction as usize,
        ef_search: ef_search as usize,
        exact_below,
        seed: HnswParams::default().seed,
    };
    let mut idx = HnswIndex::new(dim, params);
    read_nodes(&mut src, &mut idx, n, if v2 { 4 } else { 0 })?;
    idx.entry = entry_of(entry, idx.len())?;
    if v2 {
        let want = src.crc.clone().finalize();
        let got = u32::from_le_bytes(src.array()?);
        if got != want {
            return Err(Fail::Bad("checksum mismatch"));
        }
        if src.left != 0 {
            return Err(Fail::Bad("trailing bytes"));
        }
    }
    Ok((idx, base_id, file_len))
}

/// Reads `count` nodes (rows, then adjacency) onto the index. `after` is the number of
/// bytes that must still follow them.
fn read_nodes<R: Read>(
    src: &mut Src<R>,
    idx: &mut HnswIndex,
    count: u64,
    after: u64,
) -> Parsed<()> {
    // Every node takes its row and at least one empty layer. Checking that against
    // what is left before allocating keeps a forged count from reserving memory the
    // file cannot fill.
    let least = (idx.rows.dim as u64)
        .checked_mul(4)
        .and_then(|v| v.checked_add(8 + 4 + 4 + 4))
        .and_then(|per| per.checked_mul(count))
        .and_then(|b| b.checked_add(after));
    if least.is_none_or(|b| b > src.left) {
        return Err(Fail::Bad("node count runs past the end of the file"));
    }
    if idx.len() as u64 + count > u64::from(u32::MAX) {
        return Err(Fail::Bad("more nodes than ids"));
    }
    let seqs = src.values(count, u64::from_le_bytes)?;
    let dvs = src.values(count, u32::from_le_bytes)?;
    let data = src.values(count * idx.rows.dim as u64, f32::from_le_bytes)?;
    join(&mut idx.rows.seqs, seqs);
    join(&mut idx.rows.dvs, dvs);
    join(&mut idx.rows.data, data);
    idx.links.reserve(count as usize);
    for _ in 0..count {
        let node = read_adjacency(src)?;
        idx.links.push(node);
    }
    Ok(())
}

/// Appends `more`, without a copy when `into` is empty (a base load).
fn join<T>(into: &mut Vec<T>, mut more: Vec<T>) {
    if into.is_empty() {
        *into = more;
    } else {
        into.append(&mut more);
    }
}

fn read_adjacency<R: Read>(src: &mut Src<R>) -> Parsed<Vec<Vec<u32>>> {
    let layers = u64::from(src.u32()?);
    if layers == 0 || layers > MAX_LAYERS {
        return Err(Fail::Bad("bad layer count"));
    }
    (0..layers)
        .map(|_| {
            let count = src.u32()?;
            src.values(u64::from(count), u32::from_le_bytes)
        })
        .collect()
}

/// Replays the log onto the index; returns the length of its intact part (0 when it
/// is missing, stale or torn before its first record).
fn replay(idx: &mut HnswIndex, log: &Path, base_id: u64) -> Parsed<u64> {
    let f = match File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let file_len = f.metadata()?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut head = [0u8; LOG_HEADER as usize];
    let header = if file_len >= LOG_HEADER {
        r.read_exact(&mut head)?;
        parse_log_header(&head)
    } else {
        None
    };
    match header {
        Some(id) if id == base_id => {}
        // Left by a compaction cut short: its records are in the base.
        Some(_) => return Ok(0),
        None if intact_header_after(&mut r, 0, file_len)? => {
            return Err(Fail::Bad("the log header is damaged"))
        }
        // Torn while the log was being started.
        None => return Ok(0),
    }
    let mut pos = LOG_HEADER;
    while pos < file_len {
        let Some(len) = intact_record(&mut r, pos, file_len)? else {
            if intact_header_after(&mut r, pos + 1, file_len)? {
                return Err(Fail::Bad("a record before the end of the log is damaged"));
            }
            // The last record, torn: the save writing it never returned.
            break;
        };
        r.seek(SeekFrom::Start(pos + REC_HEADER))?;
        apply_record(idx, &mut Src::new(&mut r, len))?;
        pos += REC_HEADER + len + REC_TRAILER;
    }
    Ok(pos)
}

/// The payload length of the record at `pos`, if it is whole and its checksums and
/// commit marker are right. Reads a step at a time: nothing is applied, or allocated
/// for, before the whole record is known good.
fn intact_record<R: Read + Seek>(r: &mut R, pos: u64, file_len: u64) -> io::Result<Option<u64>> {
    let left = file_len - pos;
    if left < REC_HEADER + REC_TRAILER {
        return Ok(None);
    }
    r.seek(SeekFrom::Start(pos))?;
    let mut head = [0u8; REC_HEADER as usize];
    r.read_exact(&mut head)?;
    let Some(len) = parse_record_header(&head) else {
        return Ok(None);
    };
    if len > left - REC_HEADER - REC_TRAILER {
        return Ok(None);
    }
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; (len as usize).min(STEP)];
    let mut rest = len as usize;
    while rest > 0 {
        let take = rest.min(buf.len());
        r.read_exact(&mut buf[..take])?;
        crc.update(&buf[..take]);
        rest -= take;
    }
    let mut tail = [0u8; REC_TRAILER as usize];
    r.read_exact(&mut tail)?;
    let intact = tail[..4] == crc.finalize().to_le_bytes() && &tail[4..] == END_TAG;
    Ok(intact.then_some(len))
}

/// Whether an intact record header whose record fits in the file starts anywhere at
/// or after `from`: what tells a damaged record in the middle of the log from a torn
/// last one.
fn intact_header_after<R: Read + Seek>(r: &mut R, from: u64, file_len: u64) -> io::Result<bool> {
    if from >= file_len {
        return Ok(false);
    }
    r.seek(SeekFrom::Start(from))?;
    let mut window: Vec<u8> = Vec::with_capacity(2 * STEP);
    let mut at = from;
    let mut chunk = vec![0u8; STEP];
    loop {
        let got = r.read(&mut chunk)?;
        if got == 0 {
            return Ok(false);
        }
        window.extend_from_slice(&chunk[..got]);
        for (i, w) in window.windows(REC_HEADER as usize).enumerate() {
            let Some(len) = parse_record_header(w) else {
                continue;
            };
            let end = (at + i as u64)
                .checked_add(REC_HEADER + REC_TRAILER)
                .and_then(|e| e.checked_add(len));
            if end.is_some_and(|e| e <= file_len) {
                return Ok(true);
            }
        }
        // Keep the positions not yet tried (they need bytes of the next chunk).
        let keep = window.len().saturating_sub(REC_HEADER as usize - 1);
        window.drain(..keep);
        at += keep as u64;
    }
}

/// Applies one record whose checksum held. Any inconsistency now means the log was
/// not written by this index's saves: corrupt, not torn.
fn apply_record<R: Read>(idx: &mut HnswIndex, src: &mut Src<R>) -> Parsed<()> {
    let n0 = src.u64()?;
    if n0 != idx.len() as u64 {
        return Err(Fail::Bad(
            "a log record does not follow the index before it",
        ));
    }
    let n1 = src.u64()?;
    let entry = src.u64()?;
    let count = n1
        .checked_sub(n0)
        .ok_or(Fail::Bad("a log record removes nodes"))?;
    read_nodes(src, idx, count, 8)?;
    let changed = src.u64()?;
    // Each changed node takes at least its id, a layer count and one list length.
    if changed.checked_mul(12).is_none_or(|b| b > src.left) {
        return Err(Fail::Bad(
            "changed-node count runs past the end of the record",
        ));
    }
    for _ in 0..changed {
        let node = src.u32()? as usize;
        if node as u64 >= n0 {
            return Err(Fail::Bad("a changed node is not in the index before it"));
        }
        let layers = read_adjacency(src)?;
        if layers.len() != idx.links[node].len() {
            return Err(Fail::Bad("a changed node's layer count differs"));
        }
        idx.links[node] = layers;
    }
    idx.entry = entry_of(entry, idx.len())?;
    if src.left != 0 {
        return Err(Fail::Bad("a log record has bytes past its end"));
    }
    Ok(())
}

/// What search relies on to index without bounds failures: an entry point exactly when
/// there are nodes, and every neighbour on layer `l` a node that has layer `l`.
fn check_graph(idx: &HnswIndex) -> Parsed<()> {
    if idx.entry.is_none() != idx.links.is_empty() {
        return Err(Fail::Bad("entry point does not match the node count"));
    }
    for node in &idx.links {
        for (layer, list) in node.iter().enumerate() {
            for &n in list {
                if idx.links.get(n as usize).is_none_or(|t| t.len() <= layer) {
                    return Err(Fail::Bad("link out of range"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
