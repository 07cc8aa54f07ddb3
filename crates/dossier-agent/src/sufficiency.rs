//! Sufficiency by what is asked: does one evidence sentence answer a question?
//!
//! A question asks for a [`Slot`] (a person, a time, an amount, a duration, a place,
//! yes or no, steps, a reason, or a thing), read from its asking words in either
//! language, and it states constraints (identifiers such as `HS-260318-007`) that the
//! answering evidence must write. Each candidate sentence is described by
//! [`Features`] — how close it is in meaning to the question (the embedder's cosine,
//! which crosses languages), how much of the question's wording it and its title share,
//! whether it fills the asked slot — and one [`Decision`] turns them into a
//! [`Coverage`] with a confidence. Each check that adds a feature is one implementation
//! of [`SufficiencyCheck`], so that it can be tested alone on data, with no embedder.
//!
//! The weights and thresholds of [`Decision::CHOSEN`] were chosen on
//! `../shared/enterprise-dev` (the development set: policies, runbooks, contracts,
//! minutes and chat, Chinese and English); BENCHMARKS.md reports every other set
//! without changing them.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// What a question asks for, read from its asking words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    Person,
    Time,
    Duration,
    Amount,
    Place,
    Reason,
    Steps,
    YesNo,
    Thing,
}

/// Asking words for each slot, both languages. The first slot whose words occur at the
/// earliest position wins ("how long after the alarm who must be told" asks a
/// duration). Words are matched as whole words in Latin script.
static ASKING: LazyLock<Vec<(Slot, Regex)>> = LazyLock::new(|| {
    let r = |s: &str| Regex::new(s).expect("asking words");
    vec![
        (
            Slot::Reason,
            r(
                r"(?i)\bwhy\b|\bwhat (?:caused|was the cause|is the reason|was the reason)\b|\broot cause\b|\bhow come\b|为什么|为啥|为何|什么原因|啥原因|原因是|根因|根本原因|怎么会",
            ),
        ),
        (
            Slot::Duration,
            r(
                r"(?i)\bhow long\b|\bhow many (?:days|hours|minutes|weeks|months|years|working days|business days)\b|\bhow (?:far ahead|early|soon|often|frequently)\b|多久|多长时间|多长|几天|几个小时|几小时|几分钟|几周|几个月|几年|提前多少|多少天|多少小时|多少分钟|多频繁|多久一次",
            ),
        ),
        (
            Slot::Time,
            r(
                r"(?i)\bwhen\b|\bwhat time\b|\bwhat(?:'s| is) the (?:\w+ ){0,3}(?:time|date|day|cut-?off)\b|\bwhich (?:day|date|month|year)\b|\bwhat (?:day|date)\b|\bby when\b|\bdeadline\b|什么时候|何时|几点|哪天|哪一天|几号|哪个月|哪年|哪一年|截止日期|什么时间",
            ),
        ),
        (
            Slot::Amount,
            r(
                r"(?i)\bhow (?:much|many)\b|\bwhat(?:'s| is) the (?:limit|cap|maximum|minimum|max|min|rate|fee|cost|price|budget|amount|threshold|target|penalty)\b|\b(?:limit|cap|maximum|minimum|threshold)\b|多少|几个|几次|几名|几人|几位|几家|几条|上限|下限|最多|最少|最高|最低|标准是|金额|费用",
            ),
        ),
        (
            Slot::Person,
            r(
                r"(?i)\bwho(?:m|se)?\b|\bwhich (?:team|person|department|manager|role|group)\b|谁|哪个部门|哪位|哪个团队|找哪|负责人是|联系谁",
            ),
        ),
        (
            Slot::Place,
            r(
                r"(?i)\bwhere\b|\bwhich (?:place|room|floor|building|site|gateway|address|office|system|portal|channel|tool|warehouse|city|country|court|location|website|page|form|region|port|hub|depot|terminal|airport|data cent(?:re|er)|datacenter)\b|哪里|哪儿|在哪|哪个(?:地方|仓库|城市|国家|办公室|网点|楼|门|系统|平台|网站|页面|机房|数据中心|港口|码头|机场|区域)|什么(?:地方|系统|平台|网站)|地点|地址",
            ),
        ),
        (
            Slot::Steps,
            r(
                r"(?i)\bhow (?:do|can|should|would) (?:i|we|you|one)\b|\bhow to\b|\bwhat (?:are the|is the) (?:steps|process|procedure)\b|\bwhat (?:do|should|must|shall) (?:[\w-]+ ){0,4}do\b|\bsteps\b|\bprocedure\b|\bprocess\b|怎么办|怎么做|怎么弄|怎么处理|如何|怎样|怎么|流程|步骤|该做什么|要做什么|哪些",
            ),
        ),
        (
            Slot::YesNo,
            r(
                r"(?i)^(?:can|could|may|is|are|am|was|were|do|does|did|should|must|will|would|have|has|had)\b|\b(?:can|may|could|should|must) (?:i|we|you|they|he|she|it)\b|\bis it (?:ok|okay|allowed|fine)\b|\ballowed\b|能不能|可不可以|可以吗|能否|是否|能吗|行吗|吗[？?]?$|有没有|要不要|需不需要|用不用|会不会|算不算",
            ),
        ),
    ]
});

