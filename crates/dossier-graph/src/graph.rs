//! The tenant graph (every sourced fact, unfiltered) and the principal's view of it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use dossier_core::text::normalize;
use serde::{Deserialize, Serialize};

use crate::model::{EntityId, EntityKind, Extraction, Mention, Provenance};
use crate::resolve::{majority_kind, Merge, NameId, Resolver, UnionFind};
use crate::GraphError;

#[derive(Debug, Clone)]
struct Occurrence {
    name: NameId,
    surface: String,
    kind: EntityKind,
    prov: Provenance,
}

#[derive(Debug, Clone)]
struct RawRelation {
    from: NameId,
    relation: String,
    to: NameId,
    prov: Provenance,
    evidence: Option<String>,
}

/// Everything one tenant's sources say, each fact with its provenance, before anyone's
/// visibility is applied. Never shown as is: a reader gets a [`GraphView`].
#[derive(Debug, Clone)]
pub struct TenantGraph {
    resolver: Resolver,
    occurrences: Vec<Occurrence>,
    relations: Vec<RawRelation>,
    seen: HashSet<RelationKey>,
}

/// What makes a sourced relation distinct: its ends, its type, its citation and span.
type RelationKey = (NameId, String, NameId, String, Option<(usize, usize)>);

impl TenantGraph {
    pub fn new(tenant: &str) -> TenantGraph {
        TenantGraph {
            resolver: Resolver::new(tenant),
            occurrences: Vec::new(),
            relations: Vec::new(),
            seen: HashSet::new(),
        }
    }

    pub fn tenant(&self) -> &str {
        self.resolver.tenant()
    }

    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    pub fn resolver_mut(&mut self) -> &mut Resolver {
        &mut self.resolver
    }

    /// Number of distinct sourced relations.
    pub fn relation_count(&self) -> usize {
        self.relations.len()
    }

    /// Adds what an extraction found. All or nothing: a fact of another tenant refuses
    /// the whole extraction, since entities never cross tenants.
    pub fn add(&mut self, x: Extraction) -> Result<(), GraphError> {
        let provs = x
            .mentions
            .iter()
            .map(|(_, p)| p)
            .chain(x.relations.iter().map(|r| &r.provenance))
            .chain(x.aliases.iter().map(|a| &a.provenance));
        for p in provs {
            if p.tenant != self.tenant() {
                return Err(GraphError::TenantMismatch {
                    expected: self.tenant().to_string(),
                    found: p.tenant.clone(),
                });
            }
        }
        for (m, p) in x.mentions {
            self.occur(&m, p);
        }
        for r in x.relations {
            let (Some(from), Some(to)) = (
                self.occur(&r.from, r.provenance.clone()),
                self.occur(&r.to, r.provenance.clone()),
            ) else {
                continue;
            };
            let key = (
                from,
                r.relation.clone(),
                to,
                r.provenance.cite(),
                r.provenance.span,
            );
            if self.seen.insert(key) {
                self.relations.push(RawRelation {
                    from,
                    relation: r.relation,
                    to,
                    prov: r.provenance,
                    evidence: r.evidence,
                });
            }
        }
        for a in x.aliases {
            let (Some(al), Some(ca)) = (
                self.occur(&a.alias, a.provenance.clone()),
                self.occur(&a.canonical, a.provenance.clone()),
            ) else {
                continue;
            };
            if al != ca {
                self.resolver.push_merge(
                    al,
                    &a.alias.text,
                    ca,
                    &a.canonical.text,
                    a.reason,
                    Some(a.provenance),
                );
            }
        }
        Ok(())
    }

    fn occur(&mut self, m: &Mention, prov: Provenance) -> Option<NameId> {
        let name = self.resolver.observe(m)?;
        self.occurrences.push(Occurrence {
            name,
            surface: m.text.trim().to_string(),
            kind: m.kind.clone(),
            prov,
        });
        Some(name)
    }

