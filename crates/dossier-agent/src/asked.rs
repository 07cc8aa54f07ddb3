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
//! gives no relation and the rule does not apply. An English relation is said only
//! with who holds it ("created by Reg Watson", "its creator", "Watson created"), not by
//! a passive without its agent ("the character was created as part of …").
//!
//! A question asking the time of a birth or a death ([`LifeEvent`]) is answered only by
//! a sentence that holds a time and says that event.

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

/// "<verb>ed by who|whom|what|which" anywhere, or a question that starts "who <verb>ed",
/// or "<verb>ance|ence|ment by who|whom|which" (a guest appearance by which rapper).
static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b([a-z]{3,}ed)\s+by\s+(?:who|whom|what|which)\b|^\s*who\s+([a-z]{3,}ed)\b|\b([a-z]{5,}(?:ance|ence|ment))\s+by\s+(?:who|whom|which)\b")
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
            if let Some(noun) = c.get(3) {
                // A noun made from a verb names the verb's act: its agent is asked.
                let noun = noun.as_str().to_lowercase();
                let verb = ["ance", "ence", "ment"]
                    .iter()
                    .find_map(|s| noun.strip_suffix(s))?;
                return Some(Relation::English(verb.trim_end_matches('e').to_string()));
            }
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

    /// Whether `text` says the relation with someone who holds it: the answer slot is
    /// the relation's agent ("created by who"), so an English sentence must say who
    /// does it — "created by Reg Watson", "its creator", "Reg Watson created" — and not
    /// only that it was done ("the character was created as part of a new family").
    pub(crate) fn said_by(&self, text: &str) -> bool {
        match self {
            Relation::Chinese(v) => text.contains(v.as_str()),
            Relation::English(stem) => crate::text::sentences(text)
                .iter()
                .any(|s| says_with_agent(s, stem)),
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

/// The end of a life a question asks the time of: "When was the singer born who …",
/// "… who died on which date?". A sentence holding a date answers only when it says
/// that event too: "When Chiang Kai-shek died in 1975 …" holds no day, and a sentence
/// holding another day is another event's ("He made his debut on 18 May 2009").
///
/// Only births and deaths are read: other events are said in too many words ("premiered"
/// by "originally airing from", "released" by "a 1998 book"), and requiring the question's
/// verb turned answerable questions away (BENCHMARKS.md, stop 39). A birth and a death
/// are said by few: their verbs and nouns, and a life's span in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LifeEvent {
    Birth,
    Death,
}

/// Words that ask for a birth or a death.
const BIRTH_ASKED: &[&str] = &["born", "birth", "birthday", "birthdate"];
const DEATH_ASKED: &[&str] = &["die", "died", "dies", "death"];
/// Word starts that say a birth or a death.
const BIRTH_SAID: &[&str] = &["born", "birth"];
const DEATH_SAID: &[&str] = &[
    "died",
    "dies",
    "death",
    "dead",
    "killed",
    "executed",
    "assassinated",
    "murdered",
];

/// "(8 June 1951 – 5 April 1975)", "(1887–1975)", "(Hebrew: …; 15 June 1924 – 24 April
/// 2005)": a life's span in brackets, which says a birth and a death.
static LIFESPAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\([^()]*\d{3,4}[^()]*?[–—-][^()]*?\d{3,4}[^()]*\)").expect("static regex")
});

impl LifeEvent {
    /// The birth or death `question` asks the time of; `kind` is what it asks for
    /// ([`crate::text::answer_kind`]). `None` when it asks for no time, names neither,
    /// or names both ("When did the man born in Leeds die?" is left to the other rules).
    pub(crate) fn of(question: &str, kind: Option<crate::text::AnswerKind>) -> Option<Self> {
        use crate::text::AnswerKind;
        if !matches!(kind, Some(AnswerKind::Day | AnswerKind::Time)) {
            return None;
        }
        let lower = question.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let birth = words.iter().any(|w| BIRTH_ASKED.contains(w));
        let death = words.iter().any(|w| DEATH_ASKED.contains(w));
        match (birth, death) {
            (true, false) => Some(LifeEvent::Birth),
            (false, true) => Some(LifeEvent::Death),
            _ => None,
        }
    }

    /// Whether `sentence` says the event.
    pub(crate) fn said_by(self, sentence: &str) -> bool {
        let said = match self {
            LifeEvent::Birth => BIRTH_SAID,
            LifeEvent::Death => DEATH_SAID,
        };
        LIFESPAN.is_match(sentence)
            || sentence
                .to_lowercase()
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| said.iter().any(|s| w.starts_with(s)))
    }

    /// The event as the trace shows it.
    pub(crate) fn shown(self) -> &'static str {
        match self {
            LifeEvent::Birth => "birth",
            LifeEvent::Death => "death",
        }
    }
}

/// Forms of "to be" (and "been"): a past participle after one is passive, and its agent
/// is only said by a following "by".
const BE: &[&str] = &["is", "are", "was", "were", "be", "been", "being"];
/// Pronouns and relatives that stand for an agent named elsewhere in the passage.
const AGENT_PRONOUNS: &[&str] = &["he", "she", "they", "who", "which", "we", "i"];
/// Sentence-initial words that name no one.
const NOT_A_NAME_START: &[&str] = &[
    "the",
    "a",
    "an",
    "in",
    "on",
    "at",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "when",
    "after",
    "before",
    "during",
    "while",
    "as",
    "by",
    "from",
    "for",
    "with",
    "there",
    "his",
    "her",
    "their",
    "originally",
    "later",
    "also",
];
/// Words a "by" may follow the verb by ("created and produced by", "created in 1985 by").
const BY_WITHIN: usize = 4;

