//! Conditions and conclusions: clauses that state conditions are read into typed
//! conditions (time windows, states such as opened or verified, amounts), compared with
//! the facts the program read from records and the business clock, and turned into a
//! conclusion that goes no further than the evidence: met, not met, or unknown with the
//! fact that is missing.
//!
//! Nothing here comes from a question's wording: facts are record fields and the
//! day counts the loop computed (`*_days_ago`). The vocabulary is general (the usual
//! business events and states in Chinese and English), matched to record fields by the
//! field's name, so a new table needs no code.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::text::sentences;
use crate::{Evidence, State};

/// How a condition or a clause came out against the facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Met,
    NotMet,
    /// A fact the condition needs is missing.
    Unknown,
}

/// What a clause does when its conditions hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// "may / can / 可以": a right or remedy.
    Permits,
    /// "not applicable / cannot / 不适用 / 不能": an exclusion.
    Denies,
    /// "must / 须 / 需": a requirement still to be satisfied.
    Requires,
    /// A consequence stated without a modal ("运费由商家承担").
    States,
}

/// One typed condition of a clause, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConditionCheck {
    /// The words of the clause it was read from.
    pub condition: String,
    /// `within_days`, `state` or `amount`.
    pub kind: String,
    /// The fact it was compared with (`signed_days_ago`, `orders/A123.opened`), or the
    /// fact that is missing.
    pub fact: String,
    /// The fact's value; absent when it is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    pub outcome: Outcome,
}

/// A clause with conditions, compared with the facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Conclusion {
    pub doc_id: String,
    pub version: String,
    pub section: String,
    pub chunk_id: String,
    /// The clause sentence, quoted exactly.
    pub clause: String,
    pub effect: Effect,
    /// The clause's consequence ("可以申请无理由退货").
    pub consequence: String,
    /// What the clause is about: its section title, else its consequence.
    pub topic: String,
    pub conditions: Vec<ConditionCheck>,
    /// For a requirement: the last `required` conditions are the state it requires;
    /// the others trigger it.
    #[serde(skip_serializing_if = "is_zero")]
    pub required: usize,
    pub outcome: Outcome,
    /// The conclusion in the question's language, going no further than the evidence.
    pub statement: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A business concept a condition can name, and how record fields and text say it.
struct Concept {
    /// Words in a field name (split at `_`) that name it.
    fields: &'static [&'static str],
    zh: &'static [&'static str],
    en: &'static [&'static str],
}

/// States a record can be in. A field matches when one of its name's parts is listed.
const STATES: &[Concept] = &[
    Concept {
        fields: &["opened", "unsealed", "unpacked", "open"],
        zh: &["拆封", "开封", "拆开", "启封"],
        en: &["opened", "unsealed", "unpacked"],
    },
    Concept {
        fields: &["verified", "confirmed", "inspected", "approved"],
        zh: &["核实", "核验", "检测通过", "审核通过", "确认属实"],
        en: &["verified", "confirmed", "inspected", "approved"],
    },
    Concept {
        fields: &["paid"],
        zh: &["付款", "支付", "付清"],
        en: &["paid"],
    },
    Concept {
        fields: &["shipped", "dispatched"],
        zh: &["发货", "出库"],
        en: &["shipped", "dispatched"],
    },
    Concept {
        fields: &["used", "worn"],
        zh: &["使用过", "穿戴过"],
        en: &["used", "worn"],
    },
    Concept {
        fields: &["activated"],
        zh: &["激活"],
        en: &["activated"],
    },
    Concept {
        fields: &["damaged", "broken"],
        zh: &["损坏", "破损"],
        en: &["damaged", "broken"],
    },
    Concept {
        fields: &["cancelled", "canceled"],
        zh: &["取消"],
        en: &["cancelled", "canceled"],
    },
    Concept {
        fields: &["registered", "enrolled"],
        zh: &["注册", "登记"],
        en: &["registered", "enrolled"],
    },
];

/// Events a time window can count from; a `*_days_ago` fact matches by its stem.
const EVENTS: &[Concept] = &[
    Concept {
        fields: &["signed", "delivered", "received", "delivery", "receipt"],
        zh: &["签收", "收货", "送达", "到货", "收到"],
        en: &[
            "delivery",
            "receipt",
            "signing",
            "signed",
            "received",
            "delivered",
        ],
    },
    Concept {
        fields: &[
            "ordered",
            "purchased",
            "order",
            "purchase",
            "created",
            "bought",
        ],
        zh: &["下单", "购买", "订购", "购买之日"],
        en: &["purchase", "order", "ordering", "buying"],
    },
    Concept {
        fields: &["paid", "payment"],
        zh: &["付款", "支付"],
        en: &["payment"],
    },
    Concept {
        fields: &["shipped", "shipment", "dispatched"],
        zh: &["发货"],
        en: &["shipment", "shipping", "dispatch"],
    },
    Concept {
        fields: &["activated", "activation"],
        zh: &["激活"],
        en: &["activation"],
    },
    Concept {
        fields: &["incident", "occurred", "reported"],
        zh: &["事发", "发生", "报告"],
        en: &["incident", "occurrence", "report"],
    },
];

