//! Time in the question: the dates a question's own words name ("上周", "去年 3 月",
//! "本季度", "as of March 2025", "the 2025 version"), resolved against the business
//! clock into a period and the date versions are judged at.
//!
//! Only words that name a time of the world count: a duration tied to an event
//! ("签收 10 天后", "within 15 days") names none, and a bare year needs framing ("the
//! 2025 version", "截至 2025 年", "2025 年的版本") because questions mention years of
//! events far more often than they ask about a state of the rules. An explicit `as_of`
//! on the request always wins over the words (the caller said what they meant).

use chrono::{Datelike, Days, Months, NaiveDate};
use regex::{Captures, Regex};
use serde::Serialize;
use std::sync::LazyLock;

/// The time a question names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuestionTime {
    /// The words of the question that name it, as written.
    pub words: String,
    /// The first and last day they name (the same day for a date).
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// The date the words put versions at: the period's last day that is not after the
    /// business clock (its first day when the whole period lies ahead).
    pub as_of: NaiveDate,
    /// Whether the answer was judged at `as_of`; false when the request's explicit
    /// as-of date won.
    pub applied: bool,
    /// Whether judging at `as_of` admits other document versions than judging at the
    /// business clock would; the answer states the date only then (a date that changes
    /// nothing, as in a question about an event, is not worth a sentence).
    pub changed: bool,
    /// The business dates of the records the answer read, against the period the words
    /// name (empty when they frame the rules in force — "as of 2025", "2025 年的版本" —
    /// rather than a time of events, or when an explicit date won).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<RecordInPeriod>,
}

/// One date field of a record read for the answer, and whether it lies in the period
/// the question names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecordInPeriod {
    /// `table/key`.
    pub record: String,
    pub field: String,
    pub date: NaiveDate,
    pub within: bool,
}

/// Words that frame the rules in force at a date rather than a time when something
/// happened: such a date judges versions and says nothing about records' dates.
static RULES_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)截至|截止|按照?|依据|根据|版本|政策|规定|\bas\s+(?:of|at)\b|\bin\s+(?:effect|force)\b|\bversion\b|\bedition\b|\bpolic(?:y|ies)\b|\brules?\b|\brelease\b",
    )
    .expect("frame pattern compiles")
});

impl QuestionTime {
    /// Whether the words name the day of an event the question is about ("the October
    /// 27, 1999 episode"): a day written with its year, that set the date versions are
    /// judged at without changing them, and frame no rules in force. Such words single
    /// out what is asked about, and the evidence must say them; other time words only
    /// move the date ("本季度", "2025 年 6 月", "as of June 3, 2025").
    pub fn names_an_event_day(&self) -> bool {
        self.applied
            && !self.changed
            && self.from == self.to
            && self.names_a_period()
            && self
                .words
                .split(|c: char| !c.is_ascii_digit())
                .any(|run| run.len() == 4)
    }

    /// Whether the words name a time when things happened (a period records' dates can
    /// fall in or out of), not only the date of the rules in force.
    pub fn names_a_period(&self) -> bool {
        !RULES_FRAME.is_match(&self.words)
    }

    /// `date` of `record.field` against the period.
    pub fn place(&self, record: String, field: &str, date: NaiveDate) -> RecordInPeriod {
        RecordInPeriod {
            record,
            field: field.to_string(),
            date,
            within: self.from <= date && date <= self.to,
        }
    }

    /// The sentence an answer states for a record dated outside the period, in the
    /// question's language (a program statement: it cites nothing).
    pub fn outside_note(&self, r: &RecordInPeriod, zh: bool) -> String {
        let span = |sep: &str| {
            if self.from == self.to {
                self.from.to_string()
            } else {
                format!("{}{sep}{}", self.from, self.to)
            }
        };
        if zh {
            format!(
                "（记录 {} 的 {} 为 {}，不在问题所说的“{}”（{}）之内。）",
                r.record,
                r.field,
                r.date,
                self.words,
                span(" 至 ")
            )
        } else {
            format!(
                "(Record {}: {} is {}, outside “{}” ({}) in the question.)",
                r.record,
                r.field,
                r.date,
                self.words,
                span(" to ")
            )
        }
    }
}

