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
use crate::text::title_key;

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

/// How many MinHash values a [`sketch`] keeps.
pub const SKETCH_LEN: usize = 32;
/// The sketch is cut into this many bands of `SKETCH_LEN / SKETCH_BANDS` values; two
/// documents whose sketches agree on a whole band are compared (locality-sensitive
/// hashing: at Jaccard 0.5 a pair shares a band with probability ≈ 0.99, at 0.05 ≈ 0.04).
pub const SKETCH_BANDS: usize = 16;
/// Two sketches that agree on at least this many of their values have similar content
/// (estimated Jaccard similarity of their character shingles ≥ 0.5).
pub const SIMILAR_VALUES: usize = SKETCH_LEN / 2;
/// Each document owns at most this many look-alike pairs (those with documents after it
/// in its group's order), so a group of `n` holds at most `n · MAX_PAIRS_PER_DOC`.
pub const MAX_PAIRS_PER_DOC: usize = 8;
/// How far along each bucket of a group a document looks for look-alikes.
pub const WINDOW: usize = 2 * MAX_PAIRS_PER_DOC;
/// Characters per shingle.
const SHINGLE: usize = 5;

/// A content sketch of a document: the MinHash of its normalised text's character
/// shingles ([`SKETCH_LEN`] values; empty for a text too short to shingle). Computed
/// once when a version is stored; two documents' share of equal values estimates the
/// Jaccard similarity of their texts.
pub fn sketch<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
    let mut mins = [u32::MAX; SKETCH_LEN];
    let mut window: std::collections::VecDeque<char> = std::collections::VecDeque::new();
    let mut any = false;
    for text in texts {
        for c in crate::text::normalize(text).chars() {
            window.push_back(c);
            if window.len() > SHINGLE {
                window.pop_front();
            }
            if window.len() < SHINGLE {
                continue;
            }
            any = true;
            // FNV-1a over the shingle, then one mix per value.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for &c in &window {
                h ^= c as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
            for (i, m) in mins.iter_mut().enumerate() {
                let v = (mix(h ^ SEEDS[i]) >> 32) as u32;
                if v < *m {
                    *m = v;
                }
            }
        }
    }
    if any {
        mins.to_vec()
    } else {
        Vec::new()
    }
}

const SEEDS: [u64; SKETCH_LEN] = {
    let mut s = [0u64; SKETCH_LEN];
    let mut i = 0;
    while i < SKETCH_LEN {
        s[i] = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        i += 1;
    }
    s
};

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How many values two sketches share (0 when either is missing).
pub fn shared_values(a: &[u32], b: &[u32]) -> usize {
    if a.len() != SKETCH_LEN || b.len() != SKETCH_LEN {
        return 0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count()
}

/// One version as look-alike detection reads it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub version: &'a DocumentVersion,
    pub validity: Validity,
    /// Its content [`sketch`]; empty when unknown (a version stored before sketches).
    pub sketch: &'a [u32],
}

/// The key look-alikes are grouped by: tenant, knowledge base and title stem
/// ([`title_key`]); `None` for versions never look-alikes (corpus passages — independent
/// texts, not versions of one another — and titles with no stem).
pub fn group_of(v: &DocumentVersion) -> Option<(String, Option<String>, String)> {
    if v.kind == DocKind::Passage {
        return None;
    }
    let stem = title_key(&v.title).stem;
    (!stem.is_empty()).then(|| (v.tenant.clone(), v.kb.clone(), stem))
}

/// Finds look-alike pairs: different document ids, same tenant and kb, the same title
/// stem (titles compared after normalisation, with bracketed qualifiers and a trailing
/// version marker or series number removed, see [`title_key`]), overlapping validity,
/// and evidence beyond the stem (see [`look_alikes_in_group`]). Pairs linked by a
/// confirmed supersession are not conflicts, nor are pairs a reviewer has settled
/// (`settled`: document-id pairs, either order). Versions carry no content sketch here.
pub fn look_alikes<V: Borrow<DocumentVersion>>(
    versions: &[V],
    validity: &HashMap<VersionRef, Validity>,
    settled: &HashSet<(String, String)>,
) -> Vec<LookAlike> {
    let candidates = versions.iter().map(|v| {
        let v = v.borrow();
        Candidate {
            version: v,
            validity: validity.get(&v.key()).copied().unwrap_or_default(),
            sketch: &[],
        }
    });
    look_alikes_of(candidates, settled)
}