impl Slot {
    /// The slot `question` asks for: the asking words that come first decide; a
    /// question with none asks for a thing.
    pub fn of(question: &str) -> Slot {
        let q = question.trim();
        ASKING
            .iter()
            .filter_map(|(slot, re)| re.find(q).map(|m| (m.start(), *slot)))
            .min_by_key(|(at, _)| *at)
            .map_or(Slot::Thing, |(_, slot)| slot)
    }

    /// How the slot is named in a reason.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Person => "a person or team",
            Slot::Time => "a time",
            Slot::Duration => "a duration",
            Slot::Amount => "an amount",
            Slot::Place => "a place",
            Slot::Reason => "a reason",
            Slot::Steps => "steps",
            Slot::YesNo => "a yes or no",
            Slot::Thing => "a thing",
        }
    }
}

static TIME_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:1[0-9]{3}|20[0-9]{2})\b|\d{1,2}[:：]\d{2}|\d{1,4}\s*[年月日号点时]|[一二三四五六七八九十]+[月日号点]|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s*\d|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}\s*(?:am|pm)\b|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekday|weekend|daily|weekly|monthly|quarterly|annually|noon|midnight|morning|evening|night)s?\b|周[一二三四五六日天]|星期|工作日|每[天日周月年季]|上午|下午|凌晨|晚上|当天|次日|之前|之后|以前|以内|前\b|\b(?:before|after|within|by|until|prior to)\b")
        .expect("time value")
});
static DURATION_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\d+(?:\.\d+)?|[一二两三四五六七八九十百半]+)\s*(?:个)?\s*(?:工作日|自然日|天|日|小时|分钟|秒|周|星期|个月|月|年|h\b|min\b)|\b\d+(?:\.\d+)?\s*(?:-|to|–)?\s*\d*\s*(?:working |business |calendar )?(?:days?|hours?|minutes?|mins?|seconds?|weeks?|months?|years?|hrs?)\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|thirty)\s+(?:working |business )?(?:days?|hours?|minutes?|weeks?|months?|years?)\b|\b(?:daily|weekly|monthly|annually|every)\b|每[天日周月年]")
        .expect("duration value")
});
static AMOUNT_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\d|[两二三四五六七八九十百千万]+\s*[个名人次家元块万亿%％倍条项台天日周月年箱件托位]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|thousand|million|half|double|twice|none|unlimited)\b|\bin full\b|\bfull amount\b|不限|无上限|全额|免费|free of charge")
        .expect("amount value")
});
static PERSON_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\s[A-Z][a-z]+|负责|主管|经理|总监|团队|部门|专员|值班|联系|审批|批准|[师员长]|由[^，。；]{1,15}(?:设计|负责|签署|审批|批准|处理|执行|提供|发起)|@|(?i)\b(?:team|manager|director|owner|lead|desk|officer|department|on-call|approver|hr|it|finance|payroll|cfo|ceo|supervisor|secondary|primary)\b")
        .expect("person value")
});
static PLACE_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\s[A-Z][a-zA-Z]+|\b[a-z0-9]+://|[A-Za-z0-9-]+\.[a-z]{2,}|[楼层室区路号仓门口站馆厅桶]|中心|系统|平台|网站|邮箱|前台|在[^，。；]{1,12}[里中内上]|(?i)\b(?:room|floor|building|gate|area|zone|site|office|portal|system|address|point|street|road|desk|lobby|bucket|folder|drawer|reception|car park|parking)\b|>")
        .expect("place value")
});
static REASON_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)因为|由于|因[^，。；]{1,20}而|原因|导致|造成|所致|根因|以致|因此|所以|未能|没有|失效|故障|\bbecause\b|\bdue to\b|\bcaused?\b|\broot cause\b|\bresult(?:ed)? (?:of|in|from)\b|\bfailed\b|\bnot\b|\bwithout\b|\bexpired\b|\bmisconfigur")
        .expect("reason value")
});
static YES_NO_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)不|禁止|严禁|可以|可|允许|须|必须|应当|应|需|无需|予以|适用|仅|只|\b(?:must|may|can(?:not|'t)?|should|shall|allowed|not|never|only|required|requires?|prohibited|forbidden|permitted|eligible|no|yes|need(?:s|n't)?|don't|open|closed)\b")
        .expect("yes-no value")
});
/// A chat line's timestamp (`[2026-04-17 21:03]`, `[09:12]`) is when it was said, not
/// a value of what it says.
static LINE_STAMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*\[[^\]]{0,40}\]\s*").expect("line stamp"));