/// A date field's value: `2025-03-31`, or the date of `2025-03-31T10:00:00` /
/// `2025-03-31 10:00`.
pub fn date_of(v: &serde_json::Value) -> Option<NaiveDate> {
    let s = v.as_str()?.trim();
    let head = s.get(..10)?;
    let rest = &s[10..];
    if !(rest.is_empty() || rest.starts_with('T') || rest.starts_with(' ')) {
        return None;
    }
    head.parse().ok()
}

/// The time the question's words name, if any (the first expression in it).
pub fn in_question(question: &str, now: NaiveDate) -> Option<QuestionTime> {
    let mut best: Option<(usize, usize, NaiveDate, NaiveDate)> = None;
    for (re, resolve) in PATTERNS.iter() {
        for caps in re.captures_iter(question) {
            let m = caps.get(0).expect("group 0 always matches");
            if !standalone(question, m.start(), m.end()) {
                continue;
            }
            let Some((from, to)) = resolve(&caps, now) else {
                continue;
            };
            // Leftmost wins; at one start the longer (more precise) reading wins.
            let better = match best {
                None => true,
                Some((s, e, ..)) => m.start() < s || (m.start() == s && m.end() > e),
            };
            if better {
                best = Some((m.start(), m.end(), from, to));
            }
        }
    }
    let (s, e, from, to) = best?;
    let as_of = if to <= now {
        to
    } else if from <= now {
        now
    } else {
        from
    };
    Some(QuestionTime {
        words: question[s..e].trim().to_string(),
        from,
        to,
        as_of,
        applied: true,
        changed: false,
        records: Vec::new(),
    })
}

/// A question (or sub-question) without its time words: what is judged for sufficiency
/// (the words became a date; as terms they would ask every passage to mention it).
/// Searches keep them: in an undated corpus a date is a good search term.
pub fn without_words(question: &str, t: &QuestionTime) -> String {
    question.replacen(&t.words, " ", 1).trim().to_string()
}

/// The sentence an answer states when the question's words set the date versions were
/// judged at, in the question's language.
pub fn judged_note(t: &QuestionTime, zh: bool) -> String {
    if zh {
        format!("（按 {} 判断：问题中的“{}”）", t.as_of, t.words)
    } else {
        format!("(Judged as of {}: “{}” in the question.)", t.as_of, t.words)
    }
}

/// A match glued to a longer number or identifier ("A-2025-03", "20250") names no time.
fn standalone(text: &str, start: usize, end: usize) -> bool {
    let glued = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '/' || c == '_';
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(glued) && !after.is_some_and(|c| c.is_ascii_digit() || c == '-')
}

type Resolve = fn(&Captures, NaiveDate) -> Option<(NaiveDate, NaiveDate)>;

const CN_NUM: &str = r"\d{1,2}|[一二三四五六七八九十两]{1,3}";
const EN_MONTH: &str = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";

