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
use dossier_core::text::base_title;
use dossier_core::validity::{look_alikes, plan_validity_with, LookAlike, Validity};
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
    /// Its tenant's ordinal in [`DocsView::tenants`].
    tenant: u32,
}

/// Versions that may be look-alikes of one another: one tenant, one knowledge base, one
/// base title (as [`look_alikes`] groups them).
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
        let title = base_title(&m.title);
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
    /// The `dv`s of each look-alike group's members.
    groups: imbl::HashMap<GroupKey, Vec<u32>>,
    /// The conflicts found in each group that has any, sorted.
    conflicts: imbl::HashMap<GroupKey, Arc<Vec<LookAlike>>>,
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
            groups: imbl::HashMap::new(),
            conflicts: imbl::HashMap::new(),
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
                let fresh: Vec<&DocumentVersion> =
                    fresh.iter().filter(of_tenant).map(|e| &e.meta).collect();
                let gone: Vec<&DocumentVersion> =
                    removed.iter().filter(of_tenant).map(|e| &e.meta).collect();
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
            groups: self.groups.clone(),
            conflicts: self.conflicts.clone(),
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
        if let Some(g) = &group {
            self.groups.entry(g.clone()).or_default().push(dv);
        }
        let slot = Slot {
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

    /// Removes the version at `i` from every index; its look-alike group's conflicts
    /// are left for the caller to search again.
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
            unlist(&mut self.groups, g, dv);
        }
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
            let groups: HashSet<GroupKey> = members
                .iter()
                .filter_map(|&i| self.slots[i].group.clone())
                .collect();
            for i in members {
                let key = self.slots[i].entry.meta.key();
                self.slots[i].validity = plan[&key];
            }
            let stale: Vec<GroupKey> = self
                .conflicts
                .keys()
                .filter(|g| g.tenant == t)
                .cloned()
                .collect();
            for g in stale {
                self.conflicts.remove(&g);
            }
            for g in groups {
                self.search_group(g, &mine.settled);
            }
        }
    }

    /// The same result for one tenant, planning again only what a commit can change
    /// (`fresh` versions stored, `gone` versions replaced or deleted), the decisions
    /// unchanged. A version's validity depends on its own dates and on the starts of the
    /// versions that supersede it (declared or approved), so only the versions read
    /// afresh and those that any fresh or gone version supersedes can change. Conflicts
    /// are pairs within one look-alike group, depending on the members' validity and
    /// supersessions, so only the groups of those versions and of the gone ones are
    /// searched again.
    fn plan_changes(&mut self, t: u32, fresh: &[&DocumentVersion], gone: &[&DocumentVersion]) {
        let tenant = self.tenants[t as usize].clone();
        let mine = TenantDecisions::of(&tenant, &self.decisions);
        let mut targets: HashSet<VersionRef> = fresh.iter().map(|m| m.key()).collect();
        for m in fresh.iter().chain(gone) {
            targets.extend(m.supersedes.clone());
            for (newer, older) in &mine.approved {
                if same_version(m, newer) {
                    targets.insert(older.clone());
                }
            }
        }
        let mut groups: HashSet<GroupKey> =
            gone.iter().filter_map(|m| GroupKey::of(t, m)).collect();
        for target in &targets {
            let Some(i) = self.find(&tenant, &target.doc_id, &target.version) else {
                continue;
            };
            let validity = self.planned(i, target, &mine.approved);
            let slot = &mut self.slots[i];
            slot.validity = validity;
            groups.extend(slot.group.clone());
        }
        for g in groups {
            self.search_group(g, &mine.settled);
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

    /// Searches one look-alike group for conflicts again.
    fn search_group(&mut self, g: GroupKey, settled: &HashSet<(String, String)>) {
        let members: Vec<usize> = self
            .groups
            .get(&g)
            .into_iter()
            .flatten()
            .filter_map(|&dv| self.position(dv))
            .collect();
        let versions: Vec<&DocumentVersion> =
            members.iter().map(|&i| &self.slots[i].entry.meta).collect();
        let plan: HashMap<VersionRef, Validity> = members
            .iter()
            .map(|&i| (self.slots[i].entry.meta.key(), self.slots[i].validity))
            .collect();
        let found = if versions.len() < 2 {
            Vec::new()
        } else {
            look_alikes(&versions, &plan, settled)
        };
        if found.is_empty() {
            self.conflicts.remove(&g);
        } else {
            self.conflicts.insert(g, Arc::new(found));
        }
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
            .conflicts
            .iter()
            .flat_map(|(g, pairs)| {
                let tenant: &str = &self.tenants[g.tenant as usize];
                pairs.iter().map(move |l| (tenant, l))
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
            .conflicts
            .iter()
            .filter(|(g, _)| g.tenant == t)
            .flat_map(|(_, pairs)| pairs.iter())
            .collect();
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