/// A sentence `asked` at a slot: does it hold a value of that kind? Loose by design:
/// this is one feature of the decision, not a veto on its own.
pub fn fills(slot: Slot, sentence: &str) -> bool {
    let re: &Regex = match slot {
        Slot::Time => &TIME_VALUE,
        Slot::Duration => &DURATION_VALUE,
        Slot::Amount => &AMOUNT_VALUE,
        Slot::Person => &PERSON_VALUE,
        Slot::Place => &PLACE_VALUE,
        Slot::Reason => &REASON_VALUE,
        Slot::YesNo => &YES_NO_VALUE,
        Slot::Steps | Slot::Thing => return !sentence.trim().is_empty(),
    };
    re.is_match(&LINE_STAMP.replace(sentence, ""))
}

/// One candidate answer: a sentence of a found passage, with the passage's title and
/// the embedder's cosine between the question and the sentence (with its title).
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub sentence: &'a str,
    pub title: &'a str,
    /// What the evidence holds of the sentence's document: its title and every found
    /// passage of it (names and terms are often said once, in a heading or an opening).
    pub document: &'a str,
    /// `None` when no embedder is configured.
    pub similarity: Option<f32>,
    /// Where retrieval ranked the candidate's document among the evidence's documents
    /// (0: first).
    pub document_rank: usize,
}

/// What a check says of one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Signal {
    /// A feature value in 0..=1.
    Score(f32),
    /// The candidate cannot answer, whatever else holds (a stated identifier unwritten).
    Excludes,
}

/// One sufficiency check: a feature of a (question, candidate) pair.
pub trait SufficiencyCheck {
    fn name(&self) -> &'static str;
    fn signal(&self, question: &Question, candidate: &Candidate) -> Signal;
}

/// A question as the checks read it: its text, the slot it asks for and the
/// identifiers it states.
#[derive(Debug, Clone)]
pub struct Question {
    pub text: String,
    pub slot: Slot,
    pub identifiers: Vec<String>,
    terms: Vec<String>,
}

