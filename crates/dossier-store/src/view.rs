//! The in-memory view of document versions that scope filters are computed from:
//! every version with its validity, the look-alike conflicts, and the admission sets
//! computed from them. A commit updates it in time that follows the commit, not the
//! store: see [`DocsView::updated`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::NaiveDate;
use dossier_core::review::{Decision, Subject};
use dossier_core::text::base_title;
use dossier_core::validity::{look_alikes, plan_validity_with, LookAlike, Validity};
use dossier_core::{DocKind, DocumentVersion, VersionRef};
use dossier_index::Admit;
use parking_lot::Mutex;

use crate::catalog::{doc_key, CatalogBackend, ChangeSet, DocEntry, DocKey};
use crate::scope::Scope;
use crate::Result;

/// Document versions with their validity, as of the last commit.
pub struct DocsView {
    /// Shared with the views before and after it: a commit copies pointers, not entries.
    pub entries: Vec<Arc<DocEntry>>,
    pub validity: Vec<Validity>,
    /// Per entry, the title look-alikes are grouped by (empty: never a look-alike).
    titles: Vec<Arc<str>>,
    /// Per entry, the hash of its key and its tenant's ordinal in `tenants`: what a
    /// commit's walk over every entry reads, so that it never follows an entry's strings.
    hashes: Vec<u64>,
    tenant_of: Vec<u32>,
    tenants: Vec<Arc<str>>,
    by_key: KeyIndex,
    pub look_alikes: Vec<(String, LookAlike)>,
    /// The review decisions validity and conflicts were planned with.
    decisions: Arc<Vec<Decision>>,
    /// Admission sets already computed for this view, by scope. A commit builds a new
    /// view, so a cached set can never outlive the documents it was computed from.
    admit_cache: Mutex<HashMap<ScopeKey, Admit>>,
    /// Chunks an admission set admits, by the set's identity (a search asks per query).
    chunk_counts: Mutex<HashMap<u64, usize>>,
}

/// What an admission set depends on: tenant, sorted groups, date.
type ScopeKey = (String, Vec<String>, chrono::NaiveDate);

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

/// The title a version is grouped by when looking for look-alikes; empty for versions
/// that are never look-alikes (corpus passages, and titles with nothing left).
fn look_alike_title(meta: &DocumentVersion) -> Arc<str> {
    if meta.kind == DocKind::Passage {
        return Arc::from("");
    }
    Arc::from(base_title(&meta.title))
}

/// Per entry, its key's hash and its tenant's ordinal (see [`DocsView`]).
#[derive(Default)]
struct EntryIds {
    hashes: Vec<u64>,
    tenant_of: Vec<u32>,
    tenants: Vec<Arc<str>>,
    /// `tenants` by name, filled on first use.
    ordinals: HashMap<Arc<str>, u32>,
}

impl EntryIds {
    fn push(&mut self, meta: &DocumentVersion) {
        self.hashes
            .push(key_hash(&meta.tenant, &meta.doc_id, &meta.version));
        let t = self.ordinal(&meta.tenant);
        self.tenant_of.push(t);
    }

    /// The ordinal of `tenant`, added to `tenants` if new.
    fn ordinal(&mut self, tenant: &str) -> u32 {
        if self.ordinals.len() < self.tenants.len() {
            self.ordinals = (0u32..)
                .zip(&self.tenants)
                .map(|(i, t)| (t.clone(), i))
                .collect();
        }
        if let Some(&t) = self.ordinals.get(tenant) {
            return t;
        }
        let name: Arc<str> = Arc::from(tenant);
        let t = u32::try_from(self.tenants.len()).expect("fewer than 2^32 tenants");
        self.tenants.push(name.clone());
        self.ordinals.insert(name, t);
        t
    }
}

