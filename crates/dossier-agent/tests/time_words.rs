//! Time in the question, on the shared scenario corpus (real e5 store, no model): the
//! scenario questions that depend on a version, asked again with the date in their own
//! words instead of `as_of`, are answered from the version in force then; an explicit
//! as-of date wins over the words; the answer and the trace say which date was used.

mod common;

use chrono::NaiveDate;
use dossier_agent::AskResponse;

fn d(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn ask(
    engine: &dossier_engine::Engine,
    question: &str,
    now: &str,
    as_of: Option<&str>,
) -> AskResponse {
    common::ask(
        engine,
        None,
        "u7",
        question,
        common::Clock {
            now: d(now),
            as_of: as_of.map(d),
            mode: None,
        },
        None,
    )
}

/// The versions of `doc` the answer cites.
fn versions(r: &AskResponse, doc: &str) -> Vec<String> {
    let mut v: Vec<String> = r
        .citations
        .iter()
        .filter(|c| c.doc_id == doc)
        .map(|c| c.version.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn scenario_questions_with_time_words_are_answered_from_the_version_then_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    // (question, now, doc, version expected, date the words give, whether that date
    // admits other versions than today: only then does the answer state it)
    let cases = [
        // api-auth-as-of, with the date in the words instead of as_of.
        (
            "2025 年 6 月 API 的认证方式是什么？",
            "2026-11-30",
            "api-auth",
            "1.0",
            "2025-06-30",
            true,
        ),
        (
            "去年 API 的认证方式是什么？",
            "2026-11-30",
            "api-auth",
            "1.0",
            "2025-12-31",
            true,
        ),
        (
            "截至 2025 年，API 的认证方式是什么？",
            "2026-11-30",
            "api-auth",
            "1.0",
            "2025-12-31",
            true,
        ),
        // api-auth-current: words that name the present keep today's version.
        (
            "本季度 API 的认证方式是什么？",
            "2026-11-30",
            "api-auth",
            "2.0",
            "2026-11-30",
            false,
        ),
        // return-before-v2: V2 took effect on 2026-09-01; last month was August.
        (
            "按上个月的耳机退货政策，没拆封的耳机能无理由退货吗？",
            "2026-09-20",
            "headphone-policy",
            "V1",
            "2026-08-31",
            true,
        ),
        (
            "按本月的耳机退货政策，没拆封的耳机能无理由退货吗？",
            "2026-09-20",
            "headphone-policy",
            "V2",
            "2026-09-20",
            false,
        ),
    ];
    let mut failed = Vec::new();
    for (question, now, doc, version, at, changed) in cases {
        let r = ask(&engine, question, now, None);
        let time = r.trace.time.clone();
        let cited = versions(&r, doc);
        let ok = cited == [version]
            && time
                .as_ref()
                .is_some_and(|t| t.applied && t.as_of == d(at) && t.changed == changed)
            && r.answer.contains(&format!("按 {at} 判断")) == changed;
        eprintln!(
            "{question} → {cited:?} {:?}",
            time.as_ref().map(|t| t.as_of)
        );
        if !ok {
            failed.push((question, cited, time, r.answer));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Words and flag are one thing: a question with time words gets the answer (status,
/// citations, conclusions) that it gets with the same date given as `as_of`, in either
/// language — the words only ever move the date.
#[test]
fn time_words_answer_as_the_as_of_flag_does() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    for (question, now) in [
        ("2025 年 6 月 API 的认证方式是什么？", "2026-11-30"),
        (
            "What was the API authentication method as of June 2025?",
            "2026-11-30",
        ),
        ("How do I call the payment API last quarter?", "2026-11-30"),
        ("上周订单 A125 的耳机没拆封，能无理由退货吗？", "2026-09-20"),
        (
            "按上个月的耳机退货政策，没拆封的耳机能无理由退货吗？",
            "2026-09-20",
        ),
    ] {
        let worded = ask(&engine, question, now, None);
        let t = worded.trace.time.clone().expect("time words found");
        let flagged = ask(&engine, question, now, Some(&t.as_of.to_string()));
        let view = |r: &AskResponse| {
            (
                r.status,
                r.citations
                    .iter()
                    .map(|c| c.chunk_id.clone())
                    .collect::<Vec<_>>(),
                r.conclusions
                    .iter()
                    .map(|c| c.statement.clone())
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(view(&worded), view(&flagged), "{question}");
        let flag_time = flagged.trace.time.expect("the words are recorded");
        assert!(t.applied && !flag_time.applied);
    }
}

#[test]
fn an_explicit_as_of_wins_over_the_words_and_the_trace_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let r = ask(
        &engine,
        "本季度 API 的认证方式是什么？",
        "2026-11-30",
        Some("2025-06-01"),
    );
    assert_eq!(versions(&r, "api-auth"), ["1.0"], "{:#?}", r.citations);
    let t = r.trace.time.expect("the words are still recorded");
    assert!(!t.applied);
    assert_eq!(t.words, "本季度");
    assert!(!r.answer.contains("按 2026-11-30 判断"), "{}", r.answer);

    // A question without time words has no time in its trace and no note.
    let r = ask(&engine, "当前 API 的认证方式是什么？", "2026-11-30", None);
    assert!(r.trace.time.is_none());
    assert_eq!(versions(&r, "api-auth"), ["2.0"]);
    assert!(!r.answer.contains("判断："), "{}", r.answer);
    // Nor does a date that admits nothing else (an event's date in an undated corpus).
    let r = ask(
        &engine,
        "2026 年 11 月 28 日 API 的认证方式是什么？",
        "2026-11-30",
        None,
    );
    let t = r.trace.time.expect("the words are recorded");
    assert!(t.applied && !t.changed, "{t:?}");
    assert!(!r.answer.contains("判断："), "{}", r.answer);
}

/// The words only move the date versions are judged at: identity is untouched, and a
/// refused record reads the same whatever time the question names.
#[test]
fn time_words_never_widen_what_a_caller_reads() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let mine = common::ask(
        &engine,
        None,
        "u8",
        "去年 3 月订单 A123 的耳机已拆封，能退吗？",
        common::Clock {
            now: d("2026-09-20"),
            as_of: None,
            mode: None,
        },
        None,
    );
    let missing = common::ask(
        &engine,
        None,
        "u8",
        "去年 3 月订单 Z999 的耳机已拆封，能退吗？",
        common::Clock {
            now: d("2026-09-20"),
            as_of: None,
            mode: None,
        },
        None,
    );
    assert_eq!(mine.status, dossier_agent::AnswerStatus::Unavailable);
    assert_eq!(
        mine.answer.replace("A123", "X"),
        missing.answer.replace("Z999", "X")
    );
    assert!(mine.citations.is_empty());
}

/// The period the words name is put against the dates of the records read: each is
/// traced, and a record dated outside the period is said in the answer (the question may
/// mean another record). Words that frame the rules in force ("2025 年的版本") name no
/// period of events, and an explicit as-of date leaves the records alone too.
#[test]
fn records_dated_outside_the_period_the_question_names_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    // A123 was signed 2026-09-10, A124 2026-08-25; the business clock is 2026-09-20.
    let now = "2026-09-20";
    let placed = |r: &AskResponse| {
        r.trace
            .time
            .as_ref()
            .map(|t| {
                t.records
                    .iter()
                    .map(|p| {
                        (
                            p.record.clone(),
                            p.field.clone(),
                            p.date.to_string(),
                            p.within,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let a123 = |within| {
        vec![(
            "orders/A123".to_string(),
            "signed_at".to_string(),
            "2026-09-10".to_string(),
            within,
        )]
    };

    let r = ask(&engine, "上周签收的订单 A123 能退吗？", now, None);
    assert_eq!(placed(&r), a123(true), "{:#?}", r.trace.time);
    assert!(!r.answer.contains("不在问题所说的"), "{}", r.answer);

    let r = ask(&engine, "上个月签收的订单 A123 能退吗？", now, None);
    assert_eq!(placed(&r), a123(false), "{:#?}", r.trace.time);
    assert!(
        r.answer
            .contains("记录 orders/A123 的 signed_at 为 2026-09-10，不在问题所说的“上个月”（2026-08-01 至 2026-08-31）之内"),
        "{}",
        r.answer
    );

    let r = ask(
        &engine,
        "Order A124 was signed for last month and is unopened: can it be returned?",
        now,
        None,
    );
    assert_eq!(
        placed(&r),
        vec![(
            "orders/A124".to_string(),
            "signed_at".to_string(),
            "2026-08-25".to_string(),
            true
        )]
    );
    assert!(!r.answer.contains("outside “"), "{}", r.answer);
    let r = ask(
        &engine,
        "Order A124 arrived this week and is unopened: can it be returned?",
        now,
        None,
    );
    assert!(
        r.answer.contains("(Record orders/A124: signed_at is 2026-08-25, outside “this week” (2026-09-14 to 2026-09-20) in the question.)"),
        "{}",
        r.answer
    );

    // The rules in force, not a time of events: versions move, records are not placed.
    let r = ask(&engine, "按 2025 年的版本，订单 A123 能退吗？", now, None);
    assert!(r.trace.time.as_ref().is_some_and(|t| t.applied));
    assert!(placed(&r).is_empty(), "{:#?}", r.trace.time);
    // An explicit date wins over the words: nothing placed either.
    let r = ask(
        &engine,
        "上个月签收的订单 A123 能退吗？",
        now,
        Some("2026-09-20"),
    );
    assert!(placed(&r).is_empty(), "{:#?}", r.trace.time);
    assert!(!r.answer.contains("不在问题所说的"), "{}", r.answer);
}
