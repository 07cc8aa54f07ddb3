//! The router: before any tool runs, a question is put in one class, and the class
//! decides the retrieval path and the budget. The decision and its reason go into the
//! trace (and the server's metrics).
//!
//! | class | when | path |
//! |---|---|---|
//! | `lookup` | the question names a record (an identifier of a table's key shape) | the record first (owner-checked), its links, then the documents they link as of its business date |
//! | `relation` | it names entities of the caller's graph with a relation word, or two entities | graph neighbours of the entities, then graph search (PageRank + hybrid + DEPENDS_ON) |
//! | `global` | it asks for themes across many sources and names no record, document or entity | community reports, map-reduced into cited chunks |
//! | `policy` | everything else with content | graph search over the documents (hybrid + DEPENDS_ON) |
//! | `out_of_scope` | nothing in it can be searched for | no tool; "insufficient evidence" |

use serde::Serialize;

use crate::budget::Budget;
use crate::text::{content_terms, identifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RouteClass {
    Lookup,
    Policy,
    Relation,
    Global,
    OutOfScope,
}

impl RouteClass {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteClass::Lookup => "lookup",
            RouteClass::Policy => "policy",
            RouteClass::Relation => "relation",
            RouteClass::Global => "global",
            RouteClass::OutOfScope => "out_of_scope",
        }
    }

    pub const ALL: [RouteClass; 5] = [
        RouteClass::Lookup,
        RouteClass::Policy,
        RouteClass::Relation,
        RouteClass::Global,
        RouteClass::OutOfScope,
    ];

    /// The class's own limits, never above the request's (which the operator caps).
    pub fn budget(self, request: &Budget) -> Budget {
        let (steps, evidence) = match self {
            RouteClass::Lookup => (12, 30),
            RouteClass::Policy => (10, 30),
            RouteClass::Relation => (16, 40),
            RouteClass::Global => (8, 40),
            RouteClass::OutOfScope => (0, 0),
        };
        Budget {
            max_steps: request.max_steps.min(steps),
            max_evidence: request.max_evidence.min(evidence),
            ..request.clone()
        }
    }
}

/// The router's decision, as the trace shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Route {
    pub class: RouteClass,
    /// Why: the words, records or entities that decided it.
    pub reason: String,
}

/// Words that ask how things relate: an entity question with one of these follows edges.
const RELATION_WORDS: &[&str] = &[
    "影响",
    "依赖",
    "负责",
    "供应",
    "供货",
    "关联",
    "相关",
    "属于",
    "导致",
    "上游",
    "下游",
    "谁",
    "affect",
    "depend",
    "own",
    "responsib",
    "suppl",
    "relat",
    "caus",
    "belong",
    "upstream",
    "downstream",
    "who",
];

/// Words that ask for themes across sources rather than one fact.
const THEME_WORDS: &[&str] = &[
    "主要",
    "总体",
    "整体",
    "趋势",
    "共性",
    "概况",
    "总结",
    "归纳",
    "有哪些风险",
    "哪些方面",
    "main ",
    "overall",
    "themes",
    "trends",
    "in general",
    "summar",
    "common ",
    "key risks",
    "biggest risks",
    "major ",
];

/// Whether `text` says `word`: a Latin word only where a word starts ("the domain
/// password" does not say "main "); Chinese words anywhere (no spaces mark words).
fn says_word(text: &str, word: &str) -> bool {
    let latin = word.starts_with(|c: char| c.is_ascii_alphabetic());
    text.match_indices(word).any(|(at, _)| {
        !latin
            || !text[..at]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
    })
}