/// What [`DocsView::assemble`] takes over from the view before a commit.
struct Reuse<'a> {
    old: &'a DocsView,
    /// Tenants the commit touched: planned again.
    touched: &'a HashSet<String>,
    /// The same, by tenant ordinal.
    touched_ix: &'a [bool],
    /// For each new entry, its index in `old` (`None` for an entry read afresh).
    carried: &'a [Option<usize>],
    /// Indexes in `old` of the entries the commit replaced or deleted.
    removed: &'a [usize],
}

/// Entries by `(tenant, doc_id, version)`, as a hash of the three to the index: built
/// without copying a string (a commit builds one for every entry of the store), and
/// checked against the entry on lookup, so a collision costs a comparison, never a
/// wrong answer.
#[derive(Clone, Default)]
struct KeyIndex {
    first: HashMap<u64, usize>,
    /// Further entries whose key hashes like one in `first` (rare).
    more: HashMap<u64, Vec<usize>>,
}

impl KeyIndex {
    /// The index of entries whose key hashes are `hashes`.
    fn new(hashes: &[u64]) -> KeyIndex {
        let mut index = KeyIndex {
            first: HashMap::with_capacity(hashes.len()),
            more: HashMap::new(),
        };
        for (i, &h) in hashes.iter().enumerate() {
            match index.first.entry(h) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(i);
                }
                std::collections::hash_map::Entry::Occupied(_) => {
                    index.more.entry(h).or_default().push(i);
                }
            }
        }
        index
    }

    fn find(
        &self,
        entries: &[Arc<DocEntry>],
        tenant: &str,
        doc_id: &str,
        version: &str,
    ) -> Option<usize> {
        let is = |i: &usize| {
            let m = &entries[*i].meta;
            m.tenant == tenant && m.doc_id == doc_id && m.version == version
        };
        let h = key_hash(tenant, doc_id, version);
        let first = self.first.get(&h)?;
        if is(first) {
            return Some(*first);
        }
        self.more.get(&h)?.iter().copied().find(|i| is(i))
    }
}

fn key_hash(tenant: &str, doc_id: &str, version: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // `str`'s Hash ends each string with a separator, so ("ab", "c") ≠ ("a", "bc").
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (tenant, doc_id, version).hash(&mut h);
    h.finish()
}

impl DocsView {
    /// The view of `entries`, every tenant planned afresh.
    pub(crate) fn build(entries: Vec<DocEntry>, decisions: Vec<Decision>) -> DocsView {
        let entries: Vec<Arc<DocEntry>> = entries.into_iter().map(Arc::new).collect();
        let mut ids = EntryIds::default();
        for e in &entries {
            ids.push(&e.meta);
        }
        Self::assemble(entries, ids, decisions, None)
    }

