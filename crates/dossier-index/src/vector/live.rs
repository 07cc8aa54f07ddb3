//! A vector index whose writes cost what they add: an HNSW graph plus a *tail* of rows
//! appended since the graph last grew.
//!
//! Inserting into an HNSW costs more the larger the graph (each insertion searches it,
//! and its memory stops fitting in cache): at 106k chunks a commit of 1,000 spent
//! 0.7 s there, three times what it spent at 16k. So a commit only appends its rows to
//! the tail, which searches scan exactly and merge with the graph's hits, and linking
//! the tail into the graph is separate work that runs beside the readers:
//!
//! 1. [`LiveIndex::plan`] (shared access, in parallel) finds each new row's neighbours
//!    *and* computes every existing link list the new rows change, pruned;
//! 2. [`LiveIndex::apply`] (exclusive access) only writes those lists, so writers and
//!    readers wait for a copy of a few thousand integers, not for graph searches.
//!
//! Rows keep ascending sequence numbers (a commit's are sorted; later commits' are
//! larger), and the tail is linked in order, so "is this chunk already here" is one
//! comparison with the largest sequence number seen — which is what lets a store
//! replay its change log over an index saved mid-way through a commit.

use super::{dot, select_diverse, HnswIndex, MaxSim, MinSim, Rows, SEQUENTIAL_BELOW};
use crate::{Admit, Result, Scored};

/// Rows linked per plan: small enough that a plan's exclusive step is short and the
/// rows planned together (which do not see each other) are few.
pub const LINK_BATCH: usize = 128;

/// An HNSW graph and the rows not yet linked into it.
#[derive(Debug)]
pub struct LiveIndex {
    graph: HnswIndex,
    tail: Rows,
    /// The catalog generation of each tail row.
    tail_gens: Vec<u64>,
    /// Tail rows before `head` are already in the graph (dropped in bulk, not one by one).
    head: usize,
    max_seq: Option<u64>,
    /// The catalog generation every row appended so far reflects.
    through: u64,
}

/// The links for the next rows of the tail, computed without exclusive access.
#[derive(Debug)]
pub struct LinkPlan {
    /// Graph size and tail head the plan was made against: a plan made stale by another
    /// link step is discarded rather than applied.
    graph_len: usize,
    head: usize,
    take: usize,
    kind: PlanKind,
}

#[derive(Debug)]
enum PlanKind {
    /// A small graph grows one node at a time (cheap, and batches would link poorly).
    OneByOne,
    Planned {
        levels: Vec<usize>,
        /// Per new row, per layer: its neighbours.
        own: Vec<Vec<Vec<u32>>>,
        /// Existing nodes' lists that gain new rows: `(node, layer, new list)`.
        rewired: Vec<(u32, usize, Vec<u32>)>,
    },
}

impl LiveIndex {
    /// Wraps a graph that holds every row of catalog generations up to `through`.
    pub fn new(graph: HnswIndex, through: u64) -> LiveIndex {
        let max_seq = graph.rows.seqs.iter().copied().max();
        let dim = graph.dim();
        LiveIndex {
            graph,
            tail: Rows::new(dim),
            tail_gens: Vec::new(),
            head: 0,
            max_seq,
            through,
        }
    }

