//! Dense-vector indexes over L2-normalised vectors (similarity = dot product).
//!
//! [`FlatIndex`] scans every admitted row: exact, and the oracle the tests hold
//! [`HnswIndex`] to. [`HnswIndex`] is a hierarchical navigable small-world graph
//! (Malkov & Yashunin, 2016) searched under the admission filter: the graph is walked
//! through any node, but only admitted nodes enter the result set, and when the filter
//! admits few rows the search is an exact scan of those rows instead, so selective
//! filters never cost recall.
//!
//! Rows are never removed in place: a deleted chunk's document-version ordinal stops
//! being admitted, and a rebuild drops it. The index therefore only ever grows, and its
//! file is a base plus an append-only log of what each save added (`vector/persist.rs`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;

use rand::{Rng, SeedableRng};

use crate::{Admit, Error, Result, Scored};

mod live;
mod persist;

pub use live::{LinkPlan, LiveIndex};

#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Four accumulators let the compiler vectorise without fast-math.
    let mut acc = [0f32; 4];
    let chunks = a.len() / 4;
    for i in 0..chunks {
        for j in 0..4 {
            acc[j] += a[i * 4 + j] * b[i * 4 + j];
        }
    }
    let mut s = acc[0] + acc[1] + acc[2] + acc[3];
    for i in chunks * 4..a.len() {
        s += a[i] * b[i];
    }
    s
}

/// The stored rows: one vector per chunk, with its sequence number and ordinal.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    dim: usize,
    seqs: Vec<u64>,
    dvs: Vec<u32>,
    data: Vec<f32>,
}

impl Rows {
    pub fn new(dim: usize) -> Rows {
        Rows {
            dim,
            ..Rows::default()
        }
    }
    pub fn len(&self) -> usize {
        self.seqs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }
    pub fn dim(&self) -> usize {
        self.dim
    }
    #[inline]
    fn vec(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
    fn push(&mut self, seq: u64, dv: u32, v: &[f32]) -> Result<usize> {
        if v.len() != self.dim {
            return Err(Error::Dimension {
                got: v.len(),
                want: self.dim,
            });
        }
        self.seqs.push(seq);
        self.dvs.push(dv);
        self.data.extend_from_slice(v);
        Ok(self.seqs.len() - 1)
    }

    /// Exact top-k over admitted rows.
    fn exact(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        let mut heap = BinaryHeap::with_capacity(k + 1);
        for i in 0..self.len() {
            if !admit.contains(self.dvs[i]) {
                continue;
            }
            let s = dot(q, self.vec(i));
            if heap.len() < k {
                heap.push(MinSim(s, i as u32));
            } else if heap.peek().is_some_and(|w| s > w.0) {
                heap.pop();
                heap.push(MinSim(s, i as u32));
            }
        }
        self.finish(heap.into_vec(), k)
    }

    fn finish(&self, mut found: Vec<MinSim>, k: usize) -> Vec<Scored> {
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        found.truncate(k);
        found
            .into_iter()
            .map(|MinSim(score, i)| Scored {
                seq: self.seqs[i as usize],
                score,
            })
            .collect()
    }

    /// Estimated fraction of rows admitted, from an even sample.
    fn admitted_fraction(&self, admit: &Admit) -> f32 {
        let n = self.len();
        if n == 0 {
            return 0.0;
        }
        let step = (n / 2048).max(1);
        let (mut hit, mut total) = (0usize, 0usize);
        for i in (0..n).step_by(step) {
            total += 1;
            hit += admit.contains(self.dvs[i]) as usize;
        }
        hit as f32 / total as f32
    }
}

/// Max-heap entry by similarity.
#[derive(Clone, Copy, PartialEq)]
struct MaxSim(f32, u32);
impl Eq for MaxSim {}
impl Ord for MaxSim {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}
impl PartialOrd for MaxSim {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
/// Min-heap entry by similarity (the worst kept result on top).
#[derive(Clone, Copy, PartialEq)]
struct MinSim(f32, u32);
impl Eq for MinSim {}
impl Ord for MinSim {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(self.1.cmp(&o.1))
    }
}
impl PartialOrd for MinSim {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The neighbour-selection heuristic over candidates sorted best first, with the
/// vectors looked up through `vec_of` (which may reach rows not yet in a graph).
fn select_diverse<'a>(
    candidates: &[MaxSim],
    m: usize,
    vec_of: impl Fn(u32) -> &'a [f32],
) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(m);
    for &MaxSim(s, c) in candidates {
        if kept.len() >= m {
            break;
        }
        let cv = vec_of(c);
        if kept.iter().all(|&k| dot(cv, vec_of(k)) < s) {
            kept.push(c);
        }
    }
    kept
}