static PATTERNS: LazyLock<Vec<(Regex, Resolve)>> = LazyLock::new(|| {
    let year_zh = r"(?:(?P<y>\d{4})\s*年|(?P<ry>去年|今年|本年|前年|明年))";
    let month_zh = format!(r"(?P<m>{CN_NUM})\s*月份?");
    let day_zh = format!(r"(?P<d>{CN_NUM})\s*[日号]");
    let p = |s: &str, f: Resolve| (Regex::new(s).expect("time pattern compiles"), f);
    vec![
        // Dates in digits: 2025-03-31, 2025/3/31, 2025.3.31.
        p(
            r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})",
            |c, _| day(year(c)?, num(c, "m")?, num(c, "d")?),
        ),
        // A month in digits: 2025-03.
        p(r"(?P<y>\d{4})-(?P<m>\d{2})", |c, _| {
            month(year(c)?, num(c, "m")?)
        }),
        // Chinese: 2025 年 3 月 31 日, 去年 3 月 5 号, 2025 年 3 月, 去年三月份.
        p(&format!(r"{year_zh}\s*{month_zh}\s*{day_zh}"), |c, now| {
            day(year_zh_of(c, now)?, num(c, "m")?, num(c, "d")?)
        }),
        p(&format!(r"{year_zh}\s*{month_zh}"), |c, now| {
            month(year_zh_of(c, now)?, num(c, "m")?)
        }),
        // Chinese quarters: 2025 年第一季度, 去年 Q3.
        p(
            &format!(
                r"{year_zh}\s*(?:的\s*)?(?:第\s*(?P<q>[一二三四1-4])\s*季度?|[Qq](?P<q2>[1-4]))"
            ),
            |c, now| quarter(year_zh_of(c, now)?, num(c, "q").or_else(|| num(c, "q2"))?),
        ),
        // A Chinese month and day without a year: the latest one not after today.
        p(&format!(r"{month_zh}\s*{day_zh}"), |c, now| {
            let (m, d) = (num(c, "m")?, num(c, "d")?);
            let this = NaiveDate::from_ymd_opt(now.year(), m, d)?;
            let at = if this > now {
                NaiveDate::from_ymd_opt(now.year() - 1, m, d)?
            } else {
                this
            };
            Some((at, at))
        }),
        // A framed Chinese year: 截至 2025 年, 2025 年的版本, 2025 年底, 2025 年度.
        p(
            r"(?:截至|截止到?|按照?|依据|根据)\s*(?P<y>\d{4})\s*年(?:底|末|初)?|(?P<y2>\d{4})\s*年(?:度|底|末|初|的?版本?|的?政策|的?规定|时|的时候|当时)",
            |c, _| {
                let y = num(c, "y").or_else(|| num(c, "y2"))? as i32;
                let words = c.get(0)?.as_str();
                if words.ends_with('初') {
                    let d = NaiveDate::from_ymd_opt(y, 1, 31)?;
                    return Some((NaiveDate::from_ymd_opt(y, 1, 1)?, d));
                }
                year_span(y)
            },
        ),
        // Relative Chinese words.
        p(r"今天|今日", |_, now| Some((now, now))),
        p(r"昨天|昨日", |_, now| back_days(now, 1)),
        p(r"前天", |_, now| back_days(now, 2)),
        p(r"明天|明日", |_, now| ahead_days(now, 1)),
        p(
            r"本周|这周|这个?星期|本星期|这个?礼拜",
            |_, now| Some(week(now, 0)),
        ),
        p(r"上周|上个?星期|上个?礼拜", |_, now| {
            Some(week(now, -1))
        }),
        p(r"下周|下个?星期|下个?礼拜", |_, now| {
            Some(week(now, 1))
        }),
        p(r"本月|这个月", |_, now| month(now.year(), now.month())),
        p(r"上个?月", |_, now| shift_month(now, -1)),
        p(r"下个?月", |_, now| shift_month(now, 1)),
        p(r"本季度?|这个?季度", |_, now| {
            Some(quarter_of(now, 0))
        }),
        p(r"上个?季度", |_, now| Some(quarter_of(now, -1))),
        p(r"下个?季度", |_, now| Some(quarter_of(now, 1))),
        p(r"今年|本年度?", |_, now| year_span(now.year())),
        p(r"去年|上一年", |_, now| year_span(now.year() - 1)),
        p(r"前年", |_, now| year_span(now.year() - 2)),
        p(r"明年", |_, now| year_span(now.year() + 1)),
        // N 天前 / 两周前 / 3 个月前 / 一年前 (before now; "10 天后" is tied to an event).
        p(
            &format!(r"(?P<n>{CN_NUM})\s*(?P<u>天|日|周|星期|个月|年)(?:以)?前"),
            |c, now| ago(now, num(c, "n")?, &c["u"]),
        ),
        // English dates: March 31, 2025 / 31 March 2025 / March 2025.
        p(
            &format!(
                r"(?i)\b(?P<mon>{EN_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b"
            ),
            |c, _| day(year(c)?, en_month(&c["mon"])?, num(c, "d")?),
        ),
        p(
            &format!(
                r"(?i)\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{EN_MONTH})\.?,?\s+(?P<y>\d{{4}})\b"
            ),
            |c, _| day(year(c)?, en_month(&c["mon"])?, num(c, "d")?),
        ),
        p(
            &format!(r"(?i)\b(?P<mon>{EN_MONTH})\.?,?\s+(?:of\s+)?(?P<y>\d{{4}})\b"),
            |c, _| month(year(c)?, en_month(&c["mon"])?),
        ),
        // English quarters: Q1 2025, 2025 Q1, the first quarter of 2025.
        p(
            r"(?i)\bq(?P<q>[1-4])\s*(?P<y>\d{4})\b|\b(?P<y2>\d{4})\s*q(?P<q2>[1-4])\b",
            |c, _| {
                let y = num(c, "y").or_else(|| num(c, "y2"))? as i32;
                quarter(y, num(c, "q").or_else(|| num(c, "q2"))?)
            },
        ),
        p(
            r"(?i)\b(?P<o>first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter\s+(?:of\s+)?(?P<y>\d{4})\b",
            |c, _| {
                let q = match c["o"].to_ascii_lowercase().as_str() {
                    "first" | "1st" => 1,
                    "second" | "2nd" => 2,
                    "third" | "3rd" => 3,
                    _ => 4,
                };
                quarter(year(c)?, q)
            },
        ),
        // A framed English year: as of 2025, in force in 2025, the 2025 version.
        p(
            r"(?i)\b(?:as\s+(?:of|at)|in\s+(?:effect|force)\s+(?:in|during)|at\s+the\s+(?:end|start)\s+of|by\s+the\s+end\s+of)\s+(?P<y>\d{4})\b|\b(?P<y2>\d{4})(?:'s)?\s+(?:version|edition|policy|policies|rules?|release)\b",
            |c, _| {
                let y = num(c, "y").or_else(|| num(c, "y2"))? as i32;
                if c[0].to_ascii_lowercase().contains("start of") {
                    let first = NaiveDate::from_ymd_opt(y, 1, 1)?;
                    return Some((first, NaiveDate::from_ymd_opt(y, 1, 31)?));
                }
                year_span(y)
            },
        ),
        // Relative English words.
        p(r"(?i)\btoday\b", |_, now| Some((now, now))),
        p(r"(?i)\byesterday\b", |_, now| back_days(now, 1)),
        p(r"(?i)\btomorrow\b", |_, now| ahead_days(now, 1)),
        p(r"(?i)\b(?:this|the\s+current)\s+week\b", |_, now| {
            Some(week(now, 0))
        }),
        p(r"(?i)\b(?:last|previous|past)\s+week\b", |_, now| {
            Some(week(now, -1))
        }),
        p(r"(?i)\bnext\s+week\b", |_, now| Some(week(now, 1))),
        p(r"(?i)\b(?:this|the\s+current)\s+month\b", |_, now| {
            month(now.year(), now.month())
        }),
        p(r"(?i)\b(?:last|previous|past)\s+month\b", |_, now| {
            shift_month(now, -1)
        }),
        p(r"(?i)\bnext\s+month\b", |_, now| shift_month(now, 1)),
        p(r"(?i)\b(?:this|the\s+current)\s+quarter\b", |_, now| {
            Some(quarter_of(now, 0))
        }),
        p(r"(?i)\b(?:last|previous|past)\s+quarter\b", |_, now| {
            Some(quarter_of(now, -1))
        }),
        p(r"(?i)\bnext\s+quarter\b", |_, now| Some(quarter_of(now, 1))),
        p(r"(?i)\b(?:this|the\s+current)\s+year\b", |_, now| {
            year_span(now.year())
        }),
        p(r"(?i)\b(?:last|previous|past)\s+year\b", |_, now| {
            year_span(now.year() - 1)
        }),
        p(r"(?i)\bnext\s+year\b", |_, now| year_span(now.year() + 1)),
        p(
            r"(?i)\b(?P<n>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?P<u>days?|weeks?|months?|years?)\s+ago\b",
            |c, now| {
                let n = match c["n"].to_ascii_lowercase().as_str() {
                    "a" | "an" | "one" => 1,
                    "two" => 2,
                    "three" => 3,
                    "four" => 4,
                    "five" => 5,
                    "six" => 6,
                    "seven" => 7,
                    "eight" => 8,
                    "nine" => 9,
                    "ten" => 10,
                    d => d.parse().ok()?,
                };
                let u = c["u"].to_ascii_lowercase();
                let unit = match u.trim_end_matches('s') {
                    "day" => "天",
                    "week" => "周",
                    "month" => "个月",
                    _ => "年",
                };
                ago(now, n, unit)
            },
        ),
        // "last March" / "in March" without a year: the latest March not after today
        // ("last" always the one before the current month's year when it is March now).
        p(
            &format!(r"(?i)\b(?P<w>last|in|during|since)\s+(?P<mon>{EN_MONTH})\b"),
            |c, now| {
                let m = en_month(&c["mon"])?;
                let mut y = now.year();
                let last = c["w"].eq_ignore_ascii_case("last");
                if m > now.month() || (last && m == now.month()) {
                    y -= 1;
                }
                month(y, m)
            },
        ),
    ]
});

