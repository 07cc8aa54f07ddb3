//! The base + log persistence: replays equal the in-memory graph, torn tails load the
//! state before them, compaction bounds the log, and hostile files never panic.

use std::path::Path;

use rand::{Rng, SeedableRng};

use super::*;
use crate::vector::dot;
use crate::Admit;

type Rng64 = rand::rngs::StdRng;

fn random_unit(rng: &mut Rng64, dim: usize) -> Vec<f32> {
    let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let n = dot(&v, &v).sqrt();
    v.into_iter().map(|x| x / n).collect()
}

const GROUPS: u32 = 5;

/// Adds `n` random rows one at a time.
fn grow(idx: &mut HnswIndex, rng: &mut Rng64, n: usize) {
    for _ in 0..n {
        let i = idx.len() as u64;
        let v = random_unit(rng, idx.dim());
        idx.add(i * 7 + 1, i as u32 % GROUPS, &v).unwrap();
    }
}

fn index(n: usize, dim: usize, seed: u64) -> (HnswIndex, Rng64) {
    let mut rng = Rng64::seed_from_u64(seed);
    let mut idx = HnswIndex::new(dim, HnswParams::default());
    grow(&mut idx, &mut rng, n);
    (idx, rng)
}

/// The same rows, bit for bit, and the same graph.
fn assert_same(a: &HnswIndex, b: &HnswIndex) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.dim(), b.dim());
    assert_eq!(a.rows.seqs, b.rows.seqs);
    assert_eq!(a.rows.dvs, b.rows.dvs);
    let bits = |x: &HnswIndex| x.rows.data.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert!(bits(a) == bits(b), "vectors differ");
    assert!(a.links == b.links, "graphs differ");
    assert_eq!(a.entry, b.entry);
    assert_eq!(a.params.m, b.params.m);
    assert_eq!(a.params.ef_search, b.params.ef_search);
}

/// Searches, planned and graph-only, under several filters.
fn assert_same_results(a: &HnswIndex, b: &HnswIndex, rng: &mut Rng64, queries: usize) {
    let admits = [
        Admit::from_ordinals(0..GROUPS),
        Admit::from_ordinals([1, 3]),
        Admit::from_ordinals([4]),
    ];
    for i in 0..queries {
        let q = random_unit(rng, a.dim());
        let admit = &admits[i % admits.len()];
        assert_eq!(a.search(&q, 10, admit), b.search(&q, 10, admit));
        assert_eq!(a.search_graph(&q, 10, admit), b.search_graph(&q, 10, admit));
    }
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

fn base_id(p: &Path) -> u64 {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..8], MAGIC_BASE);
    u64::from_le_bytes(b[8..16].try_into().unwrap())
}

fn is_corrupt(r: Result<HnswIndex>) -> bool {
    matches!(r, Err(Error::Corrupt { .. }))
}

#[test]
fn delta_saves_replay_to_the_same_graph() {
    // Past 4096 nodes `add_batch` links in parallel batches.
    let (mut idx, mut rng) = index(4000, 48, 1);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("vectors.hnsw");
    let log = log_path(&p);
    idx.save(&p).unwrap();
    assert!(!log.exists(), "a first save writes a base only");
    let base = std::fs::read(&p).unwrap();

    grow(&mut idx, &mut rng, 80);
    idx.save(&p).unwrap();
    let first = size(&log);
    assert!(first > 0, "the second save appends");
    // Insertion rewired existing nodes, and the record carries them.
    let mut batch = Vec::new();
    for i in 0..100u64 {
        batch.push((90_000 + i, (i % 5) as u32, random_unit(&mut rng, 48)));
    }
    idx.add_batch(&batch).unwrap();
    idx.save(&p).unwrap();
    assert!(size(&log) > first);
    assert_eq!(
        std::fs::read(&p).unwrap(),
        base,
        "appends leave the base alone"
    );
    // Saving again with nothing new writes nothing.
    let before = size(&log);
    idx.save(&p).unwrap();
    assert_eq!(size(&log), before);

    let back = HnswIndex::load(&p).unwrap();
    assert_same(&idx, &back);
    assert_same_results(&idx, &back, &mut rng, 300);

    // The loaded index goes on appending where the log ends.
    let mut back = back;
    grow(&mut back, &mut rng, 10);
    back.save(&p).unwrap();
    assert!(size(&log) > before);
    let again = HnswIndex::load(&p).unwrap();
    assert_same(&back, &again);
    assert_same_results(&back, &again, &mut rng, 100);
}