/// Whether `sentence` says a word of `stem` with its agent: followed by "by" within a
/// few words, as an agent noun (creator, founder, director), or in the active voice after
/// a name or a pronoun standing for one.
fn says_with_agent(sentence: &str, stem: &str) -> bool {
    let words: Vec<&str> = sentence
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    // Whether a name or a pronoun standing for one comes before each word (computed once:
    // a sentence may repeat the verb).
    let mut agent_before = Vec::with_capacity(words.len());
    let mut seen = false;
    for (p, w) in words.iter().enumerate() {
        agent_before.push(seen);
        seen = seen
            || AGENT_PRONOUNS.contains(&lower[p].as_str())
            || (w.chars().next().is_some_and(char::is_uppercase)
                && (p > 0 || !NOT_A_NAME_START.contains(&lower[p].as_str())));
    }
    lower.iter().enumerate().any(|(k, w)| {
        let Some(rest) = w.strip_prefix(stem) else {
            return false;
        };
        if matches!(rest, "or" | "ors" | "er" | "ers" | "ress") {
            return true;
        }
        let by_follows = lower[k + 1..].iter().take(BY_WITHIN).any(|n| n == "by");
        // The act's noun has its agent after "by" ("an appearance by Rakim").
        if matches!(
            rest,
            "ance" | "ances" | "ence" | "ences" | "ment" | "ments" | "ements"
        ) {
            return by_follows;
        }
        // Only the verb itself has an agent by position ("his directorial debut" says
        // nothing of who directed).
        if !matches!(rest, "" | "e" | "d" | "ed" | "es" | "s" | "ing") {
            return false;
        }
        if by_follows {
            return true;
        }
        // The word before, past adverbs ("originally") and "co-" ("co-founded").
        let before = lower[..k]
            .iter()
            .rposition(|p| !(p.ends_with("ly") || p == "co"));
        match before {
            Some(b) if BE.contains(&lower[b].as_str()) => false,
            Some(_) => agent_before[k],
            None => false,
        }
    })
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
        assert_eq!(
            english("The album featured a guest appearance by which rapper from Harlem?"),
            Some("appear".into())
        );
        assert_eq!(
            english("The campaign had an endorsement by whom?"),
            Some("endors".into())
        );
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
    fn the_relation_is_said_only_with_who_holds_it() {
        let r = Relation::of("The series was created by who?").unwrap();
        for said in [
            "The soap was created and produced by Reg Watson.",
            "Reg Watson originally created the soap in 1985.",
            "It was devised by its creator, a former journalist.",
            "The show, which he created, ran for decades.",
        ] {
            assert!(r.said_by(said), "{said}");
        }
        for unsaid in [
            "The character was created as part of a new generation of the Ramsay family.",
            "Created characters were later written out of the show.",
            "A new family was created.",
        ] {
            assert!(!r.said_by(unsaid), "{unsaid}");
        }
        let a = Relation::of("It featured a guest appearance by which rapper?").unwrap();
        assert!(a.said_by("It features guest appearances by A$AP Rocky and Kelly Rowland."));
        assert!(a.said_by("Rocky appeared on the album's second single."));
        assert!(!a.said_by("It serves as a follow-up to the rapper's sophomore album."));
        assert!(!a.said_by("The appearance of the album was delayed."));
        let d = Relation::of("Who directed the film in which he made his debut?").unwrap();
        assert!(!d.said_by("He made his directorial debut in Bollywood."));
        assert!(d.said_by("Park Jin-pyo directed the film."));
        assert!(d.said_by("The film was co-directed by two brothers."));
    }

    #[test]
    fn a_birth_or_death_is_read_from_a_question_that_asks_its_time() {
        use crate::text::answer_kind;
        let of = |q: &str| LifeEvent::of(q, answer_kind(q));
        assert_eq!(
            of("The late president was Chiang Kai-shek, who died on which date?"),
            Some(LifeEvent::Death)
        );
        assert_eq!(
            of("When was the Welsh singer born who is known for her voice?"),
            Some(LifeEvent::Birth)
        );
        assert_eq!(of("When did Conall's father die?"), Some(LifeEvent::Death));
        // Asking no time, or naming both, reads nothing.
        assert_eq!(of("Where was the singer born?"), None);
        assert_eq!(
            of("How many stores are in the state where he lived when he died?"),
            None
        );
        assert_eq!(of("When did the man born in Leeds die?"), None);
    }

    #[test]
    fn a_birth_or_death_is_said_by_its_words_or_a_life_span() {
        let death = LifeEvent::Death;
        assert!(death.said_by("Chiang Kai-shek (31 October 1887 – 5 April 1975) was a leader."));
        assert!(death.said_by(
            "Ezer Weizman (Hebrew: עזר ויצמן; 15 June 1924 – 24 April 2005) was president."
        ));
        assert!(death.said_by("The annals report his death in 538."));
        assert!(!death.said_by("She made her first screen appearance on 18 May 2009."));
        assert!(!death.said_by("When Chiang Kai-shek was elected on 10 October 1928, he moved."));
        assert!(
            LifeEvent::Birth.said_by("Ashleigh May Brewer (born 9 December 1990) is an actress.")
        );
        assert!(!LifeEvent::Birth.said_by("The album (1979) was her third."));
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
        // A sentence repeating the verb is read once through, not once per repeat.
        let r = Relation::of("The show was created by who?").unwrap();
        assert!(!r.said_by(&"then created ".repeat(100_000)));
        assert!(r.said_by(&format!(
            "{}Watson created it.",
            "then created ".repeat(100_000)
        )));
    }
}