fn num(c: &Captures, name: &str) -> Option<u32> {
    let s = c.name(name)?.as_str();
    s.parse().ok().or_else(|| chinese_number(s))
}

fn year(c: &Captures) -> Option<i32> {
    num(c, "y")
        .map(|y| y as i32)
        .filter(|y| (1900..=2199).contains(y))
}

fn year_zh_of(c: &Captures, now: NaiveDate) -> Option<i32> {
    if let Some(r) = c.name("ry") {
        return Some(match r.as_str() {
            "去年" => now.year() - 1,
            "前年" => now.year() - 2,
            "明年" => now.year() + 1,
            _ => now.year(),
        });
    }
    year(c)
}

/// 一 … 三十一, with 两 for two; None for anything else.
fn chinese_number(s: &str) -> Option<u32> {
    let digit = |c: char| "零一二三四五六七八九".find(c).map(|i| (i / 3) as u32);
    let chars: Vec<char> = s
        .chars()
        .map(|c| if c == '两' { '二' } else { c })
        .collect();
    match chars.as_slice() {
        [d] if *d != '十' => digit(*d),
        ['十'] => Some(10),
        ['十', u] => Some(10 + digit(*u)?),
        [t, '十'] => Some(digit(*t)? * 10),
        [t, '十', u] => Some(digit(*t)? * 10 + digit(*u)?),
        _ => None,
    }
}

