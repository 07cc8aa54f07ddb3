//! What a commit costs the vector index on disk: an appended delta against the whole-file
//! rewrite every save used to be.
//!
//! Builds an index of random unit vectors, saves it, then adds a commit's worth of rows
//! at a time and saves after each; for every save it prints the bytes written and the
//! time (both include the fsync), next to a whole-file rewrite of the same index.
//!
//! ```text
//! cargo run --release -p dossier-index --example hnsw_delta_save -- [rows] [dim] [added] [commits] [dir]
//! ```
//!
//! Defaults: 200000 rows, 64 dimensions, 1000 added per commit, 5 commits, a temporary
//! directory (give one on the disk that matters: a RAM-backed /tmp flatters fsync).

use std::path::{Path, PathBuf};
use std::time::Instant;

use dossier_index::vector::{HnswIndex, HnswParams};
use dossier_index::Admit;
use rand::{Rng, SeedableRng};

fn unit(rng: &mut rand::rngs::StdRng, dim: usize) -> Vec<f32> {
    let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn rows(
    rng: &mut rand::rngs::StdRng,
    from: u64,
    n: usize,
    dim: usize,
) -> Vec<(u64, u32, Vec<f32>)> {
    (0..n as u64)
        .map(|i| (from + i, ((from + i) % 97) as u32, unit(rng, dim)))
        .collect()
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: usize| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (n, dim, added, commits) = (arg(0, 200_000), arg(1, 64), arg(2, 1000), arg(3, 5));
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir: PathBuf = args.get(4).map_or(tmp.path().to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("directory");
    let path = dir.join("vectors.hnsw");
    let log = dir.join("vectors.hnsw.log");
    let whole = dir.join("whole.hnsw");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&log);

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut idx = HnswIndex::new(dim, HnswParams::default());
    let t = Instant::now();
    idx.add_batch(&rows(&mut rng, 0, n, dim)).expect("build");
    println!("built {n} × {dim}-d in {:.1} s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    idx.save(&path).expect("first save");
    println!(
        "first save (base): {:.1} MB in {:.0} ms",
        mb(size(&path)),
        t.elapsed().as_secs_f64() * 1e3
    );

    println!("commit  rows      delta save          whole rewrite       log after");
    for c in 1..=commits {
        let next = idx.len() as u64;
        idx.add_batch(&rows(&mut rng, next, added, dim))
            .expect("add");
        let (base_before, log_before) = (size(&path), size(&log));
        let t = Instant::now();
        idx.save(&path).expect("delta save");
        let delta_ms = t.elapsed().as_secs_f64() * 1e3;
        let compacted = size(&path) != base_before || size(&log) < log_before;
        let written = if compacted {
            size(&path) + size(&log)
        } else {
            size(&log) - log_before
        };
        // What every save cost before: a fresh copy has no files, so it writes a base.
        let copy = idx.clone();
        let t = Instant::now();
        copy.save(&whole).expect("whole save");
        let whole_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "{c:>6}  {:>8}  {:>7.2} MB {:>6.1} ms  {:>7.1} MB {:>6.0} ms  {:>6.1} MB{}",
            idx.len(),
            mb(written),
            delta_ms,
            mb(size(&whole)),
            whole_ms,
            mb(size(&log)),
            if compacted { "  (compacted)" } else { "" }
        );
    }

    let t = Instant::now();
    let back = HnswIndex::load(&path).expect("load");
    let replay_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let plain = HnswIndex::load(&whole).expect("load whole");
    let plain_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("load base + log: {replay_ms:.0} ms; load one whole file: {plain_ms:.0} ms");
    assert_eq!(back.len(), idx.len());
    assert_eq!(plain.len(), idx.len());
    let all = Admit::from_ordinals(0..97);
    for _ in 0..100 {
        let q = unit(&mut rng, dim);
        assert_eq!(back.search(&q, 10, &all), idx.search(&q, 10, &all));
    }
    println!("reloaded index answers as the one in memory");
}
