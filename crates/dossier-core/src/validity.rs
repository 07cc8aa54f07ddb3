//! Which version of a document is in force on a date.
//!
//! **Invariant:** a version stops being in force only on recorded evidence: an explicit
//! `effective_to`, or a *confirmed* supersession (`supersedes: ID@VERSION` on a later
//! version). Recency or similarity never ends a version; unconfirmed look-alikes are
//! reported as conflicts instead (see [`look_alikes`]).

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::doc::{DocKind, DocumentVersion, VersionRef};
use crate::text::base_title;

/// The half-open interval `[from, to)` in which a version is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Validity {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

impl Validity {
    pub fn in_force(&self, at: NaiveDate) -> bool {
        self.from.is_none_or(|f| f <= at) && self.to.is_none_or(|t| at < t)
    }

    /// The status a version with this interval has on `at`: `active`, `deprecated`
    /// (its interval ended on or before `at`) or `not_yet_in_force`.
    pub fn status_on(&self, at: NaiveDate) -> &'static str {
        if self.in_force(at) {
            "active"
        } else if self.to.is_some_and(|t| t <= at) {
            "deprecated"
        } else {
            "not_yet_in_force"
        }
    }

    /// Whether two intervals share at least one day.
    pub fn overlaps(&self, o: &Validity) -> bool {
        let starts_before_other_ends = match (self.from, o.to) {
            (Some(a), Some(b)) => a < b,
            _ => true,
        };
        let other_starts_before_end = match (o.from, self.to) {
            (Some(a), Some(b)) => a < b,
            _ => true,
        };
        starts_before_other_ends && other_starts_before_end
    }
}

/// Computes the validity of every version from the declared dates and confirmed
/// supersessions among `versions`. A supersession that names a version not in the
/// set is ignored (it cannot end anything).
pub fn plan_validity(versions: &[DocumentVersion]) -> HashMap<VersionRef, Validity> {
    plan_validity_with(versions, &[])
}

/// [`plan_validity`] with supersessions confirmed outside the documents' own front
/// matter — approvals in the review queue — as `(newer, older)` pairs.
pub fn plan_validity_with<V: Borrow<DocumentVersion>>(
    versions: &[V],
    approved: &[(VersionRef, VersionRef)],
) -> HashMap<VersionRef, Validity> {
    let versions = || versions.iter().map(Borrow::borrow);
    let mut out: HashMap<VersionRef, Validity> = versions()
        .map(|v| {
            (
                v.key(),
                Validity {
                    from: v.effective_from,
                    to: v.effective_to,
                },
            )
        })
        .collect();
    let starts: HashMap<VersionRef, Option<NaiveDate>> =
        versions().map(|v| (v.key(), v.effective_from)).collect();
    let declared = versions().filter_map(|v| Some((v.key(), v.supersedes.clone()?)));
    for (newer, old) in declared.chain(approved.iter().cloned()) {
        if old == newer {
            continue;
        }
        let Some(&start) = starts.get(&newer) else {
            continue;
        };
        if let Some(val) = out.get_mut(&old) {
            // The successor's start ends the old version; with no start date the
            // successor has always been in force, so the old version never was.
            let end = start.unwrap_or(NaiveDate::MIN);
            val.to = Some(val.to.map_or(end, |t| t.min(end)));
        }
    }
    out
}

/// A pair of documents that look like versions of one another without a confirmed
/// supersession between them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookAlike {
    pub a: VersionRef,
    pub b: VersionRef,
    pub reason: String,
}

