//! Answer writing and verification.
//!
//! The extractive writer builds the answer from the program's facts, the graph paths
//! and the evidence sentences that best match each sub-question, each sentence cited;
//! sentences that read as instructions are never quoted. The verifier checks every
//! citation against this run's evidence (the quote must be in the cited chunk) and
//! strips model-written claims whose marks cite nothing of the run.

use std::collections::{BTreeSet, HashSet};

use dossier_engine::Engine;

use crate::planner::selected_records;
use crate::text::{
    content_terms, identifiers, is_chinese, looks_like_instruction, names_table, sentences,
};
use crate::{Citation, Evidence, State, ToolStatus};

/// Evidence sentences quoted per sub-question (one per chunk).
const SENTENCES_PER_SUB_QUESTION: usize = 4;

/// An answer before verification.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    pub answer: String,
    pub citations: Vec<Citation>,
    pub gaps: Vec<String>,
    pub notes: Vec<String>,
    /// Claims the program composed from structure, not from a sentence: a graph edge
    /// (cited through its provenance chunk) and records selected by their fields. Their
    /// support is that structure, so the claim check does not weigh their words.
    pub structural: Vec<String>,
    /// Conflicts that concern a cited document, each pair once.
    pub conflicts: Vec<dossier_engine::Conflict>,
}

struct Writer<'s> {
    state: &'s State,
    citations: Vec<Citation>,
}

impl Writer<'_> {
    /// The mark of `quote` from `e`, adding the citation when new.
    fn cite(&mut self, e: &Evidence, quote: &str) -> usize {
        if let Some(c) = self
            .citations
            .iter()
            .find(|c| c.chunk_id == e.chunk_id && c.quote == quote)
        {
            return c.mark;
        }
        let mark = self.citations.len() + 1;
        self.citations.push(Citation {
            mark,
            doc_id: e.doc_id.clone(),
            version: e.version.clone(),
            section: e.section.clone(),
            page: e.page,
            chunk_id: e.chunk_id.clone(),
            source_uri: e.source_uri.clone(),
            quote: quote.to_string(),
        });
        mark
    }

    fn evidence(&self, chunk_id: &str) -> Option<&'_ Evidence> {
        self.state.evidence.iter().find(|e| e.chunk_id == chunk_id)
    }
}

