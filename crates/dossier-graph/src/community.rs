//! Communities of a view's entity graph (Leiden, hierarchical, seeded) and their
//! extractive reports.
//!
//! Leiden (Traag, Waltman & van Eck, 2019) optimises modularity with a resolution γ:
//! moving node v into community C gains `k(v,C) − γ·k(v)·K(C)/2m`. Each pass runs the
//! fast local moving phase, refines every community into well-connected
//! sub-communities (a node or sub-community S of C is well connected when
//! `w(S, C∖S) ≥ γ·K(S)·(K(C) − K(S))/2m`), aggregates the refined partition and starts
//! the next pass from the unrefined one. The refinement merges greedily (the θ → 0 limit
//! of its randomised choice) and node order comes from a seeded generator, so the
//! result is a function of the view and the seed.
//!
//! The hierarchy is built bottom-up: level 0 is Leiden at the given resolution (the
//! finest), and each next level runs Leiden on the previous level's communities at half
//! the resolution, so levels nest. Because everything is computed on a
//! [`GraphView`], a reader's communities and reports are built only from what that
//! reader may read.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::graph::GraphView;
use crate::model::{EntityId, EntityKind};
use crate::text::sentences;

/// Entities whose names a report looks for (the best-connected first).
const REPORT_NAMES: usize = 64;
/// Chunks a report reads at most.
const REPORT_CHUNKS: usize = 256;

/// How communities are detected.
#[derive(Debug, Clone, PartialEq)]
pub struct CommunityOptions {
    /// Modularity resolution γ of level 0; each next level halves it.
    pub resolution: f64,
    pub max_levels: usize,
    pub seed: u64,
    /// Communities with fewer entities are not reported.
    pub min_size: usize,
}

impl Default for CommunityOptions {
    fn default() -> Self {
        CommunityOptions {
            resolution: 1.0,
            max_levels: 3,
            seed: 42,
            min_size: 2,
        }
    }
}

/// A community at one level, with its lineage: the chunks supporting its internal edges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Community {
    /// `L{level}C{n}`, numbered by the community's first entity.
    pub id: String,
    pub level: usize,
    pub entities: Vec<EntityId>,
    pub chunk_ids: Vec<String>,
}

/// A sentence of a report with the chunk it was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cited {
    pub chunk_id: String,
    pub text: String,
}

/// An extractive community report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub community_id: String,
    pub level: usize,
    /// The community's best-connected entities.
    pub title: String,
    /// Sentences of its chunks that mention the most of its entities.
    pub summary: Vec<Cited>,
    /// The chunks the report was built from (the community's lineage).
    pub sources: Vec<String>,
    pub entities: Vec<EntityId>,
}

impl GraphView {
    /// Communities at every level, level 0 (finest) first.
    pub fn communities(&self, opts: &CommunityOptions) -> Vec<Community> {
        let n = self.entities.len();
        // Versions are bookkeeping, not topics: the version graph stays out.
        let mut g = WGraph::new(n);
        for &(f, t) in &self.ends {
            if self.entities[f].kind != EntityKind::Version
                && self.entities[t].kind != EntityKind::Version
            {
                g.add(f, t, 1.0);
            }
        }
        // `member[v]`: the current node of entity v.
        let mut member: Vec<usize> = (0..n).collect();
        let mut levels: Vec<Vec<usize>> = Vec::new();
        let mut gamma = opts.resolution;
        for level in 0..opts.max_levels.max(1) {
            let part = leiden(&g, gamma, opts.seed.wrapping_add(level as u64));
            let count = part.iter().copied().max().map_or(0, |m| m + 1);
            if level > 0 && count == g.n() {
                break;
            }
            member = member.iter().map(|&v| part[v]).collect();
            levels.push(member.clone());
            if count <= 1 {
                break;
            }
            g = g.aggregate(&part, count);
            gamma /= 2.0;
        }
        let mut out = Vec::new();
        for (level, assign) in levels.iter().enumerate() {
            let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for (v, &c) in assign.iter().enumerate() {
                groups.entry(c).or_default().push(v);
            }
            let mut groups: Vec<Vec<usize>> = groups
                .into_values()
                .filter(|m| m.len() >= opts.min_size.max(1))
                .collect();
            groups.sort_by_key(|m| m[0]);
            for (i, members) in groups.into_iter().enumerate() {
                let inside: BTreeSet<usize> = members.iter().copied().collect();
                let chunk_ids: BTreeSet<String> = self
                    .ends
                    .iter()
                    .zip(&self.edges)
                    .filter(|((f, t), _)| inside.contains(f) && inside.contains(t))
                    .flat_map(|(_, e)| e.provenance.iter().filter_map(|p| p.chunk_id.clone()))
                    .collect();
                out.push(Community {
                    id: format!("L{level}C{i}"),
                    level,
                    entities: members
                        .iter()
                        .map(|&v| self.entities[v].id.clone())
                        .collect(),
                    chunk_ids: chunk_ids.into_iter().collect(),
                });
            }
        }
        out
    }