/// Exact search: every admitted row is scored.
#[derive(Debug, Clone)]
pub struct FlatIndex {
    rows: Rows,
}

impl FlatIndex {
    pub fn new(dim: usize) -> FlatIndex {
        FlatIndex {
            rows: Rows::new(dim),
        }
    }
    pub fn add(&mut self, seq: u64, dv: u32, v: &[f32]) -> Result<()> {
        self.rows.push(seq, dv, v).map(|_| ())
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn search(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        self.rows.exact(q, k, admit)
    }
}

/// Graphs smaller than this grow one node at a time: linked in batches, their nodes
/// would mostly miss each other.
const SEQUENTIAL_BELOW: usize = 4096;

/// HNSW build and search parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HnswParams {
    /// Links per node on upper layers (twice this on layer 0).
    pub m: usize,
    pub ef_construction: usize,
    /// Candidate list size at query time (raised to `k` and for selective filters).
    pub ef_search: usize,
    /// Below this admitted fraction, search scans the admitted rows exactly.
    pub exact_below: f32,
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 100,
            ef_search: 96,
            exact_below: 0.05,
            seed: 0x5EED,
        }
    }
}

/// An HNSW graph over [`Rows`].
#[derive(Debug)]
pub struct HnswIndex {
    params: HnswParams,
    rows: Rows,
    /// `links[node][layer]`: neighbour node indexes.
    links: Vec<Vec<Vec<u32>>>,
    entry: Option<u32>,
    rng: rand::rngs::StdRng,
    /// What the last save or load left on disk, and which nodes changed since: lets
    /// [`HnswIndex::save`] append only the change. Behind a lock so that `save` can
    /// stay `&self`; only `save` takes it, `add` reaches it through `&mut self`.
    persist: parking_lot::Mutex<persist::Persist>,
}

impl Clone for HnswIndex {
    /// A copy starts with no file of its own: were it to share the original's record
    /// of what is on disk, the two could append to one log without knowing of each
    /// other, so its first save writes a whole base.
    fn clone(&self) -> Self {
        HnswIndex {
            params: self.params,
            rows: self.rows.clone(),
            links: self.links.clone(),
            entry: self.entry,
            rng: self.rng.clone(),
            persist: Default::default(),
        }
    }
}

