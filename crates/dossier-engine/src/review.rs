//! The review queue: candidates the engine will not turn into facts on its own, each
//! shown with the source text that supports it, and the decisions reviewers record.
//!
//! - `supersession`: two look-alike documents in force at the same time with no
//!   confirmed supersession (the conflicts search reports). Approving records that the
//!   newer supersedes the older: the older version becomes deprecated from the newer's
//!   start, exactly as a declared `supersedes` would. Rejecting records that they are
//!   different documents: no longer a conflict, both stay in force.
//! - `merge`: two names of one tenant that look alike (character-bigram similarity)
//!   but no alias statement joins. Approving merges them in the graph (logged,
//!   reversible by a later rejection); rejecting keeps them apart and off the queue.
//!
//! Reviewing is an administrator's act on the store: it is not principal-scoped, and
//! the queue shows every tenant unless asked for one. Decisions live in the catalog and
//! commit like any other change, so every derived view (validity, conflicts, graph)
//! follows them.

use std::collections::{BTreeMap, HashMap};

use dossier_core::review::{Decision, Subject, Verdict};
use dossier_core::VersionRef;
use serde::Serialize;

use dossier_store::Scope;

use crate::{Engine, Error, Result};

/// Bigram similarity from which two names are proposed as one entity.
pub const MIN_MERGE_SIMILARITY: f32 = 0.6;
/// Characters of supporting text shown per source.
const EVIDENCE_CHARS: usize = 600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    Open,
    Approved,
    Rejected,
}

/// Source text shown with a candidate.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evidence {
    pub doc_id: String,
    pub version: String,
    pub title: String,
    /// The chunk the text comes from, when it is a chunk.
    pub chunk_id: Option<String>,
    /// The version's status today: `active`, `deprecated` or `not_yet_in_force`.
    pub status: String,
    pub text: String,
}

/// One candidate of the queue.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewItem {
    pub id: String,
    pub tenant: String,
    pub subject: Subject,
    pub status: ReviewStatus,
    /// Why the engine proposes it.
    pub reason: String,
    /// Filled by [`Engine::review_show`].
    pub evidence: Vec<Evidence>,
    pub decision: Option<Decision>,
}

impl Engine {
    /// Open candidates (and, with `include_decided`, decided ones), of one tenant or
    /// all, ordered by tenant and id.
    pub fn review_list(
        &self,
        tenant: Option<&str>,
        include_decided: bool,
    ) -> Result<Vec<ReviewItem>> {
        let decided: HashMap<String, Decision> = self
            .store
            .catalog()
            .decisions()?
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
        let mut items: BTreeMap<(String, String), ReviewItem> = BTreeMap::new();
        let wanted = |t: &str| tenant.is_none_or(|w| w == t);

        let view = self.store.view();
        for (t, l) in view.look_alikes().into_iter().filter(|(t, _)| wanted(t)) {
            let (ia, ib) = (
                view.find(t, &l.a.doc_id, &l.a.version),
                view.find(t, &l.b.doc_id, &l.b.version),
            );
            let start = |i: Option<usize>| i.and_then(|i| view.entry(i).meta.effective_from);
            // The later start is the candidate successor; on a tie, the second of the pair.
            let (newer, older) = if start(ia) > start(ib) {
                (l.a.clone(), l.b.clone())
            } else {
                (l.b.clone(), l.a.clone())
            };
            let subject = Subject::Supersession { newer, older };
            let id = subject.id(t);
            items.insert(
                (t.to_string(), id.clone()),
                ReviewItem {
                    id,
                    tenant: t.to_string(),
                    subject,
                    status: ReviewStatus::Open,
                    reason: l.reason.clone(),
                    evidence: vec![],
                    decision: None,
                },
            );
        }

        for t in self.tenants()?.into_iter().filter(|t| wanted(t)) {
            let state = self.current_graph(&t)?;
            for c in state.graph.resolver().candidates(MIN_MERGE_SIMILARITY) {
                let subject = Subject::Merge {
                    alias: c.b.clone(),
                    canonical: c.a.clone(),
                };
                let id = subject.id(&t);
                if decided.contains_key(&id) {
                    continue;
                }
                items.insert(
                    (t.to_string(), id.clone()),
                    ReviewItem {
                        id,
                        tenant: t.to_string(),
                        subject,
                        status: ReviewStatus::Open,
                        reason: format!(
                            "names of one kind ({:?}) with character-bigram similarity {:.2}; no alias statement joins them",
                            c.kind, c.score
                        ),
                        evidence: vec![],
                        decision: None,
                    },
                );
            }
        }

        for c in self.store.catalog().model_candidates()? {
            if !wanted(&c.tenant) || decided.contains_key(&c.id) {
                continue;
            }
            items.insert(
                (c.tenant.clone(), c.id.clone()),
                ReviewItem {
                    id: c.id.clone(),
                    tenant: c.tenant.clone(),
                    subject: c.subject.clone(),
                    status: ReviewStatus::Open,
                    reason: format!(
                        "proposed by the model {} with confidence {:.2}; outside what the written policy accepts on its own",
                        c.model, c.confidence
                    ),
                    evidence: vec![],
                    decision: None,
                },
            );
        }

        if include_decided {
            for d in decided.into_values().filter(|d| wanted(&d.tenant)) {
                items.insert(
                    (d.tenant.clone(), d.id.clone()),
                    ReviewItem {
                        id: d.id.clone(),
                        tenant: d.tenant.clone(),
                        subject: d.subject.clone(),
                        status: match d.verdict {
                            Verdict::Approved => ReviewStatus::Approved,
                            Verdict::Rejected => ReviewStatus::Rejected,
                        },
                        reason: format!("decided by {} at {}", d.by, d.at),
                        evidence: vec![],
                        decision: Some(d),
                    },
                );
            }
        }
        Ok(items.into_values().collect())
    }