    /// The extractive report of a community of this view: its title names the entities
    /// with the most edges inside it, its summary the sentences of its chunks (read with
    /// `chunk_text`) that mention the most of its entities, at most `max_sentences`.
    pub fn report(
        &self,
        c: &Community,
        chunk_text: &dyn Fn(&str) -> Option<String>,
        max_sentences: usize,
    ) -> Report {
        let members: Vec<usize> = c.entities.iter().filter_map(|id| self.index(id)).collect();
        let inside: BTreeSet<usize> = members.iter().copied().collect();
        let mut degree: HashMap<usize, usize> = HashMap::new();
        for &(f, t) in self
            .ends
            .iter()
            .filter(|(f, t)| inside.contains(f) && inside.contains(t))
        {
            *degree.entry(f).or_default() += 1;
            *degree.entry(t).or_default() += 1;
        }
        let mut ranked = members.clone();
        ranked.sort_by_key(|v| (std::cmp::Reverse(degree.get(v).copied().unwrap_or(0)), *v));
        let title = ranked
            .iter()
            .take(3)
            .map(|&v| self.entities[v].name.as_str())
            .collect::<Vec<_>>()
            .join(" · ");

        // Names to look for: each entity's name and aliases as written (not ids), of the
        // best-connected members only, so that a report of a huge community stays
        // linear in its size.
        let top: BTreeSet<usize> = ranked.iter().take(REPORT_NAMES).copied().collect();
        let names: Vec<(usize, Vec<String>)> = ranked
            .iter()
            .take(REPORT_NAMES)
            .map(|&v| {
                let e = &self.entities[v];
                let ns = std::iter::once(&e.name)
                    .chain(&e.aliases)
                    .filter(|s| s.chars().count() >= 2)
                    .map(|s| s.to_lowercase())
                    .collect();
                (v, ns)
            })
            .collect();
        let mut scored: Vec<(usize, usize, usize, Cited)> = Vec::new();
        let mut seen = BTreeSet::new();
        // The chunks read: those supporting edges of the best-connected members (in the
        // community's own order), at most REPORT_CHUNKS of them.
        let wanted: BTreeSet<&str> = self
            .ends
            .iter()
            .zip(&self.edges)
            .filter(|((f, t), _)| inside.contains(f) && inside.contains(t))
            .filter(|((f, t), _)| top.contains(f) || top.contains(t))
            .flat_map(|(_, e)| e.provenance.iter().filter_map(|p| p.chunk_id.as_deref()))
            .collect();
        let read: Vec<&String> = c
            .chunk_ids
            .iter()
            .filter(|id| wanted.contains(id.as_str()))
            .take(REPORT_CHUNKS)
            .collect();
        for (ci, chunk) in read.into_iter().enumerate() {
            let Some(text) = chunk_text(chunk) else {
                continue;
            };
            for (a, b) in sentences(&text) {
                let s = text[a..b].trim_start_matches('#').trim();
                let lower = s.to_lowercase();
                let hits = names
                    .iter()
                    .filter(|(_, ns)| ns.iter().any(|n| lower.contains(n.as_str())))
                    .count();
                if hits > 0 && seen.insert(s.to_string()) {
                    scored.push((
                        hits,
                        ci,
                        a,
                        Cited {
                            chunk_id: chunk.clone(),
                            text: s.to_string(),
                        },
                    ));
                }
            }
        }
        scored.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
        Report {
            community_id: c.id.clone(),
            level: c.level,
            title,
            summary: scored
                .into_iter()
                .take(max_sentences)
                .map(|x| x.3)
                .collect(),
            sources: c.chunk_ids.clone(),
            entities: c.entities.clone(),
        }
    }
}

/// An undirected weighted graph: adjacency without self-loops, plus each node's total
/// degree `k` (a self-loop of weight w adds 2w, as internal edges of an aggregate do).
#[derive(Debug, Clone)]
struct WGraph {
    adj: Vec<Vec<(usize, f64)>>,
    k: Vec<f64>,
}

impl WGraph {
    fn new(n: usize) -> WGraph {
        WGraph {
            adj: vec![Vec::new(); n],
            k: vec![0.0; n],
        }
    }

