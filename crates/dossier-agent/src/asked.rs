//! The relation a question asks for.
//!
//! "… a soap opera created by who?" asks who *created* it; "鑫诺二号是由谁制造的？" asks
//! who *made* it. Evidence about the soap opera (its characters, its cast) shares every
//! other word of the question and still does not answer it: a multi-hop question whose
//! first hop is found and whose last is missing looks covered by word overlap alone.
//! The word the question's answer slot hangs on must be said by the evidence.
//!
//! Only forms whose reading is unambiguous are taken: an English regular past verb
//! right before "by who/whom/what/which" or right after a leading "who", and, in Chinese,
//! the verb after 由谁 / 被谁 / 谁 (谁发明了, 由谁制造, 谁建的). Anything else
//! gives no relation and the rule does not apply.

use std::sync::LazyLock;

use regex::Regex;

/// The asked relation: an English verb stem or a Chinese verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Relation {
    /// The stem of a regular English past form, lower-case ("creat" of "created"):
    /// said by any word that starts with it (created, creator, creation, co-creat…).
    English(String),
    /// A Chinese verb of one or two characters (制造, 建), said when the text holds it.
    Chinese(String),
}

/// "<verb>ed by who|whom|what|which" anywhere, or a question that starts "who <verb>ed".
static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b([a-z]{3,}ed)\s+by\s+(?:who|whom|what|which)\b|^\s*who\s+([a-z]{3,}ed)\b")
        .expect("static regex")
});

/// 谁 (also in 由谁, 被谁) followed by two Han characters that begin a verb.
static CHINESE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"谁(\p{Han}{2})").expect("static regex"));

/// Characters after 谁 that begin no verb (谁是, 谁的, 谁在 …): no relation is read.
const NOT_A_VERB_START: &[char] = &[
    '是', '的', '为', '在', '呢', '啊', '有', '和', '与', '最', '更', '能', '会', '可', '将', '也',
    '都', '又', '还', '就', '所', '人', '家',
];

/// Particles that end a one-character verb (建的, 写了, 唱过).
const VERB_PARTICLES: &[char] = &['的', '了', '过', '着', '得'];

/// Past forms ending in -ed that are no verb the answer hangs on.
const NOT_A_RELATION: &[&str] = &["used", "based", "named", "called"];

impl Relation {
    /// The relation `question` asks for, when its form is one of the unambiguous ones.
    pub(crate) fn of(question: &str) -> Option<Self> {
        if let Some(c) = ENGLISH.captures(question) {
            let verb = c.get(1).or_else(|| c.get(2))?.as_str().to_lowercase();
            if NOT_A_RELATION.contains(&verb.as_str()) {
                return None;
            }
            return Some(Relation::English(stem(&verb)?));
        }
        let c = CHINESE.captures(question)?;
        let verb = c.get(1)?.as_str();
        let first = verb.chars().next()?;
        if NOT_A_VERB_START.contains(&first) {
            return None;
        }
        // A one-character verb before a particle (谁建的, 谁写了) is that character.
        let verb: String = match verb.chars().nth(1) {
            Some(p) if VERB_PARTICLES.contains(&p) => first.to_string(),
            _ => verb.to_string(),
        };
        Some(Relation::Chinese(verb))
    }

    /// Whether `text` says the relation.
    pub(crate) fn said_by(&self, text: &str) -> bool {
        match self {
            Relation::Chinese(v) => text.contains(v.as_str()),
            Relation::English(s) => text
                .to_lowercase()
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w.starts_with(s.as_str())),
        }
    }

    /// Whether the relation is specific enough to pick a sentence by: a one-character
    /// Chinese verb (建, 写) is said by many sentences that do not answer.
    pub(crate) fn is_specific(&self) -> bool {
        match self {
            Relation::English(_) => true,
            Relation::Chinese(v) => v.chars().count() >= 2,
        }
    }

    /// The relation as the trace shows it.
    pub(crate) fn shown(&self) -> &str {
        match self {
            Relation::English(s) | Relation::Chinese(s) => s,
        }
    }
}