const ZH_NEGATIONS: &[&str] = &["尚未", "没有", "未经", "未", "没", "不曾", "无"];

static ZH_WINDOW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<event>\p{Han}{1,4}?)(?:后|起|之日起)\s*(?P<n>\d{1,4})\s*(?P<unit>个自然日|个工作日|工作日|自然日|天|日|周|个月|小时)(?:内|以内|之内)")
        .expect("zh window")
});
static EN_WINDOW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)within\s+(?P<n>\d{1,4})\s+(?P<unit>business days?|calendar days?|days?|weeks?|months?|hours?)\s+(?:of|after|from)\s+(?:the\s+)?(?P<event>[a-z]+)")
        .expect("en window")
});
static ZH_AMOUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(不超过|不高于|不低于|不少于|超过|高于|低于|少于|满)\s*(\d+(?:\.\d+)?)\s*(元|块)|(\d+(?:\.\d+)?)\s*元\s*(以上|以下|以内)")
        .expect("zh amount")
});
static EN_AMOUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(at least|at most|more than|less than|over|under|up to|above|below)\s*(?:USD|EUR|CNY|RMB|\$|€|¥)?\s*(\d+(?:\.\d+)?)")
        .expect("en amount")
});

/// Field-name parts that hold an amount of money.
const AMOUNT_FIELDS: &[&str] = &["amount", "price", "total", "cost", "value", "sum"];

/// A condition read from a clause, before it meets the facts.
#[derive(Debug, Clone, PartialEq)]
enum Condition {
    /// Within `days` of an event.
    Within {
        event: usize,
        days: i64,
        /// Business days: only certain outcomes are decided (5 of 7 days count).
        business: bool,
        text: String,
    },
    /// A state holds (`positive`) or does not.
    State {
        concept: usize,
        positive: bool,
        text: String,
    },
    /// An amount compares with a limit.
    Amount { cmp: Cmp, limit: f64, text: String },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    AtMost,
    AtLeast,
    Below,
    Above,
}

/// A clause read into conditions and an effect.
#[derive(Debug, Clone, PartialEq)]
struct Clause {
    conditions: Vec<Condition>,
    effect: Effect,
    consequence: String,
    /// For a requirement: how many of `conditions` (the last ones) are the required
    /// state itself ("须经…核实"), not what triggers the requirement ("over 300").
    required: usize,
}

fn event_of(word: &str) -> Option<usize> {
    let w = word.to_lowercase();
    EVENTS
        .iter()
        .position(|c| c.zh.iter().any(|z| w.ends_with(z)) || c.en.iter().any(|e| w == *e))
}

fn days_of(n: i64, unit: &str) -> (i64, bool) {
    let u = unit.to_lowercase();
    if u.contains("工作日") || u.starts_with("business") {
        (n, true)
    } else if u.contains('周') || u.starts_with("week") {
        (n * 7, false)
    } else if u.contains('月') || u.starts_with("month") {
        (n * 30, false)
    } else if u.contains("小时") || u.starts_with("hour") {
        ((n + 23) / 24, false)
    } else {
        (n, false)
    }
}

/// Whether the `at`-th byte of `s` is preceded by a negation (Chinese: right before
/// it, allowing "已"; English: "not", "never", or an "un-" form handled by the caller).
fn zh_negated(s: &str, at: usize) -> bool {
    let before = &s[..at];
    ZH_NEGATIONS.iter().any(|n| before.ends_with(n))
}

fn en_negated(s: &str, at: usize) -> bool {
    let before = s[..at].to_lowercase();
    let words: Vec<&str> = before.split_whitespace().rev().take(3).collect();
    words
        .iter()
        .any(|w| matches!(*w, "not" | "never" | "no" | "non"))
}

