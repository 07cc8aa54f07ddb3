//! Hostile input: each test is named after the defect it pins down. None of them times
//! anything; each finishes quickly because the input is refused early by construction.

use std::fs;
use std::path::Path;
use std::time::Duration;

use dossier_ingest::{
    parse_bytes, parse_file, parse_paths, parse_table_bytes, IngestOptions, Item, Problem,
    MAX_PROBLEMS_PER_FILE,
};

fn opts() -> IngestOptions {
    IngestOptions::default()
}

fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> std::path::PathBuf {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, content).unwrap();
    p
}

/// The one problem of a file that must yield no item.
fn refused(name: &str, bytes: &[u8], opts: &IngestOptions) -> Problem {
    let (items, problems) = parse_bytes(name, bytes, opts);
    assert!(items.is_empty(), "{name}: {} items", items.len());
    assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
    assert_eq!(problems[0].path, Path::new(name));
    problems[0].clone()
}

fn doc_chunks(items: &[Item]) -> usize {
    match items {
        [Item::Document(d)] => d.chunks.len(),
        _ => panic!("not one document: {items:#?}"),
    }
}

/// Deterministic bytes for "random" input (xorshift64*).
fn noise(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

// --- 1. HTML nesting, size and time ---------------------------------------------------

#[test]
fn deeply_nested_html_is_refused_before_it_parses_in_quadratic_time() {
    // 20k nested divs took 10 s; 2 MB of them ran for minutes.
    let deep = "<div>".repeat(20_000) + "x" + &"</div>".repeat(20_000);
    let p = refused("deep.html", deep.as_bytes(), &opts());
    assert!(
        p.message.contains("nests elements more than 256 deep"),
        "{p}"
    );
    let two_mb = "<div>x\n".repeat(300_000);
    assert!(two_mb.len() > 2 << 20);
    let p = refused("two-mb.html", two_mb.as_bytes(), &opts());
    assert!(p.message.contains("more than 256 deep"), "{p}");

    // Nesting under the bound reads as before.
    let ok = "<div>".repeat(200) + "<p>deep text</p>" + &"</div>".repeat(200);
    let (items, problems) = parse_bytes("ok.html", ok.as_bytes(), &opts());
    assert!(problems.is_empty(), "{problems:#?}");
    let [Item::Document(d)] = &items[..] else {
        panic!()
    };
    assert_eq!(d.chunks[0].text, "deep text");
}

#[test]
fn html_text_walk_has_no_recursion_that_deep_nesting_could_overflow() {
    // The recursive walker overflowed a test thread's stack at 5000 nested divs.
    let o = IngestOptions {
        max_html_depth: 20_000,
        ..opts()
    };
    let deep = "<div><b>".repeat(2_500) + "bottom";
    let (items, problems) = parse_bytes("deep.html", deep.as_bytes(), &o);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(doc_chunks(&items), 1);
}

#[test]
fn an_html_tag_with_thousands_of_attributes_is_refused() {
    // html5ever compares each attribute with every earlier one of its tag.
    let attrs: Vec<String> = (0..20_000).map(|i| format!("a{i}")).collect();
    let html = format!("<div {}>x</div>", attrs.join(" "));
    let p = refused("attrs.html", html.as_bytes(), &opts());
    assert!(p.message.contains("more than 256 attributes"), "{p}");
    // Quoted values, even with `>` and spaces in them, are one attribute each.
    let quoted = format!(
        "<p title=\"a > b c d\" {}>fine</p>",
        (0..200)
            .map(|i| format!("x{i}='1 2'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (items, problems) = parse_bytes("quoted.html", quoted.as_bytes(), &opts());
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(doc_chunks(&items), 1);
}

#[test]
fn html_element_and_tag_counts_are_bounded() {
    let o = IngestOptions {
        max_html_elements: 1_000,
        ..opts()
    };
    let p = refused("many.html", "<p>x</p>".repeat(5_000).as_bytes(), &o);
    assert!(p.message.contains("more than"), "{p}");
    // Stray end tags cost a walk of the open elements each, and create no element.
    let stray = "<span>".repeat(100) + &"</x>".repeat(5_000);
    let p = refused("stray.html", stray.as_bytes(), &o);
    assert!(p.message.contains("more than 2000 tags"), "{p}");
}

#[test]
fn html_parse_time_is_bounded() {
    let o = IngestOptions {
        max_html_time: Duration::ZERO,
        ..opts()
    };
    let p = refused("slow.html", b"<p>any</p>", &o);
    assert!(p.message.contains("took more than"), "{p}");
}

// --- 2. Binary content, whatever the name ---------------------------------------------

#[test]
fn random_bytes_named_md_are_refused_as_binary_not_ingested_as_200_chunks() {
    let raw = noise(200_000, 7);
    // Random bytes that happen to be valid UTF-8: ASCII noise without NUL, and random
    // code points.
    let ascii: Vec<u8> = noise(200_000, 8)
        .iter()
        .map(|b| (b & 0x7f).max(1))
        .collect();
    let mut seed = 9u64;
    let chars: String = (0..50_000)
        .filter_map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            char::from_u32((seed >> 33) as u32 % 0x11_0000)
        })
        .collect();
    let lossy = String::from_utf8_lossy(&noise(200_000, 10)).replace('\0', "");
    for (what, bytes) in [
        ("random", raw.as_slice()),
        ("ascii noise", ascii.as_slice()),
        ("random code points", chars.as_bytes()),
        ("lossy", lossy.as_bytes()),
    ] {
        for name in ["r.md", "r.txt", "r.html", "principals.yaml"] {
            let p = refused(name, bytes, &opts());
            assert!(
                p.message.starts_with("binary content, not text"),
                "{what} as {name}: {p}"
            );
        }
        let (items, problems) = parse_bytes("r.jsonl", bytes, &opts());
        assert!(items.is_empty(), "{what}");
        assert_eq!(problems.len(), 1, "{what}: {problems:#?}");
        assert!(problems[0].message.starts_with("binary content"), "{what}");
        let (table, problems) = parse_table_bytes("t.jsonl", "t.schema.yaml", bytes, b"", &opts());
        assert!(table.is_none());
        assert!(problems[0].message.starts_with("binary content"), "{what}");
    }
    // Through the disk, as the report shows it: path and reason.
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "notes.md", &raw);
    let (items, problems) = parse_file(&f, &opts());
    assert!(items.is_empty());
    assert!(problems[0]
        .to_string()
        .contains("notes.md: binary content, not text"));
    // UTF-16 is named as such.
    let p = refused("u16.txt", b"\xff\xfeh\0i\0", &opts());
    assert!(p.message.contains("UTF-16"), "{p}");
}

#[test]
fn ordinary_chinese_and_english_text_is_not_taken_for_binary() {
    let zh = "# 耳机售后政策\n\n第 1 条 七天无理由退货。签收之日起七天内，商品完好可退。\n\n第 2 条 质量问题检测：三十天内免费检测，「检测报告」随附。\n";
    let en = "# Returns\r\n\r\nItems may be returned within 7 days.\tTabs, CRLF and a\u{c}form feed are text.\r\n";
    let mixed = format!("{zh}\n{en}\nEmoji 🎧 and accents: café, naïve.\n");
    for (name, text) in [("zh.md", zh), ("en.txt", en), ("mixed.md", mixed.as_str())] {
        let (items, problems) = parse_bytes(name, text.as_bytes(), &opts());
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        assert!(doc_chunks(&items) >= 1);
    }
    let html = format!("<html><body><h1>标题</h1><p>{zh}</p><p>{en}</p></body></html>");
    let (items, problems) = parse_bytes("page.html", html.as_bytes(), &opts());
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(doc_chunks(&items) >= 1);
    // A stray Latin-1 byte is an encoding mistake with its line, not binary.
    let p = refused("latin1.txt", b"one\ntwo caf\xe9\n", &opts());
    assert_eq!((p.line, p.message.as_str()), (Some(2), "invalid UTF-8"));
}

// --- 3. Nothing to index --------------------------------------------------------------

#[test]
fn an_empty_or_front_matter_only_file_is_a_problem_not_a_document_without_chunks() {
    for (name, content) in [
        ("empty.md", ""),
        ("blank.txt", " \n\t\n\u{3000}\n"),
        ("fm-only.md", "---\nid: fm\ntitle: Only metadata\n---\n"),
        ("fm-blank.md", "---\nid: fm\n---\n\n\n"),
        (
            "empty.html",
            "<html><head><title>T</title></head><body> </body></html>",
        ),
        (
            "script-only.html",
            "<body><script>var x = 1;</script></body>",
        ),
    ] {
        let p = refused(name, content.as_bytes(), &opts());
        assert_eq!(p.message, "no text to index", "{name}");
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "empty.md", "");
    write(dir.path(), "ok.md", "text\n");
    let parsed = parse_paths(&[dir.path().to_path_buf()], &opts());
    assert_eq!(parsed.items.len(), 1);
    assert_eq!(parsed.problems.len(), 1);
    assert!(parsed.problems[0]
        .to_string()
        .ends_with("empty.md: no text to index"));
}

// --- 4. Ids ---------------------------------------------------------------------------

#[test]
fn ids_with_control_characters_or_the_catalog_key_separator_are_problems_with_line() {
    let sep = '\u{1f}'; // dossier-store's catalog joins key parts with it
    for (fm, line, what) in [
        ("id: \"a\\x1fb\"", 2, "`id`"),
        ("id: ok\nversion: \"1\\0\"", 3, "`version`"),
        ("id: ok\ntenant: \"shop\\x1f\"", 3, "`tenant`"),
        ("id: ok\nkb: \"k\\tb\"", 3, "`kb`"),
        ("id: ok\nacl: [\"sre\", \"sup\\nport\"]", 3, "`acl` group"),
        ("id: ok\ndepends_on: [\"x\\u202ey\"]", 3, "`depends_on` id"),
        ("id: ok\nsupersedes: \"old\\x01@V1\"", 3, "`supersedes` id"),
    ] {
        let md = format!("---\n{fm}\n---\nbody\n");
        let p = refused("d.md", md.as_bytes(), &opts());
        assert_eq!(p.line, Some(line), "{fm}: {p}");
        assert!(p.message.starts_with(what), "{fm}: {p}");
    }
    let long = format!("---\nid: {}\n---\nbody\n", "x".repeat(300));
    assert!(refused("d.md", long.as_bytes(), &opts())
        .message
        .contains("300 bytes long, limit 256"));

    // Corpus lines: each bad id is a problem on its line; the good line lands.
    let corpus = format!(
        "{}\n{}\n{}\n{}\n",
        r#"{"id":"good","text":"fine"}"#,
        r#"{"id":"a\u001fb","text":"t"}"#,
        r#"{"id":"c","text":"t","tenant":"x\u0000"}"#,
        r#"{"id":"d","text":"t","acl":["g\n"]}"#,
    );
    let (items, problems) = parse_bytes("c.jsonl", corpus.as_bytes(), &opts());
    assert_eq!(items.len(), 1);
    let lines: Vec<_> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, [Some(2), Some(3), Some(4)], "{problems:#?}");
    assert!(problems[0].message.contains("U+001F"), "{}", problems[0]);

    // Record tables: schema names, and row keys.
    let schema = "table: orders\ntenant: \"sh\\x1fop\"\nkey: id\n";
    let (t, p) = parse_table_bytes("o.jsonl", "o.schema.yaml", schema.as_bytes(), b"", &opts());
    assert!(t.is_none());
    assert_eq!(
        (p[0].line, p[0].path.as_path()),
        (Some(2), Path::new("o.schema.yaml"))
    );
    assert!(p[0].message.contains("U+001F"), "{}", p[0]);
    // Written raw, the separator is not even valid YAML.
    let raw = format!("table: orders\ntenant: \"sh{sep}op\"\nkey: id\n");
    let (t, p) = parse_table_bytes("o.jsonl", "o.schema.yaml", raw.as_bytes(), b"", &opts());
    assert!(
        t.is_none() && p[0].message.starts_with("invalid YAML"),
        "{p:#?}"
    );
    let schema = b"table: orders\ntenant: shop\nkey: id\nread_groups: [\"a\\x1fb\"]\n";
    let (t, p) = parse_table_bytes("o.jsonl", "o.schema.yaml", schema, b"", &opts());
    assert!(
        t.is_none() && p[0].message.contains("read_groups"),
        "{p:#?}"
    );
    let rows = b"{\"id\":\"A1\"}\n{\"id\":\"A\\u001f2\"}\n{\"id\":\" A3\"}\n";
    let (t, p) = parse_table_bytes(
        "o.jsonl",
        "o.schema.yaml",
        b"table: orders\ntenant: shop\nkey: id\n",
        rows,
        &opts(),
    );
    assert_eq!(t.unwrap().rows.len(), 1);
    let lines: Vec<_> = p.iter().map(|p| p.line).collect();
    assert_eq!(lines, [Some(2), Some(3)], "{p:#?}");
    assert!(p[0].message.starts_with("row key"), "{}", p[0]);

    // Principals: id, tenant and groups; the file is refused whole, at the principal.
    for (yaml, line) in [
        (
            "principals:\n  - id: ok\n    tenant: shop\n  - id: \"b\\x1f\"\n    tenant: shop\n",
            4,
        ),
        ("principals:\n  - id: ok\n    tenant: \"s\\nhop\"\n", 2),
        (
            "principals:\n  - id: ok\n    tenant: shop\n    groups: [\"a\\u200bb\"]\n",
            2,
        ),
        ("principals:\n  - id: \" alice\"\n    tenant: shop\n", 2),
    ] {
        let p = refused("principals.yaml", yaml.as_bytes(), &opts());
        assert_eq!(p.line, Some(line), "{yaml}: {p}");
        assert!(p.message.starts_with("principal"), "{p}");
    }

    // An id taken from the file name is checked too.
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "bad\u{1f}name.txt", "text\n");
    let (items, problems) = parse_file(&f, &opts());
    assert!(items.is_empty());
    assert!(problems[0].message.contains("U+001F"), "{problems:#?}");
}

