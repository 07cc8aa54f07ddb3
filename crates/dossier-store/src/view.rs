//! The in-memory view of document versions that scope filters are computed from:
//! every version with its validity, the look-alike conflicts, and the admission sets
//! computed from them. A commit updates it in time that follows the commit, not the
//! store: see [`DocsView::updated`].
//!
//! Every part of a view is a persistent collection (`imbl`): a commit copies the view
//! before it in constant time and then changes only the versions it names and what they
//! reach, sharing everything else — readers of the older view keep reading it unchanged.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use chrono::NaiveDate;
use dossier_core::review::{Decision, Subject};
use dossier_core::text::title_key;
use dossier_core::validity::{
    buckets, owned_look_alikes, plan_validity_with, Bucket, Candidate, LookAlike, Validity, WINDOW,
};
use dossier_core::{DocKind, DocumentVersion, VersionRef};
use dossier_index::Admit;
use parking_lot::Mutex;

use crate::catalog::{CatalogBackend, ChangeSet, DocEntry, DocKey};
use crate::scope::Scope;
use crate::Result;

/// One document version as the view holds it.
#[derive(Clone)]
struct Slot {
    entry: Arc<DocEntry>,
    validity: Validity,
    /// The look-alike group it belongs to (`None`: never a look-alike).
    group: Option<GroupKey>,
    /// Its buckets within the group ([`dossier_core::validity::buckets`]; empty
    /// without a group).
    buckets: Arc<[Bucket]>,
    /// Its tenant's ordinal in [`DocsView::tenants`].
    tenant: u32,
}

/// Versions that may be look-alikes of one another: one tenant, one knowledge base, one
/// title stem (as [`dossier_core::validity::group_of`] groups them).
#[derive(Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    tenant: u32,
    kb: Option<Arc<str>>,
    title: Arc<str>,
}

impl GroupKey {
    /// The group of `m` in tenant `t`; `None` for versions never look-alikes (corpus
    /// passages, and titles with nothing left).
    fn of(t: u32, m: &DocumentVersion) -> Option<GroupKey> {
        if m.kind == DocKind::Passage {
            return None;
        }
        let title = title_key(&m.title).stem;
        (!title.is_empty()).then(|| GroupKey {
            tenant: t,
            kb: m.kb.as_deref().map(Arc::from),
            title: Arc::from(title),
        })
    }
}

/// Document versions with their validity, as of the last commit.
pub struct DocsView {
    /// Every version, ordered by `dv` (unique, and the order a rebuild reads them in),
    /// so that a version's position is found by binary search.
    slots: imbl::Vector<Slot>,
    /// The `dv`s of the versions by the hash of `(tenant, doc_id, version)`.
    by_key: KeyIndex,
    /// By the key hash of a version, the `dv`s of the versions that declare they
    /// supersede it (itself excluded): what its validity depends on besides its own dates.
    successors: imbl::HashMap<u64, Vec<u32>>,
    /// The members of each bucket of each look-alike group, in group order.
    buckets: imbl::HashMap<(GroupKey, Bucket), Members>,
    /// The look-alike pairs each version owns (with versions after it in its group's
    /// order, see [`owned_look_alikes`]), each with its partner's place; only non-empty
    /// lists are kept.
    owned: imbl::HashMap<u32, Arc<Vec<(Order, LookAlike)>>>,
    /// By `dv`, the versions that own a pair with it.
    named: imbl::HashMap<u32, Vec<u32>>,
    tenants: imbl::Vector<Arc<str>>,
    ordinals: imbl::HashMap<Arc<str>, u32>,
    /// The review decisions validity and conflicts were planned with.
    decisions: Arc<Vec<Decision>>,
    /// Admission sets already computed for this view, by scope. A commit builds a new
    /// view, so a cached set can never outlive the documents it was computed from.
    admit_cache: Mutex<HashMap<ScopeKey, Admit>>,
    /// Chunks an admission set admits, by the set's identity (a search asks per query).
    chunk_counts: Mutex<HashMap<u64, usize>>,
}

/// A version's place in its look-alike group: its start date, then its `dv` (fixed for
/// the version's life, so a view kept up and one rebuilt order a group alike).
type Order = (Option<NaiveDate>, u32);

