//! Names a question gives, and whether a text names them (sufficiency, issue 18).
//!
//! A question about a named thing ("the Dodge City Regional Airport") is answered only by
//! evidence that names it; passages sharing its words one by one are about something
//! else. Latin script only: capitals mark no names in Chinese.

/// Small words that may stand inside a name ("Siege of Cassel", "Gaby: A True Story").
const NAME_LINKS: &[&str] = &[
    "of", "the", "de", "la", "le", "du", "des", "di", "da", "del", "von", "van", "der", "den", "y",
    "&",
];

/// Whether `word` is initials: capital letters each followed by a full stop ("D.P.", "K.").
fn initials(word: &str) -> bool {
    let b = word.as_bytes();
    !b.is_empty()
        && b.len().is_multiple_of(2)
        && b.chunks(2)
            .all(|c| c[0].is_ascii_uppercase() && c[1] == b'.')
}

/// Words a question opens with that are capitalised only as its first word: question
/// words, auxiliaries, determiners, prepositions, imperatives.
const OPENERS: &str = concat!(
    "what which who whom whose when where why how is are was were do does did can could ",
    "will would should has have had may might the a an this that these those in on at of ",
    "for from by with as to after before during since according besides name list give ",
    "identify find tell describe explain compare both either neither if and or but ",
    "between among about against under over within without into through across behind ",
    "beyond near while although though because unless until whether not so then also only ",
    "even all each every some any many most other such out upon",
);