// --- 5. Size and depth of YAML, JSON, front matter and tables -------------------------

/// Ten anchors, each a list of ten aliases of the previous one: 10^10 values.
fn billion_laughs(key: &str) -> String {
    let mut y = String::from("a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n");
    for (l, prev) in ('b'..='j').zip('a'..) {
        let refs = vec![format!("*{prev}"); 10].join(", ");
        y += &format!("{l}: &{l} [{refs}]\n");
    }
    y + &format!("{key}: *j\n")
}

/// One long list and many aliases of it: one alias jump each, so serde_norway's own
/// limit on jumps lets it through, but 20 000 × 20 000 values.
fn wide_laughs(key: &str) -> String {
    let list = vec!["x"; 20_000].join(",");
    let refs = vec!["*a"; 20_000].join(",");
    format!("a: &a [{list}]\n{key}: [{refs}]\n")
}

#[test]
fn a_yaml_alias_bomb_is_refused_before_it_expands() {
    let big = IngestOptions {
        max_front_matter_bytes: 1 << 20,
        ..opts()
    };
    for bomb in [billion_laughs("title"), wide_laughs("title")] {
        let md = format!("---\nid: x\n{bomb}---\nbody\n");
        let p = refused("bomb.md", md.as_bytes(), &big);
        assert!(p.message.contains("expands to more than"), "{p}");
    }
    for bomb in [billion_laughs("principals"), wide_laughs("principals")] {
        let p = refused("principals.yaml", bomb.as_bytes(), &opts());
        assert!(p.message.contains("expands to more than"), "{p}");
    }
    let schema = format!("table: t\ntenant: s\nkey: k\n{}", billion_laughs("fields"));
    let (t, p) = parse_table_bytes("t.jsonl", "t.schema.yaml", schema.as_bytes(), b"", &opts());
    assert!(
        t.is_none() && p[0].message.contains("expands to more than"),
        "{p:#?}"
    );
    // Aliases in moderation are fine.
    let yaml = "common: &c [support]\nprincipals:\n  - id: a\n    tenant: shop\n    groups: *c\n  - id: b\n    tenant: shop\n    groups: *c\n";
    let (items, problems) = parse_bytes("principals.yaml", yaml.as_bytes(), &opts());
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(items.len(), 1);
}