    /// Forgets every fact from `doc_id` (all versions; `records/<table>` for a table):
    /// its mentions, relations and alias statements. Returns how many facts went.
    pub fn remove_document(&mut self, doc_id: &str) -> usize {
        let before = self.occurrences.len() + self.relations.len();
        self.occurrences.retain(|o| o.prov.doc_id != doc_id);
        self.relations.retain(|r| r.prov.doc_id != doc_id);
        self.seen = self
            .relations
            .iter()
            .map(|r| (r.from, r.relation.clone(), r.to, r.prov.cite(), r.prov.span))
            .collect();
        self.resolver.forget_document(doc_id);
        self.resolver.clear_kinds();
        for o in &self.occurrences {
            *self.resolver.names[o.name]
                .kinds
                .entry(o.kind.clone())
                .or_default() += 1;
        }
        before - self.occurrences.len() - self.relations.len()
    }

    /// The `(doc_id, version)` of every source anything in the graph comes from.
    pub fn sources(&self) -> BTreeSet<(String, String)> {
        self.occurrences
            .iter()
            .map(|o| &o.prov)
            .chain(self.relations.iter().map(|r| &r.prov))
            .chain(
                self.resolver
                    .merge_log()
                    .iter()
                    .filter_map(|m| m.provenance.as_ref()),
            )
            .map(|p| (p.doc_id.clone(), p.version.clone()))
            .collect()
    }

    /// The graph as a reader sees it. `may_read` decides each provenance (it is asked
    /// once per document version and chunk); provenance of another tenant is never read.
    ///
    /// - an edge is kept when at least one of its provenances is readable, and carries
    ///   only those;
    /// - a name exists only through readable provenance, and a document or version only
    ///   when its own declaration is readable (a reference to it is not enough);
    /// - a merge applies only when its statement is readable (or, for an accepted
    ///   candidate, both names are visible), so hidden aliases do not resolve.
    pub fn view(&self, may_read: &dyn Fn(&Provenance) -> bool) -> GraphView {
        let tenant = self.tenant().to_string();
        let mut cache: HashMap<(String, String, Option<String>), bool> = HashMap::new();
        let mut readable = |p: &Provenance| {
            p.tenant == tenant
                && *cache
                    .entry((p.doc_id.clone(), p.version.clone(), p.chunk_id.clone()))
                    .or_insert_with(|| may_read(p))
        };
        let names = &self.resolver.names;
        let n = names.len();
        let occ_ok: Vec<bool> = self.occurrences.iter().map(|o| readable(&o.prov)).collect();
        let mut visible = vec![false; n];
        let mut anchored = vec![false; n];
        for (o, _) in self.occurrences.iter().zip(&occ_ok).filter(|(_, ok)| **ok) {
            visible[o.name] = true;
            anchored[o.name] |= anchors(&names[o.name].key, &o.prov);
        }
        for (i, v) in visible.iter_mut().enumerate() {
            if names[i].shape == 0 && !anchored[i] {
                *v = false;
            }
        }

        // Merges, in log order; two documents never become one entity.
        let mut uf = UnionFind::new(n);
        let mut doc_of: Vec<Option<NameId>> =
            (0..n).map(|i| (names[i].shape == 0).then_some(i)).collect();
        let mut applied = Vec::new();
        let mut alias_side = vec![false; n];
        for m in self.resolver.merge_log().iter().filter(|m| m.active) {
            let (Some(a), Some(c)) = (
                self.resolver.id_of_key(&m.alias_key),
                self.resolver.id_of_key(&m.canonical_key),
            ) else {
                continue;
            };
            let ok = visible[a] && visible[c] && m.provenance.as_ref().is_none_or(&mut readable);
            if !ok {
                continue;
            }
            let (ra, rc) = (uf.find(a), uf.find(c));
            if ra != rc {
                if let (Some(x), Some(y)) = (doc_of[ra], doc_of[rc]) {
                    if x != y {
                        continue;
                    }
                }
                let root = uf.union(ra, rc);
                doc_of[root] = doc_of[ra].or(doc_of[rc]);
            }
            alias_side[a] = true;
            applied.push(m.clone());
        }

        // Classes of visible names, each with its representative.
        let mut classes: BTreeMap<usize, Vec<NameId>> = BTreeMap::new();
        for i in (0..n).filter(|&i| visible[i]) {
            classes.entry(uf.find(i)).or_default().push(i);
        }
        let mut reps: Vec<(NameId, Vec<NameId>)> = classes
            .into_values()
            .map(|members| {
                let rep = *members
                    .iter()
                    .min_by_key(|&&i| {
                        (
                            names[i].shape != 0,
                            alias_side[i],
                            names[i].shape,
                            &names[i].key,
                        )
                    })
                    .expect("a class has members");
                (rep, members)
            })
            .collect();
        reps.sort_by(|a, b| names[a.0].key.cmp(&names[b.0].key));
        let mut class_of: Vec<Option<usize>> = vec![None; n];
        for (e, (_, members)) in reps.iter().enumerate() {
            for &m in members {
                class_of[m] = Some(e);
            }
        }

        // What readable mentions say of each entity.
        let mut surfaces: Vec<BTreeMap<&str, u32>> = vec![BTreeMap::new(); n];
        let mut kinds: Vec<BTreeMap<&EntityKind, u32>> = vec![BTreeMap::new(); reps.len()];
        let mut sources: Vec<BTreeSet<String>> = vec![BTreeSet::new(); reps.len()];
        let mut links: BTreeSet<(usize, &str)> = BTreeSet::new();
        for (o, _) in self.occurrences.iter().zip(&occ_ok).filter(|(_, ok)| **ok) {
            let Some(e) = class_of[o.name] else { continue };
            *surfaces[o.name].entry(o.surface.as_str()).or_default() += 1;
            *kinds[e].entry(&o.kind).or_default() += 1;
            sources[e].insert(o.prov.cite());
            if let Some(c) = &o.prov.chunk_id {
                links.insert((e, c.as_str()));
            }
        }
        let top = |i: NameId| {
            surfaces[i]
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(s, _)| s.to_string())
                .unwrap_or_else(|| names[i].key.clone())
        };
        let entities: Vec<Entity> = reps
            .iter()
            .enumerate()
            .map(|(e, (rep, members))| {
                let name = top(*rep);
                let aliases: BTreeSet<String> = members
                    .iter()
                    .flat_map(|&m| surfaces[m].keys().map(|s| s.to_string()))
                    .filter(|s| *s != name)
                    .collect();
                Entity {
                    id: EntityId {
                        tenant: tenant.clone(),
                        key: names[*rep].key.clone(),
                    },
                    name,
                    kind: majority_kind(kinds[e].iter().map(|(k, &c)| (*k, c))),
                    aliases: aliases.into_iter().collect(),
                    sources: std::mem::take(&mut sources[e]).into_iter().collect(),
                }
            })
            .collect();