/// The stem of a regular English past form: "created" → "creat", "founded" → "found",
/// "directed" → "direct", "produced" → "produc", "married" → "marri". `None` when too
/// little is left to match on (four letters).
fn stem(past: &str) -> Option<String> {
    let s = past.strip_suffix("ed")?;
    // A doubled final consonant ("stopped") is one letter of the stem.
    let b = s.as_bytes();
    let s = if b.len() >= 2
        && b[b.len() - 1] == b[b.len() - 2]
        && !b"aeiouls".contains(&b[b.len() - 1])
    {
        &s[..s.len() - 1]
    } else {
        s
    };
    (s.chars().count() >= 4).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn english(q: &str) -> Option<String> {
        match Relation::of(q) {
            Some(Relation::English(s)) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn the_english_verb_the_answer_slot_hangs_on_is_read() {
        assert_eq!(
            english("Kate Ramsay is a character from an Australian soap opera created by who?"),
            Some("creat".into())
        );
        assert_eq!(
            english("Who directed the film in which she debuted?"),
            Some("direct".into())
        );
        assert_eq!(
            english("The dam was designed by whom?"),
            Some("design".into())
        );
        assert_eq!(
            english("The club was founded by which brewer?"),
            Some("found".into())
        );
        assert_eq!(english("who stopped the war"), Some("stop".into()));
    }

    #[test]
    fn other_forms_give_no_relation() {
        for q in [
            "Who is the director of the film?",
            "Which film did she star in?",
            "What was the company based by who",
            "Who wed him?",
            "What is the population of the city named by who?",
            "谁人知道？",
            "他被谁所杀？",
        ] {
            let r = Relation::of(q);
            assert!(r.is_none(), "{q} gave {r:?}");
        }
    }

    #[test]
    fn the_relation_is_said_by_any_form_of_its_stem() {
        let r = Relation::of("The series was created by who?").unwrap();
        assert!(r.said_by("It is a series by the creator of Neighbours."));
        assert!(r.said_by("Created by Reg Watson, it first aired in 1985."));
        assert!(!r.said_by("Kate Ramsay is a fictional character played by Ashleigh Brewer."));
        // Inside another word is no saying it.
        assert!(!r.said_by("a procreative theme"));
    }

    #[test]
    fn the_chinese_verb_after_who_is_read() {
        assert_eq!(
            Relation::of("鑫诺二号通信卫星是由谁制造的？"),
            Some(Relation::Chinese("制造".into()))
        );
        assert_eq!(
            Relation::of("电话是谁发明的？"),
            Some(Relation::Chinese("发明".into()))
        );
        assert_eq!(
            Relation::of("鲤鱼门天后庙是谁建的？"),
            Some(Relation::Chinese("建".into()))
        );
        assert_eq!(
            Relation::of("谁写了这首歌？"),
            Some(Relation::Chinese("写".into()))
        );
        assert_eq!(Relation::of("林投姐的导演是谁？"), None);
        assert_eq!(Relation::of("谁是第一任校长？"), None);
        assert_eq!(Relation::of("谁的作品最多？"), None);
        let r = Relation::of("这颗卫星由谁制造？").unwrap();
        assert!(r.said_by("该卫星由法国阿尔卡特公司制造。"));
        assert!(!r.said_by("鑫诺二号于2006年发射。"));
    }

    #[test]
    fn hostile_input_is_harmless() {
        assert_eq!(Relation::of(""), None);
        assert_eq!(Relation::of("谁"), None);
        assert_eq!(Relation::of(&"ed by who ".repeat(10_000)), None);
        let long = format!("{} by who", "a".repeat(100_000) + "ed");
        let r = Relation::of(&long).unwrap();
        assert!(!r.said_by("\u{0}\u{301}"));
    }
}
