//! The relation a question asks for must be said by its evidence (issue 18, item 6), on
//! real e5 stores, no model:
//! - "… a soap opera created by who?": pages about the soap opera's characters share every
//!   other word and are no answer, and the trace names the relation; a page that says the
//!   character was created without saying by whom is none either; a page that says who
//!   created it is;
//! - the same in Chinese (由谁制造);
//! - a name given with initials ("D.P. Varma") or joined by "&" ("Simon & Simon") must be
//!   named by the evidence, like any other name;
//! - a death's date comes from a sentence that says the death (or a life's span);
//! - a Chinese question's answer comes from a document that says the subject it opens
//!   with (圣体堂区, not 圣保罗堂区).

mod common;

use common::{ask_by_words, page_store, SEASIDE_PAGES, SEASIDE_PAGES_ZH};
use dossier_agent::{AnswerStatus, AskResponse};

type Pages<'a> = [(&'a str, &'a str, &'a str)];

/// Asks `question` of a store of `pages`: its evidence was found, and it abstains with
/// nothing cited. Gives the trace's doubt.
fn abstains(pages: &Pages, question: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let r = ask_by_words(&page_store(dir.path(), pages), question);
    let sq = &r.trace.sub_questions[0];
    assert!(!sq.evidence.is_empty(), "{question}: nothing was found");
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.citations.is_empty(), "{:?}", r.citations);
    sq.doubt.clone().unwrap_or_default()
}

/// Asks `question` of a store of `pages`: it is answered, saying `says`. Gives the
/// response.
fn answers(pages: &Pages, question: &str, says: &str) -> AskResponse {
    let dir = tempfile::tempdir().unwrap();
    let r = ask_by_words(&page_store(dir.path(), pages), question);
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.answer.contains(says), "{}", r.answer);
    r
}

#[test]
fn the_first_hop_without_the_asked_relation_is_no_answer() {
    let question =
        "Mara Quill is a fictional character from an Australian soap opera created by who?";
    let mut pages = SEASIDE_PAGES.to_vec();
    pages.push((
        "quill",
        "Mara Quill",
        "Mara Quill is a fictional character from the Australian soap opera \"Harbour Lane\", played by Jo Vance.",
    ));
    pages.push((
        "quill-family",
        "Quill family",
        "The Quill family are fictional characters from the Australian soap opera \"Harbour Lane\"; Mara joined in 2009.",
    ));
    let doubt = abstains(&pages, question);
    assert!(
        doubt.contains("relation") && doubt.contains("creat"),
        "{doubt}"
    );
    // A page that says the character was created, not by whom (a passive without its
    // agent), says no more.
    pages.push((
        "quill-new",
        "The new Quills",
        "The character Mara Quill was created as part of a new generation of the Quill family.",
    ));
    let doubt = abstains(&pages, question);
    assert!(doubt.contains("creat"), "{doubt}");
    pages.push((
        "lane",
        "Harbour Lane",
        "Harbour Lane is an Australian soap opera created by Ned Ashby, first broadcast in 1985.",
    ));
    let r = answers(&pages, question, "Ned Ashby");
    assert!(r
        .trace
        .sub_questions
        .iter()
        .all(|s| s.doubt.as_deref().is_none_or(|d| !d.contains("relation"))));
}

#[test]
fn a_chinese_question_needs_the_verb_after_who() {
    let question = "星河三号通信卫星是由谁制造的？";
    let mut pages = SEASIDE_PAGES_ZH.to_vec();
    pages.push((
        "xinghe",
        "星河三号",
        "星河三号通信卫星由长征火箭于2006年10月发射升空，是一颗地球同步轨道通信卫星。",
    ));
    let doubt = abstains(&pages, question);
    assert!(doubt.contains("制造"), "{doubt}");
    pages.push((
        "maker",
        "星河三号的研制",
        "星河三号通信卫星由北辰空间公司制造，设计寿命十五年。",
    ));
    answers(&pages, question, "北辰空间公司");
}

#[test]
fn names_with_initials_or_an_ampersand_must_be_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut pages = SEASIDE_PAGES.to_vec();
    pages.push((
        "comedy",
        "Nalla Roju",
        "Nalla Roju is a 1988 Telugu comedy film produced by K. Rao, with music by Sri Devi.",
    ));
    pages.push((
        "detective",
        "Martin Vale",
        "Martin Vale is an American television and movie actor, born in Ohio in 1950.",
    ));
    let engine = page_store(dir.path(), &pages);
    for (question, name) in [
        (
            "Which 1988 Telugu comedy produced by D.P. Varma had music by Sri Devi?",
            "d p varma",
        ),
        (
            "Hart & Vale starred which television and movie actor from the US?",
            "hart vale",
        ),
    ] {
        let r = ask_by_words(&engine, question);
        assert_eq!(
            r.status,
            AnswerStatus::InsufficientEvidence,
            "{question}: {}",
            r.answer
        );
        let sq = &r.trace.sub_questions[0];
        let doubt = sq.doubt.as_deref().unwrap_or("");
        assert!(
            doubt.contains(name),
            "{question}: {doubt} {:?}",
            sq.evidence
        );
    }

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "navvu",
        "Navvu",
        "Navvu is a 1988 Telugu comedy film produced by D. P. Varma, with music by Sri Devi.",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(
        &engine,
        "Which 1988 Telugu comedy produced by D.P. Varma had music by Sri Devi?",
    );
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.answer.contains("Navvu"), "{}", r.answer);
}

#[test]
fn a_death_date_is_answered_only_by_a_sentence_that_says_the_death() {
    let question = "The harbour master of Norport was Tomas Reyn, who died on which date?";
    let mut pages = SEASIDE_PAGES.to_vec();
    pages.push((
        "reyn",
        "Tomas Reyn",
        "Tomas Reyn took the post of harbour master of Norport on 18 May 1931. \
         When Tomas Reyn died in 1975, the harbour flew its flags at half mast.",
    ));
    let doubt = abstains(&pages, question);
    assert!(doubt.contains("death"), "{doubt}");
    // A life's span in brackets gives the day of the death.
    pages.push((
        "reyn-life",
        "Life of Tomas Reyn",
        "Tomas Reyn (2 March 1901 – 5 April 1975) was harbour master of Norport for forty years.",
    ));
    answers(&pages, question, "5 April 1975");
}

#[test]
fn a_chinese_answer_comes_from_a_document_that_says_the_subject_the_question_opens_with() {
    // 圣保罗堂区's page shares 堂区 and 成立于 with the question: most of its pairs, and
    // another parish.
    let question = "圣体堂区成立于哪一年？";
    let mut pages = SEASIDE_PAGES_ZH.to_vec();
    pages.push((
        "paul",
        "圣保罗堂区",
        "圣保罗堂区成立于1824年，是河口一带第一个新教堂会。",
    ));
    let doubt = abstains(&pages, question);
    assert!(doubt.contains("“圣体”"), "{doubt}");
    pages.push((
        "corpus",
        "圣体堂区",
        "圣体堂区位于城北。该堂区成立于1905年，有教堂一座。",
    ));
    answers(&pages, question, "1905");
}