#[test]
fn deeply_nested_yaml_is_refused_before_libyaml_scans_it_in_quadratic_time() {
    // libyaml walks every open flow level at each token: 40 000 nested `[` took 2 s in
    // serde_yaml (about 4 s in serde_norway, whose libyaml port is the same), and a
    // megabyte of them would take hours.
    let md = format!("---\nid: x\ntitle: {}\n---\nbody\n", "[".repeat(60_000));
    let p = refused("deep.md", md.as_bytes(), &opts());
    assert!(p.message.contains("nested more than 64 levels deep"), "{p}");
    let principals = "principals: ".to_string() + &"[".repeat(1 << 20);
    let big = IngestOptions {
        max_yaml_bytes: 2 << 20,
        ..opts()
    };
    let p = refused("principals.yaml", principals.as_bytes(), &big);
    assert!(p.message.contains("nested more than 64 levels deep"), "{p}");
    let blocks = "- ".repeat(20_000);
    let p = refused("principals.yaml", blocks.as_bytes(), &opts());
    assert!(p.message.contains("nested more than 64 levels deep"), "{p}");
}

#[test]
fn deeply_nested_json_in_a_record_row_or_corpus_line_is_a_problem() {
    let nested = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
    let rows = format!(
        "{{\"id\":\"ok\",\"f\":{}}}\n{{\"id\":\"deep\",\"f\":{}}}\n",
        nested(100),
        nested(100_000)
    );
    let (t, p) = parse_table_bytes(
        "t.jsonl",
        "t.schema.yaml",
        b"table: t\ntenant: s\nkey: id\n",
        rows.as_bytes(),
        &opts(),
    );
    assert_eq!(t.unwrap().rows.len(), 1);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(p[0].line, Some(2));
    assert!(
        p[0].message.contains("nested more than 128 levels deep"),
        "{}",
        p[0]
    );
    // A corpus line's unknown fields are skipped without recursion (serde_json keeps
    // its own stack for them), however deep; known ones stop at 128 levels.
    let skipped = format!(
        "{{\"id\":\"x\",\"text\":\"t\",\"extra\":{}}}\n",
        nested(100_000)
    );
    let (items, p) = parse_bytes("c.jsonl", skipped.as_bytes(), &opts());
    assert!(p.is_empty() && items.len() == 1, "{p:#?}");
    let deep = format!("{{\"id\":{},\"text\":\"t\"}}\n", nested(100_000));
    let (items, p) = parse_bytes("c.jsonl", deep.as_bytes(), &opts());
    assert!(items.is_empty());
    assert!(p[0].message.contains("nested more than 128"), "{}", p[0]);
}