/// Modal words that open a consequence, with the effect they give.
const ZH_MODALS: &[(&str, Effect)] = &[
    ("不适用", Effect::Denies),
    ("不能", Effect::Denies),
    ("不得", Effect::Denies),
    ("不可", Effect::Denies),
    ("不予", Effect::Denies),
    ("无法", Effect::Denies),
    ("不支持", Effect::Denies),
    ("可以", Effect::Permits),
    ("可申请", Effect::Permits),
    ("可", Effect::Permits),
    ("适用", Effect::Permits),
    ("有权", Effect::Permits),
    ("必须", Effect::Requires),
    ("须", Effect::Requires),
    ("需要", Effect::Requires),
    ("需", Effect::Requires),
    ("应当", Effect::Requires),
    ("应", Effect::Requires),
];
const EN_MODALS: &[(&str, Effect)] = &[
    ("is not eligible", Effect::Denies),
    ("are not eligible", Effect::Denies),
    ("cannot", Effect::Denies),
    ("can not", Effect::Denies),
    ("may not", Effect::Denies),
    ("does not apply", Effect::Denies),
    ("do not apply", Effect::Denies),
    ("is excluded", Effect::Denies),
    ("must", Effect::Requires),
    ("shall", Effect::Requires),
    ("is required", Effect::Requires),
    ("needs to", Effect::Requires),
    ("needs", Effect::Requires),
    ("need", Effect::Requires),
    ("requires", Effect::Requires),
    ("require", Effect::Requires),
    ("may", Effect::Permits),
    ("can", Effect::Permits),
    ("is eligible", Effect::Permits),
    ("are eligible", Effect::Permits),
    ("is entitled", Effect::Permits),
];

/// The first modal of `s` (position, length, effect), Chinese or English.
fn first_modal(s: &str) -> Option<(usize, usize, Effect)> {
    let lower = s.to_lowercase();
    let mut best: Option<(usize, usize, Effect)> = None;
    for (w, e) in ZH_MODALS {
        if let Some(at) = s.find(w) {
            // A longer modal at the same place wins ("不适用" over "适用").
            if best.is_none_or(|b| at < b.0 || (at == b.0 && w.len() > b.1)) {
                best = Some((at, w.len(), *e));
            }
        }
    }
    for (w, e) in EN_MODALS {
        let pat = format!(" {w} ");
        if let Some(at) = format!(" {lower} ").find(&pat) {
            // Lower-casing can move byte offsets in rare scripts: skip rather than cut.
            if !s.is_char_boundary(at) {
                continue;
            }
            if best.is_none_or(|b| at < b.0 || (at == b.0 && w.len() > b.1)) {
                best = Some((at, w.len(), *e));
            }
        }
    }
    best
}

/// Reads one sentence into a clause, when it states at least one typed condition.
fn read_clause(sentence: &str) -> Option<Clause> {
    let mut conditions = Vec::new();
    // Both languages' window patterns name their groups alike.
    for c in [&*ZH_WINDOW, &*EN_WINDOW]
        .into_iter()
        .flat_map(|re| re.captures_iter(sentence))
    {
        let Some(event) = event_of(&c["event"]) else {
            continue;
        };
        let n: i64 = c["n"].parse().ok()?;
        let (days, business) = days_of(n, &c["unit"]);
        conditions.push(Condition::Within {
            event,
            days,
            business,
            text: c[0].to_string(),
        });
    }
    let lower = sentence.to_lowercase();
    for (i, concept) in STATES.iter().enumerate() {
        let mut found: Option<(bool, String)> = None;
        for w in concept.zh {
            if let Some(at) = sentence.find(w) {
                // "检测通过" within a window's event word is not a state.
                let neg = zh_negated(sentence, at);
                let start = ZH_NEGATIONS
                    .iter()
                    .find(|n| sentence[..at].ends_with(*n))
                    .map_or(at, |n| at - n.len());
                found = Some((!neg, sentence[start..at + w.len()].to_string()));
                break;
            }
        }
        if found.is_none() {
            for w in concept.en {
                let un = format!("un{w}");
                if let Some(at) = find_word(&lower, &un) {
                    found = Some((false, sentence[at..at + un.len()].to_string()));
                    break;
                }
                if let Some(at) = find_word(&lower, w) {
                    found = Some((
                        !en_negated(&lower, at),
                        sentence[at..at + w.len()].to_string(),
                    ));
                    break;
                }
            }
        }
        if let Some((positive, text)) = found {
            // Words inside a window ("签收后") are events, not states.
            if conditions
                .iter()
                .any(|c| matches!(c, Condition::Within { text: t, .. } if t.contains(&text)))
            {
                continue;
            }
            conditions.push(Condition::State {
                concept: i,
                positive,
                text,
            });
        }
    }
    for c in ZH_AMOUNT.captures_iter(sentence) {
        let (cmp, limit) = if let Some(op) = c.get(1) {
            let cmp = match op.as_str() {
                "不超过" | "不高于" => Cmp::AtMost,
                "不低于" | "不少于" | "满" => Cmp::AtLeast,
                "超过" | "高于" => Cmp::Above,
                _ => Cmp::Below,
            };
            (cmp, c[2].parse().unwrap_or(0.0))
        } else {
            let cmp = match &c[5] {
                "以上" => Cmp::AtLeast,
                _ => Cmp::AtMost,
            };
            (cmp, c[4].parse().unwrap_or(0.0))
        };
        conditions.push(Condition::Amount {
            cmp,
            limit,
            text: c[0].to_string(),
        });
    }
    for c in EN_AMOUNT.captures_iter(sentence) {
        let cmp = match c[1].to_lowercase().as_str() {
            "at least" => Cmp::AtLeast,
            "at most" | "up to" => Cmp::AtMost,
            "more than" | "over" | "above" => Cmp::Above,
            _ => Cmp::Below,
        };
        conditions.push(Condition::Amount {
            cmp,
            limit: c[2].parse().unwrap_or(0.0),
            text: c[0].to_string(),
        });
    }
    if conditions.is_empty() {
        return None;
    }
    let (effect, consequence) = consequence_of(sentence);
    // A requirement's states inside its consequence are what it requires; the others
    // trigger it. Triggers first.
    let mut required = 0;
    if effect == Effect::Requires {
        let starts = sentence.find(consequence.as_str()).unwrap_or(usize::MAX);
        let modal_at =
            first_modal(&consequence).map_or(starts, |(at, _, _)| starts.saturating_add(at));
        let inside = |c: &Condition| matches!(c, Condition::State { text, .. } if sentence.find(text.as_str()).is_some_and(|at| at > modal_at));
        conditions.sort_by_key(inside);
        required = conditions.iter().filter(|c| inside(c)).count();
    }
    Some(Clause {
        conditions,
        effect,
        consequence,
        required,
    })
}