/// [`look_alikes`] of versions that may carry content sketches.
pub fn look_alikes_of<'a>(
    candidates: impl IntoIterator<Item = Candidate<'a>>,
    settled: &HashSet<(String, String)>,
) -> Vec<LookAlike> {
    let mut by_group: HashMap<(String, Option<String>, String), Vec<Candidate<'a>>> =
        HashMap::new();
    for c in candidates {
        if let Some(g) = group_of(c.version) {
            by_group.entry(g).or_default().push(c);
        }
    }
    let mut out: Vec<LookAlike> = by_group
        .into_values()
        .flat_map(|group| look_alikes_in_group(group, settled))
        .collect();
    out.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
    out
}

/// The look-alike pairs among one group's members (one tenant, kb and title stem), in
/// time near-linear in the group's size.
///
/// Two members are look-alikes when they are versions of different documents, in force
/// together, not linked by a supersession or a reviewer's decision, and something beyond
/// the stem says they are versions of one text: their titles end in the same series
/// number or in none (`Policy`, `Policy V2`, `Policy 2.0`, `Policy (draft)`; not
/// `Meeting notes 1` and `Meeting notes 2`), or their content is similar (sketches that
/// share at least [`SIMILAR_VALUES`] values).
///
/// Members are ordered by start date and key, and put into buckets that can only hold
/// such pairs: one per series number (title evidence) and one per sketch band value
/// (content evidence, locality-sensitive hashing). Each member is compared with the
/// next [`WINDOW`] members of each of its buckets and keeps the first
/// [`MAX_PAIRS_PER_DOC`] pairs found (nearest first), so a group of `n` costs
/// `O(n log n + n · WINDOW · SKETCH_BANDS)` and yields at most `n · MAX_PAIRS_PER_DOC`
/// pairs, whatever the titles. In a small group (up to `WINDOW + 1` members per bucket)
/// every pair is compared.
pub fn look_alikes_in_group(
    mut members: Vec<Candidate<'_>>,
    settled: &HashSet<(String, String)>,
) -> Vec<LookAlike> {
    if members.len() < 2 {
        return Vec::new();
    }
    members.sort_by(|x, y| {
        let (a, b) = (x.version, y.version);
        (a.effective_from, &a.doc_id, &a.version).cmp(&(b.effective_from, &b.doc_id, &b.version))
    });
    // Buckets, each a list of member positions in group order.
    let mut lists: HashMap<Bucket, Vec<usize>> = HashMap::new();
    for (i, m) in members.iter().enumerate() {
        for b in buckets(&m.version.title, m.sketch) {
            lists.entry(b).or_default().push(i);
        }
    }
    // By owner (the earlier member), its candidates with their distance in the bucket.
    let mut following: Vec<Vec<(usize, usize, Candidate<'_>)>> = vec![Vec::new(); members.len()];
    for list in lists.values() {
        for (at, &i) in list.iter().enumerate() {
            for (d, &j) in list[at + 1..].iter().take(WINDOW).enumerate() {
                following[i].push((d, j, members[j]));
            }
        }
    }
    let mut out: Vec<LookAlike> = following
        .into_iter()
        .enumerate()
        .flat_map(|(i, f)| owned_look_alikes(&members[i], f, settled))
        .map(|(_, l)| l)
        .collect();
    out.sort_by(|p, q| (&p.a, &p.b).cmp(&(&q.a, &q.b)));
    out
}

/// Values per band of a sketch.
pub const BAND_ROWS: usize = SKETCH_LEN / SKETCH_BANDS;

/// A bucket of one group's members that may be look-alikes of one another (see
/// [`look_alikes_in_group`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// Titles ending in this series number (or in none).
    Series(Option<String>),
    /// Sketches with these values in this band.
    Band(u8, [u32; BAND_ROWS]),
}

/// The buckets of a member with this title and sketch: its series, and one per band of
/// its sketch (none without one).
pub fn buckets(title: &str, sketch: &[u32]) -> Vec<Bucket> {
    let mut out = vec![Bucket::Series(title_key(title).series)];
    if sketch.len() == SKETCH_LEN {
        for (band, values) in sketch.chunks(BAND_ROWS).enumerate() {
            let mut v = [0u32; BAND_ROWS];
            v.copy_from_slice(values);
            out.push(Bucket::Band(band as u8, v));
        }
    }
    out
}