    /// One candidate (open or decided) with the source text that supports it, of any
    /// tenant (the operator's view; the server uses [`Engine::review_show_in`]).
    pub fn review_show(&self, id: &str) -> Result<ReviewItem> {
        self.review_show_in(None, id)
    }

    /// [`Engine::review_show`] within one tenant: only that tenant's graph is built,
    /// and another tenant's candidate reads like one that does not exist.
    pub fn review_show_in(&self, tenant: Option<&str>, id: &str) -> Result<ReviewItem> {
        let mut item = self
            .review_list(tenant, true)?
            .into_iter()
            .find(|i| i.id == id)
            .ok_or_else(|| Error::NotFound(format!("no review candidate {id}")))?;
        item.evidence = self.evidence_for(&item.tenant, &item.subject)?;
        Ok(item)
    }

    /// Records a reviewer's decision on candidate `id` and commits it; derived views
    /// follow from the next read on.
    pub fn review_decide(
        &self,
        id: &str,
        verdict: Verdict,
        by: &str,
        note: &str,
    ) -> Result<Decision> {
        self.review_decide_in(None, id, verdict, by, note)
    }

    /// [`Engine::review_decide`] within one tenant (see [`Engine::review_show_in`]).
    pub fn review_decide_in(
        &self,
        tenant: Option<&str>,
        id: &str,
        verdict: Verdict,
        by: &str,
        note: &str,
    ) -> Result<Decision> {
        if by.trim().is_empty() {
            return Err(Error::Invalid("a decision needs a reviewer (--by)".into()));
        }
        let item = self
            .review_list(tenant, true)?
            .into_iter()
            .find(|i| i.id == id)
            .ok_or_else(|| Error::NotFound(format!("no review candidate {id}")))?;
        let decision = Decision {
            id: item.id,
            tenant: item.tenant,
            subject: item.subject,
            verdict,
            by: by.trim().to_string(),
            at: chrono::Utc::now().to_rfc3339(),
            note: note.to_string(),
        };
        self.store.commit(dossier_store::catalog::CommitBatch {
            decisions: vec![decision.clone()],
            ..Default::default()
        })?;
        Ok(decision)
    }

    /// Whether a reviewer with `scope` may see candidate `item` at all: its tenant is
    /// theirs and every source it was built from is one they may read — both versions
    /// of a supersession (tenant and ACL, any date), both names of a merge (entities
    /// of their own graph view), the chunk of a model relation. An administrator is
    /// otherwise a principal like any other: restricted text does not reach them
    /// through a candidate's subject or reason.
    pub fn review_readable(&self, scope: &Scope, item: &ReviewItem) -> Result<bool> {
        if item.tenant != scope.tenant() {
            return Ok(false);
        }
        Ok(match &item.subject {
            Subject::Supersession { newer, older } => [newer, older]
                .iter()
                .all(|r| self.may_read_version(scope, &r.doc_id, &r.version)),
            Subject::Merge { alias, canonical } => {
                let view = self.graph_view(scope)?;
                [alias, canonical]
                    .iter()
                    .all(|n| view.resolve(n).and_then(|id| view.entity(&id)).is_some())
            }
            Subject::Relation { chunk_id, .. } => self.section_of(scope, chunk_id).is_ok(),
        })
    }