/// Finds look-alike pairs: different document ids, same tenant and kb, the same base
/// title (titles compared after normalisation, with bracketed qualifiers removed), and
/// overlapping validity. Pairs linked by a confirmed supersession are not conflicts,
/// nor are pairs a reviewer has settled (`settled`: document-id pairs, either order).
pub fn look_alikes<V: Borrow<DocumentVersion>>(
    versions: &[V],
    validity: &HashMap<VersionRef, Validity>,
    settled: &HashSet<(String, String)>,
) -> Vec<LookAlike> {
    let mut by_title: HashMap<(String, Option<String>, String), Vec<&DocumentVersion>> =
        HashMap::new();
    // Corpus passages are independent texts, not versions of one another.
    let versions = versions.iter().map(Borrow::borrow);
    for v in versions.filter(|v: &&DocumentVersion| v.kind != DocKind::Passage) {
        let t = base_title(&v.title);
        if t.is_empty() {
            continue;
        }
        by_title
            .entry((v.tenant.clone(), v.kb.clone(), t))
            .or_default()
            .push(v);
    }
    let mut out = Vec::new();
    for group in by_title.values() {
        for (i, a) in group.iter().enumerate() {
            for b in &group[i + 1..] {
                if a.doc_id == b.doc_id {
                    continue;
                }
                let linked = a.supersedes.as_ref().is_some_and(|s| s.doc_id == b.doc_id)
                    || b.supersedes.as_ref().is_some_and(|s| s.doc_id == a.doc_id)
                    || settled.contains(&(a.doc_id.clone(), b.doc_id.clone()))
                    || settled.contains(&(b.doc_id.clone(), a.doc_id.clone()));
                let (va, vb) = (
                    validity.get(&a.key()).copied().unwrap_or_default(),
                    validity.get(&b.key()).copied().unwrap_or_default(),
                );
                if linked || !va.overlaps(&vb) {
                    continue;
                }
                let (x, y) = if a.key() <= b.key() { (a, b) } else { (b, a) };
                out.push(LookAlike {
                    a: x.key(),
                    b: y.key(),
                    reason: format!(
                        "\"{}\" and \"{}\" share a title, overlap in effective time, and no confirmed supersession links them",
                        x.title, y.title
                    ),
                });
            }
        }
    }
    out.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    pub(crate) fn version(id: &str, v: &str, from: &str, sup: Option<&str>) -> DocumentVersion {
        DocumentVersion {
            doc_id: id.into(),
            version: v.into(),
            title: format!("{id} title"),
            tenant: "t".into(),
            kb: None,
            acl: None,
            effective_from: Some(d(from)),
            effective_to: None,
            supersedes: sup.and_then(VersionRef::parse),
            supersedes_evidence: None,
            depends_on: vec![],
            source_uri: String::new(),
            kind: DocKind::Markdown,
            digest: String::new(),
        }
    }

    #[test]
    fn confirmed_supersession_ends_the_old_version_on_the_new_start() {
        let vs = vec![
            version("p", "V1", "2026-03-01", None),
            version("p", "V2", "2026-09-01", Some("p@V1")),
        ];
        let plan = plan_validity(&vs);
        let v1 = plan[&vs[0].key()];
        let v2 = plan[&vs[1].key()];
        assert!(v1.in_force(d("2026-08-31")) && !v1.in_force(d("2026-09-01")));
        assert!(!v2.in_force(d("2026-08-31")) && v2.in_force(d("2026-09-01")));
        assert!(!v1.in_force(d("2026-02-28")));
    }

    #[test]
    fn status_follows_the_half_open_interval() {
        let v = Validity {
            from: Some(d("2026-03-01")),
            to: Some(d("2026-09-01")),
        };
        assert_eq!(v.status_on(d("2026-02-28")), "not_yet_in_force");
        assert_eq!(v.status_on(d("2026-03-01")), "active");
        assert_eq!(v.status_on(d("2026-08-31")), "active");
        assert_eq!(v.status_on(d("2026-09-01")), "deprecated");
        assert_eq!(Validity::default().status_on(d("2026-01-01")), "active");
    }

    #[test]
    fn without_supersession_both_versions_stay_in_force() {
        let vs = vec![
            version("p", "V1", "2026-03-01", None),
            version("p", "V2", "2026-09-01", None),
        ];
        let plan = plan_validity(&vs);
        assert!(plan.values().all(|v| v.in_force(d("2026-10-01"))));
    }

    #[test]
    fn look_alikes_need_same_base_title_and_no_link() {
        let mut a = version("api-auth", "2.0", "2026-04-01", None);
        a.title = "开放平台 API 认证说明".into();
        let mut b = version("api-auth-mtls-draft", "0.9", "2026-06-01", None);
        b.title = "开放平台 API 认证说明（双向 TLS 草案）".into();
        let mut c = version("other", "1", "2026-06-01", None);
        c.title = "P-204 无线耳机产品说明".into();
        let vs = vec![a, b, c];
        let found = look_alikes(&vs, &plan_validity(&vs), &HashSet::new());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].b.doc_id, "api-auth-mtls-draft");
    }

    #[test]
    fn an_approved_supersession_ends_the_older_look_alike_and_settles_the_conflict() {
        let mut a = version("api-auth", "2.0", "2026-04-01", None);
        a.title = "API 认证说明".into();
        let mut b = version("api-auth-mtls-draft", "0.9", "2026-06-01", None);
        b.title = "API 认证说明（草案）".into();
        let vs = vec![a.clone(), b.clone()];
        let plan = plan_validity_with(&vs, &[(b.key(), a.key())]);
        assert!(plan[&a.key()].in_force(d("2026-05-31")));
        assert!(!plan[&a.key()].in_force(d("2026-06-01")));
        assert!(plan[&b.key()].in_force(d("2026-06-01")));
        let settled = HashSet::from([(b.doc_id.clone(), a.doc_id.clone())]);
        assert!(look_alikes(&vs, &plan, &settled).is_empty());
        // Unsettled, the same pair is a conflict (validity from the documents alone).
        assert_eq!(
            look_alikes(&vs, &plan_validity(&vs), &HashSet::new()).len(),
            1
        );
    }
}