fn find_word(lower: &str, w: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = lower[from..].find(w) {
        let at = from + i;
        let before = lower[..at].chars().next_back();
        let after = lower[at + w.len()..].chars().next();
        if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
            return Some(at);
        }
        from = at + w.len();
    }
    None
}

/// The clause's consequence: from its first modal to the end of that part of the
/// sentence (a comma before a "but" ends it), and the effect the modal gives.
fn consequence_of(sentence: &str) -> (Effect, String) {
    let trimmed = sentence.trim_end_matches(['。', '.', '；', ';', '！', '!']);
    let Some((at, _, effect)) = first_modal(trimmed) else {
        // No modal: the last comma-part is what follows from the conditions.
        let last = trimmed
            .rsplit(['，', ','])
            .next()
            .unwrap_or(trimmed)
            .trim()
            .to_string();
        return (Effect::States, last);
    };
    // The consequence starts at the modal, or at the subject right before it in the
    // same comma-part ("拆封不适用…" keeps "拆封").
    let part_start = trimmed[..at].rfind(['，', ',']).map_or(0, |i| {
        i + trimmed[i..].chars().next().map_or(1, char::len_utf8)
    });
    let rest = &trimmed[part_start..];
    let end = rest
        .find(['，', ','])
        .filter(|i| {
            let tail = rest[*i..].to_lowercase();
            tail.contains('但') || tail.contains("but") || tail.contains("however")
        })
        .unwrap_or(rest.len());
    (effect, rest[..end].trim().to_string())
}

/// A section title without its number: "第 1 条 无理由退货" → "无理由退货".
fn topic_of(section: &str) -> Option<String> {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^\s*(第\s*[0-9一二三四五六七八九十百]+\s*[条章节款项]|(article|clause|section|§)\s*[0-9.]+)\s*[:：.、-]?\s*")
            .expect("section number")
    });
    let last = section.rsplit(['›', '>']).next().unwrap_or(section).trim();
    let t = NUMBER.replace(last, "").trim().to_string();
    (!t.is_empty()).then_some(t)
}

/// A fact's value, looked up among the records the question named.
struct Facts<'s> {
    state: &'s State,
}

impl Facts<'_> {
    /// The day count since an event (`signed_days_ago`), by the stem of its fact name.
    fn days_since(&self, event: usize) -> Option<(String, i64)> {
        let concept = &EVENTS[event];
        self.state.facts.iter().find_map(|(k, v)| {
            let stem = k.rsplit('.').next()?.strip_suffix("_days_ago")?;
            let parts: Vec<&str> = stem.split('_').collect();
            parts
                .iter()
                .any(|p| concept.fields.contains(p))
                .then(|| v.as_i64().map(|d| (k.clone(), d)))
                .flatten()
        })
    }

    /// A boolean field of a question record whose name names the concept.
    fn state_of(&self, concept: usize) -> Option<(String, bool)> {
        let c = &STATES[concept];
        for r in self.state.question_records() {
            for (field, v) in &r.row.fields {
                let Some(b) = v.as_bool() else { continue };
                if field.split('_').any(|p| c.fields.contains(&p)) {
                    return Some((format!("{}/{}.{field}", r.schema.table, r.row.key), b));
                }
            }
        }
        None
    }

    fn amount(&self) -> Option<(String, f64)> {
        for r in self.state.question_records() {
            for (field, v) in &r.row.fields {
                let Some(x) = v.as_f64() else { continue };
                if field.split('_').any(|p| AMOUNT_FIELDS.contains(&p)) {
                    return Some((format!("{}/{}.{field}", r.schema.table, r.row.key), x));
                }
            }
        }
        None
    }
}

