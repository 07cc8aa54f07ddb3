//! Follow-up questions in a conversation ("年假有几天？" then "那去年呢？"; "how many
//! remote days do I get?" then "and under the old policy?"): a short question that
//! opens with a word pointing back, or (Chinese) ends in 呢 with no asking word of its
//! own, is read together with the asker's previous question. Only the asker's own
//! earlier questions are read: an assistant turn a client sends could say anything.

use std::sync::LazyLock;

use regex::Regex;

/// Words a follow-up opens with, both languages.
static OPENS_BACK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?:那么|那如果|那要是|那|如果是|要是|换成|还有|另外|and (?:what about|how about|if|for|in|under|at)?|what about|how about|and|what if|same (?:for|question for))\b?\s*")
        .expect("follow-up opener")
});

/// Longest follow-up, in characters (Chinese) or words (others): a longer question
/// stands on its own.
const MAX_HAN_CHARS: usize = 14;
const MAX_WORDS: usize = 7;

/// The question to ask for `last`, given the asker's earlier questions (oldest first):
/// `last` itself, or — when it is a follow-up — what it adds followed by the previous
/// question (the time words, names and conditions it adds then read as part of that
/// question; "那去年呢？" after "年假有几天？" asks "去年 年假有几天？").
pub fn resolve(earlier: &[&str], last: &str) -> String {
    let Some(previous) = earlier.iter().rev().find(|q| !q.trim().is_empty()) else {
        return last.to_string();
    };
    let t = last.trim();
    let han = t.chars().any(crate::text::is_han);
    let short = if han {
        t.chars().count() <= MAX_HAN_CHARS
    } else {
        t.split_whitespace().count() <= MAX_WORDS
    };
    let opener = OPENS_BACK.find(t).filter(|m| !m.as_str().trim().is_empty());
    let trailing_ne = han && t.trim_end_matches(['？', '?', '。']).ends_with('呢');
    if !short || (opener.is_none() && !trailing_ne) {
        return last.to_string();
    }
    // A short question asking something of its own ("那病假几天？") still leans on the
    // previous one for its subject; only its pointing-back words are dropped.
    let added = t[opener.map_or(0, |m| m.end())..]
        .trim()
        .trim_end_matches(['？', '?', '。', '.', '!', '！'])
        .trim_end_matches('呢')
        .trim();
    if added.is_empty() {
        return previous.trim().to_string();
    }
    format!("{added} {}", previous.trim())
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn follow_ups_are_read_with_the_previous_question_and_others_stand_alone() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["年假有几天？"], "那去年呢？", "去年 年假有几天？"),
            (&["年假有几天？"], "那 2024 年呢？", "2024 年 年假有几天？"),
            (
                &["出差住宿标准是多少？"],
                "北京呢？",
                "北京 出差住宿标准是多少？",
            ),
            (
                &["出差住宿标准是多少？"],
                "如果是经理呢？",
                "经理 出差住宿标准是多少？",
            ),
            (
                &["How many remote days do I get?"],
                "and under the old policy?",
                "the old policy How many remote days do I get?",
            ),
            (
                &["How many remote days do I get?"],
                "What about last year?",
                "last year How many remote days do I get?",
            ),
            (
                &["What is the hotel cap?"],
                "and in Beijing?",
                "Beijing What is the hotel cap?",
            ),
            (&["年假有几天？"], "那呢？", "年假有几天？"),
            // Stand-alone questions are not touched.
            (
                &["年假有几天？"],
                "病假要交什么证明？",
                "病假要交什么证明？",
            ),
            (
                &["What is the hotel cap?"],
                "Who approves a purchase above the department budget?",
                "Who approves a purchase above the department budget?",
            ),
            (&[], "那去年呢？", "那去年呢？"),
            (
                &["What is the hotel cap?"],
                "and what does the policy say about taxis at night after a late client dinner?",
                "and what does the policy say about taxis at night after a late client dinner?",
            ),
            (&["   "], "and Beijing?", "and Beijing?"),
        ];
        for (earlier, last, want) in cases {
            assert_eq!(resolve(earlier, last), *want, "{earlier:?} then {last:?}");
        }
    }
}
