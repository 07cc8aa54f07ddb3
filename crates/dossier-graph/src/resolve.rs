//! Entity resolution within one tenant: names keyed by normalisation, merges from alias
//! statements and accepted candidates, each logged with its reason and reversible.
//!
//! Merges are not applied here once and for all: a [`crate::GraphView`] applies, in id
//! order, only the merges it may see (a statement's provenance readable, or both names
//! visible for an accepted candidate). So an alias known only from hidden text does not
//! resolve for a reader who may not see that text.

use std::collections::{BTreeMap, HashMap, HashSet};

use dossier_core::text::normalize;
use serde::{Deserialize, Serialize};

use crate::model::{EntityKind, Mention, Provenance};
use crate::text::{is_identifier, KEBAB};
use crate::GraphError;

pub(crate) type NameId = usize;

/// One normalised name of the tenant.
#[derive(Debug, Clone)]
pub(crate) struct Name {
    pub key: String,
    /// 0 document or version, 1 identifier, 2 hyphenated name, 3 anything else: the
    /// order in which a name is preferred as an entity's representative.
    pub shape: u8,
    /// Kind guesses over every mention, for candidates (views count readable ones only).
    pub kinds: BTreeMap<EntityKind, u32>,
}

/// Identifies a merge in a tenant's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MergeId(pub u32);

/// One merge: `alias` denotes the same entity as `canonical`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Merge {
    pub id: MergeId,
    pub alias: String,
    pub canonical: String,
    pub alias_key: String,
    pub canonical_key: String,
    /// Why, in words: the alias statement, the title, or the reviewer's note.
    pub reason: String,
    /// The text that says so. `None` for an accepted candidate, which applies wherever
    /// both names are visible.
    pub provenance: Option<Provenance>,
    /// `false` once reversed by [`Resolver::unmerge`]; the entry stays in the log.
    pub active: bool,
}

/// Two names that look alike: proposed for review, never merged on their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub a: String,
    pub b: String,
    pub kind: EntityKind,
    /// Jaccard similarity of the normalised names' character bigrams.
    pub score: f32,
}

/// The names and merge log of one tenant.
#[derive(Debug, Clone)]
pub struct Resolver {
    tenant: String,
    pub(crate) names: Vec<Name>,
    index: HashMap<String, NameId>,
    merges: Vec<Merge>,
    next_merge: u32,
}

/// Bigrams shared by more names than this say nothing about similarity.
const MAX_POSTINGS: usize = 256;

