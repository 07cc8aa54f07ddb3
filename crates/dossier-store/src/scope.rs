//! The filter every retrieval runs under, and the only way to get one.
//!
//! A [`Scope`] has no public constructor and cannot be deserialised: the one way to get
//! one is [`crate::Store::scope`], which reads the principal from the catalog. So a
//! tenant or a group can never come from a request body, a flag, a header or a model —
//! the compiler refuses the code that would try.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::NaiveDate;
use dossier_core::pii::{Masker, PiiPolicy};
use dossier_core::{DocumentVersion, Principal};
use serde::Serialize;

/// Tenant, groups, knowledge bases and the date versions are judged in force at, of one
/// stored principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    principal_id: String,
    tenant: String,
    groups: Vec<String>,
    /// The knowledge bases documents are read from (sorted); `None`: every one.
    kbs: Option<Vec<String>>,
    /// Versions are judged in force on this date (`--as-of`, or else `--now`).
    at: NaiveDate,
    /// The tenant's sensitive values, masked for this reader (`None`: it sees them).
    #[serde(skip)]
    masking: Masking,
}

/// A reader's masker: decided with the scope, from the store's policy and the stored
/// groups, so it can be neither dropped nor widened by whoever holds the scope.
#[derive(Debug, Clone, Default)]
struct Masking(Option<Arc<Masker>>);

impl PartialEq for Masking {
    fn eq(&self, other: &Masking) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Masking {}

/// What decides which documents a scope admits, apart from the date: the key of every
/// cache of admission sets and graph views, so that no two scopes that read differently
/// can share an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReaderKey {
    tenant: String,
    groups: Vec<String>,
    kbs: Option<Vec<String>>,
}

impl Scope {
    /// Only the store builds scopes, from a principal it read from its catalog.
    pub(crate) fn of_stored(p: &Principal, at: NaiveDate, pii: &PiiPolicy) -> Scope {
        Scope {
            principal_id: p.id.clone(),
            tenant: p.tenant.clone(),
            groups: p.groups.clone(),
            kbs: p.kbs.clone().map(sorted),
            at,
            masking: Masking(pii.masker_for(&p.tenant, &p.groups)),
        }
    }

    /// The reader's masker, when the tenant's sensitive values are hidden from it.
    pub fn masker(&self) -> Option<&Masker> {
        self.masking.0.as_deref()
    }

    /// The same masker, shared (for what outlives a borrow of the scope).
    pub fn masker_shared(&self) -> Option<Arc<Masker>> {
        self.masking.0.clone()
    }

    /// `text` as this reader may see it (sensitive values masked).
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.masker() {
            Some(m) => m.mask(text),
            None => Cow::Borrowed(text),
        }
    }

    /// Whether this reader sees sensitive values (record fields marked sensitive).
    pub fn sees_sensitive(&self) -> bool {
        self.masking.0.is_none()
    }

    /// The knowledge bases documents are read from; `None`: all of the tenant's.
    pub fn kbs(&self) -> Option<&[String]> {
        self.kbs.as_deref()
    }

    /// The same principal reading only the knowledge bases a request names: never wider
    /// than the principal's own. A named kb the principal may not read, and one that does
    /// not exist, both leave nothing to read from it — they read the same. An empty list
    /// names none and changes nothing.
    pub fn within_kbs(&self, requested: &[String]) -> Scope {
        if requested.is_empty() {
            return self.clone();
        }
        let mut kbs = sorted(requested.to_vec());
        if let Some(allowed) = &self.kbs {
            kbs.retain(|k| allowed.binary_search(k).is_ok());
        }
        Scope {
            kbs: Some(kbs),
            ..self.clone()
        }
    }

    /// The key of what this scope admits (see [`ReaderKey`]).
    pub fn reader_key(&self) -> ReaderKey {
        ReaderKey {
            tenant: self.tenant.clone(),
            groups: sorted(self.groups.clone()),
            kbs: self.kbs.clone(),
        }
    }

    pub fn principal_id(&self) -> &str {
        &self.principal_id
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The date versions are judged in force at.
    pub fn at(&self) -> NaiveDate {
        self.at
    }

    /// The same principal, judging versions on another date (an as-of question, or a
    /// record's business date). Identity cannot change this way.
    pub fn judged_at(&self, at: NaiveDate) -> Scope {
        Scope { at, ..self.clone() }
    }

    /// Tenant, ACL and knowledge-base admission of one document version (validity is
    /// judged apart, see [`dossier_core::validity`]).
    pub fn may_read(&self, d: &DocumentVersion) -> bool {
        d.tenant == self.tenant
            && d.readable_by(&self.groups)
            && self.kbs.as_ref().is_none_or(|kbs| {
                d.kb.as_ref()
                    .is_some_and(|kb| kbs.binary_search(kb).is_ok())
            })
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(kbs: Option<&[&str]>) -> Principal {
        Principal {
            id: "p".into(),
            tenant: "t".into(),
            groups: vec![],
            kbs: kbs.map(|k| k.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn doc(kb: Option<&str>) -> DocumentVersion {
        DocumentVersion {
            doc_id: "d".into(),
            version: "1".into(),
            title: String::new(),
            tenant: "t".into(),
            kb: kb.map(str::to_string),
            acl: None,
            effective_from: None,
            effective_to: None,
            supersedes: None,
            supersedes_evidence: None,
            depends_on: vec![],
            source_uri: String::new(),
            kind: dossier_core::DocKind::Markdown,
            digest: String::new(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_request_narrows_the_principals_knowledge_bases_and_never_widens_them() {
        let at = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let none = PiiPolicy::none();
        let limited = Scope::of_stored(&principal(Some(&["hr", "it"])), at, &none);
        let open = Scope::of_stored(&principal(None), at, &none);
        // No request list: the principal's own.
        assert!(open.may_read(&doc(None)) && open.may_read(&doc(Some("x"))));
        assert!(!limited.may_read(&doc(None)) && limited.may_read(&doc(Some("hr"))));
        // A list narrows; a kb outside the principal's reads like one that does not exist.
        let s = limited.within_kbs(&names(&["it", "finance"]));
        assert_eq!(s.kbs(), Some(&names(&["it"])[..]));
        assert!(!s.may_read(&doc(Some("finance"))) && !s.may_read(&doc(Some("hr"))));
        let s = limited.within_kbs(&names(&["finance"]));
        assert_eq!(s.kbs(), Some(&[][..]));
        assert!(!s.may_read(&doc(Some("hr"))) && !s.may_read(&doc(None)));
        assert_eq!(
            limited.within_kbs(&names(&["finance"])).reader_key(),
            limited.within_kbs(&names(&["ghost"])).reader_key()
        );
        // An open principal reads what the request names, and no document without a kb.
        let s = open.within_kbs(&names(&["hr"]));
        assert!(s.may_read(&doc(Some("hr"))) && !s.may_read(&doc(None)));
        // The date moves; the knowledge bases stay.
        assert_eq!(s.judged_at(at.succ_opt().unwrap()).kbs(), s.kbs());
        // Different readers never share a cache key.
        assert_ne!(open.reader_key(), limited.reader_key());
        assert_ne!(
            open.reader_key(),
            open.within_kbs(&names(&["hr"])).reader_key()
        );
        assert_eq!(open.reader_key(), open.within_kbs(&[]).reader_key());
    }
}