#[test]
fn a_torn_last_record_loads_the_state_before_it() {
    let (mut idx, mut rng) = index(600, 4, 2);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hnsw");
    let log = log_path(&p);
    idx.save(&p).unwrap();
    let state0 = idx.clone();
    grow(&mut idx, &mut rng, 8);
    idx.save(&p).unwrap();
    let l1 = size(&log);
    let state1 = idx.clone();
    grow(&mut idx, &mut rng, 4);
    idx.save(&p).unwrap();
    let full = std::fs::read(&log).unwrap();
    let l2 = full.len() as u64;
    assert!(LOG_HEADER < l1 && l1 < l2, "both saves appended");

    for cut in 0..=l2 {
        std::fs::write(&log, &full[..cut as usize]).unwrap();
        let back = HnswIndex::load(&p).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let want = if cut < l1 {
            &state0
        } else if cut < l2 {
            &state1
        } else {
            &idx
        };
        assert_same(want, &back);
    }

    // After a torn load, the next save cuts the tail off and appends after the last
    // intact record.
    for cut in [3, LOG_HEADER + 5, l1 + 1, l2 - 1] {
        std::fs::write(&log, &full[..cut as usize]).unwrap();
        let mut back = HnswIndex::load(&p).unwrap();
        grow(&mut back, &mut rng, 3);
        back.save(&p).unwrap();
        assert_same(&back, &HnswIndex::load(&p).unwrap());
    }
}

#[test]
fn compaction_rewrites_the_base_and_drops_the_log() {
    let (mut idx, mut rng) = index(500, 8, 3);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hnsw");
    let log = log_path(&p);
    idx.save(&p).unwrap();
    let (mut appended, mut compacted) = (0, 0);
    for _ in 0..40 {
        let id = base_id(&p);
        grow(&mut idx, &mut rng, 12);
        idx.save(&p).unwrap();
        if base_id(&p) == id {
            appended += 1;
            assert!(size(&log) > 0);
        } else {
            compacted += 1;
            assert!(!log.exists(), "compaction removes the log");
        }
        assert!(size(&log) * 100 <= size(&p) * COMPACT_PERCENT);
        let back = HnswIndex::load(&p).unwrap();
        assert_same(&idx, &back);
    }
    assert!(
        appended > 5 && compacted > 1,
        "{appended} appends, {compacted} compactions"
    );
    assert_same_results(&idx, &HnswIndex::load(&p).unwrap(), &mut rng, 100);
}

/// Base, then two appended records; returns the log and where record 2 starts.
fn two_records(dir: &Path) -> (HnswIndex, HnswIndex, std::path::PathBuf, Vec<u8>, u64) {
    let (mut idx, mut rng) = index(800, 4, 4);
    let p = dir.join("v.hnsw");
    idx.save(&p).unwrap();
    grow(&mut idx, &mut rng, 6);
    idx.save(&p).unwrap();
    let state1 = idx.clone();
    let l1 = size(&log_path(&p));
    grow(&mut idx, &mut rng, 6);
    idx.save(&p).unwrap();
    let full = std::fs::read(log_path(&p)).unwrap();
    assert!(l1 > LOG_HEADER && (full.len() as u64) > l1);
    (idx, state1, p, full, l1)
}