/// An English month name; "may" in lower case is the verb ("you may 2025 times"), so
/// the month needs its capital there.
fn en_month(s: &str) -> Option<u32> {
    if s == "may" {
        return None;
    }
    let s = s.to_ascii_lowercase();
    let names = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    names
        .iter()
        .position(|n| s.starts_with(n))
        .map(|i| i as u32 + 1)
}

fn day(y: i32, m: u32, d: u32) -> Option<(NaiveDate, NaiveDate)> {
    let at = NaiveDate::from_ymd_opt(y, m, d)?;
    Some((at, at))
}

fn month(y: i32, m: u32) -> Option<(NaiveDate, NaiveDate)> {
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    let last = first.checked_add_months(Months::new(1))?.pred_opt()?;
    Some((first, last))
}

fn quarter(y: i32, q: u32) -> Option<(NaiveDate, NaiveDate)> {
    if !(1..=4).contains(&q) {
        return None;
    }
    let first = NaiveDate::from_ymd_opt(y, (q - 1) * 3 + 1, 1)?;
    let last = first.checked_add_months(Months::new(3))?.pred_opt()?;
    Some((first, last))
}

fn year_span(y: i32) -> Option<(NaiveDate, NaiveDate)> {
    Some((
        NaiveDate::from_ymd_opt(y, 1, 1)?,
        NaiveDate::from_ymd_opt(y, 12, 31)?,
    ))
}

fn quarter_of(now: NaiveDate, shift: i32) -> (NaiveDate, NaiveDate) {
    let index = now.year() * 4 + (now.month0() / 3) as i32 + shift;
    quarter(index.div_euclid(4), index.rem_euclid(4) as u32 + 1).expect("a valid quarter")
}

fn week(now: NaiveDate, shift: i64) -> (NaiveDate, NaiveDate) {
    let monday = now - chrono::Duration::days(now.weekday().num_days_from_monday() as i64);
    let first = monday + chrono::Duration::weeks(shift);
    (first, first + chrono::Duration::days(6))
}

fn shift_month(now: NaiveDate, shift: i32) -> Option<(NaiveDate, NaiveDate)> {
    let index = now.year() * 12 + now.month0() as i32 + shift;
    month(index.div_euclid(12), index.rem_euclid(12) as u32 + 1)
}