impl Question {
    pub fn new(text: &str) -> Question {
        Question {
            text: text.to_string(),
            slot: Slot::of(text),
            identifiers: crate::text::identifiers(text),
            terms: crate::text::content_terms(text),
        }
    }
}

/// The sentence holds a value of the asked slot.
pub struct SlotFilled;

impl SufficiencyCheck for SlotFilled {
    fn name(&self) -> &'static str {
        "slot"
    }
    fn signal(&self, q: &Question, c: &Candidate) -> Signal {
        Signal::Score(if fills(q.slot, c.sentence) { 1.0 } else { 0.0 })
    }
}

/// Every identifier the question states is written by the sentence or its title: an
/// answer about `HS-260318-007` is not one about another shipment.
pub struct IdentifiersWritten;

impl SufficiencyCheck for IdentifiersWritten {
    fn name(&self) -> &'static str {
        "identifiers"
    }
    fn signal(&self, q: &Question, c: &Candidate) -> Signal {
        let have = format!("{}\n{}", c.title, c.sentence).to_lowercase();
        if q.identifiers
            .iter()
            .all(|id| have.contains(&id.to_lowercase()))
        {
            Signal::Score(1.0)
        } else {
            Signal::Excludes
        }
    }
}

/// The share of the question's content words (and, for Chinese, character pairs) the
/// sentence and its title say.
pub struct WordsShared;

impl SufficiencyCheck for WordsShared {
    fn name(&self) -> &'static str {
        "words"
    }
    fn signal(&self, q: &Question, c: &Candidate) -> Signal {
        Signal::Score(share(q, &format!("{}\n{}", c.title, c.sentence)))
    }
}

/// The share of the question's words its candidate's document says, anywhere.
pub struct WordsInDocument;

impl SufficiencyCheck for WordsInDocument {
    fn name(&self) -> &'static str {
        "document words"
    }
    fn signal(&self, q: &Question, c: &Candidate) -> Signal {
        Signal::Score(share(q, c.document))
    }
}

fn share(q: &Question, text: &str) -> f32 {
    {
        if crate::text::han(&q.text) {
            let pairs = crate::han_overlap::HanPairs::of(&q.text, &q.terms, |_| 1.0);
            if !pairs.is_empty() {
                return pairs.share(text);
            }
        }
        if q.terms.is_empty() {
            return 0.0;
        }
        let have: std::collections::HashSet<String> =
            crate::text::content_terms(text).into_iter().collect();
        let n = q.terms.iter().filter(|t| have.contains(*t)).count();
        n as f32 / q.terms.len() as f32
    }
}

/// What one candidate scored.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Features {
    /// The embedder's cosine (0 when none is configured).
    pub similarity: f32,
    /// [`WordsShared`].
    pub words: f32,
    /// [`WordsInDocument`].
    pub document_words: f32,
    /// The sentence is in the question's script (Han or not): when it is not, words
    /// cannot be shared and only meaning speaks.
    pub same_language: bool,
    /// How far the sentence's similarity stands above the mean of the candidates in the
    /// question's script (of every candidate when none is): an answer present in the
    /// evidence tends to stand out; a question the evidence only brushes meets a flat
    /// field.
    pub lead: f32,
    /// Where retrieval ranked the sentence's document among the evidence's documents
    /// (0: first).
    pub document_rank: usize,
    /// [`SlotFilled`].
    pub slot_filled: bool,
}

/// Whether the evidence answers what is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Coverage {
    /// A sentence fills the slot, close enough in meaning to stand as the answer.
    Covered,
    /// The closest evidence is near, but not decisive: quote it and say what it lacks.
    Partial,
    /// Nothing found answers it.
    Uncovered,
}

