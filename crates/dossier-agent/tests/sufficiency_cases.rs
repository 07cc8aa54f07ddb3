//! The sufficiency checks on data (tests/data/*.tsv): what a question asks for, and
//! whether a sentence holds a value of that kind, in both languages and several
//! genres. No embedder, store or model: these run in milliseconds.

use dossier_agent::sufficiency::{fills, Slot};

fn rows(file: &str) -> Vec<Vec<String>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn slot(name: &str) -> Slot {
    serde_json::from_value(serde_json::json!(name)).unwrap_or_else(|_| panic!("slot {name}"))
}

/// Failures are listed together, so that one run shows every case a change breaks.
fn check(file: &str, failures: Vec<String>, total: usize) {
    assert!(
        failures.is_empty(),
        "{} of {total} cases of {file} fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn what_a_question_asks_for() {
    let rows = rows("asked_slots.tsv");
    assert!(rows.len() >= 100, "{} cases", rows.len());
    let mut failures = vec![];
    for r in &rows {
        let (genre, want, q) = (&r[0], slot(&r[1]), &r[2]);
        let got = Slot::of(q);
        if got != want {
            failures.push(format!("  [{genre}] {q:?}: {got:?}, want {want:?}"));
        }
    }
    check("asked_slots.tsv", failures, rows.len());
}

#[test]
fn whether_a_sentence_fills_the_asked_slot() {
    let rows = rows("slot_fills.tsv");
    assert!(rows.len() >= 100, "{} cases", rows.len());
    let mut failures = vec![];
    for r in &rows {
        let (genre, s, want) = (&r[0], slot(&r[1]), r[2] == "yes");
        let sentence = r.get(3).map_or("", String::as_str);
        if fills(s, sentence) != want {
            failures.push(format!("  [{genre}] {s:?} {sentence:?}: want {want}"));
        }
    }
    check("slot_fills.tsv", failures, rows.len());
}

#[test]
fn both_tables_are_about_half_chinese_and_span_genres() {
    for file in ["asked_slots.tsv", "slot_fills.tsv"] {
        let rows = rows(file);
        let text_col = if file == "asked_slots.tsv" { 2 } else { 3 };
        let zh = rows
            .iter()
            .filter(|r| {
                r.get(text_col)
                    .is_some_and(|t| t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)))
            })
            .count();
        let share = zh as f64 / rows.len() as f64;
        assert!(
            (0.35..=0.65).contains(&share),
            "{file}: {zh} of {} Chinese",
            rows.len()
        );
        let genres: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        assert!(genres.len() >= 4, "{file}: genres {genres:?}");
    }
}

#[test]
fn the_decision_on_given_cosines() {
    use dossier_agent::sufficiency::{Candidate, Coverage, Decision, Question};
    let rows = rows("decisions.tsv");
    let mut failures = vec![];
    for r in &rows {
        let (genre, want, q) = (&r[0], &r[1], &r[2]);
        let parsed: Vec<(String, f32, usize)> = r[3]
            .split(" || ")
            .map(|c| {
                let mut p = c.rsplitn(3, '@');
                let rank = p.next().unwrap().parse().unwrap();
                let sim = p.next().unwrap().parse().unwrap();
                (p.next().unwrap().to_string(), sim, rank)
            })
            .collect();
        let candidates: Vec<Candidate> = parsed
            .iter()
            .map(|(s, sim, rank)| Candidate {
                sentence: s,
                title: "",
                document: s,
                similarity: Some(*sim),
                document_rank: *rank,
            })
            .collect();
        let v = Decision::CHOSEN.judge(&Question::new(q), &candidates);
        let got = match v.coverage {
            Coverage::Covered => "covered",
            Coverage::Partial => "partial",
            Coverage::Uncovered => "uncovered",
        };
        if got != want {
            failures.push(format!(
                "  [{genre}] {q:?}: {got} ({:?}), want {want}",
                v.doubt
            ));
        }
        // A refusal always says why; a covered verdict has no doubt.
        if (v.coverage == Coverage::Covered) == v.doubt.is_some() {
            failures.push(format!(
                "  [{genre}] {q:?}: coverage {got} with doubt {:?}",
                v.doubt
            ));
        }
        assert!((0.0..=1.0).contains(&v.confidence));
    }
    check("decisions.tsv", failures, rows.len());
    // No candidates, or no cosines (no embedder): uncovered, with the reason.
    let v = Decision::CHOSEN.judge(&Question::new("When?"), &[]);
    assert_eq!(v.coverage, Coverage::Uncovered);
    assert!(v.doubt.is_some());
}