        // Edges between entities, through readable provenance only.
        type Support = (Vec<Provenance>, BTreeSet<String>);
        let mut grouped: BTreeMap<(usize, &str, usize), Support> = BTreeMap::new();
        for r in &self.relations {
            let (Some(f), Some(t)) = (class_of[r.from], class_of[r.to]) else {
                continue;
            };
            if f == t || !readable(&r.prov) {
                continue;
            }
            let g = grouped.entry((f, r.relation.as_str(), t)).or_default();
            if !g
                .0
                .iter()
                .any(|p| p.cite() == r.prov.cite() && p.span == r.prov.span)
            {
                g.0.push(r.prov.clone());
            }
            g.1.extend(r.evidence.clone());
        }
        let mut edges = Vec::with_capacity(grouped.len());
        let mut ends = Vec::with_capacity(grouped.len());
        let mut adj = vec![Vec::new(); entities.len()];
        for ((f, rel, t), (provenance, evidence)) in grouped {
            adj[f].push(edges.len());
            adj[t].push(edges.len());
            ends.push((f, t));
            edges.push(Edge {
                from: entities[f].id.clone(),
                relation: rel.to_string(),
                to: entities[t].id.clone(),
                provenance,
                evidence: evidence.into_iter().collect(),
            });
        }

        let chunks: Vec<String> = links
            .iter()
            .map(|(_, c)| c.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let chunk_ix: HashMap<&str, usize> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let mut entity_chunks = vec![Vec::new(); entities.len()];
        for (e, c) in links {
            entity_chunks[e].push(chunk_ix[c]);
        }
        let by_name = (0..n)
            .filter_map(|i| class_of[i].map(|e| (names[i].key.clone(), e)))
            .collect();
        let by_key = entities
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.key.clone(), i))
            .collect();
        GraphView {
            tenant,
            entities,
            by_key,
            by_name,
            edges,
            ends,
            adj,
            chunks,
            entity_chunks,
            merges: applied,
        }
    }
}

