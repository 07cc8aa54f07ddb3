use std::fs;
use std::path::{Path, PathBuf};

use dossier_core::{DocKind, VersionRef};
use dossier_ingest::{
    parse_corpus_jsonl, parse_file, parse_paths, IngestOptions, Item, Parsed, ParsedDocument,
    Problem,
};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared")
        .join(rel)
}

fn docs(p: &Parsed) -> Vec<&ParsedDocument> {
    p.items
        .iter()
        .filter_map(|i| match i {
            Item::Document(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn doc<'a>(p: &'a Parsed, id: &str, version: &str) -> &'a ParsedDocument {
    docs(p)
        .into_iter()
        .find(|d| d.meta.doc_id == id && d.meta.version == version)
        .unwrap_or_else(|| panic!("{id}@{version} not ingested"))
}

#[test]
fn scenarios_ingest_as_they_are() {
    let p = parse_paths(&[shared("scenarios")], &IngestOptions::default());
    assert!(p.problems.is_empty(), "{:#?}", p.problems);
    let tenant_docs = |t: &str| docs(&p).iter().filter(|d| d.meta.tenant == t).count();
    assert_eq!((tenant_docs("shop"), tenant_docs("acme")), (13, 1));

    let mut tables: Vec<_> = p
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Records(t) => Some((t.schema.table.as_str(), t.rows.len())),
            _ => None,
        })
        .collect();
    tables.sort();
    assert_eq!(tables, [("customers", 4), ("orders", 4), ("products", 2)]);
    let principals: usize = p
        .items
        .iter()
        .map(|i| match i {
            Item::Principals { principals, .. } => principals.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(principals, 6);

    let v2 = doc(&p, "headphone-policy", "V2");
    let labels: Vec<_> = v2.chunks.iter().map(|c| c.section_label()).collect();
    assert_eq!(
        labels,
        [
            "第 1 条 无理由退货",
            "第 2 条 质量问题检测",
            "第 3 条 拆封例外",
            "第 4 条 修订说明"
        ]
    );
    assert_eq!(
        v2.chunks[0].section,
        ["耳机售后政策 V2", "第 1 条 无理由退货"]
    );
    assert_eq!(v2.meta.supersedes, VersionRef::parse("headphone-policy@V1"));
    assert_eq!(
        v2.meta.supersedes_evidence.as_deref(),
        Some("本版第 4 条修订说明")
    );
    assert_eq!(v2.meta.effective_from, "2026-09-01".parse().ok());
    for c in &v2.chunks {
        assert_eq!(c.chunk_id, format!("headphone-policy@V2#{}", c.ordinal));
        assert_eq!(
            (c.tenant.as_str(), c.kb.as_deref()),
            ("shop", Some("aftersales"))
        );
        assert_eq!(c.source_uri, "policy://aftersales/headphone/v2");
        assert_eq!(c.title, "耳机售后政策");
    }
    assert!(v2.chunks[3]
        .text
        .contains("签收日早于生效日的订单仍按 V1 处理"));

    // Chunk text is exactly the span of the body after the front matter.
    let src = fs::read_to_string(shared("scenarios/shop/docs/headphone-policy-v2.md")).unwrap();
    let body = &src[src.match_indices("---\n").nth(1).unwrap().0 + 4..];
    for c in &v2.chunks {
        assert_eq!(&body[c.byte_start..c.byte_end], c.text);
    }

    assert_eq!(doc(&p, "api-auth", "1.0").meta.version, "1.0");
    let auth2 = doc(&p, "api-auth", "2.0");
    assert_eq!(auth2.meta.supersedes, VersionRef::parse("api-auth@1.0"));
    let notice = doc(&p, "supplier-notice-S-8", "v1");
    assert_eq!(notice.meta.acl, Some(vec!["supply-chain".to_string()]));
    assert!(notice.chunks.iter().all(|c| c.acl == notice.meta.acl));
    assert_eq!(
        doc(&p, "incident-4821", "v1").meta.acl,
        Some(vec!["sre".into(), "support".into()])
    );
    assert_eq!(doc(&p, "payment-api", "2.0").meta.depends_on, ["api-auth"]);
    assert_eq!(doc(&p, "quality-policy", "v1").meta.acl, None);
    assert!(docs(&p).iter().all(|d| !d.chunks.is_empty()));
}

#[test]
fn same_input_same_digest() {
    let f = shared("scenarios/shop/docs/api-auth-v2.md");
    let opts = IngestOptions::default();
    let digest = |o: &IngestOptions| match &parse_file(&f, o).0[0] {
        Item::Document(d) => d.meta.digest.clone(),
        _ => unreachable!(),
    };
    assert_eq!(digest(&opts), digest(&opts));
    let smaller = IngestOptions {
        max_chunk_chars: 50,
        ..opts.clone()
    };
    assert_ne!(digest(&opts), digest(&smaller));
}

fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn problem_for<'a>(problems: &'a [Problem], file: &str) -> &'a Problem {
    problems
        .iter()
        .find(|p| p.path.ends_with(file))
        .unwrap_or_else(|| panic!("no problem for {file}: {problems:#?}"))
}