fn check(facts: &Facts, c: &Condition) -> ConditionCheck {
    match c {
        Condition::Within {
            event,
            days,
            business,
            text,
        } => match facts.days_since(*event) {
            Some((fact, d)) => {
                let outcome = if *business {
                    // n business days span at least n and at most n·7/5 + 2 calendar days.
                    if d <= *days {
                        Outcome::Met
                    } else if d > days * 7 / 5 + 2 {
                        Outcome::NotMet
                    } else {
                        Outcome::Unknown
                    }
                } else if d <= *days {
                    Outcome::Met
                } else {
                    Outcome::NotMet
                };
                ConditionCheck {
                    condition: text.clone(),
                    kind: "within_days".into(),
                    fact,
                    value: Some(Value::from(d)),
                    outcome,
                }
            }
            None => ConditionCheck {
                condition: text.clone(),
                kind: "within_days".into(),
                fact: format!("{}_days_ago", EVENTS[*event].fields[0]),
                value: None,
                outcome: Outcome::Unknown,
            },
        },
        Condition::State {
            concept,
            positive,
            text,
        } => match facts.state_of(*concept) {
            Some((fact, b)) => ConditionCheck {
                condition: text.clone(),
                kind: "state".into(),
                fact,
                value: Some(Value::from(b)),
                outcome: if b == *positive {
                    Outcome::Met
                } else {
                    Outcome::NotMet
                },
            },
            None => ConditionCheck {
                condition: text.clone(),
                kind: "state".into(),
                fact: STATES[*concept].fields[0].to_string(),
                value: None,
                outcome: Outcome::Unknown,
            },
        },
        Condition::Amount { cmp, limit, text } => match facts.amount() {
            Some((fact, x)) => {
                let ok = match cmp {
                    Cmp::AtMost => x <= *limit,
                    Cmp::AtLeast => x >= *limit,
                    Cmp::Below => x < *limit,
                    Cmp::Above => x > *limit,
                };
                ConditionCheck {
                    condition: text.clone(),
                    kind: "amount".into(),
                    fact,
                    value: Some(Value::from(x)),
                    outcome: if ok { Outcome::Met } else { Outcome::NotMet },
                }
            }
            None => ConditionCheck {
                condition: text.clone(),
                kind: "amount".into(),
                fact: "amount".into(),
                value: None,
                outcome: Outcome::Unknown,
            },
        },
    }
}

/// A heading states no condition: the section's own title, or a short line without
/// sentence punctuation.
fn is_heading(s: &str, section: &str) -> bool {
    let last = section.rsplit(['›', '>']).next().unwrap_or(section).trim();
    s.trim() == last
        || (s.chars().count() < 24 && !s.contains(['。', '，', '；', '：', ',', '.', ';', ':']))
}

/// All conditions met → met; any not met → not met; else unknown.
fn combine(checks: &[ConditionCheck]) -> Outcome {
    if checks.iter().any(|c| c.outcome == Outcome::NotMet) {
        Outcome::NotMet
    } else if checks.iter().all(|c| c.outcome == Outcome::Met) {
        Outcome::Met
    } else {
        Outcome::Unknown
    }
}

/// A condition's fact in words: "signed_days_ago = 10，超出「签收后 7 天内」".
fn describe(c: &ConditionCheck, zh: bool) -> String {
    let fact = c.fact.rsplit('.').next().unwrap_or(&c.fact);
    let cond = &c.condition;
    match (&c.value, c.outcome, zh) {
        (None, _, true) => format!("缺少事实 {fact}（「{cond}」无法判断）"),
        (None, _, false) => format!("missing fact {fact} (\"{cond}\" cannot be judged)"),
        (Some(v), Outcome::Met, true) => format!("{fact} = {v}，满足「{cond}」"),
        (Some(v), Outcome::Met, false) => format!("{fact} = {v}, meets \"{cond}\""),
        (Some(v), Outcome::NotMet, true) => format!("{fact} = {v}，不满足「{cond}」"),
        (Some(v), Outcome::NotMet, false) => format!("{fact} = {v}, fails \"{cond}\""),
        (Some(v), Outcome::Unknown, true) => format!("{fact} = {v}，「{cond}」无法确定"),
        (Some(v), Outcome::Unknown, false) => format!("{fact} = {v}, \"{cond}\" undecided"),
    }
}