#[test]
fn front_matter_schema_and_principals_sizes_are_bounded() {
    let fm = format!("---\nid: x\ntitle: {}\n---\nbody\n", "t".repeat(70_000));
    let p = refused("big-fm.md", fm.as_bytes(), &opts());
    assert_eq!(p.line, Some(1));
    assert!(
        p.message
            .contains("front matter is longer than 65536 bytes"),
        "{p}"
    );
    // An unclosed front matter is not read to the end of a large file either.
    let unclosed = format!("---\nid: x\n{}", "k: v\n".repeat(100_000));
    assert!(refused("unclosed.md", unclosed.as_bytes(), &opts())
        .message
        .contains("longer than"));

    let small = IngestOptions {
        max_yaml_bytes: 1_000,
        ..opts()
    };
    let principals = format!(
        "principals:\n{}",
        "  - id: someone\n    tenant: shop\n".repeat(100)
    );
    let p = refused("principals.yaml", principals.as_bytes(), &small);
    assert!(p.message.starts_with("oversized"), "{p}");
    let schema = format!("table: t\ntenant: s\nkey: k\n#{}\n", "c".repeat(2_000));
    let (t, p) = parse_table_bytes("t.jsonl", "t.schema.yaml", schema.as_bytes(), b"", &small);
    assert!(
        t.is_none() && p[0].message.starts_with("oversized"),
        "{p:#?}"
    );
    // On disk, the same bound holds.
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "principals.yaml", &principals);
    assert!(parse_file(&f, &small).1[0].message.starts_with("oversized"));
}