    fn n(&self) -> usize {
        self.adj.len()
    }

    fn add(&mut self, a: usize, b: usize, w: f64) {
        if a != b {
            self.adj[a].push((b, w));
            self.adj[b].push((a, w));
        }
        self.k[a] += w;
        self.k[b] += w;
    }

    fn m2(&self) -> f64 {
        self.k.iter().sum()
    }

    /// One node per community of `part` (numbered `0..count`), weights summed.
    fn aggregate(&self, part: &[usize], count: usize) -> WGraph {
        let mut acc: Vec<BTreeMap<usize, f64>> = vec![BTreeMap::new(); count];
        let mut k = vec![0.0; count];
        for v in 0..self.n() {
            k[part[v]] += self.k[v];
            for &(u, w) in &self.adj[v] {
                if part[u] != part[v] {
                    *acc[part[v]].entry(part[u]).or_default() += w;
                }
            }
        }
        WGraph {
            adj: acc.into_iter().map(|m| m.into_iter().collect()).collect(),
            k,
        }
    }
}

/// splitmix64: a small seeded generator for node orders.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// Leiden to convergence; communities numbered `0..count` by first node.
fn leiden(g0: &WGraph, gamma: f64, seed: u64) -> Vec<usize> {
    let mut rng = Rng(seed);
    let m2 = g0.m2();
    let n0 = g0.n();
    if m2 == 0.0 {
        return (0..n0).collect();
    }
    let mut g = g0.clone();
    let mut member: Vec<usize> = (0..n0).collect();
    let mut part: Vec<usize> = (0..g.n()).collect();
    for _ in 0..64 {
        move_nodes(&g, &mut part, gamma, m2, &mut rng);
        let count = renumber(&mut part);
        if count == g.n() {
            break;
        }
        let mut refined = refine(&g, &part, gamma, m2, &mut rng);
        let mut rcount = renumber(&mut refined);
        if rcount == g.n() {
            // Nothing to refine: aggregate the moved partition itself.
            refined = part.clone();
            rcount = count;
        }
        let agg = g.aggregate(&refined, rcount);
        let mut next = vec![0; rcount];
        for v in 0..g.n() {
            next[refined[v]] = part[v];
        }
        member = member.iter().map(|&v| refined[v]).collect();
        g = agg;
        part = next;
    }
    let mut out: Vec<usize> = member.iter().map(|&v| part[v]).collect();
    renumber(&mut out);
    out
}

/// Renumbers labels `0..count` in order of first appearance; returns `count`.
fn renumber(part: &mut [usize]) -> usize {
    let mut map = HashMap::new();
    for p in part.iter_mut() {
        let next = map.len();
        *p = *map.entry(*p).or_insert(next);
    }
    map.len()
}

/// The fast local moving phase: visit nodes from a queue, move each to the neighbouring
/// (or an empty) community with the best positive gain, and requeue the neighbours that
/// now lie outside its new community.
fn move_nodes(g: &WGraph, part: &mut [usize], gamma: f64, m2: f64, rng: &mut Rng) {
    let n = g.n();
    let mut tot = vec![0.0; n];
    for v in 0..n {
        tot[part[v]] += g.k[v];
    }
    let mut size = vec![0usize; n];
    for &p in part.iter() {
        size[p] += 1;
    }
    let mut empty: Vec<usize> = (0..n).filter(|&c| size[c] == 0).collect();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut queue: VecDeque<usize> = order.into();
    let mut queued = vec![true; n];
    let mut w_to = vec![0.0; n];
    while let Some(v) = queue.pop_front() {
        queued[v] = false;
        let cur = part[v];
        let mut touched = Vec::new();
        for &(u, w) in &g.adj[v] {
            if w_to[part[u]] == 0.0 {
                touched.push(part[u]);
            }
            w_to[part[u]] += w;
        }
        tot[cur] -= g.k[v];
        size[cur] -= 1;
        let gain = |c: usize, w: f64| w - gamma * g.k[v] * tot[c] / m2;
        let mut best = cur;
        let mut best_gain = gain(cur, w_to[cur]);
        // Ties keep the current community, then the first one met: deterministic.
        for &c in touched.iter().filter(|&&c| c != cur) {
            let x = gain(c, w_to[c]);
            if x > best_gain + 1e-12 {
                best = c;
                best_gain = x;
            }
        }
        if best_gain < 0.0 && size[cur] > 0 {
            // Alone is better than anywhere: an empty community (gain 0).
            if let Some(c) = empty.pop() {
                best = c;
            }
        }
        for &c in &touched {
            w_to[c] = 0.0;
        }
        tot[best] += g.k[v];
        size[best] += 1;
        if size[cur] == 0 && cur != best {
            empty.push(cur);
        }
        part[v] = best;
        if best != cur {
            for &(u, _) in &g.adj[v] {
                if part[u] != best && !queued[u] {
                    queued[u] = true;
                    queue.push_back(u);
                }
            }
        }
    }
}