/// Whether a requirement's trigger (not what it requires) failed.
fn triggers_failed(c: &Conclusion) -> bool {
    c.conditions[..c.conditions.len() - c.required]
        .iter()
        .any(|x| x.outcome == Outcome::NotMet)
}

fn statement(c: &Conclusion, zh: bool) -> String {
    let cite = format!("{}@{} {}", c.doc_id, c.version, c.section);
    let list = |o: Outcome| -> Vec<String> {
        c.conditions
            .iter()
            .filter(|x| x.outcome == o)
            .map(|x| describe(x, zh))
            .collect()
    };
    // One sentence: a claim check sees the statement whole, with its mark.
    let sep = if zh { "，" } else { ", " };
    let (met, not_met, unknown) = (
        list(Outcome::Met).join(sep),
        list(Outcome::NotMet).join(sep),
        list(Outcome::Unknown).join(sep),
    );
    let topic = &c.topic;
    let cons = &c.consequence;
    match (c.effect, c.outcome, zh) {
        (Effect::Permits | Effect::States, Outcome::Met, true) => {
            format!("符合{topic}条件（{cite}）：{met}，因此{cons}。")
        }
        (Effect::Permits | Effect::States, Outcome::Met, false) => {
            format!("Meets {topic} ({cite}): {met}, so: {cons}.")
        }
        (Effect::Permits | Effect::States, Outcome::NotMet, true) => {
            format!("不符合{topic}条件（{cite}）：{not_met}。")
        }
        (Effect::Permits | Effect::States, Outcome::NotMet, false) => {
            format!("Does not meet {topic} ({cite}): {not_met}.")
        }
        (Effect::Denies, Outcome::Met, true) => format!("适用{cite}：{cons}（{met}）。"),
        (Effect::Denies, Outcome::Met, false) => {
            format!("{cite} applies: {cons} ({met}).")
        }
        (Effect::Denies, Outcome::NotMet, true) => {
            format!("{cite} 的限制不适用：{not_met}。")
        }
        (Effect::Denies, Outcome::NotMet, false) => {
            format!("The restriction of {cite} does not apply: {not_met}.")
        }
        // A requirement that names what it requires: satisfied, or still needed.
        (Effect::Requires, Outcome::Met, true) if c.required > 0 => {
            format!("已满足{cite}的要求：{met}。")
        }
        (Effect::Requires, Outcome::Met, false) if c.required > 0 => {
            format!("The requirement of {cite} is met: {met}.")
        }
        (Effect::Requires, Outcome::NotMet, true) if c.required > 0 && !triggers_failed(c) => {
            format!("尚需满足{cite}：{cons}（目前 {not_met}）。")
        }
        (Effect::Requires, Outcome::NotMet, false) if c.required > 0 && !triggers_failed(c) => {
            format!("Still needed under {cite}: {cons} (now {not_met}).")
        }
        // A requirement triggered by conditions: it applies, or it does not.
        (Effect::Requires, Outcome::Met, true) => format!("适用{cite}：{cons}（{met}）。"),
        (Effect::Requires, Outcome::Met, false) => {
            format!("{cite} applies: {cons} ({met}).")
        }
        (Effect::Requires, Outcome::NotMet, true) => {
            format!("{cite} 的要求不适用：{not_met}。")
        }
        (Effect::Requires, Outcome::NotMet, false) => {
            format!("The requirement of {cite} does not apply: {not_met}.")
        }
        (_, Outcome::Unknown, true) => {
            format!("是否适用{topic}（{cite}）尚不能确定：{unknown}。")
        }
        (_, Outcome::Unknown, false) => {
            format!("Whether {topic} applies ({cite}) cannot be decided yet: {unknown}.")
        }
    }
}