#[test]
fn bad_inputs_are_problems_and_the_rest_lands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "good.md",
        "---\nid: good\nversion: 1.0\n---\n# Good\n\nFine text.\n",
    );
    write(d, "plain.txt", "Just text.\n");
    write(
        d,
        "page.html",
        "<html><head><title>Page</title><script>var x;</script></head><body><h1>Top</h1><p>Hello <b>world</b>.</p><h2>Sub</h2><p>More.</p></body></html>",
    );
    write(
        d,
        "broken.md",
        "---\nid: broken\ntitle: [unclosed\nkb: x\n---\nbody\n",
    );
    write(d, "no-id.md", "---\ntitle: nothing\n---\nbody\n");
    write(
        d,
        "bad-date.md",
        "---\nid: d\neffective_from: 2026-13-01\n---\nbody\n",
    );
    write(d, "latin1.txt", b"line one\nline two caf\xe9\n");
    write(d, "big.txt", "x".repeat(2000));
    write(
        d,
        "t/orders.schema.yaml",
        "table: orders\ntenant: shop\nkey: order_id\n",
    );
    write(
        d,
        "t/orders.jsonl",
        "{\"order_id\":\"A1\"}\n{\"owner\":\"u7\"}\n{\"order_id\":42}\nnot json\n",
    );
    write(
        d,
        "u/items.schema.yaml",
        "table: items\ntenant: shop\nkey: id\nfields:\n  id: string\n  price: money\n",
    );
    write(d, "u/items.jsonl", "{\"id\":\"1\"}\n");
    write(d, "v/nokey.schema.yaml", "table: nokey\ntenant: shop\n");
    write(d, "v/nokey.jsonl", "{\"id\":\"1\"}\n");
    write(d, "notes.yaml", "ignored: true\n");

    let opts = IngestOptions {
        max_file_bytes: 1000,
        ..IngestOptions::default()
    };
    let p = parse_paths(&[d.to_path_buf(), d.join("missing")], &opts);
    let show: Vec<String> = p.problems.iter().map(|p| p.to_string()).collect();

    let ids: Vec<_> = docs(&p).iter().map(|d| d.meta.doc_id.as_str()).collect();
    assert_eq!(ids, ["good", "page", "plain"], "{show:#?}");
    assert_eq!(doc(&p, "good", "1.0").meta.title, "Good");
    let page = doc(&p, "page", "1");
    assert_eq!(page.meta.title, "Page");
    assert_eq!(page.meta.kind, DocKind::Html);
    let sections: Vec<_> = page.chunks.iter().map(|c| c.section.clone()).collect();
    assert_eq!(sections, [vec!["Top"], vec!["Top", "Sub"]]);
    assert_eq!(page.chunks[1].text, "## Sub\n\nMore.");
    assert!(page.chunks[0].text.contains("Hello world."));
    assert!(!page.chunks[0].text.contains("var x"));

    let broken = problem_for(&p.problems, "broken.md");
    // The unclosed list opens on line 3; the parser notices on line 4.
    assert_eq!(broken.line, Some(4), "{broken}");
    assert!(broken.to_string().contains("broken.md:4: "), "{broken}");
    assert!(broken.message.contains("line 3 column 8"), "{broken}");
    assert!(problem_for(&p.problems, "no-id.md").message.contains("id"));
    assert_eq!(problem_for(&p.problems, "bad-date.md").line, Some(3));
    assert_eq!(problem_for(&p.problems, "latin1.txt").line, Some(2));
    assert!(problem_for(&p.problems, "big.txt")
        .message
        .contains("oversized"));
    let price = problem_for(&p.problems, "items.schema.yaml");
    assert!(price.message.contains("money"), "{price}");
    assert_eq!(price.line, Some(6));
    assert!(problem_for(&p.problems, "nokey.schema.yaml")
        .message
        .contains("key"));
    assert!(problem_for(&p.problems, "missing").line.is_none());

    let order_problems: Vec<_> = p
        .problems
        .iter()
        .filter(|p| p.path.ends_with("orders.jsonl"))
        .map(|p| p.line)
        .collect();
    assert_eq!(order_problems, [Some(2), Some(4)], "{show:#?}");
    let tables: Vec<_> = p
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Records(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tables.len(), 1);
    let keys: Vec<_> = tables[0].rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["A1", "42"]);

    // 14 written files less the schemas and notes.yaml, and no file for `missing`.
    assert_eq!(p.files_seen, 11);
    assert_eq!(p.problems.len(), 10, "{show:#?}");
}

