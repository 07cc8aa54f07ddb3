//! Issue 39: look-alike detection in the document view costs what the documents are, not
//! the square of a title group. Counts are asserted, never times.

use dossier_core::validity::MAX_PAIRS_PER_DOC;
use dossier_core::{Chunk, DocKind, DocumentVersion};
use dossier_store::catalog::{CommitBatch, NewDocument};
use dossier_store::{testing, Store};

const DIM: usize = 4;

fn doc(id: &str, title: &str, text: &str) -> NewDocument {
    let meta = DocumentVersion {
        doc_id: id.into(),
        version: "1".into(),
        title: title.into(),
        tenant: "t".into(),
        kb: None,
        acl: None,
        effective_from: None,
        effective_to: None,
        supersedes: None,
        supersedes_evidence: None,
        depends_on: vec![],
        source_uri: format!("test://{id}"),
        kind: DocKind::Markdown,
        digest: format!("{id}:{text}"),
    };
    let chunk = Chunk {
        chunk_id: Chunk::make_id(id, "1", 0),
        doc_id: id.into(),
        version: "1".into(),
        ordinal: 0,
        section: vec![],
        text: text.into(),
        byte_start: 0,
        byte_end: text.len(),
        source_uri: meta.source_uri.clone(),
        tenant: "t".into(),
        kb: None,
        acl: None,
        title: title.into(),
    };
    NewDocument {
        meta,
        chunks: vec![chunk],
        vectors: vec![vec![1.0, 0.0, 0.0, 0.0]],
    }
}

/// `n` words of a made-up vocabulary, different for every `seed`.
fn words(seed: usize, n: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let w = (x >> 33) % 5000;
            format!("{}{}", ["ka", "lo", "mi", "ne", "su"][(w % 5) as usize], w)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn open(dir: &std::path::Path) -> Store {
    Store::open(testing::location(dir), "hash:4", "hash-4", DIM).unwrap()
}

fn commit_all(store: &Store, docs: Vec<NewDocument>) {
    let mut docs = docs.into_iter().peekable();
    while docs.peek().is_some() {
        store
            .commit(CommitBatch {
                documents: docs.by_ref().take(256).collect(),
                ..Default::default()
            })
            .unwrap();
    }
}

/// 2,000 "Meeting notes i" of distinct content, committed 256 at a time as an ingest
/// does, are no look-alikes (before: 1,999,000 conflicts); the same series written from
/// one template are, but at most `MAX_PAIRS_PER_DOC` per version; and a view kept up
/// commit by commit (adds, deletes, a replaced version superseding another inside the
/// group) equals the one a reopen rebuilds.
#[test]
fn a_series_of_numbered_titles_is_not_quadratic_look_alikes_in_the_view() {
    let n = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    commit_all(
        &store,
        (0..n)
            .map(|i| {
                doc(
                    &format!("notes-{i}"),
                    &format!("Meeting notes {i}"),
                    &words(i, 80),
                )
            })
            .collect(),
    );
    assert_eq!(store.view().len(), n);
    assert_eq!(store.view().look_alikes().len(), 0);

    let template = "Meeting notes. Attendees: the whole team. Decisions: none recorded. \
                    Actions: follow up next week with the owners of each open item.";
    commit_all(
        &store,
        (0..n)
            .map(|i| doc(&format!("tpl-{i}"), &format!("Weekly sync {i}"), template))
            .collect(),
    );
    // Deletes, a replaced version and a supersession inside the large group: planned
    // again only around them, still equal to a rebuild.
    store
        .commit(CommitBatch {
            deletes: (0..n)
                .step_by(97)
                .map(|i| ("t".to_string(), format!("tpl-{i}"), None))
                .collect(),
            ..Default::default()
        })
        .unwrap();
    let mut successor = doc("tpl-5", "Weekly sync 5", template);
    successor.meta.supersedes = dossier_core::VersionRef::parse("tpl-6@1");
    successor.meta.effective_from = "2026-03-01".parse().ok();
    commit_all(&store, vec![successor]);
    let kept: Vec<String> = store
        .view()
        .look_alikes()
        .iter()
        .map(|(t, l)| format!("{t} {l:?}"))
        .collect();
    assert!(kept.len() >= n - 30, "{}", kept.len());
    assert!(kept.len() <= n * MAX_PAIRS_PER_DOC, "{}", kept.len());
    assert!(kept.iter().all(|l| l.contains("similar content")));
    let i = store.view().find("t", "tpl-7", "1").unwrap();
    assert!(!store.view().look_alikes_at(i).is_empty());
    drop(store);
    let rebuilt: Vec<String> = open(dir.path())
        .view()
        .look_alikes()
        .iter()
        .map(|(t, l)| format!("{t} {l:?}"))
        .collect();
    assert_eq!(kept, rebuilt);
}