/// Refinement: within each community, start from singletons and merge each
/// well-connected singleton into the well-connected sub-community with the best
/// non-negative gain.
fn refine(g: &WGraph, part: &[usize], gamma: f64, m2: f64, rng: &mut Rng) -> Vec<usize> {
    let n = g.n();
    let mut tot_c = vec![0.0; n];
    for v in 0..n {
        tot_c[part[v]] += g.k[v];
    }
    let mut refined: Vec<usize> = (0..n).collect();
    let mut tot_r = g.k.clone();
    let mut size_r = vec![1usize; n];
    // Weight from each node (then each sub-community) to the rest of its community.
    let mut ext: Vec<f64> = (0..n)
        .map(|v| {
            g.adj[v]
                .iter()
                .filter(|(u, _)| part[*u] == part[v])
                .map(|(_, w)| w)
                .sum()
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut w_to = vec![0.0; n];
    for v in order {
        if size_r[refined[v]] != 1 {
            continue;
        }
        let c = part[v];
        let kv = g.k[v];
        if ext[v] < gamma * kv * (tot_c[c] - kv) / m2 {
            continue;
        }
        let mut touched = Vec::new();
        for &(u, w) in &g.adj[v] {
            if part[u] == c && refined[u] != refined[v] {
                if w_to[refined[u]] == 0.0 {
                    touched.push(refined[u]);
                }
                w_to[refined[u]] += w;
            }
        }
        let mut best: Option<(usize, f64)> = None;
        for &t in &touched {
            let well = ext[t] >= gamma * tot_r[t] * (tot_c[c] - tot_r[t]) / m2;
            let gain = w_to[t] - gamma * kv * tot_r[t] / m2;
            if well
                && gain >= 0.0
                && best.is_none_or(|(b, bg)| gain > bg + 1e-12 || (gain >= bg - 1e-12 && t < b))
            {
                best = Some((t, gain));
            }
        }
        if let Some((t, _)) = best {
            let own = refined[v];
            ext[t] = ext[t] + ext[own] - 2.0 * w_to[t];
            tot_r[t] += kv;
            size_r[t] += 1;
            tot_r[own] = 0.0;
            size_r[own] = 0;
            refined[v] = t;
        }
        for &t in &touched {
            w_to[t] = 0.0;
        }
    }
    refined
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two 4-cliques joined by one edge.
    fn barbell() -> WGraph {
        let mut g = WGraph::new(8);
        for base in [0, 4] {
            for i in 0..4 {
                for j in i + 1..4 {
                    g.add(base + i, base + j, 1.0);
                }
            }
        }
        g.add(3, 4, 1.0);
        g
    }

    #[test]
    fn leiden_splits_a_barbell_deterministically() {
        let p = leiden(&barbell(), 1.0, 7);
        assert_eq!(p, [0, 0, 0, 0, 1, 1, 1, 1]);
        for seed in 0..20 {
            assert_eq!(leiden(&barbell(), 1.0, seed), p, "seed {seed}");
        }
    }

    #[test]
    fn communities_are_connected_and_lower_resolution_merges() {
        // A ring of 6 triangles: each triangle is a community at γ = 1.
        let mut g = WGraph::new(18);
        for t in 0..6 {
            let b = t * 3;
            g.add(b, b + 1, 1.0);
            g.add(b + 1, b + 2, 1.0);
            g.add(b, b + 2, 1.0);
            g.add(b + 2, (b + 3) % 18, 1.0);
        }
        let p = leiden(&g, 1.0, 1);
        assert_eq!(p.iter().max(), Some(&5));
        for t in 0..6 {
            assert!(p[t * 3] == p[t * 3 + 1] && p[t * 3 + 1] == p[t * 3 + 2]);
        }
        let coarse = leiden(&g, 0.1, 1);
        assert!(coarse.iter().max() < p.iter().max());
    }

    #[test]
    fn aggregation_keeps_total_degree() {
        let g = barbell();
        let a = g.aggregate(&[0, 0, 0, 0, 1, 1, 1, 1], 2);
        assert_eq!(a.m2(), g.m2());
        assert_eq!(a.adj[0], vec![(1, 1.0)]);
    }
}