/// Writes the extractive answer.
pub fn extractive(engine: &Engine, state: &State) -> Draft {
    let zh = is_chinese(&state.question);
    let mut w = Writer {
        state,
        citations: vec![],
    };
    let mut lines: Vec<String> = Vec::new();
    let mut gaps: Vec<String> = Vec::new();
    let mut structural: Vec<String> = Vec::new();

    // The conclusion first: what the clauses' conditions give against the facts, each
    // citing its clause. It goes no further than the evidence (unknown says what fact
    // is missing).
    if !state.conclusions.is_empty() {
        lines.push(if zh { "结论：" } else { "Conclusion:" }.into());
        for c in &state.conclusions {
            let Some(e) = w.evidence(&c.chunk_id).cloned() else {
                continue;
            };
            let m = w.cite(&e, &c.clause);
            lines.push(format!("- {} [{m}]", c.statement));
        }
        lines.push(if zh { "依据：" } else { "Grounds:" }.into());
    }

    // Facts first: what the program read and computed.
    let computed: Vec<String> = state
        .facts
        .iter()
        .filter(|(k, _)| k.ends_with("_days_ago"))
        .map(|(k, v)| {
            let src = state.fact_sources.get(k).cloned().unwrap_or_default();
            if zh {
                format!("{k} = {v}（{src}）")
            } else {
                format!("{k} = {v} ({src})")
            }
        })
        .collect();
    for r in state.question_records() {
        if state
            .sub_questions
            .first()
            .is_some_and(|s| s.text.contains(&r.row.key))
        {
            let owner = r.schema.owner_field.clone();
            let fields: Vec<String> = r
                .row
                .fields
                .iter()
                .filter(|(k, _)| Some(*k) != owner.as_ref())
                .map(|(k, v)| format!("{k}: {}", v.as_str().map_or(v.to_string(), str::to_string)))
                .collect();
            lines.push(format!(
                "{} {}（{}）：{}",
                if zh { "记录" } else { "Record" },
                r.row.key,
                r.schema.table,
                fields.join("，")
            ));
        }
    }
    if !computed.is_empty() {
        lines.push(format!(
            "{}{}",
            if zh { "计算所得：" } else { "Computed: " },
            computed.join("; ")
        ));
    }
    for (doc, at) in &state.linked_documents {
        lines.push(if zh {
            format!("适用文档 {doc} 按业务日期 {at} 时有效的版本判断。")
        } else {
            format!("Document {doc} is judged by the version in force on the business date {at}.")
        });
    }

    // Records a live source could not serve: each named, since the fact is missing,
    // not absent (a record the caller may not read is `no_hit` and never listed here).
    let mut unread: Vec<(String, bool)> = Vec::new();
    for s in state.steps.iter().filter(|s| s.action == "record") {
        if !matches!(s.status, ToolStatus::Timeout | ToolStatus::Error) {
            continue;
        }
        let (table, key) = (s.args["table"].as_str(), s.args["key"].as_str());
        if let (Some(table), Some(key)) = (table, key) {
            let name = format!("{table}/{key}");
            if !unread.iter().any(|(n, _)| *n == name) {
                unread.push((name, s.status == ToolStatus::Timeout));
            }
        }
    }
    for (name, timeout) in &unread {
        gaps.push(match (zh, timeout) {
            (true, true) => format!("记录 {name} 未能读取：数据来源超时，这一事实缺失（不代表记录不存在）"),
            (true, false) => format!("记录 {name} 未能读取：数据来源出错，这一事实缺失（不代表记录不存在）"),
            (false, true) => format!("record {name} could not be read: its source timed out, so that fact is missing (this does not mean there is no such record)"),
            (false, false) => format!("record {name} could not be read: its source failed, so that fact is missing (this does not mean there is no such record)"),
        });
    }

    for (i, sq) in state.sub_questions.iter().enumerate() {
        if !sq.covered {
            // A document search that timed out (a record read is named above).
            let timed_out = state.steps.iter().any(|s| {
                s.sub_question == i && s.status == ToolStatus::Timeout && s.action != "record"
            });
            gaps.push(if timed_out && zh {
                format!("「{}」：检索超时，未能核对相关文档（不代表没有相关规定）", sq.text)
            } else if timed_out {
                format!("\"{}\": the search timed out; the documents could not be checked (this does not mean there are none)", sq.text)
            } else {
                // Every refusal says why: the sufficiency decision's doubt, else the
                // words judge's, else that nothing was found.
                let reason = sq
                    .fit
                    .as_ref()
                    .and_then(|f| f.doubt.as_ref().map(|d| d.say(f.slot, zh)))
                    .or_else(|| sq.doubt.clone())
                    .unwrap_or_else(|| {
                        crate::sufficiency::Doubt::NoEvidence
                            .say(crate::sufficiency::Slot::Thing, zh)
                    });
                if zh {
                    format!("「{}」：可见的证据不足以回答（{reason}）", sq.text)
                } else {
                    format!(
                        "\"{}\": the visible evidence is not sufficient ({reason})",
                        sq.text
                    )
                }
            });
            continue;
        }
        let mut parts: Vec<String> = Vec::new();
        let terms: HashSet<String> = content_terms(&query_text(state, i)).into_iter().collect();

        // Community reports (global questions): each summary line cites its chunk.
        if state.mode == Some(dossier_engine::Mode::Global) {
            for r in state.reports.iter().take(3) {
                let mut cited = Vec::new();
                for line in r.summary.iter().take(3) {
                    if looks_like_instruction(&line.text) {
                        continue;
                    }
                    if let Some(e) = w.evidence(&line.chunk_id).cloned() {
                        if e.text.contains(line.text.as_str()) {
                            let m = w.cite(&e, &line.text);
                            cited.push(format!("{} [{m}]", line.text));
                        }
                    }
                }
                if !cited.is_empty() {
                    parts.push(format!(
                        "{} {}（{}）：{}",
                        if zh {
                            "社区报告"
                        } else {
                            "Community report"
                        },
                        r.community_id,
                        r.title,
                        cited.join(" ")
                    ));
                }
            }
        }

        // Graph paths: typed edges around the entities the sub-question names.
        let named: Vec<&String> = state.entities.get(i).into_iter().flatten().collect();
        let mut used_edges = 0;
        for e in &sq.edges {
            let relevant = named.iter().any(|n| *n == &e.from || *n == &e.to)
                || sq.edges.iter().any(|f| {
                    named.iter().any(|n| *n == &f.to || *n == &f.from)
                        && (f.from == e.to || f.to == e.from)
                });
            if !relevant || used_edges >= 6 {
                continue;
            }
            let Some(chunk) = e.provenance.iter().find_map(|c| w.evidence(c)) else {
                continue;
            };
            let chunk = chunk.clone();
            // Quote the sentence of the chunk that names both ends, else the first.
            let candidates: Vec<String> = sentences(&chunk.text)
                .into_iter()
                .filter(|s| !looks_like_instruction(s))
                .collect();
            let quote = candidates
                .iter()
                .find(|s| mentions(s, &e.from) && mentions(s, &e.to))
                .or_else(|| {
                    candidates
                        .iter()
                        .find(|s| mentions(s, &e.to) && !is_heading(s))
                })
                .or_else(|| {
                    candidates
                        .iter()
                        .find(|s| mentions(s, &e.from) && !is_heading(s))
                })
                .or_else(|| candidates.iter().find(|s| !is_heading(s)))
                .or(candidates.first())
                .cloned();
            if let Some(q) = quote {
                let m = w.cite(&chunk, &q);
                let claim = format!("{} —{}→ {}", e.from, e.relation, e.to);
                parts.push(format!("{claim} [{m}]"));
                structural.push(claim);
                used_edges += 1;
            }
        }

        // Records a sub-question selected from its evidence ("high-value customers").
        let selected = selected_records(state, i);
        let mut selected_keys: BTreeSet<String> =
            selected.iter().map(|r| r.row.key.clone()).collect();
        if i > 0 && crate::text::refers_back(&sq.text) {
            selected_keys.extend(crate::planner::selected_keys(state, i - 1));
        }
        let tables_named: Vec<&dossier_engine::TableInfo> = state
            .tables
            .iter()
            .filter(|t| names_table(&sq.text, &t.schema.table))
            .collect();
        let other_keys_of_named_tables = |s: &str| {
            identifiers(s).iter().any(|id| {
                tables_named
                    .iter()
                    .any(|t| t.key_shapes.contains(&dossier_engine::key_shape(id)))
                    && !selected_keys.contains(id)
                    && !state.question.contains(id.as_str())
            })
        };
        if !selected.is_empty() {
            let source = state
                .evidence_of(i)
                .into_iter()
                .find(|e| selected_keys.iter().any(|k| e.text.contains(k.as_str())));
            let described: Vec<String> = selected
                .iter()
                .map(|r| {
                    let vals: Vec<String> = r
                        .row
                        .fields
                        .iter()
                        .filter(|(k, _)| *k != &r.schema.key)
                        .filter_map(|(_, v)| v.as_str().map(str::to_string))
                        .filter(|v| sq.text.contains(v.as_str()))
                        .collect();
                    if vals.is_empty() {
                        r.row.key.clone()
                    } else {
                        format!("{}（{}）", r.row.key, vals.join("，"))
                    }
                })
                .collect();
            let mark = source.map(|e| {
                let e = e.clone();
                let quote = sentences(&e.text)
                    .into_iter()
                    .find(|s| selected_keys.iter().any(|k| s.contains(k.as_str())))
                    .unwrap_or_else(|| e.text.clone());
                w.cite(&e, &quote)
            });
            let claim = format!(
                "{}{}",
                if zh {
                    "符合条件的记录："
                } else {
                    "Matching records: "
                },
                described.join(if zh { "、" } else { ", " }),
            );
            parts.push(format!(
                "{claim}{}",
                mark.map_or(String::new(), |m| format!(" [{m}]"))
            ));
            structural.push(claim);
        }

        // Evidence sentences: one per chunk, those sharing the most content terms.
        let must: Vec<String> = if sq.rewritten.is_some() {
            identifiers(&query_text(state, i))
                .into_iter()
                .filter(|id| !sq.text.contains(id.as_str()))
                .collect()
        } else {
            vec![]
        };
        let mut scored: Vec<(usize, usize, Evidence, String)> = Vec::new();
        let mut rank_of: std::collections::HashMap<String, usize> = Default::default();
        // Covered by the sufficiency decision: its sentences are the answer, whatever
        // words they share (they may be in the other language).
        let by_fit = sq.judged_by.as_deref() == Some("fit");
        // The pool is in reranked order ([`crate::rerank`]).
        for (pos, e) in state.evidence_of(i).into_iter().enumerate() {
            if by_fit {
                break;
            }
            rank_of.insert(e.chunk_id.clone(), pos);
            let best = sentences(&e.text)
                .into_iter()
                .filter(|s| !looks_like_instruction(s))
                .filter(|s| must.is_empty() || must.iter().any(|m| s.contains(m.as_str())))
                .filter(|s| !other_keys_of_named_tables(s))
                .map(|s| {
                    let st: HashSet<String> = content_terms(&s).into_iter().collect();
                    let overlap = terms.iter().filter(|t| st.contains(*t)).count();
                    // A heading counts for less than a sentence that says something.
                    let overlap = if is_heading(&s) {
                        overlap.saturating_sub(1)
                    } else {
                        overlap
                    };
                    (overlap, s.chars().count(), s)
                })
                .filter(|(o, _, _)| *o > 0)
                .max_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            if let Some((o, len, s)) = best {
                scored.push((o, len, e.clone(), s));
            }
        }
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        // Say only what answers: a sentence far below the best match is another topic
        // of the same document, not part of the answer.
        // A sentence that says the relation the question asks for ("created by who") is
        // the last hop's answer, however few of the first hop's words it shares.
        let best = scored.first().map_or(0, |s| s.0);
        let relation = crate::asked::Relation::of(&sq.text).filter(|r| r.is_specific());
        scored.retain(|(o, _, _, s)| {
            (o * 5 >= best * 3 || relation.as_ref().is_some_and(|r| r.said_by(s)))
                && !state.conclusions.iter().any(|c| &c.clause == s)
        });
        // What is said comes in the pool's reranked order (the shared words chose what
        // is said, not its order): on hotpotqa-dev100 and musique-dev100 citation
        // precision rose 0.453 → 0.510 and 0.317 → 0.372 (BENCHMARKS.md, issue 14).
        scored.sort_by_key(|a| rank_of.get(&a.2.chunk_id).copied().unwrap_or(usize::MAX));
        // No sentence shares its words, but some are close in meaning (another language):
        // quote those.
        if scored.is_empty() {
            for (cid, sentence, _) in &sq.by_meaning {
                if let Some(e) = w.evidence(cid).cloned() {
                    scored.push((0, 0, e, sentence.clone()));
                }
            }
        }
        let graph_answered = used_edges > 0;
        for (_, _, e, s) in scored.into_iter().take(if graph_answered {
            2
        } else {
            SENTENCES_PER_SUB_QUESTION
        }) {
            // With a graph path, quote only the path's own sources.
            if graph_answered && !sq.edges.iter().any(|x| x.provenance.contains(&e.chunk_id)) {
                continue;
            }
            let m = w.cite(&e, &s);
            parts.push(format!("{s} [{m}]"));
        }

        // Caveats: limiting sentences of the cited chunks that concern the question.
        let ids_asked = identifiers(&query_text(state, i));
        let cited_chunks: Vec<String> = w.citations.iter().map(|c| c.chunk_id.clone()).collect();
        for cid in cited_chunks {
            let Some(e) = w.evidence(&cid).cloned() else {
                continue;
            };
            for s in sentences(&e.text) {
                if !is_caveat(&s) || looks_like_instruction(&s) || other_keys_of_named_tables(&s) {
                    continue;
                }
                if w.citations.iter().any(|c| c.quote == s) {
                    continue;
                }
                let st: HashSet<String> = content_terms(&s).into_iter().collect();
                let related = ids_asked.iter().any(|id| s.contains(id.as_str()))
                    || sq
                        .edges
                        .iter()
                        .any(|x| mentions(&s, &x.from) || mentions(&s, &x.to))
                    || terms.iter().filter(|t| st.contains(*t)).count() >= 2;
                if related {
                    let m = w.cite(&e, &s);
                    parts.push(format!(
                        "{}{s} [{m}]",
                        if zh { "限定：" } else { "Caveat: " }
                    ));
                }
            }
        }

        // Documents the cited ones depend on, when they were retrieved.
        let view = engine.store().view();
        let cited_docs: BTreeSet<String> = w.citations.iter().map(|c| c.doc_id.clone()).collect();
        for d in &cited_docs {
            let deps: Vec<String> = view
                .entries()
                .filter(|x| &x.meta.doc_id == d && x.meta.tenant == state.scope.tenant())
                .flat_map(|x| x.meta.depends_on.clone())
                .collect();
            for dep in deps {
                if cited_docs.contains(&dep) {
                    continue;
                }
                let Some(e) = state.evidence_of(i).into_iter().find(|e| e.doc_id == dep) else {
                    continue;
                };
                let e = e.clone();
                if let Some(s) = sentences(&e.text)
                    .into_iter()
                    .filter(|s| !looks_like_instruction(s))
                    .max_by_key(|s| {
                        let st: HashSet<String> = content_terms(s).into_iter().collect();
                        terms.iter().filter(|t| st.contains(*t)).count()
                    })
                {
                    let m = w.cite(&e, &s);
                    parts.push(format!(
                        "{}{s} [{m}]",
                        if zh {
                            "（所依赖的文档）"
                        } else {
                            "(a document it depends on) "
                        }
                    ));
                }
            }
        }

        // Its clauses already answered as conclusions (cited above).
        let concluded = state
            .conclusions
            .iter()
            .any(|c| sq.evidence.contains(&c.chunk_id));
        if parts.is_empty() && concluded {
            continue;
        }
        if parts.is_empty() {
            gaps.push(if zh {
                format!("「{}」：证据中没有可引用的句子", sq.text)
            } else {
                format!("\"{}\": no citable sentence in the evidence", sq.text)
            });
            continue;
        }
        if state.sub_questions.len() > 1 {
            lines.push(format!("{}. {}", i + 1, sq.text));
        }
        lines.extend(parts.into_iter().map(|p| format!("- {p}")));
    }

    // Conflicts that concern a cited document, each pair once.
    let cited: BTreeSet<&str> = w.citations.iter().map(|c| c.doc_id.as_str()).collect();
    let mut pairs = BTreeSet::new();
    let conflicts: Vec<&dossier_engine::Conflict> = state
        .conflicts
        .iter()
        .filter(|c| {
            cited.contains(c.doc_id.as_str()) || cited.contains(c.conflicts_with.doc_id.as_str())
        })
        .filter(|c| {
            let a = format!("{}@{}", c.doc_id, c.version);
            let b = c.conflicts_with.to_string();
            pairs.insert(if a <= b { (a, b) } else { (b, a) })
        })
        .collect();
    for c in &conflicts {
        lines.push(if zh {
            format!(
                "注意：{}@{} 与 {} 内容相近且时间重叠，二者之间没有确认的取代关系（冲突未裁决）：{}",
                c.doc_id, c.version, c.conflicts_with, c.reason
            )
        } else {
            format!(
                "Note: {}@{} and {} overlap and no confirmed supersession links them (unresolved conflict): {}",
                c.doc_id, c.version, c.conflicts_with, c.reason
            )
        });
    }
    let conflicts = conflicts.into_iter().cloned().collect();
    Draft {
        answer: lines.join("\n"),
        citations: w.citations,
        gaps,
        notes: vec![],
        structural,
        conflicts,
    }
}