/// The conclusions the facts support, from the clauses of this run's evidence: for
/// records the question named, against the documents their links chose (all evidence
/// when no record links a document). Empty when the question named no record.
pub fn conclude(state: &State) -> Vec<Conclusion> {
    if state.question_records().is_empty() {
        return vec![];
    }
    let zh = crate::text::is_chinese(&state.question);
    let facts = Facts { state };
    let linked: Vec<&str> = state
        .linked_documents
        .iter()
        .map(|(d, _)| d.as_str())
        .collect();
    let mut out: Vec<Conclusion> = Vec::new();
    let evidence: Vec<&Evidence> = state
        .evidence
        .iter()
        .filter(|e| linked.is_empty() || linked.contains(&e.doc_id.as_str()))
        .collect();
    for e in evidence {
        for s in sentences(&e.text) {
            if crate::text::looks_like_instruction(&s) || is_heading(&s, &e.section) {
                continue;
            }
            let Some(clause) = read_clause(&s) else {
                continue;
            };
            let checks: Vec<ConditionCheck> =
                clause.conditions.iter().map(|c| check(&facts, c)).collect();
            // A clause none of whose conditions meets a fact says nothing about this case.
            if checks.iter().all(|c| c.value.is_none()) {
                continue;
            }
            if out.iter().any(|c| c.clause == s) {
                continue;
            }
            let split = checks.len() - clause.required;
            let triggers = combine(&checks[..split]);
            // A requirement whose trigger fails does not apply; otherwise what it
            // requires decides (a trigger-only requirement applies when triggered).
            let outcome = if clause.required > 0 && triggers != Outcome::NotMet {
                combine(&checks[split..])
            } else {
                triggers
            };
            let topic = topic_of(&e.section).unwrap_or_else(|| clause.consequence.clone());
            let mut c = Conclusion {
                doc_id: e.doc_id.clone(),
                version: e.version.clone(),
                section: e.section.clone(),
                chunk_id: e.chunk_id.clone(),
                clause: s.clone(),
                effect: clause.effect,
                consequence: clause.consequence,
                topic,
                conditions: checks,
                required: clause.required,
                outcome,
                statement: String::new(),
            };
            c.statement = statement(&c, zh);
            out.push(c);
        }
    }
    // Rights not met first (what the asker cannot do), then what applies, then what is
    // still needed: the order an auditor reads a case in.
    out.sort_by_key(|c| match (c.effect, c.outcome) {
        (Effect::Permits | Effect::States, Outcome::NotMet) => 0,
        (Effect::Denies, Outcome::Met) => 1,
        (Effect::Permits | Effect::States, Outcome::Met) => 2,
        (Effect::Requires, _) => 3,
        (_, Outcome::Unknown) => 4,
        _ => 5,
    });
    out
}

/// Whether `claim` says the opposite of a conclusion about the same topic: it names the
/// topic and its polarity (negated or not) differs from the conclusion's.
pub fn contradicts(claim: &str, c: &Conclusion) -> bool {
    if !about(claim, c) {
        return false;
    }
    let claim_negative = is_negative(claim);
    let expected_negative = match (c.effect, c.outcome) {
        (Effect::Permits | Effect::States, Outcome::NotMet) => true,
        (Effect::Permits | Effect::States, Outcome::Met) => false,
        (Effect::Denies, Outcome::Met) => true,
        _ => return false,
    };
    claim_negative != expected_negative
}

/// Whether `claim` is about the conclusion's matter: it names the topic, or carries
/// most of the consequence's content terms ("may be returned within 14 days").
pub fn about(claim: &str, c: &Conclusion) -> bool {
    let topic = c.topic.trim().to_lowercase();
    let lower = claim.to_lowercase();
    if topic.chars().count() >= 2 && lower.contains(&topic) {
        return true;
    }
    let cons: std::collections::HashSet<String> = crate::text::content_terms(&c.consequence)
        .into_iter()
        .collect();
    if cons.len() < 2 {
        return false;
    }
    let have: std::collections::HashSet<String> =
        crate::text::content_terms(claim).into_iter().collect();
    cons.iter().filter(|t| have.contains(*t)).count() * 5 >= cons.len() * 3
}