    /// The view after `changes`: only the document versions they name are re-read, and
    /// in the tenants they touch only the versions whose validity they can change are
    /// planned again (and only the look-alike groups those are in); every other entry's
    /// validity and conflicts are carried over. Equal to a rebuild
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
        let touched: HashSet<String> = changes
            .iter()
            .flat_map(|c| c.tenants.iter().cloned())
            .collect();
        if touched.is_empty() {
            return Ok(self.carried_over());
        }
        let wanted: Vec<DocKey> = keys.iter().map(|k| (*k).clone()).collect();
        let fresh = catalog.documents_by_key(&wanted)?;
        let wanted_hashes: HashSet<u64> = keys.iter().map(|(t, d, v)| key_hash(t, d, v)).collect();
        // Each kept entry with its index in this view, so that what is known of it is
        // carried over by position (no lookups, no string copies).
        let n = self.entries.len();
        let mut carried: Vec<Option<usize>> = Vec::with_capacity(n);
        let mut entries: Vec<Arc<DocEntry>> = Vec::with_capacity(n);
        let mut ids = EntryIds {
            hashes: Vec::with_capacity(n),
            tenant_of: Vec::with_capacity(n),
            tenants: self.tenants.clone(),
            ordinals: HashMap::new(),
        };
        // Ordinals for tenants new with this commit first, so that one `touched_ix`
        // covers old and new tenants alike.
        for e in &fresh {
            ids.ordinal(&e.meta.tenant);
        }
        let touched_ix: Vec<bool> = ids.tenants.iter().map(|t| touched.contains(&**t)).collect();
        let mut removed: Vec<usize> = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let replaced = touched_ix[self.tenant_of[i] as usize]
                && wanted_hashes.contains(&self.hashes[i])
                && keys.contains(&doc_key(&e.meta));
            if replaced {
                removed.push(i);
            } else {
                entries.push(e.clone());
                carried.push(Some(i));
                ids.hashes.push(self.hashes[i]);
                ids.tenant_of.push(self.tenant_of[i]);
            }
        }
        for e in fresh {
            ids.push(&e.meta);
            entries.push(Arc::new(e));
            carried.push(None);
        }
        Ok(Self::assemble(
            entries,
            ids,
            catalog.decisions()?,
            Some(Reuse {
                old: self,
                touched: &touched,
                touched_ix: &touched_ix,
                carried: &carried,
                removed: &removed,
            }),
        ))
    }

    /// The same entries under a new identity (nothing a view holds changed).
    fn carried_over(&self) -> DocsView {
        DocsView {
            entries: self.entries.clone(),
            validity: self.validity.clone(),
            titles: self.titles.clone(),
            hashes: self.hashes.clone(),
            tenant_of: self.tenant_of.clone(),
            tenants: self.tenants.clone(),
            by_key: self.by_key.clone(),
            look_alikes: self.look_alikes.clone(),
            decisions: self.decisions.clone(),
            admit_cache: Mutex::new(HashMap::new()),
            chunk_counts: Mutex::new(HashMap::new()),
        }
    }

    /// Plans validity and conflicts — per tenant afresh without `reuse`; with it,
    /// carried over for untouched tenants and planned again only where the change
    /// reaches in touched ones (all of a touched tenant when the decisions changed) —
    /// and indexes the entries.
    fn assemble(
        entries: Vec<Arc<DocEntry>>,
        ids: EntryIds,
        decisions: Vec<Decision>,
        reuse: Option<Reuse<'_>>,
    ) -> DocsView {
        let titles: Vec<Arc<str>> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| match reuse.as_ref().and_then(|r| r.carried[i]) {
                Some(was) => reuse.as_ref().unwrap().old.titles[was].clone(),
                None => look_alike_title(&e.meta),
            })
            .collect();
        let by_key = KeyIndex::new(&ids.hashes);
        let mut validity: Vec<Option<Validity>> = vec![None; entries.len()];
        let mut planned: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, &t) in ids.tenant_of.iter().enumerate() {
            match &reuse {
                Some(r) if !r.touched_ix[t as usize] => {
                    let was = r.carried[i].expect("an untouched tenant's version is carried");
                    validity[i] = Some(r.old.validity[was]);
                }
                _ => planned.entry(t).or_default().push(i),
            }
        }
        let mut conflicts: Vec<(String, LookAlike)> = match &reuse {
            Some(r) => r
                .old
                .look_alikes
                .iter()
                .filter(|(t, _)| !r.touched.contains(t))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        for (&t, members) in &planned {
            let tenant: &str = &ids.tenants[t as usize];
            let mine = TenantDecisions::of(tenant, &decisions);
            let tenant_plan = TenantPlan {
                tenant,
                members,
                entries: &entries,
                titles: &titles,
                by_key: &by_key,
                decisions: &mine,
            };
            let found = match &reuse {
                Some(r) if *r.old.decisions == decisions => {
                    tenant_plan.changed_only(r, &mut validity)
                }
                _ => tenant_plan.whole(&mut validity),
            };
            conflicts.extend(found.into_iter().map(|l| (tenant.to_string(), l)));
        }
        let validity = validity
            .into_iter()
            .map(|v| v.expect("every entry is planned or carried"))
            .collect();
        DocsView {
            entries,
            validity,
            titles,
            hashes: ids.hashes,
            tenant_of: ids.tenant_of,
            tenants: ids.tenants,
            by_key,
            look_alikes: conflicts,
            decisions: Arc::new(decisions),
            admit_cache: Mutex::new(HashMap::new()),
            chunk_counts: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `scope` may see this entry: tenant, ACL, and in force on `scope.at()`.
    pub fn admits(&self, i: usize, scope: &Scope) -> bool {
        scope.may_read(&self.entries[i].meta) && self.validity[i].in_force(scope.at())
    }

    /// The admission set of a scope (the principal id does not enter into it).
    pub fn admit(&self, scope: &Scope) -> Admit {
        let mut groups = scope.groups().to_vec();
        groups.sort();
        let key = (scope.tenant().to_string(), groups, scope.at());
        if let Some(a) = self.admit_cache.lock().get(&key) {
            return a.clone();
        }
        let admitted: Vec<u32> = (0..self.entries.len())
            .filter(|&i| self.admits(i, scope))
            .map(|i| self.entries[i].dv)
            .collect();
        let everything = admitted.len() == self.entries.len();
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
            .entries
            .iter()
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

    pub fn find(&self, tenant: &str, doc_id: &str, version: &str) -> Option<usize> {
        self.by_key.find(&self.entries, tenant, doc_id, version)
    }

    /// Versions of `doc_id` in `tenant` that `scope` may see.
    pub fn visible_versions<'a>(
        &'a self,
        doc_id: &'a str,
        scope: &'a Scope,
    ) -> impl Iterator<Item = usize> + 'a {
        (0..self.entries.len())
            .filter(move |&i| self.entries[i].meta.doc_id == doc_id && self.admits(i, scope))
    }
}