#[test]
fn damage_before_the_last_record_is_corrupt_and_in_it_is_torn() {
    let dir = tempfile::tempdir().unwrap();
    let (idx, state1, p, full, l1) = two_records(dir.path());
    let log = log_path(&p);
    let flip = |at: u64| {
        let mut b = full.clone();
        b[at as usize] ^= 0x20;
        std::fs::write(&log, &b).unwrap();
        HnswIndex::load(&p)
    };
    // Record 1's payload, its header, its commit marker, the log header.
    for at in [LOG_HEADER + 30, LOG_HEADER + 1, LOG_HEADER + 5, l1 - 1, 10] {
        assert!(is_corrupt(flip(at)), "byte {at}");
    }
    // The last record damaged: a save that never returned.
    for at in [
        l1 + 1,
        l1 + 40,
        full.len() as u64 - 6,
        full.len() as u64 - 1,
    ] {
        assert_same(&state1, &flip(at).unwrap());
    }
    // A stray intact record header after a torn record shows it was not the last.
    let mut b = full[..l1 as usize + 30].to_vec();
    b.extend_from_slice(&full[LOG_HEADER as usize..l1 as usize]);
    std::fs::write(&log, &b).unwrap();
    assert!(is_corrupt(HnswIndex::load(&p)));
    std::fs::write(&log, &full).unwrap();
    assert_same(&idx, &HnswIndex::load(&p).unwrap());
}

/// A framed record around `payload`.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut r = record_header(payload.len() as u64).to_vec();
    r.extend_from_slice(payload);
    r.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    r.extend_from_slice(END_TAG);
    r
}

struct Payload(Vec<u8>);
impl Payload {
    fn u32(mut self, x: u32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u64(mut self, x: u64) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
}

#[test]
fn forged_records_are_refused_without_panicking_or_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let (idx, _) = index(50, 2, 5);
    let p = dir.path().join("v.hnsw");
    idx.save(&p).unwrap();
    let log = log_path(&p);
    let id = base_id(&p);
    let n = idx.len() as u64;
    let with = |records: &[Vec<u8>]| {
        let mut b = log_header(id).to_vec();
        for r in records {
            b.extend_from_slice(r);
        }
        std::fs::write(&log, b).unwrap();
        HnswIndex::load(&p)
    };
    // One well-formed new node linking to `to` on layer 0, plus `tail`.
    let node = |n0: u64, to: u32| {
        Payload(Vec::new())
            .u64(n0)
            .u64(n0 + 1)
            .u64(0)
            .u64(999)
            .u32(0)
            .u32(1f32.to_bits())
            .u32(0f32.to_bits())
            .u32(1)
            .u32(1)
            .u32(to)
    };
    let ok = frame(&node(n, 0).u64(0).0);
    let good = with(std::slice::from_ref(&ok)).unwrap();
    assert_eq!(good.len(), idx.len() + 1);