/// The look-alike pairs `owner` keeps: `following` holds, for each of its buckets, the
/// up to [`WINDOW`] members after it in group order, each as `(distance in the bucket,
/// its place in group order, member)`. Nearest first (distance, then place), each
/// member once, the first [`MAX_PAIRS_PER_DOC`] with evidence are kept. Depends only on
/// the owner and what follows it, so a change to a group plans again only the owners
/// within [`WINDOW`] before a changed member in one of its buckets.
pub fn owned_look_alikes<'a, O: Ord + Copy>(
    owner: &Candidate<'a>,
    mut following: Vec<(usize, O, Candidate<'a>)>,
    settled: &HashSet<(String, String)>,
) -> Vec<(O, LookAlike)> {
    following.sort_by_key(|x| (x.0, x.1));
    let mut seen: Vec<O> = Vec::with_capacity(following.len());
    let mut out = Vec::new();
    let owner_series = std::cell::OnceCell::new();
    for (_, o, other) in following {
        if out.len() == MAX_PAIRS_PER_DOC {
            break;
        }
        if seen.contains(&o) {
            continue;
        }
        seen.push(o);
        let series = owner_series.get_or_init(|| title_key(&owner.version.title).series);
        let Some(evidence) = evidence(owner, &other, series, settled) else {
            continue;
        };
        let (a, b) = (owner.version, other.version);
        let (p, q) = if a.key() <= b.key() { (a, b) } else { (b, a) };
        out.push((
            o,
            LookAlike {
                a: p.key(),
                b: q.key(),
                reason: format!(
                    "\"{}\" and \"{}\" {evidence}, overlap in effective time, and no confirmed supersession links them",
                    p.title, q.title
                ),
            },
        ));
    }
    out
}