/// A claim that denies: a negation word before its end.
pub fn is_negative(s: &str) -> bool {
    // A negated state ("未拆封", "unopened") describes the case; it does not deny.
    let mut l = s.to_lowercase();
    for c in STATES {
        for w in c.zh {
            for n in ZH_NEGATIONS {
                l = l.replace(&format!("{n}{w}"), w);
            }
        }
        for w in c.en {
            l = l
                .replace(&format!("un{w}"), w)
                .replace(&format!("not {w}"), w);
        }
    }
    ["不", "没", "未", "无法", "无权", "否"]
        .iter()
        .any(|n| l.contains(n))
        || l.split(|c: char| !c.is_alphanumeric() && c != '\'')
            .any(|w| {
                matches!(
                    w,
                    "not"
                        | "no"
                        | "cannot"
                        | "never"
                        | "isn't"
                        | "can't"
                        | "doesn't"
                        | "won't"
                        | "ineligible"
                )
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_states_and_effects_are_read_in_both_languages() {
        let c = read_clause("签收后 7 天内且未拆封，可以申请无理由退货。").unwrap();
        assert_eq!(c.effect, Effect::Permits);
        assert_eq!(c.consequence, "可以申请无理由退货");
        assert!(matches!(
            c.conditions[0],
            Condition::Within {
                days: 7,
                business: false,
                ..
            }
        ));
        assert!(matches!(
            c.conditions[1],
            Condition::State {
                concept: 0,
                positive: false,
                ..
            }
        ));

        let c = read_clause("拆封不适用无理由退货，但不因此失去质量问题售后申请资格。").unwrap();
        assert_eq!(c.effect, Effect::Denies);
        assert_eq!(c.consequence, "拆封不适用无理由退货");
        assert!(matches!(
            c.conditions[0],
            Condition::State {
                concept: 0,
                positive: true,
                ..
            }
        ));

        let c = read_clause(
            "Unopened items may be returned within 14 days of delivery for a full refund.",
        )
        .unwrap();
        assert_eq!(c.effect, Effect::Permits);
        assert!(c
            .conditions
            .iter()
            .any(|x| matches!(x, Condition::Within { days: 14, .. })));
        assert!(c.conditions.iter().any(|x| matches!(
            x,
            Condition::State {
                concept: 0,
                positive: false,
                ..
            }
        )));

        let c = read_clause("Refunds over 500 must be approved by finance.").unwrap();
        assert_eq!(c.effect, Effect::Requires);
        // The amount triggers it; the approval is what it requires.
        assert_eq!(c.required, 1);
        assert!(matches!(c.conditions[0], Condition::Amount { .. }));
        let c = read_clause("Orders over 300 must be shipped by courier.").unwrap();
        assert_eq!(c.required, 1);
        let c = read_clause("Refunds over 300 need a receipt.");
        assert!(c.is_some_and(|c| c.required == 0 && c.effect == Effect::Requires));
        let c = read_clause("Refunds over 300 need a receipt.").unwrap();
        assert!(matches!(
            c.conditions[0],
            Condition::Amount {
                cmp: Cmp::Above,
                ..
            }
        ));
        let c = read_clause("质量问题须经售后检测核实；").unwrap();
        assert_eq!((c.effect, c.required), (Effect::Requires, 1));

        let c = read_clause("经核实属于质量问题的，退货运费由商家承担。").unwrap();
        assert_eq!(c.effect, Effect::States);
        assert_eq!(c.consequence, "退货运费由商家承担");
        assert!(matches!(
            c.conditions[0],
            Condition::State {
                concept: 1,
                positive: true,
                ..
            }
        ));

        assert!(read_clause("本政策适用于全部耳机产品。").is_none());
        assert!(read_clause("Call the on-call engineer first.").is_none());
    }

    #[test]
    fn a_unit_changes_the_window() {
        let c = read_clause("下单后 2 周内可以取消。").unwrap();
        assert!(matches!(
            c.conditions[0],
            Condition::Within { days: 14, .. }
        ));
        let c = read_clause("付款后 3 个工作日内须发货。").unwrap();
        assert!(matches!(
            c.conditions[0],
            Condition::Within {
                days: 3,
                business: true,
                ..
            }
        ));
        // An unknown event is no window.
        assert!(read_clause("开会后 3 天内可以报销。").is_none());
    }

    #[test]
    fn topics_drop_section_numbers() {
        assert_eq!(
            topic_of("第 1 条 无理由退货").as_deref(),
            Some("无理由退货")
        );
        assert_eq!(
            topic_of("Returns › Article 2: Refunds").as_deref(),
            Some("Refunds")
        );
        assert_eq!(topic_of("第 3 条").as_deref(), None);
        assert_eq!(topic_of("期限").as_deref(), Some("期限"));
    }

    #[test]
    fn claims_against_a_conclusion() {
        let c = Conclusion {
            doc_id: "p".into(),
            version: "V2".into(),
            section: "第 1 条 无理由退货".into(),
            chunk_id: "p@V2#1".into(),
            clause: "签收后 7 天内且未拆封，可以申请无理由退货。".into(),
            effect: Effect::Permits,
            consequence: "可以申请无理由退货".into(),
            topic: "无理由退货".into(),
            conditions: vec![],
            required: 0,
            outcome: Outcome::NotMet,
            statement: String::new(),
        };
        assert!(contradicts("可以无理由退货 [1]", &c));
        assert!(!contradicts("不能无理由退货 [1]", &c));
        assert!(!contradicts("可以申请售后检测 [2]", &c));
        assert!(contradicts("未拆封的订单可以无理由退货 [1]", &c));
        let met = Conclusion {
            outcome: Outcome::Met,
            ..c
        };
        assert!(contradicts("不能无理由退货 [1]", &met));
        assert!(!contradicts("可以无理由退货 [1]", &met));
        assert!(!contradicts("未拆封，可以无理由退货 [1]", &met));
    }
}