impl Resolver {
    pub fn new(tenant: &str) -> Resolver {
        Resolver {
            tenant: tenant.to_string(),
            names: Vec::new(),
            index: HashMap::new(),
            merges: Vec::new(),
            next_merge: 0,
        }
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// Every merge ever made, reversed ones included, in the order they were made.
    pub fn merge_log(&self) -> &[Merge] {
        &self.merges
    }

    /// Merges `alias` into `canonical` on a reviewer's or policy's word. Both must be
    /// names of this tenant (as written, an id, or normalised).
    pub fn merge(
        &mut self,
        alias: &str,
        canonical: &str,
        reason: &str,
    ) -> Result<MergeId, GraphError> {
        let a = self
            .lookup(alias)
            .ok_or_else(|| GraphError::UnknownName(alias.into()))?;
        let c = self
            .lookup(canonical)
            .ok_or_else(|| GraphError::UnknownName(canonical.into()))?;
        if a == c {
            return Err(GraphError::SameName(alias.into()));
        }
        Ok(self.push_merge(a, alias, c, canonical, reason.into(), None))
    }

    /// Reverses one merge. The log keeps it, marked inactive.
    pub fn unmerge(&mut self, id: MergeId) -> Result<(), GraphError> {
        let m = self
            .merges
            .iter_mut()
            .find(|m| m.id == id)
            .ok_or(GraphError::UnknownMerge(id.0))?;
        if !m.active {
            return Err(GraphError::AlreadyReversed(id.0));
        }
        m.active = false;
        Ok(())
    }

    /// Pairs of names of the same kind whose normalised character bigrams have a
    /// Jaccard similarity of at least `min_score`, not already one entity under the
    /// active merges. Identifiers and documents are never candidates: a different
    /// identifier is a different thing by definition.
    pub fn candidates(&self, min_score: f32) -> Vec<Candidate> {
        let eligible: Vec<NameId> = (0..self.names.len())
            .filter(|&i| self.names[i].shape >= 2 && !self.names[i].kinds.is_empty())
            .filter(|&i| self.kind(i) != EntityKind::Title)
            .collect();
        let grams: HashMap<NameId, HashSet<String>> = eligible
            .iter()
            .map(|&i| (i, bigrams(&self.names[i].key)))
            .collect();
        let mut postings: HashMap<&str, Vec<NameId>> = HashMap::new();
        for &i in &eligible {
            for g in &grams[&i] {
                postings.entry(g.as_str()).or_default().push(i);
            }
        }
        let mut uf = UnionFind::new(self.names.len());
        for m in self.merges.iter().filter(|m| m.active) {
            if let (Some(&a), Some(&b)) = (
                self.index.get(&m.alias_key),
                self.index.get(&m.canonical_key),
            ) {
                uf.union(a, b);
            }
        }
        let mut out = Vec::new();
        for &i in &eligible {
            let mut shared: BTreeMap<NameId, usize> = BTreeMap::new();
            for g in &grams[&i] {
                let p = &postings[g.as_str()];
                if p.len() <= MAX_POSTINGS {
                    for &j in p.iter().filter(|&&j| j > i) {
                        *shared.entry(j).or_default() += 1;
                    }
                }
            }
            for (j, s) in shared {
                let union = grams[&i].len() + grams[&j].len() - s;
                let score = s as f32 / union as f32;
                let (ki, kj) = (self.kind(i), self.kind(j));
                let same_kind = ki == kj || (ki.is_generic() && kj.is_generic());
                if score >= min_score && same_kind && uf.find(i) != uf.find(j) {
                    out.push(Candidate {
                        a: self.names[i].key.clone(),
                        b: self.names[j].key.clone(),
                        kind: ki,
                        score,
                    });
                }
            }
        }
        out.sort_by(|x, y| {
            y.score
                .total_cmp(&x.score)
                .then_with(|| (&x.a, &x.b).cmp(&(&y.a, &y.b)))
        });
        out
    }

    /// The key of a name as written, as an id, or normalised.
    pub(crate) fn lookup(&self, s: &str) -> Option<NameId> {
        [
            normalize(s),
            format!("doc:{}", s.trim()),
            format!("ver:{}", s.trim()),
        ]
        .iter()
        .find_map(|k| self.index.get(k).copied())
    }

    pub(crate) fn id_of_key(&self, key: &str) -> Option<NameId> {
        self.index.get(key).copied()
    }

    /// Registers a mention's name and counts its kind.
    pub(crate) fn observe(&mut self, m: &Mention) -> Option<NameId> {
        let key = m.key()?;
        let id = match self.index.get(&key) {
            Some(&id) => id,
            None => {
                let shape = match m.kind {
                    EntityKind::Document | EntityKind::Version => 0,
                    _ if is_identifier(m.text.trim()) => 1,
                    _ if KEBAB
                        .find(m.text.trim())
                        .is_some_and(|k| k.len() == m.text.trim().len()) =>
                    {
                        2
                    }
                    _ => 3,
                };
                self.names.push(Name {
                    key: key.clone(),
                    shape,
                    kinds: BTreeMap::new(),
                });
                self.index.insert(key, self.names.len() - 1);
                self.names.len() - 1
            }
        };
        *self.names[id].kinds.entry(m.kind.clone()).or_default() += 1;
        Some(id)
    }

    pub(crate) fn clear_kinds(&mut self) {
        for n in &mut self.names {
            n.kinds.clear();
        }
    }

    pub(crate) fn push_merge(
        &mut self,
        a: NameId,
        alias: &str,
        c: NameId,
        canonical: &str,
        reason: String,
        provenance: Option<Provenance>,
    ) -> MergeId {
        let id = MergeId(self.next_merge);
        self.next_merge += 1;
        self.merges.push(Merge {
            id,
            alias: alias.to_string(),
            canonical: canonical.to_string(),
            alias_key: self.names[a].key.clone(),
            canonical_key: self.names[c].key.clone(),
            reason,
            provenance,
            active: true,
        });
        id
    }

    /// Drops every merge whose statement came from `doc_id` (a deleted source).
    pub(crate) fn forget_document(&mut self, doc_id: &str) {
        self.merges
            .retain(|m| m.provenance.as_ref().is_none_or(|p| p.doc_id != doc_id));
    }

    /// The majority kind over every mention, a specific kind before a generic one.
    fn kind(&self, i: NameId) -> EntityKind {
        majority_kind(self.names[i].kinds.iter().map(|(k, &n)| (k, n)))
    }
}

/// The kind most votes give, documents first, then specific kinds, then generic ones.
pub(crate) fn majority_kind<'a>(votes: impl Iterator<Item = (&'a EntityKind, u32)>) -> EntityKind {
    let mut totals: BTreeMap<&EntityKind, u32> = BTreeMap::new();
    for (k, n) in votes {
        *totals.entry(k).or_default() += n;
    }
    let rank = |k: &EntityKind| match k {
        EntityKind::Document | EntityKind::Version => 0,
        k if !k.is_generic() => 1,
        EntityKind::Title => 2,
        EntityKind::Identifier => 3,
        _ => 4,
    };
    totals
        .into_iter()
        .min_by(|(a, x), (b, y)| rank(a).cmp(&rank(b)).then(y.cmp(x)).then(a.cmp(b)))
        .map_or(EntityKind::Concept, |(k, _)| k.clone())
}