/// Classifies a question. `records` are the `table/key` records it names; `entities`
/// the (non-document) entities of the caller's graph it names; `documents` the
/// documents it names by title; `requested_global` when the caller asked for
/// `--mode global`.
pub fn route(
    question: &str,
    records: &[String],
    entities: &[String],
    documents: &[String],
    requested_global: bool,
) -> Route {
    let lower = question.to_lowercase();
    if requested_global {
        return Route {
            class: RouteClass::Global,
            reason: "the caller asked for community reports (mode global)".into(),
        };
    }
    if !records.is_empty() {
        return Route {
            class: RouteClass::Lookup,
            reason: format!("names record {}", records.join(", ")),
        };
    }
    if content_terms(question).is_empty() && identifiers(question).is_empty() {
        return Route {
            class: RouteClass::OutOfScope,
            reason: "nothing in the question can be searched for".into(),
        };
    }
    let theme = THEME_WORDS.iter().find(|w| says_word(&lower, w));
    if let Some(w) = theme {
        // "The main business of <a company with its own page>" asks about that page.
        if identifiers(question).is_empty() && entities.len() <= 1 && documents.is_empty() {
            return Route {
                class: RouteClass::Global,
                reason: format!("asks for themes (\"{}\")", w.trim()),
            };
        }
    }
    let relation = RELATION_WORDS.iter().find(|w| says_word(&lower, w));
    if !entities.is_empty() && (relation.is_some() || entities.len() >= 2) {
        return Route {
            class: RouteClass::Relation,
            reason: match relation {
                Some(w) => format!(
                    "names {} and asks how it relates (\"{w}\")",
                    entities.join(", ")
                ),
                None => format!("names several entities: {}", entities.join(", ")),
            },
        };
    }
    Route {
        class: RouteClass::Policy,
        reason: if entities.is_empty() {
            "asks about documents; names no record or entity".into()
        } else {
            format!(
                "names {} without asking how it relates",
                entities.join(", ")
            )
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(q: &str, records: &[&str], entities: &[&str]) -> RouteClass {
        let r: Vec<String> = records.iter().map(|s| s.to_string()).collect();
        let e: Vec<String> = entities.iter().map(|s| s.to_string()).collect();
        route(q, &r, &e, &[], false).class
    }

    #[test]
    fn a_theme_word_about_a_named_document_asks_about_that_document() {
        let q = "中国建筑工程总公司的主要业务是什么？";
        assert_eq!(class(q, &[], &[]), RouteClass::Global);
        let r = route(q, &[], &[], &["中国建筑工程总公司".to_string()], false);
        assert_eq!(r.class, RouteClass::Policy, "{r:?}");
    }

    #[test]
    fn each_class_is_reached() {
        assert_eq!(
            class("订单 B7 能退吗？", &["orders/B7"], &[]),
            RouteClass::Lookup
        );
        assert_eq!(
            class("Who owns the billing service?", &[], &["billing"]),
            RouteClass::Relation
        );
        assert_eq!(
            class("仓库 W-2 依赖哪些系统？", &[], &["W-2"]),
            RouteClass::Relation
        );
        assert_eq!(
            class("What are the main reliability themes?", &[], &[]),
            RouteClass::Global
        );
        assert_eq!(
            class("报销的主要问题有哪些？", &[], &[]),
            RouteClass::Global
        );
        assert_eq!(class("差旅住宿标准是多少？", &[], &[]), RouteClass::Policy);
        assert_eq!(class("？？", &[], &[]), RouteClass::OutOfScope);
        // A named record wins over theme words; a theme question about one identifier is
        // a lookup of documents, not a theme.
        assert_eq!(
            class("订单 B7 的主要问题？", &["orders/B7"], &[]),
            RouteClass::Lookup
        );
        assert_eq!(
            class("What are the main changes in RFC-12?", &[], &[]),
            RouteClass::Policy
        );
        assert!(route("x", &[], &[], &[], true).class == RouteClass::Global);
    }

    #[test]
    fn a_class_never_widens_the_request_budget() {
        let tight = Budget {
            max_steps: 3,
            ..Budget::default()
        };
        for c in RouteClass::ALL {
            assert!(c.budget(&tight).max_steps <= 3);
            assert!(c.budget(&Budget::default()).max_steps <= Budget::default().max_steps);
        }
        assert_eq!(
            RouteClass::OutOfScope.budget(&Budget::default()).max_steps,
            0
        );
    }

    #[test]
    fn a_theme_word_inside_another_word_is_not_one() {
        let r = route(
            "whats the minimum length for a new domain password?",
            &[],
            &[],
            &[],
            false,
        );
        assert_ne!(r.class, RouteClass::Global, "{}", r.reason);
        let r = route(
            "What are the main reliability themes?",
            &[],
            &[],
            &[],
            false,
        );
        assert_eq!(r.class, RouteClass::Global);
        let r = route("这些事故的主要原因有哪些？", &[], &[], &[], false);
        assert_eq!(r.class, RouteClass::Global);
    }
}