    let forged: Vec<(&str, Vec<u8>)> = vec![
        ("link out of range", node(n, 1_000_000).u64(0).0),
        ("does not follow", node(n - 1, 0).u64(0).0),
        ("node count past the end", {
            let mut b = Payload(Vec::new()).u64(n).u64(u64::MAX).u64(0);
            b.0.extend_from_slice(&[0; 64]);
            b.0
        }),
        (
            "removes nodes",
            Payload(Vec::new()).u64(n).u64(0).u64(0).u64(0).0,
        ),
        ("changed count", node(n, 0).u64(u64::MAX / 2).0),
        (
            "changed node beyond",
            node(n, 0).u64(1).u32(n as u32).u32(1).u32(0).0,
        ),
        ("changed layers differ", {
            let layers = idx.links[0].len() as u32 + 1;
            let mut b = node(n, 0).u64(1).u32(0).u32(layers);
            for _ in 0..layers {
                b = b.u32(0);
            }
            b.0
        }),
        ("layer count", {
            let mut b = node(n, 0).0;
            let at = b.len() - 12;
            b[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            b
        }),
        ("list past the end", {
            let mut b = node(n, 0).0;
            let at = b.len() - 8;
            b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            b
        }),
        ("entry", {
            let mut b = node(n, 0).u64(0).0;
            b[16..24].copy_from_slice(&(n + 5).to_le_bytes());
            b
        }),
        ("trailing", node(n, 0).u64(0).u32(7).0),
    ];
    for (what, payload) in forged {
        assert!(is_corrupt(with(&[frame(&payload)])), "{what}");
        // A forged record after a good one is caught the same way.
        assert!(
            is_corrupt(with(&[ok.clone(), frame(&payload)])),
            "{what}, second"
        );
    }

    // An intact header announcing an absurd length is a torn tail when last (nothing
    // is allocated for it), and corrupt when an intact record follows.
    let mut huge = record_header(u64::MAX - 64).to_vec();
    huge.extend_from_slice(&[0; 40]);
    assert_same(&idx, &with(std::slice::from_ref(&huge)).unwrap());
    assert!(is_corrupt(with(&[huge, ok.clone()])));
    // A log for another base is one left by an interrupted compaction: ignored.
    let mut stale = log_header(id ^ 1).to_vec();
    stale.extend_from_slice(&ok);
    std::fs::write(&log, stale).unwrap();
    assert_same(&idx, &HnswIndex::load(&p).unwrap());
}

#[test]
fn random_damage_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, p, full, _) = two_records(dir.path());
    let log = log_path(&p);
    let base = std::fs::read(&p).unwrap();
    let v1 = dir.path().join("v1.hnsw");
    save_v1(&HnswIndex::load(&p).unwrap(), &v1);
    let base_v1 = std::fs::read(&v1).unwrap();
    let mut rng = Rng64::seed_from_u64(6);
    let mut mutate = |bytes: &[u8]| -> Vec<u8> {
        let mut b = bytes.to_vec();
        match rng.gen_range(0..5) {
            0 => {
                for _ in 0..rng.gen_range(1..4) {
                    let at = rng.gen_range(0..b.len());
                    b[at] = rng.gen();
                }
            }
            1 => b.truncate(rng.gen_range(0..b.len())),
            2 => {
                let at = rng.gen_range(0..b.len());
                let junk: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
                b.splice(at..at, junk);
            }
            _ => {
                // A plausible-looking or absurd length where a count might be.
                let at = rng.gen_range(0..b.len().saturating_sub(8));
                let x: u64 = match rng.gen_range(0..3) {
                    0 => u64::MAX - rng.gen_range(0..1000),
                    1 => rng.gen_range(0..100_000),
                    _ => rng.gen::<u32>() as u64,
                };
                let w = if rng.gen() { 4 } else { 8 };
                b[at..at + w].copy_from_slice(&x.to_le_bytes()[..w]);
            }
        }
        b
    };
    let exercise = |r: Result<HnswIndex>| {
        if let Ok(idx) = r {
            let q = vec![0.5f32; idx.dim()];
            let all = Admit::from_ordinals(0..GROUPS);
            let _ = idx.search(&q, 5, &all);
            let _ = idx.search_graph(&q, 5, &all);
        }
    };
    for _ in 0..1500 {
        std::fs::write(&log, mutate(&full)).unwrap();
        exercise(HnswIndex::load(&p));
    }
    std::fs::remove_file(&log).unwrap();
    for _ in 0..700 {
        std::fs::write(&p, mutate(&base)).unwrap();
        exercise(HnswIndex::load(&p));
        // Version 1 has no checksum: its structure checks carry the weight.
        std::fs::write(&v1, mutate(&base_v1)).unwrap();
        exercise(HnswIndex::load(&v1));
    }
}

/// The `DHNSW001` layout as the previous `save` wrote it.
fn save_v1(idx: &HnswIndex, path: &Path) {
    let mut s = Sink::new(Vec::new());
    s.put(MAGIC_V1).unwrap();
    put_header(idx, &mut s).unwrap();
    put_nodes(idx, &mut s, 0).unwrap();
    std::fs::write(path, s.finish().0).unwrap();
}

#[test]
fn version_1_files_load_and_the_next_save_upgrades_them() {
    let (idx, mut rng) = index(2500, 8, 7);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hnsw");
    save_v1(&idx, &p);
    let mut back = HnswIndex::load(&p).unwrap();
    assert_same(&idx, &back);
    assert_same_results(&idx, &back, &mut rng, 100);
    grow(&mut back, &mut rng, 10);
    back.save(&p).unwrap();
    assert!(!log_path(&p).exists(), "no log extends a version 1 base");
    base_id(&p);
    assert_same(&back, &HnswIndex::load(&p).unwrap());
}

