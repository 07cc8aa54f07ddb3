//! Review decisions: what a person decided about a candidate the engine would not
//! decide on its own — whether a look-alike document supersedes another, whether two
//! names are one entity, whether a model-proposed relation is a fact.
//!
//! **Invariant:** a decision is the only way such a candidate becomes a fact. The
//! engine proposes; a reviewer approves or rejects; the decision is stored with who,
//! when and why, and everything derived (validity, conflicts, the graph) follows it.

use serde::{Deserialize, Serialize};

use crate::doc::VersionRef;

/// What a candidate proposes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Subject {
    /// `newer` supersedes `older` (two look-alike documents with different ids).
    Supersession {
        newer: VersionRef,
        older: VersionRef,
    },
    /// `alias` names the same entity as `canonical` (normalised names of one tenant).
    Merge { alias: String, canonical: String },
    /// A relation a model proposed, supported by the chunk it read.
    Relation {
        from: String,
        relation: String,
        to: String,
        chunk_id: String,
    },
}

impl Subject {
    /// A stable id for the candidate within `tenant`: a kind prefix and a hash of
    /// what it proposes, so the same candidate keeps its id across runs.
    pub fn id(&self, tenant: &str) -> String {
        let (prefix, parts): (&str, Vec<&str>) = match self {
            Subject::Supersession { newer, older } => (
                "sup",
                vec![&newer.doc_id, &newer.version, &older.doc_id, &older.version],
            ),
            Subject::Merge { alias, canonical } => {
                // Order-free: "a = b" and "b = a" are one question.
                let (x, y) = if alias <= canonical {
                    (alias, canonical)
                } else {
                    (canonical, alias)
                };
                ("mrg", vec![x, y])
            }
            Subject::Relation {
                from,
                relation,
                to,
                chunk_id,
            } => ("rel", vec![from, relation, to, chunk_id]),
        };
        // FNV-1a, 64 bits: stable across builds and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in std::iter::once(tenant)
            .chain(parts)
            .flat_map(|p| p.bytes().chain([0x1f]))
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{prefix}-{:012x}", h & 0xffff_ffff_ffff)
    }

    /// The subject in a few words.
    pub fn describe(&self) -> String {
        match self {
            Subject::Supersession { newer, older } => format!("{newer} supersedes {older}?"),
            Subject::Merge { alias, canonical } => format!("{alias} = {canonical}?"),
            Subject::Relation {
                from, relation, to, ..
            } => format!("{from} -[{relation}]-> {to}?"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approved,
    Rejected,
}

/// A reviewer's decision on one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Decision {
    /// The candidate's id ([`Subject::id`]).
    pub id: String,
    pub tenant: String,
    pub subject: Subject,
    pub verdict: Verdict,
    /// Who decided.
    pub by: String,
    /// When (RFC 3339).
    pub at: String,
    /// Why, in the reviewer's words.
    #[serde(default)]
    pub note: String,
}

impl Decision {
    /// The supersession this decision confirms, if it approves one.
    pub fn confirmed_supersession(&self) -> Option<(&VersionRef, &VersionRef)> {
        match (&self.subject, self.verdict) {
            (Subject::Supersession { newer, older }, Verdict::Approved) => Some((newer, older)),
            _ => None,
        }
    }
}

/// A fact a model proposed (a relation read from one chunk), waiting in the review
/// queue: never a fact on the model's word alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCandidate {
    /// The candidate's id ([`Subject::id`]).
    pub id: String,
    pub tenant: String,
    /// Always a [`Subject::Relation`].
    pub subject: Subject,
    /// The model's own confidence, 0..1.
    pub confidence: f32,
    /// Which model proposed it.
    pub model: String,
    /// When (RFC 3339).
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(d: &str, ver: &str) -> VersionRef {
        VersionRef {
            doc_id: d.into(),
            version: ver.into(),
        }
    }

    #[test]
    fn ids_are_stable_and_distinguish_subjects() {
        let s = Subject::Supersession {
            newer: v("b", "1"),
            older: v("a", "1"),
        };
        assert_eq!(s.id("t"), s.clone().id("t"));
        assert!(s.id("t").starts_with("sup-"));
        assert_ne!(s.id("t"), s.id("u"), "tenant is part of the id");
        let flipped = Subject::Supersession {
            newer: v("a", "1"),
            older: v("b", "1"),
        };
        assert_ne!(s.id("t"), flipped.id("t"), "direction matters");
        let m1 = Subject::Merge {
            alias: "x".into(),
            canonical: "y".into(),
        };
        let m2 = Subject::Merge {
            alias: "y".into(),
            canonical: "x".into(),
        };
        assert_eq!(m1.id("t"), m2.id("t"), "a merge is order-free");
    }
}