/// Whether this provenance is the declaration of the document or version named `key`.
fn anchors(key: &str, p: &Provenance) -> bool {
    if p.record_table().is_some() {
        return false;
    }
    match (key.strip_prefix("doc:"), key.strip_prefix("ver:")) {
        (Some(id), _) => p.doc_id == id,
        (_, Some(v)) => {
            v.strip_prefix(p.doc_id.as_str())
                .and_then(|r| r.strip_prefix('@'))
                == Some(p.version.as_str())
        }
        _ => false,
    }
}

/// One entity as a reader sees it: every field derived from readable provenance only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    pub id: EntityId,
    /// The representative name as most often written.
    pub name: String,
    pub kind: EntityKind,
    /// Other names it is known by, as written.
    pub aliases: Vec<String>,
    /// Where it is mentioned: chunk ids, or `DOC@VERSION` for facts without a chunk.
    pub sources: Vec<String>,
}

/// A typed edge between two entities with the readable provenance that supports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub from: EntityId,
    pub relation: String,
    pub to: EntityId,
    pub provenance: Vec<Provenance>,
    /// Evidence text of declared edges (e.g. `supersedes_evidence`).
    pub evidence: Vec<String>,
}

/// An edge as search results show it: its provenance as citations (chunk ids, or
/// `DOC@VERSION` for facts without a chunk).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeRef {
    pub from: EntityId,
    pub relation: String,
    pub to: EntityId,
    pub provenance: Vec<String>,
}

impl From<&Edge> for EdgeRef {
    fn from(e: &Edge) -> EdgeRef {
        let cites: BTreeSet<String> = e.provenance.iter().map(Provenance::cite).collect();
        EdgeRef {
            from: e.from.clone(),
            relation: e.relation.clone(),
            to: e.to.clone(),
            provenance: cites.into_iter().collect(),
        }
    }
}

/// A node as search results show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    pub id: EntityId,
    pub name: String,
    pub kind: EntityKind,
}

/// A neighbourhood: its nodes and the edges that join them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subgraph {
    pub nodes: Vec<NodeRef>,
    pub edges: Vec<EdgeRef>,
}

/// One reader's graph: only what readable provenance supports (see [`TenantGraph::view`]).
/// Build one per visibility class (tenant and groups) and query it as often as needed.
#[derive(Debug, Clone)]
pub struct GraphView {
    tenant: String,
    pub(crate) entities: Vec<Entity>,
    by_key: HashMap<String, usize>,
    by_name: HashMap<String, usize>,
    pub(crate) edges: Vec<Edge>,
    pub(crate) ends: Vec<(usize, usize)>,
    adj: Vec<Vec<usize>>,
    chunks: Vec<String>,
    entity_chunks: Vec<Vec<usize>>,
    merges: Vec<Merge>,
}

impl GraphView {
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The merges this view applied (readable statements, accepted candidates).
    pub fn merges(&self) -> &[Merge] {
        &self.merges
    }

    /// The entity a name denotes for this reader: as written, normalised, or an id.
    pub fn resolve(&self, name: &str) -> Option<EntityId> {
        let i = [
            normalize(name),
            format!("doc:{}", name.trim()),
            format!("ver:{}", name.trim()),
        ]
        .iter()
        .find_map(|k| self.by_name.get(k).copied())?;
        Some(self.entities[i].id.clone())
    }

    pub fn entity(&self, id: &EntityId) -> Option<&Entity> {
        self.index(id).map(|i| &self.entities[i])
    }