    pub fn graph(&self) -> &HnswIndex {
        &self.graph
    }
    /// Rows searched: linked and not.
    pub fn len(&self) -> usize {
        self.graph.len() + self.tail_len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Rows appended but not yet linked.
    pub fn tail_len(&self) -> usize {
        self.tail.len() - self.head
    }
    /// The catalog generation every appended row reflects.
    pub fn through(&self) -> u64 {
        self.through
    }
    /// The newest catalog generation all of whose rows are in the graph.
    pub fn linked_through(&self) -> u64 {
        match self.tail_gens.get(self.head) {
            Some(&g) => g.saturating_sub(1).min(self.through),
            None => self.through,
        }
    }

    /// Appends one commit's rows (generation `generation`) to the tail. Rows whose
    /// sequence number is not above every row already held are skipped: they are in
    /// already (a replay over an index saved part-way). Returns how many were added.
    pub fn append(
        &mut self,
        generation: u64,
        mut rows: Vec<(u64, u32, Vec<f32>)>,
    ) -> Result<usize> {
        rows.sort_by_key(|r| r.0);
        let mut added = 0;
        for (seq, dv, v) in rows {
            if self.max_seq.is_some_and(|m| seq <= m) {
                continue;
            }
            self.tail.push(seq, dv, &v)?;
            self.tail_gens.push(generation);
            self.max_seq = Some(seq);
            added += 1;
        }
        self.mark(generation);
        Ok(added)
    }

    /// Notes that every row of catalog generations up to `generation` has been offered
    /// (a commit may add no vectors).
    pub fn mark(&mut self, generation: u64) {
        self.through = self.through.max(generation);
    }

    /// The `k` most similar admitted rows, from the graph and the tail together.
    pub fn search(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        let mut hits = self.graph.search(q, k, admit);
        self.merge_tail(&mut hits, q, k, admit);
        hits
    }

    /// Exact search over every row (the oracle).
    pub fn search_exact(&self, q: &[f32], k: usize, admit: &Admit) -> Vec<Scored> {
        let mut hits = self.graph.search_exact(q, k, admit);
        self.merge_tail(&mut hits, q, k, admit);
        hits
    }

    fn merge_tail(&self, hits: &mut Vec<Scored>, q: &[f32], k: usize, admit: &Admit) {
        if self.tail_len() == 0 || k == 0 {
            return;
        }
        hits.extend(self.tail.exact_from(q, k, admit, self.head));
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
        hits.truncate(k);
    }

    /// Plans linking up to `max` tail rows (at most `LINK_BATCH`); `None` when the
    /// tail is empty. Read-only: runs beside searches and appends.
    pub fn plan(&self, max: usize) -> Option<LinkPlan> {
        use rayon::prelude::*;
        use std::collections::HashMap;
        let take = self.tail_len().min(max).min(LINK_BATCH);
        if take == 0 {
            return None;
        }
        let g = &self.graph;
        let start = g.len();
        let (graph_len, head) = (start, self.head);
        if start < SEQUENTIAL_BELOW {
            let kind = PlanKind::OneByOne;
            return Some(LinkPlan {
                graph_len,
                head,
                take,
                kind,
            });
        }
        let rows: Vec<usize> = (head..head + take).collect();
        let levels: Vec<usize> = rows
            .iter()
            .map(|&r| g.level_for(self.tail.seqs[r]))
            .collect();
        let own: Vec<Vec<Vec<u32>>> = rows
            .par_iter()
            .zip(levels.par_iter())
            .map(|(&r, &level)| g.plan_vector(self.tail.vec(r), level, None))
            .collect();
        // Each existing node that gains links gets its list recomputed once, with all of
        // this batch's new rows, and pruned as insertion would prune it.
        let mut incoming: HashMap<(u32, usize), Vec<u32>> = HashMap::new();
        for (i, layers) in own.iter().enumerate() {
            for (layer, list) in layers.iter().enumerate() {
                for &n in list {
                    incoming
                        .entry((n, layer))
                        .or_default()
                        .push((start + i) as u32);
                }
            }
        }
        let vec_of = |id: u32| -> &[f32] {
            let id = id as usize;
            if id < start {
                g.rows.vec(id)
            } else {
                self.tail.vec(head + id - start)
            }
        };
        let rewired: Vec<(u32, usize, Vec<u32>)> = incoming
            .into_par_iter()
            .map(|((n, layer), new)| {
                let mut list = g.links[n as usize][layer].clone();
                list.extend(new);
                let max_links = g.max_links(layer);
                if list.len() > max_links {
                    let nv = g.rows.vec(n as usize);
                    let mut cands: Vec<MaxSim> = list
                        .iter()
                        .map(|&c| MaxSim(dot(nv, vec_of(c)), c))
                        .collect();
                    cands.sort_by(|a, b| b.cmp(a));
                    list = select_diverse(&cands, max_links, vec_of);
                }
                (n, layer, list)
            })
            .collect();
        let kind = PlanKind::Planned {
            levels,
            own,
            rewired,
        };
        Some(LinkPlan {
            graph_len,
            head,
            take,
            kind,
        })
    }

    /// Writes a plan into the graph and drops its rows from the tail. Returns the rows
    /// linked: 0 when the plan is stale (the graph or tail moved since it was made).
    pub fn apply(&mut self, plan: LinkPlan) -> Result<usize> {
        if plan.graph_len != self.graph.len() || plan.head != self.head {
            return Ok(0);
        }
        let rows = plan.head..plan.head + plan.take;
        match plan.kind {
            PlanKind::OneByOne => {
                for r in rows {
                    let (seq, dv) = (self.tail.seqs[r], self.tail.dvs[r]);
                    self.graph.add(seq, dv, self.tail.vec(r))?;
                }
            }
            PlanKind::Planned {
                levels,
                own,
                rewired,
            } => {
                let top_before = self.graph.top_layer();
                let mut new_entry: Option<(usize, u32)> = None;
                for ((r, level), links) in rows.zip(levels).zip(own) {
                    let (seq, dv) = (self.tail.seqs[r], self.tail.dvs[r]);
                    let node = self.graph.rows.push(seq, dv, self.tail.vec(r))? as u32;
                    self.graph.links.push(links);
                    if level > top_before && new_entry.is_none_or(|(l, _)| level > l) {
                        new_entry = Some((level, node));
                    }
                }
                for (n, layer, list) in rewired {
                    self.graph.links[n as usize][layer] = list;
                    self.graph.persist.get_mut().touch(n);
                }
                if let Some((_, node)) = new_entry {
                    self.graph.entry = Some(node);
                }
            }
        }
        self.head += plan.take;
        self.compact_tail();
        Ok(plan.take)
    }

    /// Plans and applies until the tail is empty (one caller with exclusive access:
    /// builds, tests, the end of a bulk load).
    pub fn link_all(&mut self) -> Result<usize> {
        let mut linked = 0;
        while let Some(plan) = self.plan(usize::MAX) {
            linked += self.apply(plan)?;
        }
        Ok(linked)
    }

    /// Drops linked rows from the front of the tail once they are most of it.
    fn compact_tail(&mut self) {
        if self.head == 0 || self.head * 2 < self.tail.len() {
            return;
        }
        let (h, dim) = (self.head, self.tail.dim);
        self.tail.seqs.drain(..h);
        self.tail.dvs.drain(..h);
        self.tail.data.drain(..h * dim);
        self.tail_gens.drain(..h);
        self.head = 0;
    }
}

impl HnswIndex {
    /// A node's level from its sequence number and the index's seed: the same
    /// distribution insertion draws from, without mutable state, so that it can be
    /// chosen while planning under shared access.
    fn level_for(&self, seq: u64) -> usize {
        // splitmix64 finaliser.
        let mut z = seq ^ self.params.seed ^ 0x9E37_79B9_7F4A_7C15;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = ((z >> 11) as f64 / (1u64 << 53) as f64).max(f64::EPSILON);
        let ml = 1.0 / (self.params.m as f64).ln();
        ((-u.ln() * ml).floor() as usize).min(16)
    }
}

impl Rows {
    /// Exact top-k over admitted rows from `from` on.
    pub(super) fn exact_from(
        &self,
        q: &[f32],
        k: usize,
        admit: &Admit,
        from: usize,
    ) -> Vec<Scored> {
        let mut heap = std::collections::BinaryHeap::with_capacity(k + 1);
        for i in from..self.len() {
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
}

#[cfg(test)]
mod tests {
    use super::super::HnswParams;
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    fn unit(rng: &mut rand::rngs::StdRng, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let n = dot(&v, &v).sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn seqs(h: &[Scored]) -> HashSet<u64> {
        h.iter().map(|s| s.seq).collect()
    }

    /// Commits of random sizes, linked by random amounts between them: after every
    /// step each row is found exactly once, exact search equals a flat scan, and the
    /// graph-plus-tail search keeps recall.
    #[test]
    fn appended_rows_are_searchable_before_and_after_linking() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let dim = 24;
        let mut live = LiveIndex::new(HnswIndex::new(dim, HnswParams::default()), 0);
        let mut flat = super::super::FlatIndex::new(dim);
        let (mut seq, mut hit, mut total) = (0u64, 0usize, 0usize);
        for generation in 1..=40u64 {
            let n = rng.gen_range(0..400);
            let rows: Vec<(u64, u32, Vec<f32>)> = (0..n)
                .map(|_| {
                    seq += 1;
                    (seq, rng.gen_range(0..6), unit(&mut rng, dim))
                })
                .collect();
            for (s, dv, v) in &rows {
                flat.add(*s, *dv, v).unwrap();
            }
            assert_eq!(live.append(generation, rows).unwrap(), n);
            let budget = rng.gen_range(0..600);
            let mut linked = 0;
            while linked < budget {
                let Some(plan) = live.plan(budget - linked) else {
                    break;
                };
                linked += live.apply(plan).unwrap();
            }
            assert_eq!(live.len(), flat.len());
            assert!(live.linked_through() <= live.through());
            let admit = Admit::from_ordinals((0..6).filter(|_| rng.gen_bool(0.6)));
            let q = unit(&mut rng, dim);
            let want = flat.search(&q, 10, &admit);
            assert_eq!(seqs(&live.search_exact(&q, 10, &admit)), seqs(&want));
            let got = live.search(&q, 10, &admit);
            assert_eq!(seqs(&got).len(), got.len(), "a row was returned twice");
            hit += got.iter().filter(|s| seqs(&want).contains(&s.seq)).count();
            total += want.len();
        }
        assert!(hit as f32 / total as f32 > 0.9, "recall {hit}/{total}");
        live.link_all().unwrap();
        assert_eq!(live.tail_len(), 0);
        assert_eq!(live.graph().len(), flat.len());
        assert_eq!(live.linked_through(), 40);
    }

    #[test]
    fn rows_already_held_are_skipped_and_stale_plans_discarded() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let rows =
            |from: u64, to: u64, rng: &mut rand::rngs::StdRng| -> Vec<(u64, u32, Vec<f32>)> {
                (from..to).map(|s| (s, 0, unit(rng, 8))).collect()
            };
        let mut live = LiveIndex::new(HnswIndex::new(8, HnswParams::default()), 0);
        live.append(1, rows(0, 5000, &mut rng)).unwrap();
        live.link_all().unwrap();
        // A replay of generation 1 and a commit overlapping it add only what is new.
        assert_eq!(live.append(1, rows(0, 5000, &mut rng)).unwrap(), 0);
        assert_eq!(live.append(2, rows(4990, 5300, &mut rng)).unwrap(), 300);
        assert_eq!(live.linked_through(), 1);
        let stale = live.plan(10).unwrap();
        let fresh = live.plan(10).unwrap();
        assert_eq!(live.apply(fresh).unwrap(), 10);
        assert_eq!(
            live.apply(stale).unwrap(),
            0,
            "a stale plan must not be applied"
        );
        assert_eq!(live.len(), 5300);
    }

    /// The planned (batch) path links as well as one-by-one insertion.
    #[test]
    fn planned_linking_keeps_recall_against_the_exact_scan() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let dim = 32;
        let mut live = LiveIndex::new(HnswIndex::new(dim, HnswParams::default()), 0);
        let rows: Vec<(u64, u32, Vec<f32>)> = (0..12_000u64)
            .map(|s| (s, (s % 3) as u32, unit(&mut rng, dim)))
            .collect();
        for (g, part) in rows.chunks(1000).enumerate() {
            live.append(g as u64 + 1, part.to_vec()).unwrap();
            live.link_all().unwrap();
        }
        let admit = Admit::from_ordinals([0, 2]);
        let (mut hit, mut total) = (0, 0);
        for _ in 0..50 {
            let q = unit(&mut rng, dim);
            let want = seqs(&live.search_exact(&q, 10, &admit));
            let got = live.graph().search_graph(&q, 10, &admit);
            hit += got.iter().filter(|s| want.contains(&s.seq)).count();
            total += want.len();
        }
        assert!(hit as f32 / total as f32 > 0.9, "recall {hit}/{total}");
    }
}
