//! Numbers a question states single out what it asks about (issue 18, item 6), on real
//! e5 stores, no model:
//! - a passage that shares every word of the question but another year is no answer,
//!   and the trace says which numbers no passage writes; the passage that writes the
//!   year is;
//! - a date that changes no version ("the October 27, 1999 episode") names an event:
//!   a passage about another episode is no answer, the one about that episode is.

mod common;

use common::{ask_by_words, page_store, SEASIDE_PAGES};
use dossier_agent::AnswerStatus;

#[test]
fn a_passage_with_another_year_is_no_answer_and_the_one_with_the_year_is() {
    let question = "Which reggae singer from Kingston was born in 1952?";
    let other_year = (
        "lake",
        "Desmond Lake",
        "Desmond Lake is a reggae singer from Kingston who was born in 1948 and recorded with the Harbour Band.",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut pages = SEASIDE_PAGES.to_vec();
    pages.push(other_year);
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    let sq = &r.trace.sub_questions[0];
    assert!(!sq.evidence.is_empty(), "the singer's page was found");
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);
    assert!(r.citations.is_empty(), "{:?}", r.citations);
    let doubt = sq.doubt.as_deref().expect("the trace says why");
    assert!(
        doubt.contains("number") && doubt.contains("1952"),
        "{doubt}"
    );

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "moss",
        "Paul Moss",
        "Paul Moss, a reggae singer from Kingston, was born in 1952 and first sang in a church choir.",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert!(r.answer.contains("Paul Moss"), "{}", r.answer);
    assert!(r.citations.iter().any(|c| c.doc_id == "moss"));
    assert!(r.trace.sub_questions[0].doubt.is_none());
}

#[test]
fn a_date_that_changes_no_version_names_an_event_the_evidence_must_write() {
    let question = "Who was the guest star of the October 27, 1999 episode of Harbour Lights?";
    let other_episode = (
        "nov",
        "Harbour Lights episodes",
        "The guest star of the November 3, 1998 episode of Harbour Lights was Ann Rowe.",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut pages = SEASIDE_PAGES.to_vec();
    pages.push(other_episode);
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert!(r.trace.time.is_some(), "the date was read as time words");
    assert!(!r.trace.sub_questions[0].evidence.is_empty());
    assert_eq!(r.status, AnswerStatus::InsufficientEvidence, "{}", r.answer);

    let dir = tempfile::tempdir().unwrap();
    pages.push((
        "oct",
        "Harbour Lights, season 3",
        "The guest star of the October 27, 1999 episode of Harbour Lights was Tom Vale.",
    ));
    let engine = page_store(dir.path(), &pages);
    let r = ask_by_words(&engine, question);
    assert_eq!(r.status, AnswerStatus::Answered, "{}", r.answer);
    assert!(r.answer.contains("Tom Vale"), "{}", r.answer);
}
