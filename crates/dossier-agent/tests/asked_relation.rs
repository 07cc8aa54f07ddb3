//! The relation a question asks for must be said by its evidence (issue 18, item 6), on
//! real e5 stores, no model:
//! - "… a soap opera created by who?": pages about the soap opera's characters share every
//!   other word and are no answer, and the trace names the relation; a page that says who
//!   created it is;
//! - the same in Chinese (由谁制造);
//! - a name given with initials ("D.P. Varma") or joined by "&" ("Simon & Simon") must be
//!   named by the evidence, like any other name.

mod common;

use common::{ask_by_words, page_store, SEASIDE_PAGES, SEASIDE_PAGES_ZH};
use dossier_agent::AnswerStatus;

#[test]
fn the_first_hop_without_the_asked_relation_is_no_answer() {
    let question =
        "Mara Quill is a fictional character from an Australian soap opera created by who?";
    let dir = tempfile::tempdir().unwrap();
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
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    let sq = &r.trace.sub_questions[0];
    assert!(!sq.evidence.is_empty(), "the character's page was found");
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.citations.is_empty(), "{:?}", r.citations);
    let doubt = sq.doubt.as_deref().expect("the trace says why");
    assert!(
        doubt.contains("relation") && doubt.contains("creat"),
        "{doubt}"
    );

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "lane",
        "Harbour Lane",
        "Harbour Lane is an Australian soap opera created by Ned Ashby, first broadcast in 1985.",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.answer.contains("Ned Ashby"), "{}", r.answer);
    assert!(r
        .trace
        .sub_questions
        .iter()
        .all(|s| s.doubt.as_deref().is_none_or(|d| !d.contains("relation"))));
}

#[test]
fn a_chinese_question_needs_the_verb_after_who() {
    let question = "星河三号通信卫星是由谁制造的？";
    let dir = tempfile::tempdir().unwrap();
    let mut pages = SEASIDE_PAGES_ZH.to_vec();
    pages.push((
        "xinghe",
        "星河三号",
        "星河三号通信卫星由长征火箭于2006年10月发射升空，是一颗地球同步轨道通信卫星。",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert!(!r.trace.sub_questions[0].evidence.is_empty());
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    let doubt = r.trace.sub_questions[0].doubt.as_deref().unwrap_or("");
    assert!(doubt.contains("制造"), "{doubt}");

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "maker",
        "星河三号的研制",
        "星河三号通信卫星由北辰空间公司制造，设计寿命十五年。",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert_ne!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.answer.contains("北辰空间公司"), "{}", r.answer);
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