/// Why a question was not (fully) covered: rendered as text only in the answer and
/// the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Doubt {
    /// Nothing was found.
    NoEvidence,
    /// The identifiers the question states are written by no evidence.
    Unwritten { identifiers: Vec<String> },
    /// The closest sentence does not hold the asked slot.
    SlotNotFilled { slot: Slot },
    /// The closest sentence is not close enough to the question. (No figures: a
    /// cosine's digits move with every token of the question — another identifier's
    /// hash, say — and a caller could read them as a signal about what it may not see.)
    Distant,
    /// The closest sentence is close, but in another document than the one retrieval
    /// ranked first: the two signals disagree about where the answer is.
    Disagreeing,
}

impl Doubt {
    /// The reason, in the question's language.
    /// The reason told to the caller, in the question's language. Whether anything was
    /// found and which identifiers no evidence writes are said as they are; every other
    /// doubt depends on which sentence scored best, which moves with the question's every
    /// token (an identifier's hash), so it is said only as the asked `slot` not found.
    pub fn say(&self, slot: Slot, han: bool) -> String {
        match (self, han) {
            (Doubt::NoEvidence, false) => "nothing you may read was found about it".into(),
            (Doubt::NoEvidence, true) => "在你可见的资料中没有找到相关内容".into(),
            (Doubt::Unwritten { identifiers }, false) => {
                format!("no evidence writes {}", identifiers.join(", "))
            }
            (Doubt::Unwritten { identifiers }, true) => {
                format!("没有证据写到 {}", identifiers.join("、"))
            }
            (_, false) => format!(
                "the evidence found does not clearly give {} the question asks for",
                slot.name()
            ),
            (_, true) => format!("找到的证据没有明确给出问题所问的{}", slot_zh(slot)),
        }
    }
}

fn slot_zh(slot: Slot) -> &'static str {
    match slot {
        Slot::Person => "人或团队",
        Slot::Time => "时间",
        Slot::Duration => "时长",
        Slot::Amount => "数额",
        Slot::Place => "地点",
        Slot::Reason => "原因",
        Slot::Steps => "步骤",
        Slot::YesNo => "是或否",
        Slot::Thing => "内容",
    }
}

/// The one decision. A candidate's *score* is the embedder's cosine plus
/// `lead_weight` times its lead over the other candidates; its *confidence* maps the
/// score onto 0..=1 (`floor` → 0, `floor + span` → 1) for callers to set a threshold on.
/// The evidence covers the question when the best candidate scores `answer` or more,
/// fills the asked slot and comes from the document retrieval ranked first (meaning at
/// the sentence and ranking over whole passages agree); a candidate scoring `partial`
/// or more is quoted as the closest evidence of a partial answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub lead_weight: f32,
    /// The answer threshold for a question in Latin script.
    pub answer: f32,
    /// The answer threshold for a Chinese question: e5 rates Chinese pairs closer than
    /// English ones (the reason its answer floor is English-only), so the same score
    /// says less.
    pub answer_han: f32,
    /// Added to the cosine of a Chinese sentence judged against a question in Latin
    /// script: e5-small rates such a pair about this much below a pair in one language,
    /// so without it no English question over a Chinese policy is ever answered. (The
    /// other way round needs none: a Chinese question rates everything close, the
    /// reason for `answer_han`.)
    pub latin_to_han: f32,
    pub partial: f32,
    pub floor: f32,
    pub span: f32,
}

/// A judged question: its coverage, the candidate that decided it and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub coverage: Coverage,
    /// The index of the best candidate, when there was one.
    pub best: Option<usize>,
    pub confidence: f32,
    pub features: Option<Features>,
    pub doubt: Option<Doubt>,
}

impl Decision {
    /// Chosen on ../shared/enterprise-dev, the development set (BENCHMARKS.md, issue 40:
    /// every (answer, lead weight) pair on a grid, by answerable-correct plus
    /// unanswerable-declined with the words judge kept); every other set is reported
    /// with these values untouched.
    pub const CHOSEN: Decision = Decision {
        lead_weight: 1.0,
        answer: 0.93,
        answer_han: 0.95,
        latin_to_han: 0.06,
        partial: 0.90,
        floor: 0.80,
        span: 0.20,
    };