fn query_text(state: &State, i: usize) -> String {
    state.sub_questions[i]
        .rewritten
        .clone()
        .unwrap_or_else(|| state.sub_questions[i].text.clone())
}

/// A line that reads as a heading: short, with no sentence punctuation.
pub(crate) fn is_heading(s: &str) -> bool {
    s.chars().count() < 24 && !s.contains(['。', '，', '；', '：', ',', '.', ';', ':'])
}

/// Words that limit a statement: such sentences are kept as caveats.
fn is_caveat(s: &str) -> bool {
    let l = s.to_lowercase();
    [
        "仅",
        "只",
        "除",
        "但",
        "例外",
        "不包括",
        "only",
        "except",
        "unless",
        "excluding",
    ]
    .iter()
    .any(|w| l.contains(w))
}

fn mentions(s: &str, name: &str) -> bool {
    let n = dossier_core::text::normalize(name);
    !n.is_empty() && dossier_core::text::normalize(s).contains(&n)
}

/// The answer when nothing is backed: say so, invent nothing.
pub fn insufficient_text(state: &State, gaps: &[String]) -> String {
    let zh = is_chinese(&state.question);
    let mut s = if zh {
        "证据不足：在你可见的资料中找不到足以回答此问题的内容。".to_string()
    } else {
        "Insufficient evidence: nothing you may read answers this question.".to_string()
    };
    for g in gaps {
        s.push('\n');
        s.push_str("- ");
        s.push_str(g);
    }
    s
}
