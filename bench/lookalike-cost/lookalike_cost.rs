//! Look-alike detection alone: N versions of one tenant sharing one title stem, through
//! `dossier_core::validity::look_alikes` (an API both the code before issue 39 and after
//! it have). Copied into `crates/dossier-core/examples/` of the tree measured by
//! `bench/lookalike-cost/run.sh`. Prints the workload, N, pairs found and seconds.
use std::collections::HashSet;
use std::time::Instant;

use dossier_core::validity::{look_alikes, plan_validity};
use dossier_core::{DocKind, DocumentVersion};

fn main() {
    let mut args = std::env::args().skip(1);
    let workload = args.next().expect("series|versions|same");
    let n: usize = args.next().expect("N").parse().unwrap();
    let versions: Vec<DocumentVersion> = (0..n)
        .map(|i| DocumentVersion {
            doc_id: format!("doc-{i}"),
            version: "1".into(),
            title: match workload.as_str() {
                "series" => format!("Meeting notes {i}"),
                "versions" => format!("Meeting notes V{i}"),
                "same" => "Meeting notes".into(),
                w => panic!("unknown workload {w}"),
            },
            tenant: "t".into(),
            kb: None,
            acl: None,
            effective_from: None,
            effective_to: None,
            supersedes: None,
            supersedes_evidence: None,
            depends_on: vec![],
            source_uri: String::new(),
            kind: DocKind::Markdown,
            digest: String::new(),
        })
        .collect();
    let plan = plan_validity(&versions);
    let t = Instant::now();
    let pairs = look_alikes(&versions, &plan, &HashSet::new());
    println!(
        "{workload} n={n} pairs={} secs={:.3}",
        pairs.len(),
        t.elapsed().as_secs_f64()
    );
}