/// The members of one bucket, in order; one member is kept without a tree (most band
/// buckets hold one).
#[derive(Clone)]
enum Members {
    One(Order),
    Many(imbl::OrdSet<Order>),
}

impl Members {
    fn insert(&mut self, o: Order) {
        match self {
            Members::One(x) if *x == o => {}
            Members::One(x) => {
                let mut set = imbl::OrdSet::new();
                set.insert(*x);
                set.insert(o);
                *self = Members::Many(set);
            }
            Members::Many(set) => {
                set.insert(o);
            }
        }
    }

    /// Removes `o`; whether the bucket is empty after.
    fn remove(&mut self, o: Order) -> bool {
        match self {
            Members::One(x) => *x == o,
            Members::Many(set) => {
                set.remove(&o);
                if set.len() == 1 {
                    let last = *set.get_min().expect("one member");
                    *self = Members::One(last);
                }
                set_is_empty(self)
            }
        }
    }

    /// Up to `n` members after `o`, nearest first.
    fn after(&self, o: Order, n: usize) -> Vec<Order> {
        match self {
            Members::One(x) => (*x > o).then_some(*x).into_iter().collect(),
            Members::Many(set) => set
                .range((std::ops::Bound::Excluded(o), std::ops::Bound::Unbounded))
                .take(n)
                .copied()
                .collect(),
        }
    }

    /// Up to `n` members before `o`, nearest first.
    fn before(&self, o: Order, n: usize) -> Vec<Order> {
        match self {
            Members::One(x) => (*x < o).then_some(*x).into_iter().collect(),
            Members::Many(set) => set.range(..o).rev().take(n).copied().collect(),
        }
    }
}

/// A version as look-alike detection reads it.
fn candidate(s: &Slot) -> Candidate<'_> {
    Candidate {
        version: &s.entry.meta,
        validity: s.validity,
        sketch: &s.entry.sketch,
    }
}

fn set_is_empty(m: &Members) -> bool {
    matches!(m, Members::Many(set) if set.is_empty())
}

/// What an admission set depends on: tenant, sorted groups, date.
type ScopeKey = (crate::scope::ReaderKey, chrono::NaiveDate);

/// Distinct scopes whose admission sets a view keeps.
const ADMIT_CACHE_SIZE: usize = 1024;

/// A tenant's review decisions as planning uses them: confirmed supersessions
/// `(newer, older)`, and the document pairs a reviewer settled (no longer conflicts).
struct TenantDecisions {
    approved: Vec<(VersionRef, VersionRef)>,
    settled: HashSet<(String, String)>,
}