#[test]
fn record_rows_per_table_are_bounded() {
    let o = IngestOptions {
        max_rows: 3,
        ..opts()
    };
    let rows: String = (0..10).map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let (t, p) = parse_table_bytes(
        "t.jsonl",
        "t.schema.yaml",
        b"table: t\ntenant: s\nkey: id\n",
        rows.as_bytes(),
        &o,
    );
    assert_eq!(t.unwrap().rows.len(), 3);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(p[0].line, Some(4));
    assert!(p[0].message.contains("more than 3 rows"), "{}", p[0]);
}

#[test]
fn a_file_of_a_million_bad_lines_is_reported_in_a_bounded_list() {
    // Before, every `{}` line of a 16 MB table was a problem of its own, in memory.
    let rows = "{}\n".repeat(50_000);
    let (t, p) = parse_table_bytes(
        "t.jsonl",
        "t.schema.yaml",
        b"table: t\ntenant: s\nkey: id\n",
        rows.as_bytes(),
        &opts(),
    );
    assert!(t.unwrap().rows.is_empty());
    assert_eq!(p.len(), MAX_PROBLEMS_PER_FILE + 1);
    assert_eq!(
        p.last().unwrap().message,
        format!(
            "{} more problems in this file, not listed",
            50_000 - MAX_PROBLEMS_PER_FILE
        )
    );
    let (_, p) = parse_bytes("c.jsonl", "nope\n".repeat(1_000).as_bytes(), &opts());
    assert_eq!(p.len(), MAX_PROBLEMS_PER_FILE + 1);
}