fn back_days(now: NaiveDate, n: u64) -> Option<(NaiveDate, NaiveDate)> {
    let at = now.checked_sub_days(Days::new(n))?;
    Some((at, at))
}

fn ahead_days(now: NaiveDate, n: u64) -> Option<(NaiveDate, NaiveDate)> {
    let at = now.checked_add_days(Days::new(n))?;
    Some((at, at))
}

/// A point `n` units before now.
fn ago(now: NaiveDate, n: u32, unit: &str) -> Option<(NaiveDate, NaiveDate)> {
    let at = match unit {
        "天" | "日" => now.checked_sub_days(Days::new(n as u64))?,
        "周" | "星期" => now.checked_sub_days(Days::new(7 * n as u64))?,
        "个月" => now.checked_sub_months(Months::new(n))?,
        _ => now.checked_sub_months(Months::new(12 * n))?,
    };
    Some((at, at))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_period_of_events_is_told_from_a_frame_of_rules() {
        let now = NaiveDate::from_ymd_opt(2026, 9, 20).unwrap();
        for (q, period) in [
            ("上周签收的订单", true),
            ("last month's incidents", true),
            ("2025 年 3 月的事故", true),
            ("按 2025 年的版本", false),
            ("截至 2025 年的规定", false),
            ("the refund rules as of March 2025", true),
            ("as of 2025, what applied?", false),
            ("the 2025 version of the policy", false),
        ] {
            let t = in_question(q, now).unwrap_or_else(|| panic!("{q}"));
            assert_eq!(t.names_a_period(), period, "{q}: {:?}", t.words);
        }
    }

    #[test]
    fn record_dates_are_read_and_placed() {
        use serde_json::json;
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        assert_eq!(date_of(&json!("2026-09-10")), Some(d("2026-09-10")));
        assert_eq!(
            date_of(&json!("2026-09-10T08:00:00Z")),
            Some(d("2026-09-10"))
        );
        assert_eq!(date_of(&json!("2026-09-10 08:00")), Some(d("2026-09-10")));
        for bad in [
            json!("2026-09-101"),
            json!("2026-13-01"),
            json!(20260910),
            json!("十月"),
        ] {
            assert_eq!(date_of(&bad), None, "{bad}");
        }
        let now = d("2026-09-20");
        let t = in_question("上周的订单", now).unwrap();
        assert_eq!((t.from, t.to), (d("2026-09-07"), d("2026-09-13")));
        for (date, within) in [
            ("2026-09-06", false),
            ("2026-09-07", true),
            ("2026-09-13", true),
            ("2026-09-14", false),
        ] {
            assert_eq!(
                t.place("orders/A1".into(), "signed_at", d(date)).within,
                within,
                "{date}"
            );
        }
        let out = t.place("orders/A1".into(), "signed_at", d("2026-09-14"));
        assert_eq!(
            t.outside_note(&out, true),
            "（记录 orders/A1 的 signed_at 为 2026-09-14，不在问题所说的“上周”（2026-09-07 至 2026-09-13）之内。）"
        );
        let t = in_question("yesterday's order", now).unwrap();
        let out = t.place("orders/A1".into(), "signed_at", d("2026-09-14"));
        assert_eq!(
            t.outside_note(&out, false),
            "(Record orders/A1: signed_at is 2026-09-14, outside “yesterday” (2026-09-19) in the question.)"
        );
    }

    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    /// (question, now, words, from, to, as_of)
    fn check(q: &str, now: &str, words: &str, from: &str, to: &str, as_of: &str) {
        let t = in_question(q, d(now)).unwrap_or_else(|| panic!("no time found in {q:?}"));
        assert_eq!(
            (t.words.as_str(), t.from, t.to, t.as_of),
            (words, d(from), d(to), d(as_of)),
            "{q}"
        );
    }

    #[test]
    fn chinese_relative_words_resolve_against_the_business_clock() {
        // 2026-11-30 is a Monday.
        let now = "2026-11-30";
        check(
            "上周的订单还能退吗？",
            now,
            "上周",
            "2026-11-23",
            "2026-11-29",
            "2026-11-29",
        );
        check(
            "本周有哪些变更",
            now,
            "本周",
            "2026-11-30",
            "2026-12-06",
            "2026-11-30",
        );
        check(
            "上个月的报销规定是什么",
            now,
            "上个月",
            "2026-10-01",
            "2026-10-31",
            "2026-10-31",
        );
        check(
            "本季度的差旅标准",
            now,
            "本季度",
            "2026-10-01",
            "2026-12-31",
            "2026-11-30",
        );
        check(
            "上季度的差旅标准",
            now,
            "上季度",
            "2026-07-01",
            "2026-09-30",
            "2026-09-30",
        );
        check(
            "去年 3 月的认证方式",
            now,
            "去年 3 月",
            "2025-03-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "去年三月份的认证方式",
            now,
            "去年三月份",
            "2025-03-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "昨天的退货政策",
            now,
            "昨天",
            "2026-11-29",
            "2026-11-29",
            "2026-11-29",
        );
        check(
            "两周前的规定",
            now,
            "两周前",
            "2026-11-16",
            "2026-11-16",
            "2026-11-16",
        );
        check(
            "3 个月前的规定",
            now,
            "3 个月前",
            "2026-08-30",
            "2026-08-30",
            "2026-08-30",
        );
        check(
            "去年的版本",
            now,
            "去年",
            "2025-01-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "前年的规定",
            now,
            "前年",
            "2024-01-01",
            "2024-12-31",
            "2024-12-31",
        );
        check(
            "今年的规定",
            now,
            "今年",
            "2026-01-01",
            "2026-12-31",
            "2026-11-30",
        );
        check(
            "下个月起的规定",
            now,
            "下个月",
            "2026-12-01",
            "2026-12-31",
            "2026-12-01",
        );
        check(
            "十二月一日的规定",
            now,
            "十二月一日",
            "2025-12-01",
            "2025-12-01",
            "2025-12-01",
        );
        check(
            "11 月 5 号的规定",
            now,
            "11 月 5 号",
            "2026-11-05",
            "2026-11-05",
            "2026-11-05",
        );
    }

    #[test]
    fn chinese_absolute_dates_months_quarters_and_framed_years() {
        let now = "2026-11-30";
        check(
            "2025 年 6 月 1 日时 API 的认证方式",
            now,
            "2025 年 6 月 1 日",
            "2025-06-01",
            "2025-06-01",
            "2025-06-01",
        );
        check(
            "2025年6月API的认证方式",
            now,
            "2025年6月",
            "2025-06-01",
            "2025-06-30",
            "2025-06-30",
        );
        check(
            "2025 年第一季度的规定",
            now,
            "2025 年第一季度",
            "2025-01-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "按 2025-06-01 的规定",
            now,
            "2025-06-01",
            "2025-06-01",
            "2025-06-01",
            "2025-06-01",
        );
        check(
            "2025 年的版本怎么写的",
            now,
            "2025 年的版本",
            "2025-01-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "截至 2025 年，认证方式是什么",
            now,
            "截至 2025 年",
            "2025-01-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "2025 年初的规定",
            now,
            "2025 年初",
            "2025-01-01",
            "2025-01-31",
            "2025-01-31",
        );
    }

    #[test]
    fn english_words_resolve_too() {
        let now = "2026-11-30";
        check(
            "What was the auth method as of March 2025?",
            now,
            "March 2025",
            "2025-03-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "the rule on March 5, 2025",
            now,
            "March 5, 2025",
            "2025-03-05",
            "2025-03-05",
            "2025-03-05",
        );
        check(
            "the rule on 5 March 2025",
            now,
            "5 March 2025",
            "2025-03-05",
            "2025-03-05",
            "2025-03-05",
        );
        check(
            "What did the 2025 version say?",
            now,
            "2025 version",
            "2025-01-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "the policy as of 2025",
            now,
            "as of 2025",
            "2025-01-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "orders from last week",
            now,
            "last week",
            "2026-11-23",
            "2026-11-29",
            "2026-11-29",
        );
        check(
            "the rules last quarter",
            now,
            "last quarter",
            "2026-07-01",
            "2026-09-30",
            "2026-09-30",
        );
        check(
            "expenses this quarter",
            now,
            "this quarter",
            "2026-10-01",
            "2026-12-31",
            "2026-11-30",
        );
        check(
            "in Q1 2025",
            now,
            "Q1 2025",
            "2025-01-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "the first quarter of 2025",
            now,
            "first quarter of 2025",
            "2025-01-01",
            "2025-03-31",
            "2025-03-31",
        );
        check(
            "the rule two weeks ago",
            now,
            "two weeks ago",
            "2026-11-16",
            "2026-11-16",
            "2026-11-16",
        );
        check(
            "what applied last March",
            now,
            "last March",
            "2026-03-01",
            "2026-03-31",
            "2026-03-31",
        );
        check(
            "what applied in December",
            now,
            "in December",
            "2025-12-01",
            "2025-12-31",
            "2025-12-31",
        );
        check(
            "what was in force yesterday",
            now,
            "yesterday",
            "2026-11-29",
            "2026-11-29",
            "2026-11-29",
        );
    }

    #[test]
    fn durations_tied_to_events_identifiers_and_bare_years_name_no_time() {
        let now = d("2026-11-30");
        for q in [
            "订单 A123 的耳机已拆封，签收 10 天后有杂音，能退吗？",
            "签收后 15 天内可以退货吗？",
            "当前 API 的认证方式是什么？",
            "当时 API 的认证方式是什么？",
            "Can I return it within 15 days?",
            "Which film released in 1995 starred him?",
            "2008年北京奥运会在哪里举办？",
            "What is error code E-2025-03?",
            "order A-2025-03-01 status",
            "API 2.0 的认证方式",
            "You may 2025 times",
            "what they may do in may",
            "哪些产品受到供应商事件 E-1 影响？",
        ] {
            assert_eq!(in_question(q, now), None, "{q}");
        }
    }

    #[test]
    fn the_first_expression_wins_and_an_impossible_day_falls_back_to_its_month() {
        let now = d("2026-11-30");
        let t = in_question("2025 年 2 月 30 日的规定", now).unwrap();
        assert_eq!(
            (t.words.as_str(), t.from),
            ("2025 年 2 月", d("2025-02-01"))
        );
        assert_eq!(in_question("2025 年 13 月的规定", now), None);
        let t = in_question("去年 3 月和今年 5 月的规定有什么不同", now).unwrap();
        assert_eq!(t.words, "去年 3 月");
    }

    #[test]
    fn the_words_leave_the_question_that_is_searched() {
        let q = "2025 年 6 月 API 的认证方式是什么？";
        let t = in_question(q, d("2026-11-30")).unwrap();
        assert_eq!(without_words(q, &t), "API 的认证方式是什么？");
    }

    #[test]
    fn hostile_questions_name_no_time_or_a_valid_one_and_never_panic() {
        let now = d("2026-11-30");
        let long = "2025年".repeat(700) + &"上周 ".repeat(300);
        for q in [
            long.as_str(),
            "２０２５年６月的规定",
            "٢٠٢٥-٠٦-٠١",
            "9999-99-99 0000-00-00 2025-02-29",
            "999 years ago and 999 days ago",
            "三十一月三十一日",
            "\u{0}2025年\u{202e}3月",
        ] {
            if let Some(t) = in_question(q, now) {
                assert!(t.from <= t.to && q.contains(&t.words), "{q:?}: {t:?}");
            }
        }
        assert_eq!(in_question("２０２５年６月的规定", now), None);
    }

    #[test]
    fn chinese_numbers_read_as_written() {
        for (s, n) in [
            ("一", 1),
            ("十", 10),
            ("十二", 12),
            ("二十", 20),
            ("三十一", 31),
            ("两", 2),
        ] {
            assert_eq!(chinese_number(s), Some(n), "{s}");
        }
        assert_eq!(chinese_number("十十"), None);
        assert_eq!(chinese_number("零"), Some(0));
    }

    #[test]
    fn the_note_speaks_the_questions_language() {
        let t = in_question("去年 3 月的规定", d("2026-11-30")).unwrap();
        assert_eq!(
            judged_note(&t, true),
            "（按 2025-03-31 判断：问题中的“去年 3 月”）"
        );
        let t = in_question("the rule as of March 2025", d("2026-11-30")).unwrap();
        assert_eq!(
            judged_note(&t, false),
            "(Judged as of 2025-03-31: “March 2025” in the question.)"
        );
    }
}