/// Planning one tenant's versions (`members`, indexes into `entries`).
struct TenantPlan<'a> {
    tenant: &'a str,
    members: &'a [usize],
    entries: &'a [Arc<DocEntry>],
    titles: &'a [Arc<str>],
    by_key: &'a KeyIndex,
    decisions: &'a TenantDecisions,
}

impl TenantPlan<'_> {
    /// Validity of every member and the tenant's conflicts, from scratch: an approved
    /// supersession ends the older version like a declared one; an approved or
    /// rejected look-alike pair is no longer a conflict.
    fn whole(&self, validity: &mut [Option<Validity>]) -> Vec<LookAlike> {
        let versions: Vec<&DocumentVersion> = self
            .members
            .iter()
            .map(|&i| &self.entries[i].meta)
            .collect();
        let plan = plan_validity_with(&versions, &self.decisions.approved);
        for &i in self.members {
            validity[i] = Some(plan[&self.entries[i].meta.key()]);
        }
        look_alikes(&versions, &plan, &self.decisions.settled)
    }

    /// The same result, planning again only what a commit can change, with the
    /// decisions unchanged. A version's validity depends on its own dates and on the
    /// starts of the versions that supersede it (declared or approved), so only the
    /// versions read afresh and those that any read or removed version supersedes can
    /// change. Look-alikes are pairs within one title group, depending on the members'
    /// validity and supersessions, so only the groups of those versions are searched
    /// again; every other pair is carried over, except those naming a removed version.
    fn changed_only(&self, r: &Reuse<'_>, validity: &mut [Option<Validity>]) -> Vec<LookAlike> {
        let meta = |i: usize| &self.entries[i].meta;
        let fresh: Vec<usize> = self
            .members
            .iter()
            .copied()
            .filter(|&i| r.carried[i].is_none())
            .collect();
        let removed: Vec<usize> = r
            .removed
            .iter()
            .copied()
            .filter(|&i| r.old.entries[i].meta.tenant == self.tenant)
            .collect();
        // Versions whose validity may change, present in the tenant now.
        let mut targets: HashSet<VersionRef> = fresh.iter().map(|&i| meta(i).key()).collect();
        let changed_metas = fresh
            .iter()
            .map(|&i| meta(i))
            .chain(removed.iter().map(|&i| &r.old.entries[i].meta));
        for m in changed_metas {
            targets.extend(m.supersedes.clone());
            for (newer, older) in &self.decisions.approved {
                if newer.doc_id == m.doc_id && newer.version == m.version {
                    targets.insert(older.clone());
                }
            }
        }
        let find = |v: &VersionRef| {
            self.by_key
                .find(self.entries, self.tenant, &v.doc_id, &v.version)
        };
        // The starts of the successors of each target: one pass over the tenant.
        let mut successors: HashMap<&VersionRef, Vec<Option<NaiveDate>>> = HashMap::new();
        for &i in self.members {
            let m = meta(i);
            if let Some(s) = &m.supersedes {
                let itself = s.doc_id == m.doc_id && s.version == m.version;
                if let (Some(t), false) = (targets.get(s), itself) {
                    successors.entry(t).or_default().push(m.effective_from);
                }
            }
        }
        for (newer, older) in &self.decisions.approved {
            if newer == older {
                continue;
            }
            if let (Some(t), Some(n)) = (targets.get(older), find(newer)) {
                successors
                    .entry(t)
                    .or_default()
                    .push(meta(n).effective_from);
            }
        }
        let mut replanned: Vec<usize> = Vec::with_capacity(targets.len());
        for t in &targets {
            let Some(i) = find(t) else { continue };
            let m = meta(i);
            let mut v = Validity {
                from: m.effective_from,
                to: m.effective_to,
            };
            for start in successors.get(t).into_iter().flatten() {
                // As in `plan_validity_with`: the successor's start ends the old
                // version; with no start it has always been in force.
                let end = start.unwrap_or(NaiveDate::MIN);
                v.to = Some(v.to.map_or(end, |x| x.min(end)));
            }
            validity[i] = Some(v);
            replanned.push(i);
        }
        for &i in self.members {
            if validity[i].is_none() {
                let was = r.carried[i].expect("a version read afresh is planned again");
                validity[i] = Some(r.old.validity[was]);
            }
        }

        // Look-alike groups the change reaches: those of every version planned again.
        // (A removed version's pairs are dropped below; the rest of its group is as
        // it was, unless planned again itself.)
        let mut groups: HashSet<(Option<&str>, &str)> = HashSet::new();
        for &i in &replanned {
            groups.insert((meta(i).kb.as_deref(), &self.titles[i]));
        }
        groups.retain(|(_, title)| !title.is_empty());
        let in_groups: Vec<usize> = self
            .members
            .iter()
            .copied()
            .filter(|&i| {
                !self.titles[i].is_empty()
                    && groups.contains(&(meta(i).kb.as_deref(), &*self.titles[i]))
            })
            .collect();
        let versions: Vec<&DocumentVersion> = in_groups.iter().map(|&i| meta(i)).collect();
        let plan: HashMap<VersionRef, Validity> = in_groups
            .iter()
            .map(|&i| (meta(i).key(), validity[i].expect("planned above")))
            .collect();
        let mut found = look_alikes(&versions, &plan, &self.decisions.settled);
        // Every earlier pair outside those groups stands.
        let mut regrouped: HashSet<VersionRef> = plan.into_keys().collect();
        regrouped.extend(removed.iter().map(|&i| r.old.entries[i].meta.key()));
        found.extend(
            r.old
                .look_alikes
                .iter()
                .filter(|(t, l)| {
                    t == self.tenant && !regrouped.contains(&l.a) && !regrouped.contains(&l.b)
                })
                .map(|(_, l)| l.clone()),
        );
        found.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
        found
    }
}