    pub(crate) fn index(&self, id: &EntityId) -> Option<usize> {
        (id.tenant == self.tenant).then(|| self.by_key.get(&id.key).copied())?
    }

    /// The chunks that mention an entity.
    pub fn chunks_of(&self, id: &EntityId) -> Vec<&str> {
        self.index(id)
            .map(|i| {
                self.entity_chunks[i]
                    .iter()
                    .map(|&c| self.chunks[c].as_str())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn node(&self, i: usize) -> NodeRef {
        let e = &self.entities[i];
        NodeRef {
            id: e.id.clone(),
            name: e.name.clone(),
            kind: e.kind.clone(),
        }
    }

    fn other(&self, e: usize, v: usize) -> usize {
        let (a, b) = self.ends[e];
        if a == v {
            b
        } else {
            a
        }
    }

    /// Entities within `hops` edges of `id` (either direction), through edges whose
    /// relation is in `relations` when given, and the edges walked.
    pub fn neighbors(&self, id: &EntityId, hops: usize, relations: Option<&[&str]>) -> Subgraph {
        let Some(start) = self.index(id) else {
            return Subgraph::default();
        };
        let allowed =
            |e: usize| relations.is_none_or(|r| r.contains(&self.edges[e].relation.as_str()));
        let mut dist = HashMap::from([(start, 0usize)]);
        let mut queue = VecDeque::from([start]);
        let mut walked = BTreeSet::new();
        while let Some(v) = queue.pop_front() {
            if dist[&v] == hops {
                continue;
            }
            for &e in self.adj[v].iter().filter(|&&e| allowed(e)) {
                walked.insert(e);
                let u = self.other(e, v);
                if !dist.contains_key(&u) {
                    dist.insert(u, dist[&v] + 1);
                    queue.push_back(u);
                }
            }
        }
        let mut nodes: Vec<usize> = dist.keys().copied().collect();
        nodes.sort_by_key(|i| (dist[i], *i));
        Subgraph {
            nodes: nodes.into_iter().map(|i| self.node(i)).collect(),
            edges: walked
                .into_iter()
                .map(|e| EdgeRef::from(&self.edges[e]))
                .collect(),
        }
    }

    /// A shortest chain of edges (walked in either direction) from `a` to `b`, at most
    /// `max_hops` long.
    pub fn path(&self, a: &EntityId, b: &EntityId, max_hops: usize) -> Option<Vec<EdgeRef>> {
        let (s, t) = (self.index(a)?, self.index(b)?);
        let mut via: HashMap<usize, (usize, usize)> = HashMap::new();
        let mut depth = HashMap::from([(s, 0usize)]);
        let mut queue = VecDeque::from([s]);
        while let Some(v) = queue.pop_front() {
            if v == t {
                let mut out = Vec::new();
                let mut x = t;
                while x != s {
                    let (e, prev) = via[&x];
                    out.push(EdgeRef::from(&self.edges[e]));
                    x = prev;
                }
                out.reverse();
                return Some(out);
            }
            if depth[&v] == max_hops {
                continue;
            }
            for &e in &self.adj[v] {
                let u = self.other(e, v);
                if !depth.contains_key(&u) {
                    depth.insert(u, depth[&v] + 1);
                    via.insert(u, (e, v));
                    queue.push_back(u);
                }
            }
        }
        None
    }

    /// Personalised PageRank over the entity graph (edges undirected, one unit of
    /// weight per typed edge), restarting at `seeds` (weights need not sum to one).
    /// Entities with a positive score, highest first.
    pub fn personalized_pagerank(
        &self,
        seeds: &[(EntityId, f32)],
        damping: f32,
        iters: usize,
    ) -> Vec<(EntityId, f32)> {
        let adj = self.entity_adjacency(0);
        let seeds: Vec<(usize, f32)> = seeds
            .iter()
            .filter_map(|(id, w)| Some((self.index(id)?, *w)))
            .collect();
        let r = ppr(&adj, &seeds, damping, iters);
        let mut out: Vec<(EntityId, f32)> = r
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .map(|(i, s)| (self.entities[i].id.clone(), s))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Personalised PageRank over the entity–passage graph: chunks are nodes linked to
    /// the entities they mention, so mass from seed entities (and seed chunks, e.g.
    /// lexical or dense hits) flows to passages. Readable chunks with a positive score,
    /// highest first.
    pub fn chunk_scores(
        &self,
        entity_seeds: &[(EntityId, f32)],
        chunk_seeds: &[(String, f32)],
        damping: f32,
        iters: usize,
    ) -> Vec<(String, f32)> {
        let ne = self.entities.len();
        let mut adj = self.entity_adjacency(self.chunks.len());
        let mut linked: HashSet<(usize, usize)> = HashSet::new();
        for (e, cs) in self.entity_chunks.iter().enumerate() {
            for &c in cs {
                adj[e].push((ne + c, 1.0));
                adj[ne + c].push((e, 1.0));
                linked.insert((e, c));
            }
        }
        // A passage also belongs to its own document's node, so that a mention of a
        // document (a hyperlink-like edge) leads to the document's passages.
        let doc_node: HashMap<&str, usize> = self
            .entities
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((e.id.key.strip_prefix("doc:")?, i)))
            .collect();
        for (c, chunk) in self.chunks.iter().enumerate() {
            let doc = chunk.rsplit_once('@').map_or(chunk.as_str(), |(d, _)| d);
            if let Some(&e) = doc_node.get(doc) {
                if linked.insert((e, c)) {
                    adj[e].push((ne + c, 1.0));
                    adj[ne + c].push((e, 1.0));
                }
            }
        }
        let chunk_ix: HashMap<&str, usize> = self
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let seeds: Vec<(usize, f32)> = entity_seeds
            .iter()
            .filter_map(|(id, w)| Some((self.index(id)?, *w)))
            .chain(
                chunk_seeds
                    .iter()
                    .filter_map(|(c, w)| Some((ne + *chunk_ix.get(c.as_str())?, *w))),
            )
            .collect();
        let r = ppr(&adj, &seeds, damping, iters);
        let mut out: Vec<(String, f32)> = r[ne..]
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0.0)
            .map(|(i, s)| (self.chunks[i].clone(), *s))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Undirected entity adjacency with `extra` empty slots appended for other nodes.
    fn entity_adjacency(&self, extra: usize) -> Vec<Vec<(usize, f32)>> {
        let mut adj = vec![Vec::new(); self.entities.len() + extra];
        for &(f, t) in &self.ends {
            adj[f].push((t, 1.0));
            adj[t].push((f, 1.0));
        }
        adj
    }
}

/// Power iteration of personalised PageRank: `r ← (1−d)·s + d·(Pᵀr + dangling·s)`.
fn ppr(adj: &[Vec<(usize, f32)>], seeds: &[(usize, f32)], damping: f32, iters: usize) -> Vec<f32> {
    let n = adj.len();
    let mut s = vec![0f32; n];
    for &(i, w) in seeds.iter().filter(|(_, w)| *w > 0.0 && w.is_finite()) {
        s[i] += w;
    }
    let total: f32 = s.iter().sum();
    if total <= 0.0 {
        return vec![0.0; n];
    }
    s.iter_mut().for_each(|x| *x /= total);
    let deg: Vec<f32> = adj.iter().map(|a| a.iter().map(|(_, w)| w).sum()).collect();
    let mut r = s.clone();
    for _ in 0..iters {
        let mut next: Vec<f32> = s.iter().map(|x| (1.0 - damping) * x).collect();
        let mut dangling = 0.0;
        for (u, ru) in r.iter().enumerate() {
            if deg[u] == 0.0 {
                dangling += ru;
                continue;
            }
            for &(v, w) in &adj[u] {
                next[v] += damping * ru * w / deg[u];
            }
        }
        for (x, si) in next.iter_mut().zip(&s) {
            *x += damping * dangling * si;
        }
        r = next;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Alias, Relation, Source};

    fn prov(doc: &str) -> Provenance {
        Provenance {
            tenant: "t".into(),
            doc_id: doc.into(),
            version: "1".into(),
            chunk_id: Some(format!("{doc}@1#0")),
            span: None,
            source: Source::Extracted,
        }
    }

    fn rel(a: &str, r: &str, b: &str, doc: &str) -> Relation {
        Relation {
            from: Mention::new(a, EntityKind::Identifier),
            relation: r.into(),
            to: Mention::new(b, EntityKind::Identifier),
            provenance: prov(doc),
            evidence: None,
        }
    }

    fn graph() -> TenantGraph {
        let mut g = TenantGraph::new("t");
        g.add(Extraction {
            mentions: vec![(Mention::new("Bee", EntityKind::Concept), prov("open"))],
            relations: vec![
                rel("A-1", "r", "B-1", "open"),
                rel("B-1", "r", "C-1", "secret"),
                rel("A-1", "r", "B-1", "secret"),
                rel("C-1", "r", "D-1", "open"),
            ],
            aliases: vec![Alias {
                alias: Mention::new("Bee", EntityKind::Concept),
                canonical: Mention::new("B-1", EntityKind::Identifier),
                reason: "said so".into(),
                provenance: prov("secret"),
            }],
        })
        .unwrap();
        g
    }

    #[test]
    fn views_keep_only_readable_provenance() {
        let g = graph();
        let open = |p: &Provenance| p.doc_id == "open";
        let v = g.view(&open);
        assert_eq!(v.edges().len(), 2);
        assert!(v.edges().iter().all(|e| e.provenance.iter().all(open)));
        // "Bee" is written in the open document, but only the secret one says it is B-1.
        assert!(v.resolve("Bee").is_some());
        assert_ne!(v.resolve("Bee"), v.resolve("B-1"));
        let (a, c) = (v.resolve("A-1").unwrap(), v.resolve("C-1").unwrap());
        assert!(v.path(&a, &c, 5).is_none());
        let all = g.view(&|_| true);
        assert_eq!(all.resolve("Bee"), all.resolve("B-1"));
        let p = all
            .path(
                &all.resolve("A-1").unwrap(),
                &all.resolve("D-1").unwrap(),
                3,
            )
            .unwrap();
        assert_eq!(p.len(), 3);
        assert!(all
            .path(
                &all.resolve("A-1").unwrap(),
                &all.resolve("D-1").unwrap(),
                2
            )
            .is_none());
        assert_eq!(all.edges()[0].provenance.len(), 2);
    }

    #[test]
    fn other_tenants_are_refused() {
        let mut g = TenantGraph::new("u");
        assert!(matches!(
            g.add(graph_extraction()),
            Err(GraphError::TenantMismatch { .. })
        ));
        let v = graph().view(&|_| true);
        let mut id = v.resolve("A-1").unwrap();
        id.tenant = "u".into();
        assert!(v.entity(&id).is_none());
    }

    fn graph_extraction() -> Extraction {
        Extraction {
            mentions: vec![],
            relations: vec![rel("A-1", "r", "B-1", "open")],
            aliases: vec![],
        }
    }

    #[test]
    fn pagerank_flows_from_seeds_to_chunks() {
        let v = graph().view(&|_| true);
        let a = v.resolve("A-1").unwrap();
        let pr = v.personalized_pagerank(&[(a.clone(), 1.0)], 0.85, 30);
        let score = |k: &str| pr.iter().find(|x| x.0.key == k).map_or(0.0, |x| x.1);
        assert!(score("a1") > score("c1") && score("c1") > score("d1"));
        let total: f32 = pr.iter().map(|x| x.1).sum();
        assert!((total - 1.0).abs() < 1e-3, "{total}");
        let cs = v.chunk_scores(&[(a, 1.0)], &[], 0.85, 30);
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0].0, "open@1#0");
    }

    #[test]
    fn removing_a_document_leaves_nothing_of_it() {
        let mut g = graph();
        assert!(g.remove_document("secret") > 0);
        assert!(g.sources().iter().all(|(d, _)| d != "secret"));
        let v = g.view(&|_| true);
        assert_ne!(v.resolve("Bee"), v.resolve("B-1"));
        assert_eq!(v.edges().len(), 2);
    }
}