// --- The in-memory path is the file path ----------------------------------------------

#[test]
fn parse_bytes_reads_content_as_parse_file_does() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("a.md", "---\nid: a\nversion: 2\n---\n# A\n\nText.\n"),
        ("b.txt", "plain\n"),
        ("c.html", "<title>C</title><h1>C</h1><p>para</p>"),
        ("d.jsonl", "{\"id\":\"p1\",\"text\":\"one\"}\nbad\n"),
        (
            "principals.yaml",
            "principals:\n  - id: u\n    tenant: shop\n",
        ),
        ("e.md", ""),
    ] {
        let f = write(dir.path(), name, content);
        let (mut from_file, pf) = parse_file(&f, &opts());
        let (mut from_bytes, pb) = parse_bytes(&f, content.as_bytes(), &opts());
        // Only the URI differs: the file's is canonical.
        for item in from_file.iter_mut().chain(from_bytes.iter_mut()) {
            if let Item::Document(d) = item {
                d.meta.source_uri.clear();
                d.chunks.iter_mut().for_each(|c| c.source_uri.clear());
            }
        }
        assert_eq!(from_file, from_bytes, "{name}");
        assert_eq!(pf, pb, "{name}");
    }
}

#[cfg(unix)]
#[test]
fn a_device_named_like_a_text_file_is_refused_unread() {
    // /dev/zero reports size 0, so the size check passed and the read never ended.
    let dir = tempfile::tempdir().unwrap();
    for name in ["zero.txt", "zero.jsonl", "principals.yaml"] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let (items, problems) = parse_file(&link, &opts());
        assert!(items.is_empty(), "{name}");
        assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
        assert_eq!(problems[0].message, "not a regular file", "{name}");
    }
    let t = dir.path().join("t");
    fs::create_dir(&t).unwrap();
    write(&t, "z.schema.yaml", "table: z\ntenant: s\nkey: id\n");
    std::os::unix::fs::symlink("/dev/zero", t.join("z.jsonl")).unwrap();
    let (_, problems) = parse_file(&t.join("z.jsonl"), &opts());
    assert_eq!(problems[0].message, "not a regular file");
}