impl TenantDecisions {
    fn of(tenant: &str, decisions: &[Decision]) -> TenantDecisions {
        let mine = || decisions.iter().filter(|d| d.tenant == tenant);
        TenantDecisions {
            approved: mine()
                .filter_map(|d| d.confirmed_supersession())
                .map(|(n, o)| (n.clone(), o.clone()))
                .collect(),
            settled: mine()
                .filter_map(|d| match &d.subject {
                    Subject::Supersession { newer, older } => {
                        Some((newer.doc_id.clone(), older.doc_id.clone()))
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}

/// `dv`s by the hash of their key: a lookup checks the entry it finds, so a collision
/// costs a comparison, never a wrong answer.
#[derive(Clone, Default)]
struct KeyIndex {
    first: imbl::HashMap<u64, u32>,
    /// Further versions whose key hashes like one in `first` (rare).
    more: imbl::HashMap<u64, Vec<u32>>,
}

impl KeyIndex {
    fn insert(&mut self, h: u64, dv: u32) {
        if self.first.contains_key(&h) {
            self.more.entry(h).or_default().push(dv);
        } else {
            self.first.insert(h, dv);
        }
    }

    fn remove(&mut self, h: u64, dv: u32) {
        if self.first.get(&h) == Some(&dv) {
            match self.more.get_mut(&h).and_then(Vec::pop) {
                Some(next) => {
                    self.first.insert(h, next);
                }
                None => {
                    self.first.remove(&h);
                }
            }
        } else if let Some(more) = self.more.get_mut(&h) {
            more.retain(|&d| d != dv);
        }
        if self.more.get(&h).is_some_and(Vec::is_empty) {
            self.more.remove(&h);
        }
    }

    fn dvs(&self, h: u64) -> impl Iterator<Item = u32> + '_ {
        let more = self.more.get(&h).into_iter().flatten().copied();
        self.first.get(&h).copied().into_iter().chain(more)
    }
}

fn key_hash(tenant: &str, doc_id: &str, version: &str) -> u64 {
    // `str`'s Hash ends each string with a separator, so ("ab", "c") ≠ ("a", "bc").
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (tenant, doc_id, version).hash(&mut h);
    h.finish()
}

fn same_version(m: &DocumentVersion, v: &VersionRef) -> bool {
    m.doc_id == v.doc_id && m.version == v.version
}

/// Removes one `dv` from a list-valued map, dropping the list when it empties.
fn unlist<K: Hash + Eq + Clone>(map: &mut imbl::HashMap<K, Vec<u32>>, key: &K, dv: u32) {
    if let Some(list) = map.get_mut(key) {
        list.retain(|&d| d != dv);
        if list.is_empty() {
            map.remove(key);
        }
    }
}

impl DocsView {
    fn empty(decisions: Vec<Decision>) -> DocsView {
        DocsView {
            slots: imbl::Vector::new(),
            by_key: KeyIndex::default(),
            successors: imbl::HashMap::new(),
            buckets: imbl::HashMap::new(),
            owned: imbl::HashMap::new(),
            named: imbl::HashMap::new(),
            tenants: imbl::Vector::new(),
            ordinals: imbl::HashMap::new(),
            decisions: Arc::new(decisions),
            admit_cache: Mutex::new(HashMap::new()),
            chunk_counts: Mutex::new(HashMap::new()),
        }
    }

    /// The view of `entries`, every tenant planned afresh.
    pub(crate) fn build(mut entries: Vec<DocEntry>, decisions: Vec<Decision>) -> DocsView {
        entries.sort_by_key(|e| e.dv);
        let mut view = DocsView::empty(decisions);
        for e in entries {
            view.add(Arc::new(e));
        }
        let every: HashSet<u32> = (0..view.tenants.len() as u32).collect();
        view.plan_whole(&every);
        view
    }

    /// The view after `changes`: only the document versions they name are re-read, and
    /// in the tenants they touch only the versions whose validity they can change are
    /// planned again (and only the look-alike groups those are in); everything else is
    /// shared with this view. Equal to a rebuild
    /// (`the_view_updated_commit_by_commit_equals_one_rebuilt_from_the_catalog`).
    /// Change sets that do not name their documents (older stores) fall back to a
    /// whole rebuild.
    pub(crate) fn updated(
        &self,
        changes: &[ChangeSet],
        catalog: &dyn CatalogBackend,
    ) -> Result<DocsView> {
        if changes.iter().any(|c| !c.names_its_documents()) {
            return Ok(DocsView::build(catalog.documents()?, catalog.decisions()?));
        }
        let keys: HashSet<&DocKey> = changes.iter().flat_map(|c| c.docs.iter()).collect();
        let touched: HashSet<&String> = changes.iter().flat_map(|c| c.tenants.iter()).collect();
        let mut next = self.carried_over();
        if touched.is_empty() {
            return Ok(next);
        }
        let wanted: Vec<DocKey> = keys.iter().map(|k| (*k).clone()).collect();
        let fresh = catalog.documents_by_key(&wanted)?;
        let decisions = catalog.decisions()?;
        // Out with every version the change names (replaced or deleted), in with those
        // it stored.
        let mut removed: Vec<Arc<DocEntry>> = Vec::new();
        for (t, d, v) in keys {
            if let Some(i) = next.find(t, d, v) {
                removed.push(next.remove(i));
            }
        }
        let fresh: Vec<Arc<DocEntry>> = fresh.into_iter().map(Arc::new).collect();
        for e in &fresh {
            next.add(e.clone());
        }
        let touched: HashSet<u32> = touched
            .iter()
            .filter_map(|t| next.ordinals.get(t.as_str()).copied())
            .collect();
        if *self.decisions != decisions {
            next.decisions = Arc::new(decisions);
            next.plan_whole(&touched);
        } else {
            for t in touched {
                let name = next.tenants[t as usize].clone();
                let of_tenant = |e: &&Arc<DocEntry>| *e.meta.tenant == *name;
                let fresh: Vec<&DocEntry> = fresh.iter().filter(of_tenant).map(|e| &**e).collect();
                let gone: Vec<&DocEntry> = removed.iter().filter(of_tenant).map(|e| &**e).collect();
                next.plan_changes(t, &fresh, &gone);
            }
        }
        Ok(next)
    }

    /// The same view under a new identity, with empty caches (constant time: every
    /// collection is shared until written to).
    fn carried_over(&self) -> DocsView {
        DocsView {
            slots: self.slots.clone(),
            by_key: self.by_key.clone(),
            successors: self.successors.clone(),
            buckets: self.buckets.clone(),
            owned: self.owned.clone(),
            named: self.named.clone(),
            tenants: self.tenants.clone(),
            ordinals: self.ordinals.clone(),
            decisions: self.decisions.clone(),
            admit_cache: Mutex::new(HashMap::new()),
            chunk_counts: Mutex::new(HashMap::new()),
        }
    }

    /// The ordinal of `tenant`, added if new.
    fn ordinal(&mut self, tenant: &str) -> u32 {
        if let Some(&t) = self.ordinals.get(tenant) {
            return t;
        }
        let t = u32::try_from(self.tenants.len()).expect("fewer than 2^32 tenants");
        let name: Arc<str> = Arc::from(tenant);
        self.tenants.push_back(name.clone());
        self.ordinals.insert(name, t);
        t
    }

    /// Where the version `dv` is (positions are ordered by `dv`).
    fn position(&self, dv: u32) -> Option<usize> {
        self.slots.binary_search_by_key(&dv, |s| s.entry.dv).ok()
    }

    /// Adds a version, unplanned (its validity its own dates), to every index.
    fn add(&mut self, entry: Arc<DocEntry>) {
        let m = &entry.meta;
        let tenant = self.ordinal(&m.tenant);
        let dv = entry.dv;
        self.by_key
            .insert(key_hash(&m.tenant, &m.doc_id, &m.version), dv);
        if let Some(s) = m.supersedes.as_ref().filter(|s| !same_version(m, s)) {
            let target = key_hash(&m.tenant, &s.doc_id, &s.version);
            self.successors.entry(target).or_default().push(dv);
        }
        let group = GroupKey::of(tenant, m);
        let bucketed: Arc<[Bucket]> = match &group {
            Some(g) => {
                let bs = buckets(&m.title, &entry.sketch);
                for b in &bs {
                    let at = (m.effective_from, dv);
                    match self.buckets.get_mut(&(g.clone(), b.clone())) {
                        Some(members) => members.insert(at),
                        None => {
                            self.buckets
                                .insert((g.clone(), b.clone()), Members::One(at));
                        }
                    }
                }
                bs.into()
            }
            None => Arc::from(Vec::new()),
        };
        let slot = Slot {
            buckets: bucketed,
            validity: Validity {
                from: m.effective_from,
                to: m.effective_to,
            },
            group,
            tenant,
            entry,
        };
        match self.slots.last() {
            Some(last) if last.entry.dv >= dv => {
                let at = self
                    .slots
                    .binary_search_by_key(&dv, |s| s.entry.dv)
                    .expect_err("a version's dv is unique");
                self.slots.insert(at, slot);
            }
            _ => self.slots.push_back(slot),
        }
    }

    /// Removes the version at `i` from every index, with the pairs it owns; the pairs
    /// others own with it are left for the caller to plan again.
    fn remove(&mut self, i: usize) -> Arc<DocEntry> {
        let slot = self.slots.remove(i);
        let (m, dv) = (&slot.entry.meta, slot.entry.dv);
        self.by_key
            .remove(key_hash(&m.tenant, &m.doc_id, &m.version), dv);
        if let Some(s) = m.supersedes.as_ref().filter(|s| !same_version(m, s)) {
            let target = key_hash(&m.tenant, &s.doc_id, &s.version);
            unlist(&mut self.successors, &target, dv);
        }
        if let Some(g) = &slot.group {
            for b in slot.buckets.iter() {
                let k = (g.clone(), b.clone());
                if self
                    .buckets
                    .get_mut(&k)
                    .is_some_and(|members| members.remove((m.effective_from, dv)))
                {
                    self.buckets.remove(&k);
                }
            }
        }
        self.unplan_owner(dv);
        slot.entry
    }

    /// Plans the validity and conflicts of every version of `tenants` from scratch: an
    /// approved supersession ends the older version like a declared one; an approved or
    /// rejected look-alike pair is no longer a conflict.
    fn plan_whole(&mut self, tenants: &HashSet<u32>) {
        let mut members: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, s) in self.slots.iter().enumerate() {
            if tenants.contains(&s.tenant) {
                members.entry(s.tenant).or_default().push(i);
            }
        }
        for (t, members) in members {
            let mine = TenantDecisions::of(&self.tenants[t as usize], &self.decisions);
            let versions: Vec<&DocumentVersion> =
                members.iter().map(|&i| &self.slots[i].entry.meta).collect();
            let plan = plan_validity_with(&versions, &mine.approved);
            for &i in &members {
                let key = self.slots[i].entry.meta.key();
                self.slots[i].validity = plan[&key];
            }
            let dvs: Vec<u32> = members.iter().map(|&i| self.slots[i].entry.dv).collect();
            for &dv in &dvs {
                self.unplan_owner(dv);
            }
            for dv in dvs {
                self.plan_owner(dv, &mine.settled);
            }
        }
    }

    /// The same result for one tenant, planning again only what a commit can change
    /// (`fresh` versions stored, `gone` versions replaced or deleted), the decisions
    /// unchanged. A version's validity depends on its own dates and on the starts of the
    /// versions that supersede it (declared or approved), so only the versions read
    /// afresh and those that any fresh or gone version supersedes can change. The
    /// look-alike pairs a version owns depend on it and the [`WINDOW`] members after it
    /// in each of its buckets, so only the changed versions and the `WINDOW` before each
    /// in its buckets are planned again: a commit costs what it changes, however large
    /// the look-alike group.
    fn plan_changes(&mut self, t: u32, fresh: &[&DocEntry], gone: &[&DocEntry]) {
        let tenant = self.tenants[t as usize].clone();
        let mine = TenantDecisions::of(&tenant, &self.decisions);
        let mut targets: HashSet<VersionRef> = fresh.iter().map(|e| e.meta.key()).collect();
        for m in fresh.iter().chain(gone).map(|e| &e.meta) {
            targets.extend(m.supersedes.clone());
            for (newer, older) in &mine.approved {
                if same_version(m, newer) {
                    targets.insert(older.clone());
                }
            }
        }
        // The versions whose pairs, or whose place in others' windows, changed.
        let mut changed: Vec<(GroupKey, Arc<[Bucket]>, Order)> = Vec::new();
        for e in gone {
            if let Some(g) = GroupKey::of(t, &e.meta) {
                let bs: Arc<[Bucket]> = buckets(&e.meta.title, &e.sketch).into();
                changed.push((g, bs, (e.meta.effective_from, e.dv)));
            }
        }
        for target in &targets {
            let Some(i) = self.find(&tenant, &target.doc_id, &target.version) else {
                continue;
            };
            let validity = self.planned(i, target, &mine.approved);
            let slot = &mut self.slots[i];
            slot.validity = validity;
            if let Some(g) = &slot.group {
                let at = (slot.entry.meta.effective_from, slot.entry.dv);
                changed.push((g.clone(), slot.buckets.clone(), at));
            }
        }
        let mut owners: HashSet<u32> = HashSet::new();
        for (g, bs, at) in changed {
            if self.position(at.1).is_some() {
                owners.insert(at.1);
            }
            for b in bs.iter() {
                if let Some(members) = self.buckets.get(&(g.clone(), b.clone())) {
                    owners.extend(members.before(at, WINDOW).into_iter().map(|o| o.1));
                }
            }
        }
        let mut owners: Vec<u32> = owners.into_iter().collect();
        owners.sort_unstable();
        for &p in &owners {
            self.unplan_owner(p);
        }
        for p in owners {
            self.plan_owner(p, &mine.settled);
        }
    }

    /// The validity of the version at `i` (`target`, in its tenant): its own dates, ended
    /// by the earliest start of any version that supersedes it, declared or approved —
    /// as [`plan_validity_with`] computes it.
    fn planned(
        &self,
        i: usize,
        target: &VersionRef,
        approved: &[(VersionRef, VersionRef)],
    ) -> Validity {
        let m = &self.slots[i].entry.meta;
        let tenant = &m.tenant;
        let declared = self
            .successors
            .get(&key_hash(tenant, &target.doc_id, &target.version))
            .into_iter()
            .flatten()
            .filter_map(|&dv| self.position(dv))
            .map(|j| &self.slots[j].entry.meta)
            .filter(|n| &n.tenant == tenant && n.supersedes.as_ref() == Some(target))
            .map(|n| n.effective_from);
        let confirmed = approved
            .iter()
            .filter(|(newer, older)| older == target && newer != older)
            .filter_map(|(newer, _)| self.find(tenant, &newer.doc_id, &newer.version))
            .map(|j| self.slots[j].entry.meta.effective_from);
        let mut v = Validity {
            from: m.effective_from,
            to: m.effective_to,
        };
        for start in declared.chain(confirmed) {
            // The successor's start ends the old version; with no start it has always
            // been in force, so the old version never was.
            let end = start.unwrap_or(NaiveDate::MIN);
            v.to = Some(v.to.map_or(end, |x| x.min(end)));
        }
        v
    }

    /// Drops the pairs version `p` owns.
    fn unplan_owner(&mut self, p: u32) {
        if let Some(pairs) = self.owned.remove(&p) {
            for (o, _) in pairs.iter() {
                unlist(&mut self.named, &o.1, p);
            }
        }
    }

    /// Finds the pairs version `p` owns ([`owned_look_alikes`]) among the [`WINDOW`]
    /// members after it in each of its buckets; its old pairs must be dropped first.
    fn plan_owner(&mut self, p: u32, settled: &HashSet<(String, String)>) {
        let Some(i) = self.position(p) else {
            return;
        };
        let slot = &self.slots[i];
        let Some(g) = &slot.group else {
            return;
        };
        let at = (slot.entry.meta.effective_from, p);
        let mut following = Vec::new();
        for b in slot.buckets.iter() {
            let Some(members) = self.buckets.get(&(g.clone(), b.clone())) else {
                continue;
            };
            for (d, o) in members.after(at, WINDOW).into_iter().enumerate() {
                let j = self
                    .position(o.1)
                    .expect("a bucket's members are in the view");
                following.push((d, o, candidate(&self.slots[j])));
            }
        }
        let pairs = owned_look_alikes(&candidate(slot), following, settled);
        if pairs.is_empty() {
            return;
        }
        for (o, _) in &pairs {
            let owners = self.named.entry(o.1).or_default();
            if !owners.contains(&p) {
                owners.push(p);
            }
        }
        self.owned.insert(p, Arc::new(pairs));
    }

    /// How many document versions the view holds.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The version at `i` (`0..len()`).
    pub fn entry(&self, i: usize) -> &DocEntry {
        &self.slots[i].entry
    }

    /// When the version at `i` is in force.
    pub fn validity(&self, i: usize) -> Validity {
        self.slots[i].validity
    }

    /// Every version, in the order of their positions.
    pub fn entries(&self) -> impl Iterator<Item = &DocEntry> + '_ {
        self.slots.iter().map(|s| &*s.entry)
    }

    /// Every look-alike conflict with its tenant, ordered by tenant and pair.
    pub fn look_alikes(&self) -> Vec<(&str, &LookAlike)> {
        let mut out: Vec<(&str, &LookAlike)> = self
            .owned
            .iter()
            .filter_map(|(&p, pairs)| Some((self.position(p)?, pairs)))
            .flat_map(|(i, pairs)| {
                let tenant: &str = &self.tenants[self.slots[i].tenant as usize];
                pairs.iter().map(move |(_, l)| (tenant, l))
            })
            .collect();
        out.sort_by(|(t, p), (u, q)| (t, &p.a, &p.b).cmp(&(u, &q.a, &q.b)));
        out
    }

    /// The look-alike conflicts of one tenant, ordered by pair.
    pub fn look_alikes_in(&self, tenant: &str) -> Vec<&LookAlike> {
        let Some(&t) = self.ordinals.get(tenant) else {
            return Vec::new();
        };
        let mut out: Vec<&LookAlike> = self
            .owned
            .iter()
            .filter(|(&p, _)| self.position(p).is_some_and(|i| self.slots[i].tenant == t))
            .flat_map(|(_, pairs)| pairs.iter().map(|(_, l)| l))
            .collect();
        out.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
        out
    }

    /// The look-alike conflicts the version at `i` is in, ordered by pair: the pairs it
    /// owns and those owned by the versions [`DocsView`] lists as naming it, in time that
    /// follows its own conflicts (a search asks this per hit).
    pub fn look_alikes_at(&self, i: usize) -> Vec<&LookAlike> {
        let dv = self.slots[i].entry.dv;
        let own = self
            .owned
            .get(&dv)
            .into_iter()
            .flat_map(|pairs| pairs.iter());
        let others = self
            .named
            .get(&dv)
            .into_iter()
            .flatten()
            .filter_map(|p| self.owned.get(p))
            .flat_map(|pairs| pairs.iter())
            .filter(|(o, _)| o.1 == dv);
        let mut out: Vec<&LookAlike> = own.chain(others).map(|(_, l)| l).collect();
        out.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
        out
    }

    /// Whether `scope` may see this entry: tenant, ACL, and in force on `scope.at()`.
    pub fn admits(&self, i: usize, scope: &Scope) -> bool {
        Self::slot_admits(&self.slots[i], scope)
    }

    fn slot_admits(s: &Slot, scope: &Scope) -> bool {
        scope.may_read(&s.entry.meta) && s.validity.in_force(scope.at())
    }

    /// The admission set of a scope (the principal id does not enter into it).
    pub fn admit(&self, scope: &Scope) -> Admit {
        let key = (scope.reader_key(), scope.at());
        if let Some(a) = self.admit_cache.lock().get(&key) {
            return a.clone();
        }
        let admitted: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| Self::slot_admits(s, scope))
            .map(|s| s.entry.dv)
            .collect();
        let everything = admitted.len() == self.slots.len();
        let admit = Admit::from_ordinals(admitted).covering_everything(everything);
        let mut cache = self.admit_cache.lock();
        if cache.len() >= ADMIT_CACHE_SIZE {
            cache.clear();
        }
        cache.insert(key, admit.clone());
        admit
    }

    /// How many chunks `admit` admits in this view (counted once per set).
    pub fn admitted_chunks(&self, admit: &Admit) -> usize {
        if let Some(&n) = self.chunk_counts.lock().get(&admit.id()) {
            return n;
        }
        let n = self
            .entries()
            .filter(|e| admit.contains(e.dv))
            .map(|e| e.seqs.len())
            .sum();
        let mut counts = self.chunk_counts.lock();
        if counts.len() >= ADMIT_CACHE_SIZE {
            counts.clear();
        }
        counts.insert(admit.id(), n);
        n
    }

    /// The position of the version `(tenant, doc_id, version)`.
    pub fn find(&self, tenant: &str, doc_id: &str, version: &str) -> Option<usize> {
        self.by_key
            .dvs(key_hash(tenant, doc_id, version))
            .filter_map(|dv| self.position(dv))
            .find(|&i| {
                let m = &self.slots[i].entry.meta;
                m.tenant == tenant && m.doc_id == doc_id && m.version == version
            })
    }

    /// Versions of `doc_id` that `scope` may see.
    pub fn visible_versions<'a>(
        &'a self,
        doc_id: &'a str,
        scope: &'a Scope,
    ) -> impl Iterator<Item = usize> + 'a {
        self.slots
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.entry.meta.doc_id == doc_id && Self::slot_admits(s, scope))
            .map(|(i, _)| i)
    }
}
