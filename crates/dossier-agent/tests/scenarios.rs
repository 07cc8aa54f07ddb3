//! Every case of ../shared/scenarios/scenarios.yaml, with no model configured (the
//! deterministic planner and the extractive answer), on the real e5 store.

mod common;

#[test]
fn every_scenario_case_holds_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::open_scenarios(dir.path());
    let cases = common::cases();
    assert!(
        cases.len() >= 19,
        "scenarios.yaml has {} cases",
        cases.len()
    );
    let mut failed = Vec::new();
    for case in &cases {
        // A case with steps changes the store: it gets one of its own.
        let own;
        let engine = if case.get("steps").is_some() {
            own = (tempfile::tempdir().unwrap(),);
            &common::open_scenarios(own.0.path())
        } else {
            &engine
        };
        let o = common::run_case(engine, None, case);
        eprintln!(
            "{:<28} {:<22} {} steps, {} citations{}",
            o.id,
            format!("{:?}", o.response.status),
            o.response.trace.steps.len(),
            o.response.citations.len(),
            if o.failures.is_empty() {
                String::new()
            } else {
                format!("  FAILED: {:?}", o.failures)
            }
        );
        if !o.failures.is_empty() {
            failed.push((o.id, o.failures, o.response.answer));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