#[test]
fn cmrc_corpus_streams_137_passages() {
    let path = shared("datasets/cmrc2018-zh/corpus.jsonl");
    let mut n = 0;
    let mut first = None;
    let problems = parse_corpus_jsonl(&path, &IngestOptions::default(), |d| {
        n += 1;
        assert_eq!(d.meta.kind, DocKind::Passage);
        assert!(!d.chunks.is_empty());
        first.get_or_insert(d);
    });
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(n, 137);
    let first = first.unwrap();
    assert_eq!(first.meta.source_uri, "corpus://corpus/cmrc-p0000");
    assert_eq!(first.meta.version, "1");
    // Passages under the bound stay whole.
    assert_eq!(first.chunks.len(), 1);
}

#[test]
fn a_bad_corpus_line_is_reported_and_the_rest_lands() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "c.jsonl",
        "{\"id\":\"a\",\"title\":\"A\",\"text\":\"one\"}\n{\"id\":\"b\"}\n\n{\"id\":\"c\",\"text\":\"three\",\"acl\":[\"g\"]}\n{\"id\":\"a\",\"text\":\"again\"}\n",
    );
    let (items, problems) = parse_file(&dir.path().join("c.jsonl"), &IngestOptions::default());
    let lines: Vec<_> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, [Some(2), Some(5)], "{problems:#?}");
    assert_eq!(items.len(), 2);
    let Item::Document(c) = &items[1] else {
        panic!()
    };
    assert_eq!(c.meta.acl, Some(vec!["g".to_string()]));
    assert_eq!(c.chunks[0].acl, c.meta.acl);
}

/// A live table's schema may stand alone (its rows live in the source); a snapshot
/// schema without its table file is nothing to ingest, as before; a live schema beside a
/// table file with rows is refused (two truths); and a bad `source` is a problem on the
/// schema's line.
#[test]
fn a_live_tables_schema_stands_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let live = "table: orders\ntenant: shop\nkey: order_id\nowner_field: owner\nkey_shapes: [A999]\n\
                source:\n  kind: sql\n  connection: orders_db\n  query: SELECT * FROM orders WHERE order_id = :key AND owner = :principal\n";
    write(d, "orders.schema.yaml", live);
    write(
        d,
        "notes.schema.yaml",
        "table: notes\ntenant: shop\nkey: id\n",
    );
    write(
        d,
        "kept.schema.yaml",
        live.replace("table: orders", "table: kept"),
    );
    write(d, "kept.jsonl", "{\"order_id\":\"A1\",\"owner\":\"u7\"}\n");
    write(
        d,
        "leaky.schema.yml",
        live.replace("table: orders", "table: leaky")
            .replace(" AND owner = :principal", ""),
    );
    let p = parse_paths(&[d.to_path_buf()], &IngestOptions::default());
    let tables: Vec<_> = p
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Records(t) => Some((t.schema.table.as_str(), t.rows.len())),
            _ => None,
        })
        .collect();
    assert_eq!(tables, [("orders", 0)], "{:#?}", p.problems);
    assert!(problem_for(&p.problems, "kept.jsonl")
        .message
        .contains("must hold no rows"));
    assert!(problem_for(&p.problems, "leaky.schema.yml")
        .message
        .contains(":principal"));
    assert_eq!(p.problems.len(), 2, "{:#?}", p.problems);
    // Named on its own, the same.
    let (items, problems) = parse_file(&d.join("orders.schema.yaml"), &IngestOptions::default());
    assert!(problems.is_empty() && matches!(&items[..], [Item::Records(t)] if t.rows.is_empty()));
}