#[test]
fn a_log_left_by_an_interrupted_compaction_is_ignored() {
    let (mut idx, mut rng) = index(300, 4, 8);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hnsw");
    let log = log_path(&p);
    idx.save(&p).unwrap();
    grow(&mut idx, &mut rng, 5);
    idx.save(&p).unwrap();
    let stale = std::fs::read(&log).unwrap();
    grow(&mut idx, &mut rng, 400);
    idx.save(&p).unwrap();
    assert!(!log.exists(), "that save compacted");
    // The crash came after the new base's rename, before the old log's removal.
    std::fs::write(&log, &stale).unwrap();
    let mut back = HnswIndex::load(&p).unwrap();
    assert_same(&idx, &back);
    // The next append replaces the stale log rather than extending it.
    grow(&mut back, &mut rng, 5);
    back.save(&p).unwrap();
    assert_ne!(
        std::fs::read(&log).unwrap()[..LOG_HEADER as usize],
        stale[..LOG_HEADER as usize]
    );
    assert_same(&back, &HnswIndex::load(&p).unwrap());
}

#[test]
fn a_failed_append_is_cut_off_before_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (mut idx, _, p, full, l1) = two_records(dir.path());
    let log = log_path(&p);
    // What a save that failed half-way (disk full, say) left behind it.
    let mut b = full.clone();
    b.extend_from_slice(&full[l1 as usize..l1 as usize + 50]);
    std::fs::write(&log, &b).unwrap();
    assert_same(&idx, &HnswIndex::load(&p).unwrap());
    let mut rng = Rng64::seed_from_u64(9);
    grow(&mut idx, &mut rng, 5);
    idx.save(&p).unwrap();
    assert_same(&idx, &HnswIndex::load(&p).unwrap());
}

#[test]
fn saves_elsewhere_from_copies_or_over_changed_files_write_a_base() {
    let (mut idx, mut rng) = index(400, 4, 10);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.hnsw"), dir.path().join("b.hnsw"));
    idx.save(&a).unwrap();
    grow(&mut idx, &mut rng, 5);
    idx.save(&b).unwrap();
    assert!(!log_path(&b).exists());
    assert_same(&idx, &HnswIndex::load(&b).unwrap());
    grow(&mut idx, &mut rng, 5);
    idx.save(&a).unwrap();
    assert!(
        !log_path(&a).exists(),
        "a's files are not what idx last wrote"
    );
    assert_same(&idx, &HnswIndex::load(&a).unwrap());

    // A copy saved over the original's files: the original notices the new base.
    let mut copy = idx.clone();
    grow(&mut copy, &mut rng, 5);
    copy.save(&a).unwrap();
    assert!(!log_path(&a).exists(), "a copy's first save writes a base");
    grow(&mut idx, &mut rng, 5);
    idx.save(&a).unwrap();
    assert!(!log_path(&a).exists());
    assert_same(&idx, &HnswIndex::load(&a).unwrap());

    // The log removed behind the index's back: the next save writes a whole base.
    grow(&mut idx, &mut rng, 5);
    idx.save(&a).unwrap();
    assert!(log_path(&a).exists());
    std::fs::remove_file(log_path(&a)).unwrap();
    grow(&mut idx, &mut rng, 5);
    idx.save(&a).unwrap();
    assert_same(&idx, &HnswIndex::load(&a).unwrap());
}

#[test]
fn an_empty_index_round_trips_and_grows_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.hnsw");
    let idx = HnswIndex::new(3, HnswParams::default());
    idx.save(&p).unwrap();
    let mut back = HnswIndex::load(&p).unwrap();
    assert!(back.is_empty());
    let mut rng = Rng64::seed_from_u64(11);
    grow(&mut back, &mut rng, 10);
    back.save(&p).unwrap();
    assert_same(&back, &HnswIndex::load(&p).unwrap());
    assert_eq!(idx.len(), 0);
}