// --- Degenerate input and the chunk cap (issue 39) -----------------------------------

/// `n` bytes of words that never repeat in any pattern: lower-case letters in words of
/// 2 to 9, one line, with a full stop now and then.
fn varied_words(n: usize, seed: u64) -> String {
    let bytes = noise(n, seed);
    let mut out = String::with_capacity(n + 16);
    let mut word = 0;
    for (i, b) in bytes.iter().enumerate() {
        if word >= 2 + (*b as usize % 8) {
            out.push(if i % 97 == 0 { '.' } else { ' ' });
            if i % 97 == 0 {
                out.push(' ');
            }
            word = 0;
        } else {
            out.push((b'a' + b % 26) as char);
            word += 1;
        }
    }
    out
}

/// The problems of a corpus, as (line, message).
fn corpus_problems(bytes: &[u8], opts: &IngestOptions) -> (usize, Vec<(Option<usize>, String)>) {
    let (items, problems) = parse_bytes("probe.jsonl", bytes, opts);
    let p = problems.into_iter().map(|p| (p.line, p.message)).collect();
    (items.len(), p)
}

#[test]
fn a_twelve_megabyte_line_without_a_word_boundary_is_refused_not_chunked() {
    // The probe's corpus line: 12 MB of `x` passed the 16 MiB line limit and became
    // 12,000 chunks, about 33 minutes of embedding, with nothing printed.
    let line = format!(
        "{{\"id\":\"a\",\"text\":\"fine\"}}\n{{\"id\":\"x\",\"text\":\"{}\"}}\n{{\"id\":\"b\",\"text\":\"fine too\"}}\n",
        "x".repeat(12_000_000)
    );
    let (docs, problems) = corpus_problems(line.as_bytes(), &opts());
    assert_eq!(docs, 2, "{problems:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, Some(2));
    assert!(
        problems[0].1.starts_with("degenerate text, not indexed: ")
            && problems[0].1.contains("repeated more than 10000 times"),
        "{}",
        problems[0].1
    );
    // Letters that do not repeat, but with no space or punctuation for megabytes, are
    // refused too: no word in them can be searched for.
    let letters: String = noise(2_000_000, 7)
        .iter()
        .map(|b| (b'a' + b % 26) as char)
        .collect();
    let p = refused("blob.txt", letters.as_bytes(), &opts());
    assert!(
        p.message
            .contains("more than 10000 letters and digits without a word boundary"),
        "{p}"
    );
    // One character repeated is degenerate whatever it is: punctuation makes no words.
    let p = refused("dots.md", ".".repeat(3_000_000).as_bytes(), &opts());
    assert!(p.message.contains("'.' (U+002E) repeated"), "{p}");
}

#[test]
fn a_one_line_markdown_file_past_the_chunk_cap_is_refused_with_the_cap_named() {
    // The probe's 15 MB one-line Markdown made 15,061 chunks, about 40 minutes. Text of
    // varied words is not degenerate; it is the chunk count that refuses it.
    assert_eq!(opts().max_chunks_per_document, 5_000);
    let md = varied_words(6_000_000, 11);
    assert!(!md.contains('\n') && dossier_ingest::degenerate(&md).is_none());
    let p = refused("one-line.md", md.as_bytes(), &opts());
    assert!(
        p.message
            .contains("more than the 5000 one document may have")
            && p.message.contains("max_chunks_per_document")
            && p.message.contains("--max-chunks-per-document")
            && p.message.contains("refused whole, not truncated"),
        "{p}"
    );
    // The cap is an option: raised, the same file is read whole.
    let raised = IngestOptions {
        max_chunks_per_document: 20_000,
        ..opts()
    };
    let (items, problems) = parse_bytes("one-line.md", md.as_bytes(), &raised);
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(doc_chunks(&items) > 5_000);
    // A corpus passage past the cap is reported on its line; its neighbours land.
    let small = IngestOptions {
        max_chunks_per_document: 10,
        ..opts()
    };
    let corpus = format!(
        "{{\"id\":\"a\",\"text\":\"fine\"}}\n{{\"id\":\"big\",\"text\":\"{}\"}}\n",
        varied_words(20_000, 3)
    );
    let (docs, problems) = corpus_problems(corpus.as_bytes(), &small);
    assert_eq!(docs, 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, Some(2));
    assert!(
        problems[0].1.contains("more than the 10 one"),
        "{problems:?}"
    );
    // At the cap exactly, a document is whole.
    let at_cap = varied_words(20_000, 3);
    let n = dossier_ingest::chunk_text(&at_cap, 1000).len();
    let exact = IngestOptions {
        max_chunks_per_document: n,
        ..opts()
    };
    let (items, problems) = parse_bytes("exact.txt", at_cap.as_bytes(), &exact);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(doc_chunks(&items), n);
}

#[test]
fn one_token_repeated_is_reported_as_degenerate() {
    // The probe's third input: one word a million times (5 MB, 5,000 chunks).
    let p = refused("word.txt", "word ".repeat(1_000_000).as_bytes(), &opts());
    assert!(
        p.message.starts_with(
            "degenerate text, not indexed: one word, \"word\", repeated 1000000 times: 100%"
        ),
        "{p}"
    );
    // Punctuation between the repeats, a few other words, or another script do not
    // hide it.
    let mixed = "spam, spam; spam. ".repeat(20_000) + "and a little else at the end";
    let p = refused("spam.md", mixed.as_bytes(), &opts());
    assert!(p.message.contains("\"spam\""), "{p}");
    let han = "哈哈，".repeat(10_000);
    let p = refused("han.txt", han.as_bytes(), &opts());
    assert!(p.message.contains("\"哈哈\""), "{p}");
    // In a corpus, with its line.
    let corpus = format!(
        "{{\"id\":\"a\",\"text\":\"fine\"}}\n{{\"id\":\"w\",\"text\":\"{}\"}}\n",
        "na ".repeat(5_000)
    );
    let (docs, problems) = corpus_problems(corpus.as_bytes(), &opts());
    assert_eq!(docs, 1);
    assert_eq!(problems[0].0, Some(2), "{problems:?}");
    assert!(problems[0].1.contains("degenerate"), "{problems:?}");
    // A short text may repeat itself: it makes a chunk or two, and may be a real answer.
    for short in ["yes ".repeat(100), "ok".into(), "哈".repeat(200)] {
        let (items, problems) = parse_bytes("short.txt", short.as_bytes(), &opts());
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(doc_chunks(&items) >= 1);
    }
}

#[test]
fn chinese_prose_without_spaces_is_not_degenerate() {
    // Chinese and Japanese put no space between words; their own punctuation bounds
    // each run. A megabyte of it, on one line, is read whole.
    let zh = "第一条为了保护民事主体的合法权益，调整民事关系，维护社会和经济秩序，适应中国特色社会主义发展要求，弘扬社会主义核心价值观，根据宪法，制定本法。民事主体在民事活动中的法律地位一律平等。民事主体从事民事活动，应当遵循自愿原则，按照自己的意思设立、变更、终止民事法律关系。";
    let ja = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。";
    for (name, unit) in [("zh.txt", zh), ("ja.md", ja)] {
        let text: String = (0..)
            .map(|i| format!("{unit}（{i}）"))
            .take_while({
                let mut len = 0;
                move |s: &String| {
                    len += s.len();
                    len < 1_000_000
                }
            })
            .collect();
        assert!(!text.contains([' ', '\n']));
        assert_eq!(dossier_ingest::degenerate(&text), None, "{name}");
        let (items, problems) = parse_bytes(name, text.as_bytes(), &opts());
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        assert!(doc_chunks(&items) > 100, "{name}");
    }
    // Nor is English prose, nor a spreadsheet-like text of numbers.
    let en = "Items may be returned within seven days of delivery, unopened and with the receipt. "
        .repeat(2_000);
    assert_eq!(dossier_ingest::degenerate(&en), None);
    let table: String = (0..5_000)
        .map(|i| format!("order: {i}; qty: {}; status: shipped\n\n", i % 7))
        .collect();
    assert_eq!(dossier_ingest::degenerate(&table), None);
}