/// Why `x` and `y` (of one group) are look-alikes, or `None` when they are not
/// (`sx`: the series number `x`'s title ends in).
fn evidence(
    x: &Candidate<'_>,
    y: &Candidate<'_>,
    sx: &Option<String>,
    settled: &HashSet<(String, String)>,
) -> Option<&'static str> {
    let (a, b) = (x.version, y.version);
    if a.doc_id == b.doc_id || !x.validity.overlaps(&y.validity) {
        return None;
    }
    let linked = a.supersedes.as_ref().is_some_and(|s| s.doc_id == b.doc_id)
        || b.supersedes.as_ref().is_some_and(|s| s.doc_id == a.doc_id)
        || (!settled.is_empty()
            && (settled.contains(&(a.doc_id.clone(), b.doc_id.clone()))
                || settled.contains(&(b.doc_id.clone(), a.doc_id.clone()))));
    if linked {
        return None;
    }
    if *sx == title_key(&b.title).series {
        Some("share a title")
    } else if shared_values(x.sketch, y.sketch) >= SIMILAR_VALUES {
        Some("share a title stem and similar content")
    } else {
        None
    }
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

    fn titled(id: &str, title: &str) -> DocumentVersion {
        let mut v = version(id, "1", "2026-01-01", None);
        v.title = title.into();
        v
    }

    fn found(vs: &[DocumentVersion], sketches: &[Vec<u32>]) -> Vec<LookAlike> {
        let plan = plan_validity(vs);
        let candidates = vs.iter().enumerate().map(|(i, v)| Candidate {
            version: v,
            validity: plan[&v.key()],
            sketch: sketches.get(i).map_or(&[][..], |s| &s[..]),
        });
        look_alikes_of(candidates, &HashSet::new())
    }

    /// `n` words of a made-up vocabulary, different for every `seed`.
    fn words(seed: usize, n: usize) -> String {
        let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let w = (x >> 33) % 5000;
                format!("{}{}", ["ka", "lo", "mi", "ne", "su"][(w % 5) as usize], w)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Issue 39: "Meeting notes 1" … "Meeting notes N" shared a base title (trailing
    /// digits were read as a version marker), so every pair was a conflict — N(N-1)/2
    /// of them, 2,000 documents taking 15 s and 1.76 GB to ingest. A trailing bare number
    /// is a series number: titles that differ only in it are look-alikes only when their
    /// content is similar too, and however many versions share a stem, a group yields
    /// at most `MAX_PAIRS_PER_DOC` pairs per version.
    #[test]
    fn a_series_of_numbered_titles_is_not_quadratic_look_alikes() {
        let n = 2_000;
        let vs: Vec<DocumentVersion> = (0..n)
            .map(|i| titled(&format!("notes-{i}"), &format!("Meeting notes {i}")))
            .collect();
        // Distinct content: no look-alikes, with sketches or without.
        let sketches: Vec<Vec<u32>> = (0..n).map(|i| sketch([words(i, 60).as_str()])).collect();
        assert_eq!(found(&vs, &sketches).len(), 0);
        assert_eq!(found(&vs, &[]).len(), 0);
        // One template for every note: similar content makes them look-alikes, but at
        // most MAX_PAIRS_PER_DOC per version, never all pairs.
        let same = vec![sketch(["Meeting notes template: attendees, decisions, actions."]); n];
        let pairs = found(&vs, &same);
        assert!(!pairs.is_empty());
        assert!(pairs.len() <= n * MAX_PAIRS_PER_DOC, "{}", pairs.len());
        // 20,000 versions of one title with a version marker each: every pair has title
        // evidence, yet the pairs stay linear in the versions.
        let n = 20_000;
        let vs: Vec<DocumentVersion> = (0..n)
            .map(|i| titled(&format!("policy-{i}"), &format!("Policy V{i}")))
            .collect();
        let pairs = look_alikes(&vs, &plan_validity(&vs), &HashSet::new());
        assert!(pairs.len() >= n, "{}", pairs.len());
        assert!(pairs.len() <= n * MAX_PAIRS_PER_DOC, "{}", pairs.len());
        let mut degree: HashMap<&str, usize> = HashMap::new();
        for p in &pairs {
            *degree.entry(p.a.doc_id.as_str()).or_default() += 1;
            *degree.entry(p.b.doc_id.as_str()).or_default() += 1;
        }
        assert!(degree.values().all(|&d| d <= 2 * WINDOW), "{degree:?}");
        // And 20,000 identical titles likewise.
        let vs: Vec<DocumentVersion> = (0..n)
            .map(|i| titled(&format!("untitled-{i}"), "Untitled"))
            .collect();
        let pairs = look_alikes(&vs, &plan_validity(&vs), &HashSet::new());
        assert!(pairs.len() >= n && pairs.len() <= n * MAX_PAIRS_PER_DOC);
    }

    #[test]
    fn versions_of_a_title_are_look_alikes_whatever_their_marker() {
        let vs = vec![
            titled("a", "Policy V2"),
            titled("b", "Policy 2.0"),
            titled("c", "Policy (draft)"),
            titled("d", "Policy"),
        ];
        // Every pair of a small group is compared.
        assert_eq!(found(&vs, &[]).len(), 6);
        let vs = vec![
            titled("api-auth", "开放平台 API 认证说明 2.0"),
            titled(
                "api-auth-mtls-draft",
                "开放平台 API 认证说明（双向 TLS 草案）",
            ),
        ];
        assert_eq!(found(&vs, &[]).len(), 1);
        // Identical titles, numbered or not.
        let vs = vec![
            titled("x", "Meeting notes 3"),
            titled("y", "Meeting notes 3"),
        ];
        assert_eq!(found(&vs, &[]).len(), 1);
    }

    #[test]
    fn numbered_titles_are_look_alikes_only_with_similar_content() {
        let vs = vec![
            titled("n1", "Meeting notes 1"),
            titled("n2", "Meeting notes 2"),
            titled("n", "Meeting notes"),
        ];
        assert!(found(&vs, &[]).is_empty());
        let text = "退货政策：签收后七日内可无理由退货，商品需保持完好，配件齐全。\
                    Refunds are issued within five working days of the return arriving.";
        let revised = format!("{text} Shipping is paid by the shop for quality issues.");
        let other = "Quarterly planning: roadmap review, hiring plan, budget for the new office.";
        let sketches = vec![sketch([text]), sketch([revised.as_str()]), sketch([other])];
        assert!(shared_values(&sketches[0], &sketches[1]) >= SIMILAR_VALUES);
        assert!(shared_values(&sketches[0], &sketches[2]) < 4);
        let pairs = found(&vs, &sketches);
        assert_eq!(pairs.len(), 1, "{pairs:?}");
        assert_eq!(
            (pairs[0].a.doc_id.as_str(), pairs[0].b.doc_id.as_str()),
            ("n1", "n2")
        );
        assert!(
            pairs[0].reason.contains("similar content"),
            "{}",
            pairs[0].reason
        );
        // Not in force together, or linked, they are no conflict.
        let mut later = vs.clone();
        later[1].effective_from = Some(d("2027-01-01"));
        later[0].effective_to = Some(d("2026-06-01"));
        assert!(found(&later, &sketches).is_empty());
        let mut linked = vs.clone();
        linked[1].supersedes = VersionRef::parse("n1@1");
        assert!(found(&linked, &sketches).is_empty());
    }

    #[test]
    fn a_sketch_needs_enough_text_and_ignores_case_and_spacing() {
        assert!(sketch(["abc"]).is_empty());
        assert_eq!(
            sketch(["Hello, World again"]),
            sketch(["hello world  AGAIN"])
        );
        assert_eq!(sketch(["Hello, World again"]).len(), SKETCH_LEN);
    }
}