    /// Fills in the supporting source text of listed candidates.
    pub fn review_with_evidence(&self, items: &mut [ReviewItem]) -> Result<()> {
        for item in items {
            item.evidence = self.evidence_for(&item.tenant, &item.subject)?;
        }
        Ok(())
    }

    /// Tenants that hold documents or record tables.
    fn tenants(&self) -> Result<Vec<String>> {
        let mut ts: Vec<String> = self
            .store
            .view()
            .entries()
            .map(|e| e.meta.tenant.clone())
            .collect();
        ts.extend(
            self.store
                .catalog()
                .record_counts()?
                .into_keys()
                .map(|(t, _)| t),
        );
        ts.sort();
        ts.dedup();
        Ok(ts)
    }

    fn evidence_for(&self, tenant: &str, subject: &Subject) -> Result<Vec<Evidence>> {
        let view = self.store.view();
        let today = chrono::Utc::now().date_naive();
        let status = |i: usize| view.validity(i).status_on(today).to_string();
        let clip = |s: &str| -> String {
            let mut out: String = s.chars().take(EVIDENCE_CHARS).collect();
            if s.chars().count() > EVIDENCE_CHARS {
                out.push('…');
            }
            out
        };
        let mut out = Vec::new();
        match subject {
            Subject::Supersession { newer, older } => {
                for r in [newer, older] {
                    let Some(i) = view.find(tenant, &r.doc_id, &r.version) else {
                        continue;
                    };
                    let e = &view.entry(i);
                    let meta = &e.meta;
                    let mut head = format!(
                        "effective from {}{}",
                        meta.effective_from
                            .map_or("(no date)".to_string(), |d| d.to_string()),
                        meta.effective_to
                            .map_or(String::new(), |d| format!(" to {d}"))
                    );
                    if let Some(s) = &meta.supersedes {
                        head.push_str(&format!("; declares supersedes {s}"));
                    }
                    if let Some(ev) = &meta.supersedes_evidence {
                        head.push_str(&format!("; evidence: {ev}"));
                    }
                    out.push(Evidence {
                        doc_id: r.doc_id.clone(),
                        version: r.version.clone(),
                        title: meta.title.clone(),
                        chunk_id: None,
                        status: status(i),
                        text: head,
                    });
                    for c in self
                        .store
                        .catalog()
                        .chunks(&e.seqs[..e.seqs.len().min(2)])?
                    {
                        out.push(Evidence {
                            doc_id: r.doc_id.clone(),
                            version: r.version.clone(),
                            title: meta.title.clone(),
                            chunk_id: Some(c.chunk.chunk_id.clone()),
                            status: status(i),
                            text: clip(&c.chunk.text),
                        });
                    }
                }
            }
            Subject::Merge { alias, canonical } => {
                let state = self.current_graph(tenant)?;
                // The reviewer sees every source of the tenant: an administrator's view.
                let all = state.graph.view(&|_| true);
                for name in [alias, canonical] {
                    let Some(entity) = all.resolve(name).and_then(|id| all.entity(&id)) else {
                        continue;
                    };
                    for src in entity.sources.iter().take(3) {
                        let chunk = state
                            .chunk_seq
                            .get(src)
                            .map(|&seq| self.store.catalog().chunks(&[seq]))
                            .transpose()?
                            .and_then(|mut v| v.pop());
                        let (doc, version) = match &chunk {
                            Some(c) => (c.chunk.doc_id.clone(), c.chunk.version.clone()),
                            None => VersionRef::parse(src)
                                .map(|r| (r.doc_id, r.version))
                                .unwrap_or_else(|| (src.clone(), String::new())),
                        };
                        let i = view.find(tenant, &doc, &version);
                        out.push(Evidence {
                            title: i.map_or(String::new(), |i| view.entry(i).meta.title.clone()),
                            status: i.map_or("record".to_string(), status),
                            chunk_id: chunk.as_ref().map(|c| c.chunk.chunk_id.clone()),
                            text: chunk.map_or_else(
                                || format!("{name} is named in {src}"),
                                |c| clip(&c.chunk.text),
                            ),
                            doc_id: doc,
                            version,
                        });
                    }
                }
            }
            Subject::Relation { chunk_id, .. } => {
                let state = self.current_graph(tenant)?;
                if let Some(&seq) = state.chunk_seq.get(chunk_id) {
                    for c in self.store.catalog().chunks(&[seq])? {
                        let i = view.find(tenant, &c.chunk.doc_id, &c.chunk.version);
                        out.push(Evidence {
                            doc_id: c.chunk.doc_id.clone(),
                            version: c.chunk.version.clone(),
                            title: c.chunk.title.clone(),
                            chunk_id: Some(c.chunk.chunk_id.clone()),
                            status: i.map_or("unknown".to_string(), status),
                            text: clip(&c.chunk.text),
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Relations a model may add without a reviewer: the typed relations the text rules
/// also produce.
pub const POLICY_RELATIONS: &[&str] = &[
    "supplied_by",
    "affected_by",
    "depends_on",
    "owned_by",
    "resolved_by",
];
/// Confidence from which a grounded proposal of a known relation between known
/// entities is accepted by policy.
pub const POLICY_MIN_CONFIDENCE: f32 = 0.9;
/// Who the policy's decisions are recorded as.
pub const POLICY_REVIEWER: &str = "policy:model-relations-v1";

/// What happened to a batch of model proposals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProposalReport {
    /// Accepted by the written policy (recorded as decisions by [`POLICY_REVIEWER`]).
    pub accepted: Vec<String>,
    /// Queued for a reviewer.
    pub queued: Vec<String>,
    /// Dropped: a name not in the chunk's text, an unknown chunk, an empty field.
    pub discarded: Vec<String>,
}

impl Engine {
    /// Applies the written policy to relations a model proposed, each read from one
    /// chunk. A proposal is **discarded** unless both names occur in that chunk's text;
    /// **accepted** (a decision by [`POLICY_REVIEWER`]) only when its relation is one of
    /// [`POLICY_RELATIONS`], both names are already entities of the tenant, and the
    /// confidence is at least [`POLICY_MIN_CONFIDENCE`]; otherwise **queued** for review.
    pub fn submit_model_candidates(
        &self,
        proposals: Vec<dossier_core::review::ModelCandidate>,
    ) -> Result<ProposalReport> {
        let mut report = ProposalReport::default();
        let mut batch = dossier_store::catalog::CommitBatch::default();
        // The same proposal twice counts once, at its highest confidence.
        let mut proposals = proposals;
        proposals.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
        let mut seen = std::collections::HashSet::new();
        let mut graphs = HashMap::new();
        for mut c in proposals {
            if !seen.insert(c.subject.id(&c.tenant)) {
                continue;
            }
            let Subject::Relation {
                from,
                relation,
                to,
                chunk_id,
            } = &c.subject
            else {
                report.discarded.push(format!("{}: not a relation", c.id));
                continue;
            };
            // One graph and one whole-tenant view per tenant, not per proposal.
            if !graphs.contains_key(&c.tenant) {
                let state = self.current_graph(&c.tenant)?;
                let all = state.graph.view(&|_| true);
                graphs.insert(c.tenant.clone(), (state, all));
            }
            let (state, all) = &graphs[&c.tenant];
            let text = match state.chunk_seq.get(chunk_id) {
                Some(&seq) => self
                    .store
                    .catalog()
                    .chunks(&[seq])?
                    .pop()
                    .map(|s| s.chunk.text),
                None => None,
            };
            let grounded = text.as_deref().is_some_and(|t| {
                let t = dossier_core::text::normalize(t);
                [from, to].iter().all(|n| {
                    let n = dossier_core::text::normalize(n);
                    !n.is_empty() && t.contains(&n)
                })
            });
            let desc = c.subject.describe();
            if !grounded || relation.trim().is_empty() {
                report.discarded.push(desc);
                continue;
            }
            c.id = c.subject.id(&c.tenant);
            let known = all.resolve(from).is_some() && all.resolve(to).is_some();
            if POLICY_RELATIONS.contains(&relation.as_str())
                && known
                && c.confidence >= POLICY_MIN_CONFIDENCE
            {
                batch.decisions.push(Decision {
                    id: c.id.clone(),
                    tenant: c.tenant.clone(),
                    subject: c.subject.clone(),
                    verdict: Verdict::Approved,
                    by: POLICY_REVIEWER.into(),
                    at: chrono::Utc::now().to_rfc3339(),
                    note: format!(
                        "{} proposed it with confidence {:.2}; known relation between known entities, grounded in {chunk_id}",
                        c.model, c.confidence
                    ),
                });
                report.accepted.push(desc);
            } else {
                report.queued.push(desc);
            }
            batch.candidates.push(c);
        }
        if !batch.is_empty() {
            self.store.commit(batch)?;
        }
        Ok(report)
    }
}