    /// The score of one candidate's features.
    pub fn score(&self, f: &Features) -> f32 {
        f.similarity + self.lead_weight * f.lead
    }

    /// A score as a confidence in 0..=1.
    pub fn confidence(&self, score: f32) -> f32 {
        ((score - self.floor) / self.span).clamp(0.0, 1.0)
    }

    /// Judges `question` on `candidates`: the best-scoring candidate decides.
    pub fn judge(&self, question: &Question, candidates: &[Candidate]) -> Verdict {
        let none = |doubt| Verdict {
            coverage: Coverage::Uncovered,
            best: None,
            confidence: 0.0,
            features: None,
            doubt: Some(doubt),
        };
        if candidates.is_empty() {
            return none(Doubt::NoEvidence);
        }
        // Each cosine on the question script's scale.
        let question_han = crate::text::han(&question.text);
        let on_scale = |c: &Candidate| {
            c.similarity.map(|s| {
                if !question_han && crate::text::han(c.sentence) {
                    s + self.latin_to_han
                } else {
                    s
                }
            })
        };
        // The field a candidate leads: the sentences in the question's script when there
        // are any (sentences in the other script, on another scale, would move its mean).
        let in_script: Vec<f32> = candidates
            .iter()
            .filter(|c| crate::text::han(c.sentence) == question_han)
            .filter_map(on_scale)
            .collect();
        let sims: Vec<f32> = if in_script.is_empty() {
            candidates.iter().filter_map(on_scale).collect()
        } else {
            in_script
        };
        if sims.is_empty() {
            // No embedder: this decision has nothing to weigh.
            return none(Doubt::NoEvidence);
        }
        let mean = sims.iter().sum::<f32>() / sims.len() as f32;
        let score_of = |s: Signal| match s {
            Signal::Score(x) => x,
            Signal::Excludes => 0.0,
        };
        let mut best: Option<(usize, f32, Features)> = None;
        for (i, c) in candidates.iter().enumerate() {
            if IdentifiersWritten.signal(question, c) == Signal::Excludes {
                continue;
            }
            let similarity = on_scale(c).unwrap_or(0.0);
            let f = Features {
                similarity,
                words: score_of(WordsShared.signal(question, c)),
                document_words: score_of(WordsInDocument.signal(question, c)),
                slot_filled: score_of(SlotFilled.signal(question, c)) > 0.5,
                same_language: question_han == crate::text::han(c.sentence),
                lead: similarity - mean,
                document_rank: c.document_rank,
            };
            let score = self.score(&f);
            // A sentence that fills the asked slot beats any that does not; among
            // equals, the higher score.
            let better =
                |(_, b, g): &(usize, f32, Features)| (f.slot_filled, score) > (g.slot_filled, *b);
            if best.as_ref().is_none_or(better) {
                best = Some((i, score, f));
            }
        }
        let Some((i, score, f)) = best else {
            return none(Doubt::Unwritten {
                identifiers: question.identifiers.clone(),
            });
        };
        let answer = if question_han {
            self.answer_han
        } else {
            self.answer
        };
        let confidence = self.confidence(score);
        let (coverage, doubt) = if score >= answer && f.slot_filled && f.document_rank == 0 {
            (Coverage::Covered, None)
        } else {
            let coverage = if score >= self.partial {
                Coverage::Partial
            } else {
                Coverage::Uncovered
            };
            let doubt = if !f.slot_filled {
                Doubt::SlotNotFilled {
                    slot: question.slot,
                }
            } else if score >= answer {
                Doubt::Disagreeing
            } else {
                Doubt::Distant
            };
            (coverage, Some(doubt))
        };
        Verdict {
            coverage,
            best: Some(i),
            confidence,
            features: Some(f),
            doubt,
        }
    }
}