impl HnswIndex {
    pub fn new(dim: usize, params: HnswParams) -> HnswIndex {
        HnswIndex {
            params,
            rows: Rows::new(dim),
            links: Vec::new(),
            entry: None,
            rng: rand::rngs::StdRng::seed_from_u64(params.seed),
            persist: Default::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn dim(&self) -> usize {
        self.rows.dim
    }
    pub fn params(&self) -> HnswParams {
        self.params
    }

    fn top_layer(&self) -> usize {
        self.entry.map_or(0, |e| self.links[e as usize].len() - 1)
    }

    /// Inserts one vector.
    pub fn add(&mut self, seq: u64, dv: u32, v: &[f32]) -> Result<()> {
        let node = self.push_node(seq, dv, v)?;
        let plan = self.plan_links(node);
        self.link(node, plan);
        Ok(())
    }

    /// Inserts many vectors, searching for their neighbours in parallel. Each batch
    /// is linked against the graph as it stood before the batch, which costs nothing
    /// measurable once the graph holds a few thousand nodes; smaller graphs are grown
    /// one node at a time.
    pub fn add_batch(&mut self, items: &[(u64, u32, Vec<f32>)]) -> Result<()> {
        use rayon::prelude::*;
        const BATCH: usize = 256;
        let mut rest = items;
        while !rest.is_empty() && self.len() < SEQUENTIAL_BELOW {
            let (seq, dv, v) = &rest[0];
            self.add(*seq, *dv, v)?;
            rest = &rest[1..];
        }
        for batch in rest.chunks(BATCH) {
            let first = self.len() as u32;
            for (seq, dv, v) in batch {
                self.push_node(*seq, *dv, v)?;
            }
            let nodes: Vec<u32> = (first..self.len() as u32).collect();
            let plans: Vec<Vec<Vec<u32>>> = nodes.par_iter().map(|&n| self.plan_links(n)).collect();
            for (node, plan) in nodes.into_iter().zip(plans) {
                self.link(node, plan);
            }
        }
        Ok(())
    }

    fn push_node(&mut self, seq: u64, dv: u32, v: &[f32]) -> Result<u32> {
        let node = self.rows.push(seq, dv, v)? as u32;
        let ml = 1.0 / (self.params.m as f64).ln();
        let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
        let level = ((-u.ln() * ml).floor() as usize).min(16);
        self.links.push(vec![Vec::new(); level + 1]);
        Ok(node)
    }

    /// Chooses a new node's neighbours on each of its layers (read-only).
    fn plan_links(&self, node: u32) -> Vec<Vec<u32>> {
        let level = self.links[node as usize].len() - 1;
        self.plan_vector(self.rows.vec(node as usize), level, Some(node))
    }

    /// Chooses the neighbours a vector would get at each layer up to `level`, among
    /// the nodes already in the graph (`exclude`: the vector's own node, if it has one).
    fn plan_vector(&self, q: &[f32], level: usize, exclude: Option<u32>) -> Vec<Vec<u32>> {
        let mut plan = vec![Vec::new(); level + 1];
        let Some(mut ep) = self.entry else {
            return plan;
        };
        let node = exclude.unwrap_or(u32::MAX);
        let top = self.top_layer();
        for layer in (level + 1..=top).rev() {
            ep = self.greedy(q, ep, layer);
        }
        for layer in (0..=level.min(top)).rev() {
            let found = self.search_layer(q, &[ep], self.params.ef_construction, layer, None);
            let found: Vec<MaxSim> = found.into_iter().filter(|m| m.1 != node).collect();
            plan[layer] = self.select(&found, self.max_links(layer));
            ep = found.first().map_or(ep, |m| m.1);
        }
        plan
    }

    /// Writes a planned node's links and the reverse links, pruning full lists.
    fn link(&mut self, node: u32, plan: Vec<Vec<u32>>) {
        let level = plan.len() - 1;
        for (layer, chosen) in plan.into_iter().enumerate() {
            let max_links = self.max_links(layer);
            for &n in &chosen {
                let list = &mut self.links[n as usize][layer];
                list.push(node);
                if list.len() > max_links {
                    self.prune(n, layer, max_links);
                }
                // An already saved node's list changed: the next save must log it.
                self.persist.get_mut().touch(n);
            }
            self.links[node as usize][layer] = chosen;
        }
        if self.entry.is_none() || level > self.top_layer() {
            self.entry = Some(node);
        }
    }

    fn max_links(&self, layer: usize) -> usize {
        if layer == 0 {
            self.params.m * 2
        } else {
            self.params.m
        }
    }

    fn greedy(&self, q: &[f32], mut ep: u32, layer: usize) -> u32 {
        let mut best = dot(q, self.rows.vec(ep as usize));
        loop {
            let mut moved = false;
            for &n in &self.links[ep as usize][layer] {
                let s = dot(q, self.rows.vec(n as usize));
                if s > best {
                    (best, ep, moved) = (s, n, true);
                }
            }
            if !moved {
                return ep;
            }
        }
    }

    /// Best-first search of one layer. With `admit`, every node may be walked through
    /// but only admitted nodes are kept as results. Returns results best first.
    fn search_layer(
        &self,
        q: &[f32],
        entries: &[u32],
        ef: usize,
        layer: usize,
        admit: Option<&Admit>,
    ) -> Vec<MaxSim> {
        let mut visited = vec![0u64; self.len().div_ceil(64)];
        let mut candidates = BinaryHeap::new();
        let mut results: BinaryHeap<MinSim> = BinaryHeap::new();
        let admitted = |i: u32| admit.is_none_or(|a| a.contains(self.rows.dvs[i as usize]));
        for &e in entries {
            visited[e as usize / 64] |= 1 << (e % 64);
            let s = dot(q, self.rows.vec(e as usize));
            candidates.push(MaxSim(s, e));
            if admitted(e) {
                results.push(MinSim(s, e));
            }
        }
        while let Some(MaxSim(s, c)) = candidates.pop() {
            if results.len() >= ef && results.peek().is_some_and(|w| s < w.0) {
                break;
            }
            for &n in &self.links[c as usize][layer] {
                let (w, b) = (n as usize / 64, n % 64);
                if visited[w] & (1 << b) != 0 {
                    continue;
                }
                visited[w] |= 1 << b;
                let sn = dot(q, self.rows.vec(n as usize));
                let worst = results.peek().map_or(f32::MIN, |m| m.0);
                if results.len() < ef || sn > worst {
                    candidates.push(MaxSim(sn, n));
                    if admitted(n) {
                        results.push(MinSim(sn, n));
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
        }
        let mut out: Vec<MaxSim> = results.into_iter().map(|m| MaxSim(m.0, m.1)).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// The neighbour-selection heuristic: keep a candidate only if it is closer to the
    /// new node than to every neighbour already kept, which keeps links diverse.
    fn select(&self, candidates: &[MaxSim], m: usize) -> Vec<u32> {
        select_diverse(candidates, m, |i| self.rows.vec(i as usize))
    }

    fn prune(&mut self, node: u32, layer: usize, m: usize) {
        let v = self.rows.vec(node as usize);
        let mut cands: Vec<MaxSim> = self.links[node as usize][layer]
            .iter()
            .map(|&n| MaxSim(dot(v, self.rows.vec(n as usize)), n))
            .collect();
        cands.sort_by(|a, b| b.cmp(a));
        let kept = self.select(&cands, m);
        self.links[node as usize][layer] = kept;
    }

    /// The `k` most similar admitted rows.
    pub fn search(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        if self.entry.is_none() || k == 0 || admit.is_empty() {
            return Vec::new();
        }
        let fraction = self.rows.admitted_fraction(admit);
        let ef = self.filtered_ef(k, fraction);
        // Cost model in distance computations: the exact scan scores the admitted rows;
        // the graph search scores about ef · 2M candidates per hop over ~log₂ N hops.
        // Whichever is cheaper runs; selective filters make the scan win, and it is exact.
        let admitted_rows = fraction * self.len() as f32;
        let graph_work = (ef * self.params.m * 2) as f32 * (self.len() as f32).log2();
        if fraction < self.params.exact_below || self.len() <= 2048 || admitted_rows <= graph_work {
            return self.rows.exact(q, k, admit);
        }
        self.walk_graph(q, k, admit, ef)
    }

    /// The graph search alone, whatever the cost model would choose (tests and
    /// benchmarks compare it with the exact scan).
    pub fn search_graph(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        if self.entry.is_none() || k == 0 || admit.is_empty() {
            return Vec::new();
        }
        let ef = self.filtered_ef(k, self.rows.admitted_fraction(admit));
        self.walk_graph(q, k, admit, ef)
    }

    /// A filter that admits a fraction f of the rows leaves about f·ef admitted results
    /// in a plain candidate list; widen the list to compensate, up to four times.
    fn filtered_ef(&self, k: usize, fraction: f32) -> usize {
        let base = self.params.ef_search.max(k);
        ((base as f32 / fraction.max(f32::EPSILON)).ceil() as usize).min(base * 4)
    }

    fn walk_graph(&self, q: &[f32], k: usize, admit: &Admit, ef: usize) -> Vec<Scored> {
        let Some(mut ep) = self.entry else {
            return Vec::new();
        };
        for layer in (1..=self.top_layer()).rev() {
            ep = self.greedy(q, ep, layer);
        }
        let found = self.search_layer(q, &[ep], ef.min(self.len()), 0, Some(admit));
        self.rows
            .finish(found.into_iter().map(|m| MinSim(m.0, m.1)).collect(), k)
    }

    /// Exact search over the same rows (the oracle).
    pub fn search_exact(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        self.rows.exact(q, k, admit)
    }

    /// Persists the index at `path`. The first save (and any save to another path)
    /// writes a whole base file atomically; later saves append only what changed since
    /// (new nodes and the link lists insertion rewired) to `<path>.log`, and rewrite the
    /// base instead once the log would outgrow half of it. A save returns only when
    /// what it wrote is durable.
    pub fn save(&self, path: &Path) -> Result<()> {
        persist::save(self, path)
    }

    /// Reads an index written by [`HnswIndex::save`]: the base, then every intact
    /// record of its log. A torn last record (a save cut short) is ignored; damage
    /// anywhere else is [`Error::Corrupt`].
    pub fn load(path: &Path) -> Result<HnswIndex> {
        persist::load(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_unit(rng: &mut rand::rngs::StdRng, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let n = dot(&v, &v).sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn build(n: usize, dim: usize, groups: u32) -> (HnswIndex, rand::rngs::StdRng) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let mut idx = HnswIndex::new(dim, HnswParams::default());
        for i in 0..n {
            let v = random_unit(&mut rng, dim);
            idx.add(i as u64 * 10, i as u32 % groups, &v).unwrap();
        }
        (idx, rng)
    }

    fn recall(idx: &HnswIndex, rng: &mut rand::rngs::StdRng, admit: &Admit, k: usize) -> f32 {
        let (mut hit, mut total) = (0, 0);
        for _ in 0..40 {
            let q = random_unit(rng, idx.dim());
            let truth: std::collections::HashSet<u64> = idx
                .search_exact(&q, k, admit)
                .iter()
                .map(|s| s.seq)
                .collect();
            let got = idx.search_graph(&q, k, admit);
            for g in &got {
                assert!(admit.contains(
                    idx.rows.dvs[idx.rows.seqs.iter().position(|&s| s == g.seq).unwrap()]
                ));
            }
            hit += got.iter().filter(|s| truth.contains(&s.seq)).count();
            total += truth.len();
        }
        hit as f32 / total as f32
    }

    #[test]
    fn hnsw_matches_the_exact_oracle_with_and_without_filters() {
        let (idx, mut rng) = build(4000, 32, 10);
        let all = Admit::from_ordinals(0..10);
        assert!(recall(&idx, &mut rng, &all, 10) > 0.9);
        let half = Admit::from_ordinals([0, 2, 4, 6, 8]);
        assert!(recall(&idx, &mut rng, &half, 10) > 0.9);
        // Selective: one group in ten, and then one in a hundred via the exact path.
        let tenth = Admit::from_ordinals([3]);
        assert!(recall(&idx, &mut rng, &tenth, 10) > 0.9);
        let (idx2, mut rng2) = build(3000, 16, 100);
        assert!((recall(&idx2, &mut rng2, &Admit::from_ordinals([7]), 5) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn batch_insertion_keeps_recall() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let items: Vec<(u64, u32, Vec<f32>)> = (0..6000)
            .map(|i| (i as u64, i as u32 % 4, random_unit(&mut rng, 24)))
            .collect();
        let mut idx = HnswIndex::new(24, HnswParams::default());
        idx.add_batch(&items).unwrap();
        assert_eq!(idx.len(), 6000);
        assert!(recall(&idx, &mut rng, &Admit::from_ordinals(0..4), 10) > 0.9);
        assert!(recall(&idx, &mut rng, &Admit::from_ordinals([1]), 10) > 0.9);
    }

    #[test]
    fn save_and_load_round_trip() {
        let (idx, mut rng) = build(2500, 8, 3);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.hnsw");
        idx.save(&p).unwrap();
        let back = HnswIndex::load(&p).unwrap();
        let q = random_unit(&mut rng, 8);
        let admit = Admit::from_ordinals(0..3);
        assert_eq!(idx.search(&q, 5, &admit), back.search(&q, 5, &admit));
        std::fs::write(&p, b"garbage").unwrap();
        assert!(matches!(HnswIndex::load(&p), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn flat_index_filters_before_cut() {
        let mut f = FlatIndex::new(2);
        f.add(1, 0, &[1.0, 0.0]).unwrap();
        f.add(2, 1, &[0.9, 0.1]).unwrap();
        let hits = f.search(&[1.0, 0.0], 1, &Admit::from_ordinals([1]));
        assert_eq!(hits[0].seq, 2);
        assert!(f.add(3, 0, &[1.0]).is_err());
    }
}