/// The names a question written in Latin script gives: runs of two or more words that
/// start with a capital ("Dodge City Regional Airport", "Black Hawk Township"), linked by
/// small words. The question's first word counts only when it is no opener (a question
/// word, auxiliary, determiner, preposition or imperative, capitalised only as the first
/// word): "Which Dodge City …" gives "Dodge City", "Toad Hall is a hall …" gives "Toad
/// Hall". A passage that answers a question about a named thing names it; passages that
/// share its words one by one ("Dodge City", "a regional airport") are about something
/// else. Names are returned normalised (see [`normalise`]).
pub fn given(question: &str) -> Vec<String> {
    // Capitals mark names only in a Latin-script question: a Chinese question's Latin
    // words ("iPhone SE 3的起售价") are product names and identifiers, which the
    // identifier rule already asks for.
    if question.chars().any(crate::text::is_han) {
        return Vec::new();
    }
    // A bracketed part disambiguates ("Power Of Women (Film)", "(1899–1977)"); passages
    // do not repeat it.
    let plain = crate::text::unbracketed(question);
    let words: Vec<&str> = plain.split_whitespace().collect();
    let capital = |w: &str| {
        let w = w.trim_start_matches(|c: char| !c.is_alphanumeric());
        w.chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
            && w.chars().any(|c| c.is_alphabetic())
    };
    let mut out = Vec::new();
    let opener = words.first().is_none_or(|w| {
        let w = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        OPENERS.split(' ').any(|o| o == w)
    });
    let mut i = usize::from(opener);
    while i < words.len() {
        if !capital(words[i]) {
            i += 1;
            continue;
        }
        // Extend over capitalised words, and over small words followed by one.
        let (start, mut end, mut capitals) = (i, i + 1, 1);
        while end < words.len() {
            let w = words[end];
            // Initials end with a full stop and no phrase ("D.P. Varma", "J. K. Rowling").
            let previous_ends_phrase = words[end - 1]
                .trim_end_matches(['\'', '’'])
                .ends_with([',', '?', '.', ';', ':', '!', ')'])
                && !initials(words[end - 1]);
            if previous_ends_phrase {
                break;
            }
            if capital(w) {
                capitals += 1;
                end += 1;
            } else if NAME_LINKS.contains(&w.to_lowercase().as_str())
                && words.get(end + 1).is_some_and(|n| capital(n))
            {
                end += 1;
            } else {
                break;
            }
        }
        if capitals >= 2 {
            let name = normalise(&words[start..end].join(" "));
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
        i = end;
    }
    out
}

/// Lower case without accents ("Tekezé" is "tekeze"), apostrophes and possessive `'s`
/// dropped, every other run of non-letters one space, padded with a space each side so
/// that `contains` matches whole words.
pub fn normalise(text: &str) -> String {
    use unicode_normalization::{char::is_combining_mark, UnicodeNormalization};
    let mut out = String::from(" ");
    let folded: String = text.nfd().filter(|c| !is_combining_mark(*c)).collect();
    let lower = folded
        .to_lowercase()
        .replace("'s ", " ")
        .replace("’s ", " ");
    let lower = lower
        .strip_suffix("'s")
        .or_else(|| lower.strip_suffix("’s"))
        .unwrap_or(&lower);
    for c in lower.chars() {
        if c == '\'' || c == '’' {
            continue;
        }
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    if out.trim().is_empty() {
        String::new()
    } else {
        out
    }
}

/// Whether `text` names `name` (both normalised by [`normalise`]): its words in
/// order, at most two other words between two of them, so that a name given
/// short is found where the text gives it whole ("Captain Miller" in "Captain John H.
/// Miller") while words scattered over a passage are not.
pub fn mentions(text: &str, name: &str) -> bool {
    let want: Vec<&str> = name.split_whitespace().collect();
    let have: Vec<&str> = text.split_whitespace().collect();
    let Some((first, rest)) = want.split_first() else {
        return true;
    };
    have.iter().enumerate().any(|(start, w)| {
        if w != first {
            return false;
        }
        let mut at = start;
        rest.iter().all(|next| {
            let mut window = have.iter().enumerate().skip(at + 1).take(NAME_GAP + 1);
            match window.find(|(_, h)| *h == next) {
                Some((found, _)) => {
                    at = found;
                    true
                }
                None => false,
            }
        })
    })
}

/// Words a text may put between two words of a name it gives short: a first name and
/// an initial ("Captain John H. Miller").
const NAME_GAP: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_capitalised_runs_without_the_first_word_or_brackets() {
        assert_eq!(
            given(
                "What is the population of the state where Dodge City Regional Airport is located?"
            ),
            vec![" dodge city regional airport "]
        );
        assert_eq!(
            given(
                "Which film has the director born later, Diary Of A Maniac or Return Of The Hero?"
            ),
            vec![" diary of a maniac ", " return of the hero "]
        );
        assert_eq!(
            given("When is Archduchess Maria Antonia Of Austria (1899–1977)'s father's birthday?"),
            vec![" archduchess maria antonia of austria "]
        );
        assert_eq!(
            given("Who played Captain Miller in Saving Private Ryan, and where?"),
            vec![" captain miller ", " saving private ryan "]
        );
        // One capitalised word is no name here; the first word is the sentence's, and
        // starts a name only when it is no question word or the like.
        assert!(given("Where was Gershwin born?").is_empty());
        assert!(given("Who Was born where?").is_empty());
        assert!(given("Name Two rivers of Spain").is_empty());
        assert_eq!(
            given("Scott Derrickson was born where?"),
            vec![" scott derrickson "]
        );
        assert_eq!(
            given("Toad Hall is a residential hall in what city?"),
            vec![" toad hall "]
        );
        // Initials end no phrase; "&" links the words of a name.
        assert_eq!(
            given("Which comedy produced by D.P. Varma had music by her?"),
            vec![" d p varma "]
        );
        assert!(mentions(
            &normalise("produced by D. P. Varma"),
            " d p varma "
        ));
        assert_eq!(
            given("Did J. K. Rowling write it? Yes."),
            vec![" j k rowling "]
        );
        assert_eq!(
            given("Simon & Simon starred which actor?"),
            vec![" simon simon "]
        );
        assert!(given("Was it Tom. Jerry ran").is_empty());
        assert!(given("2022年中国电影的总票房收入").is_empty());
        assert!(given("iPhone SE 3的起售价是多少？").is_empty());
        assert_eq!(normalise("The Hornets’ Nest's"), " the hornets nest ");
        assert_eq!(
            normalise("the Tekezé (Setit) River"),
            " the tekeze setit river "
        );
        assert_eq!(normalise("中国电影"), " 中国电影 ");
        let miller = &given("Who played Captain Miller in the film?")[0];
        assert!(mentions(&normalise("as Captain John H. Miller"), miller));
        assert!(!mentions(
            &normalise("the captain of the ship, Arthur Miller"),
            miller
        ));
        assert!(!mentions(&normalise("Miller, a captain"), miller));
        assert!(normalise("won The Girl Who Kicked the Hornets' Nest.")
            .contains(&given("Who directed The Girl Who Kicked the Hornets' Nest?")[0]));
    }

    #[test]
    fn hostile_questions_give_sane_names_or_none() {
        // Deeply nested and unbalanced brackets: what they hold never becomes a name.
        let nested = format!(
            "Who is {}Hidden Name{} Open Name?",
            "(".repeat(10_000),
            ")".repeat(10_000)
        );
        assert_eq!(given(&nested), vec![" open name "]);
        assert!(given(&format!(
            "Who is ))) Loose End {}Never Seen",
            "(".repeat(50)
        ))
        .contains(&" loose end ".to_string()));
        // One huge run of capitals is one name; control characters, NUL and lone
        // marks are separators, never part of it.
        let huge = format!("Who {}?", "Abc ".repeat(50_000));
        let names = given(&huge);
        assert_eq!(names.len(), 1);
        assert!(mentions(&normalise(&huge), &names[0]));
        let odd = "Who saw Big\u{0}Ben\u{7}Tower and \u{301}\u{301} Red\u{FFFD}Square?";
        for n in given(odd) {
            assert!(n.starts_with(' ') && n.ends_with(' '));
            assert!(
                n.trim().chars().all(|c| c.is_alphanumeric() || c == ' '),
                "{n:?}"
            );
        }
        for q in ["", "?", "Who", "Who ?", "(", "Who (Is) (", "’s 's"] {
            for n in given(q) {
                assert!(!n.trim().is_empty(), "{q:?}");
            }
        }
        // Words repeated everywhere: a near miss at every start, no match.
        let text = normalise(&"a b a b x ".repeat(20_000));
        assert!(!mentions(&text, " a b y "));
        assert!(mentions(&text, " a b a b "));
        assert!(mentions(&text, ""));
    }
}