fn bigrams(key: &str) -> HashSet<String> {
    let cs: Vec<char> = key.chars().collect();
    if cs.len() < 2 {
        return HashSet::from([key.to_string()]);
    }
    cs.windows(2).map(|w| w.iter().collect()).collect()
}

/// Union–find with path halving; the smaller index becomes the root, for determinism.
#[derive(Debug, Clone)]
pub(crate) struct UnionFind(Vec<usize>);

impl UnionFind {
    pub fn new(n: usize) -> Self {
        UnionFind((0..n).collect())
    }

    pub fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    pub fn union(&mut self, a: usize, b: usize) -> usize {
        let (a, b) = (self.find(a), self.find(b));
        let (lo, hi) = (a.min(b), a.max(b));
        self.0[hi] = lo;
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(names: &[(&str, EntityKind)]) -> Resolver {
        let mut r = Resolver::new("t");
        for (n, k) in names {
            r.observe(&Mention::new(*n, k.clone()));
        }
        r
    }

    #[test]
    fn normalisation_folds_width_case_and_punctuation() {
        let r = resolver(&[("Pay-GW", EntityKind::Service)]);
        assert_eq!(r.lookup("ｐａｙ－ｇｗ"), r.lookup("pay gw"));
        assert!(r.lookup("pay-gw").is_some());
    }

    #[test]
    fn similar_names_are_candidates_not_merges() {
        let r = resolver(&[
            ("payment-gateway", EntityKind::Service),
            ("payments-gateway", EntityKind::Service),
            ("payment-gateways", EntityKind::Team),
            ("C-1001", EntityKind::Customer),
            ("C-1002", EntityKind::Customer),
        ]);
        let c = r.candidates(0.6);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].a.as_str(), c[0].b.as_str()),
            ("paymentgateway", "paymentsgateway")
        );
        assert!(r.merge_log().is_empty());
    }

    #[test]
    fn merges_are_logged_and_reversible() {
        let mut r = resolver(&[
            ("payment-gateway", EntityKind::Service),
            ("payments-gateway", EntityKind::Service),
        ]);
        let id = r
            .merge("payments-gateway", "payment-gateway", "reviewed: typo")
            .unwrap();
        assert!(r.candidates(0.6).is_empty());
        assert_eq!(r.merge_log()[0].reason, "reviewed: typo");
        r.unmerge(id).unwrap();
        assert!(!r.merge_log()[0].active);
        assert_eq!(r.candidates(0.6).len(), 1);
        assert!(matches!(r.unmerge(id), Err(GraphError::AlreadyReversed(0))));
        assert!(matches!(
            r.merge("nope", "payment-gateway", ""),
            Err(GraphError::UnknownName(_))
        ));
    }

    #[test]
    fn majority_prefers_specific_kinds() {
        let v = [(&EntityKind::Identifier, 5), (&EntityKind::Supplier, 1)];
        assert_eq!(majority_kind(v.into_iter()), EntityKind::Supplier);
    }
}
