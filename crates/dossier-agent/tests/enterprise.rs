//! Every case of ../shared/enterprise-dev/cases.yaml (a logistics company's policies,
//! runbooks, contracts, minutes and chat, Chinese and English), with no model, on the
//! real e5 store. The test fails on a case the runner cannot read or check, and on a
//! gap line (a refused part of an answer) that does not say why; the figures
//! (pass, answerable answered and correct, unanswerable declined, by kind and language)
//! are printed, and their bars are checked by `dossier eval --cases` in BENCHMARKS.md,
//! not here: the set is the development set the answer rules are chosen on.

mod common;

use dossier_agent::cases::{run_case, CaseReport};

#[test]
fn every_enterprise_case_runs_and_is_reported_by_kind_and_language() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_enterprise(dir.path());
    let text = std::fs::read_to_string(common::enterprise().join("cases.yaml")).unwrap();
    let cases = dossier_agent::cases::parse_cases(&text).unwrap();
    assert!(cases.len() >= 134, "cases.yaml has {} cases", cases.len());
    let mut report = CaseReport::default();
    let mut unexplained = Vec::new();
    for case in &cases {
        let o = run_case(&engine, None, case).expect("a well-formed case");
        // A refusal without a reason is a bug: every gap line ends in its reason.
        for g in &o.response.gaps {
            if !g.trim_end().ends_with([')', '）']) {
                unexplained.push((o.id.clone(), g.clone()));
            }
        }
        eprintln!(
            "{:<44} {:<14} {:<3} {:<22}{}",
            o.id,
            o.kind,
            o.lang,
            format!("{:?}", o.response.status),
            if o.failures.is_empty() {
                String::new()
            } else {
                let answer: String = o.response.answer.chars().take(300).collect();
                format!("  FAILED: {:?}\n    answer: {answer:?}", o.failures)
            }
        );
        // DOSSIER_CASE_TRACE=1 prints each failed case's sub-questions, route and pool.
        if !o.failures.is_empty() && std::env::var_os("DOSSIER_CASE_TRACE").is_some() {
            let t = &o.response.trace;
            eprintln!(
                "    route: {}\n    sub-questions: {}\n    pool: {}",
                serde_json::to_string(&t.route).unwrap(),
                serde_json::to_string(&t.sub_questions).unwrap(),
                serde_json::to_string(&t.rerank).unwrap()
            );
        }
        // DOSSIER_CASE_FIT=1 prints one line per sub-question judged by the
        // sufficiency decision: the data its weights were chosen on.
        if std::env::var_os("DOSSIER_CASE_FIT").is_some() {
            for sq in &o.response.trace.sub_questions {
                if let Some(f) = &sq.fit {
                    eprintln!(
                        "FIT\t{}\t{}\t{:?}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                        o.id,
                        serde_json::to_string(&o.expected).unwrap(),
                        f.slot,
                        f.features.map_or(0.0, |x| x.similarity),
                        f.features.map_or(0.0, |x| x.words),
                        f.features.map_or(0.0, |x| x.document_words),
                        f.features.is_some_and(|x| x.same_language),
                        f.features.is_some_and(|x| x.slot_filled),
                        f.sentence
                            .as_deref()
                            .unwrap_or("")
                            .replace(['\n', '\t'], " "),
                        // Covered by the words judge (not by this decision).
                        sq.covered && sq.judged_by.as_deref() != Some("fit"),
                        f.features.map_or(0.0, |x| x.lead),
                    );
                    let first: Vec<&str> = o
                        .response
                        .trace
                        .rerank
                        .after
                        .iter()
                        .filter(|r| sq.evidence.contains(&r.chunk_id))
                        .map(|r| r.chunk_id.as_str())
                        .take(3)
                        .collect();
                    eprintln!(
                        "FITDOC\t{}\t{}\t{}\t{}",
                        o.id,
                        f.chunk_id.as_deref().unwrap_or(""),
                        first.join(" "),
                        serde_json::to_string(&case["expect"]["cites_all"]).unwrap()
                    );
                }
            }
        }
        report.add(&o);
    }
    eprintln!("{}", report.table());
    assert!(
        unexplained.is_empty(),
        "gaps without a reason: {unexplained:#?}"
    );
    // Every case is counted once overall and once under its kind and its language.
    assert_eq!(report.all.cases, cases.len());
    assert_eq!(
        report.by_kind.values().map(|t| t.cases).sum::<usize>(),
        cases.len()
    );
    assert_eq!(
        report.all.answerable + report.all.unanswerable,
        cases.len(),
        "every case names the status it expects"
    );
}
