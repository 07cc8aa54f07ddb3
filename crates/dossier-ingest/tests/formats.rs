//! PDF, DOCX, XLSX and CSV files and their metadata sidecars, as made by the tests
//! themselves (PDFs written object by object, DOCX packages zipped from their XML,
//! workbooks by rust_xlsxwriter), and the hostile ones: scans, zip bombs, PDFs that never
//! finish or print without end. PDF needs poppler (`scripts/setup-office`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dossier_ingest::{parse_bytes_with_meta, parse_file, IngestOptions, Item, ParsedDocument};

fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn one_doc(path: &Path, opts: &IngestOptions) -> (ParsedDocument, Vec<String>) {
    let (items, problems) = parse_file(path, opts);
    let problems: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
    match items.into_iter().next() {
        Some(Item::Document(d)) => (d, problems),
        other => panic!(
            "no document from {}: {other:?} {problems:?}",
            path.display()
        ),
    }
}

fn refusal(path: &Path, opts: &IngestOptions) -> String {
    let (items, problems) = parse_file(path, opts);
    assert!(items.is_empty(), "{items:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems[0].message.clone()
}

fn pdf(pages: &[Vec<(u32, &str)>]) -> Vec<u8> {
    dossier_ingest::pdf::simple_pdf(pages)
}

#[test]
fn a_pdf_is_read_page_by_page_with_headings_and_every_chunk_names_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let body = "Refunds are paid within fourteen days of the return reaching the warehouse.";
    let p = write(
        dir.path(),
        "refunds.pdf",
        pdf(&[
            vec![(24, "Refund Policy"), (16, "Clause 1 Scope"), (11, body)],
            vec![
                (16, "Clause 2 Exceptions"),
                (11, "Opened headphones are not refunded without a fault."),
            ],
            vec![(11, "Faulty goods are repaired or replaced at our choice.")],
        ]),
    );
    write(
        dir.path(),
        "refunds.pdf.meta.yaml",
        "id: refunds\nversion: '3'\ntenant: shop\nacl: [support]\nsource_uri: https://intranet/refunds.pdf\n",
    );
    let (d, problems) = one_doc(&p, &IngestOptions::default());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(d.meta.doc_id, "refunds");
    assert_eq!(d.meta.version, "3");
    assert_eq!(d.meta.acl, Some(vec!["support".to_string()]));
    assert_eq!(d.meta.title, "Refund Policy");
    assert_eq!(d.meta.kind, dossier_core::DocKind::Pdf);
    let find = |needle: &str| {
        d.chunks
            .iter()
            .find(|c| c.text.contains(needle))
            .unwrap_or_else(|| panic!("no chunk with {needle:?}: {:#?}", d.chunks))
    };
    let c1 = find("fourteen days");
    assert_eq!(c1.section, vec!["p. 1", "Refund Policy", "Clause 1 Scope"]);
    assert_eq!(c1.page(), Some(1));
    assert_eq!(c1.section_label(), "p. 1 › Clause 1 Scope");
    let c2 = find("Opened headphones");
    assert_eq!(
        c2.section,
        vec!["p. 2", "Refund Policy", "Clause 2 Exceptions"]
    );
    // Page 3 has no heading of its own: it is still under clause 2, on page 3.
    let c3 = find("Faulty goods");
    assert_eq!(
        c3.section,
        vec!["p. 3", "Refund Policy", "Clause 2 Exceptions"]
    );
    for c in &d.chunks {
        assert!(c.page().is_some(), "{c:?}");
        assert_eq!(&d.chunks[c.ordinal as usize].chunk_id, &c.chunk_id);
    }
    // The same bytes uploaded with the same metadata read the same.
    let meta = std::fs::read(dir.path().join("refunds.pdf.meta.yaml")).unwrap();
    let (items, _) = parse_bytes_with_meta(
        "refunds.pdf",
        &std::fs::read(&p).unwrap(),
        Some(&meta),
        &IngestOptions::default(),
    );
    let Some(Item::Document(up)) = items.first() else {
        panic!("{items:?}")
    };
    assert_eq!(
        up.chunks.iter().map(|c| &c.text).collect::<Vec<_>>(),
        d.chunks.iter().map(|c| &c.text).collect::<Vec<_>>()
    );
}

#[test]
fn a_scanned_pdf_is_refused_and_pages_without_text_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let scan = write(dir.path(), "scan.pdf", pdf(&[vec![], vec![]]));
    let why = refusal(&scan, &IngestOptions::default());
    assert!(why.contains("no text layer on any of its 2 pages"), "{why}");

    let mixed = write(
        dir.path(),
        "mixed.pdf",
        pdf(&[
            vec![(11, "Page one has text.")],
            vec![],
            vec![(11, "Page three too.")],
        ]),
    );
    let (d, problems) = one_doc(&mixed, &IngestOptions::default());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("without a text layer") && problems[0].ends_with(": 2"),
        "{problems:?}"
    );
    let pages: Vec<_> = d.chunks.iter().filter_map(|c| c.page()).collect();
    assert!(
        pages.contains(&1) && pages.contains(&3) && !pages.contains(&2),
        "{pages:?}"
    );
}

#[test]
fn files_that_are_not_pdfs_or_are_broken_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let opts = IngestOptions::default();
    let why = refusal(&write(dir.path(), "a.pdf", b"hello, I am text"), &opts);
    assert!(why.contains("not a PDF"), "{why}");
    let mut truncated = pdf(&[vec![(11, "Some text on a page.")]]);
    truncated.truncate(60);
    let (items, problems) = parse_file(&write(dir.path(), "b.pdf", &truncated), &opts);
    assert!(
        items.is_empty() && problems.len() == 1,
        "{items:?} {problems:?}"
    );
}

/// A stand-in for poppler that misbehaves, for the bounds on the child process.
fn fake_poppler(dir: &Path, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-pdftohtml");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "#!/bin/sh\n{script}").unwrap();
    drop(f);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

// Each test runs in a process of its own (nextest), so setting the variable is local.
#[test]
fn a_pdf_that_takes_too_long_is_refused_and_its_reader_killed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_poppler(dir.path(), "exec sleep 30");
    std::env::set_var("DOSSIER_PDFTOHTML", &fake);
    let opts = IngestOptions {
        max_convert_time: Duration::from_secs(1),
        ..IngestOptions::default()
    };
    let t = Instant::now();
    let why = refusal(
        &write(dir.path(), "slow.pdf", pdf(&[vec![(11, "x")]])),
        &opts,
    );
    assert!(why.contains("took longer than 1 s"), "{why}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_pdf_whose_text_has_no_end_is_refused_at_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_poppler(dir.path(), "exec yes '<text>aaaaaaaaaaaaaaaa</text>'");
    std::env::set_var("DOSSIER_PDFTOHTML", &fake);
    let opts = IngestOptions {
        max_file_bytes: 64 << 10,
        ..IngestOptions::default()
    };
    let why = refusal(
        &write(dir.path(), "loud.pdf", pdf(&[vec![(11, "x")]])),
        &opts,
    );
    assert!(why.contains("larger than"), "{why}");
}

#[test]
fn without_poppler_a_pdf_is_refused_with_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("DOSSIER_PDFTOHTML", "/nonexistent/pdftohtml");
    let why = refusal(
        &write(dir.path(), "a.pdf", pdf(&[vec![(11, "x")]])),
        &IngestOptions::default(),
    );
    assert!(why.contains("poppler-utils"), "{why}");
}

/// A DOCX package from its parts.
fn docx(parts: &[(&str, &str)], method: zip::CompressionMethod) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut z = zip::ZipWriter::new(&mut out);
    let o = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, text) in parts {
        z.start_file(*name, o).unwrap();
        z.write_all(text.as_bytes()).unwrap();
    }
    z.finish().unwrap();
    out.into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

fn para(style: Option<&str>, num: Option<(u32, u32)>, text: &str) -> String {
    let mut ppr = String::new();
    if let Some(s) = style {
        ppr += &format!(r#"<w:pStyle w:val="{s}"/>"#);
    }
    if let Some((id, lvl)) = num {
        ppr += &format!(r#"<w:numPr><w:ilvl w:val="{lvl}"/><w:numId w:val="{id}"/></w:numPr>"#);
    }
    format!(r#"<w:p><w:pPr>{ppr}</w:pPr><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
}

#[test]
fn a_docx_keeps_its_headings_list_numbers_and_tables() {
    let body = [
        para(Some("Title"), None, "退货政策"),
        para(Some("Heading1"), None, "第一章 总则"),
        para(None, Some((1, 0)), "签收后 7 天内可退。"),
        para(None, Some((1, 0)), "拆封后不适用。"),
        para(None, Some((1, 1)), "质量问题除外。"),
        para(Some("Berichtigung"), None, "Scope &amp; purpose"),
        r#"<w:p><w:r><w:t>Kept </w:t></w:r><w:del><w:r><w:delText>deleted </w:delText></w:r></w:del><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins></w:p>"#.to_string(),
        r#"<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Item</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Days</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:p><w:r><w:t>Headphones</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>7</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"#.to_string(),
    ]
    .concat();
    let document =
        format!(r#"<?xml version="1.0"?><w:document {W}><w:body>{body}</w:body></w:document>"#);
    let styles = format!(
        r#"<w:styles {W}><w:style w:styleId="Heading1"><w:name w:val="heading 1"/></w:style><w:style w:styleId="Berichtigung"><w:name w:val="Überschrift"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style></w:styles>"#
    );
    let numbering = format!(
        r#"<w:numbering {W}><w:abstractNum w:abstractNumId="7"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="chineseCounting"/><w:lvlText w:val="第%1条"/></w:lvl><w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="(%2)"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="7"/></w:num></w:numbering>"#
    );
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "returns.docx",
        docx(
            &[
                ("word/document.xml", &document),
                ("word/styles.xml", &styles),
                ("word/numbering.xml", &numbering),
            ],
            zip::CompressionMethod::Deflated,
        ),
    );
    let (d, problems) = one_doc(&p, &IngestOptions::default());
    assert!(problems.is_empty(), "{problems:?}");
    let all: String = d
        .chunks
        .iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(d.meta.title, "退货政策");
    assert_eq!(d.meta.doc_id, "returns");
    for want in [
        "第一条 签收后 7 天内可退。",
        "第二条 拆封后不适用。",
        "(a) 质量问题除外。",
        "## Scope & purpose",
        "Kept inserted",
        "Item | Days\nHeadphones | 7",
    ] {
        assert!(all.contains(want), "{want:?} not in {all}");
    }
    assert!(!all.contains("deleted"), "{all}");
    // A numbered clause is a section of its own, under its chapter (the title and
    // Heading 1 are both level 1, so the chapter replaces the title in the path).
    let clause = d.chunks.iter().find(|c| c.text.contains("拆封后")).unwrap();
    assert_eq!(clause.section, ["第一章 总则", "第二条"]);
    assert!(clause.page().is_none());
}

#[test]
fn a_docx_that_inflates_past_its_bound_is_refused_whatever_its_headers_say() {
    let dir = tempfile::tempdir().unwrap();
    // 32 MiB of one character deflates to about 32 KiB.
    let filler = "a".repeat(32 << 20);
    let document = format!(
        r#"<w:document {W}><w:body><w:p><w:r><w:t>{filler}</w:t></w:r></w:p></w:body></w:document>"#
    );
    let bytes = docx(
        &[("word/document.xml", &document)],
        zip::CompressionMethod::Deflated,
    );
    assert!(bytes.len() < 1 << 20, "{}", bytes.len());
    let opts = IngestOptions {
        max_file_bytes: 1 << 20,
        ..IngestOptions::default()
    };
    let why = refusal(&write(dir.path(), "bomb.docx", bytes), &opts);
    assert!(why.contains("inflates past"), "{why}");
    let why = refusal(&write(dir.path(), "text.docx", "not a zip at all"), &opts);
    assert!(why.contains("not a DOCX file"), "{why}");
}

fn workbook(path: &Path) {
    let mut wb = rust_xlsxwriter::Workbook::new();
    let s = wb.add_worksheet().set_name("orders").unwrap();
    for (c, h) in ["order_id", "owner", "opened", "amount", "signed_at", "note"]
        .iter()
        .enumerate()
    {
        s.write_string(0, c as u16, *h).unwrap();
    }
    s.write_string(1, 0, "A123").unwrap();
    s.write_string(1, 1, "u7").unwrap();
    s.write_boolean(1, 2, true).unwrap();
    s.write_number(1, 3, 19.5).unwrap();
    // A date as spreadsheets keep one: a day count since 1899-12-30 (2026-09-10).
    s.write_number(1, 4, 46275.0).unwrap();
    s.write_string(1, 5, "耳机有杂音").unwrap();
    s.write_string(2, 0, "A124").unwrap();
    s.write_string(2, 1, "u8").unwrap();
    s.write_boolean(2, 2, false).unwrap();
    s.write_number(2, 3, 7.0).unwrap();
    let notes = wb.add_worksheet().set_name("notes").unwrap();
    notes.write_string(0, 0, "topic").unwrap();
    notes.write_string(1, 0, "returns open on Mondays").unwrap();
    wb.save(path).unwrap();
}

const SCHEMA: &str =
    "table: orders\ntenant: shop\nkey: order_id\nowner_field: owner\ndate_fields: [signed_at]\n";

#[test]
fn a_workbook_beside_a_schema_is_a_record_table_with_typed_fields() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("orders.xlsx");
    workbook(&p);
    write(dir.path(), "orders.schema.yaml", SCHEMA);
    let (items, problems) = parse_file(&p, &IngestOptions::default());
    assert!(problems.is_empty(), "{problems:?}");
    let Some(Item::Records(t)) = items.first() else {
        panic!("{items:?}")
    };
    assert_eq!(t.rows.len(), 2);
    let a = &t.rows[0];
    assert_eq!(a.key, "A123");
    assert_eq!(a.fields["opened"], serde_json::json!(true));
    assert_eq!(a.fields["amount"], serde_json::json!(19.5));
    assert_eq!(a.fields["signed_at"], serde_json::json!("2026-09-10"));
    assert_eq!(a.fields["note"], serde_json::json!("耳机有杂音"));
    assert_eq!(t.rows[1].fields["amount"], serde_json::json!(7));
    assert!(!t.rows[1].fields.contains_key("signed_at"));
}

#[test]
fn a_workbook_or_csv_without_a_schema_is_a_document_of_labelled_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("book.xlsx");
    workbook(&p);
    let (d, problems) = one_doc(&p, &IngestOptions::default());
    assert!(problems.is_empty(), "{problems:?}");
    let all: String = d.chunks.iter().map(|c| c.text.as_str()).collect();
    assert!(
        all.contains("order_id: A123; owner: u7; opened: true; amount: 19.5"),
        "{all}"
    );
    let note = d
        .chunks
        .iter()
        .find(|c| c.text.contains("Mondays"))
        .unwrap();
    assert_eq!(note.section.last().unwrap(), "notes");

    let csv = write(
        dir.path(),
        "prices.csv",
        "sku,price\nP-204,\"1,299\"\nP-205,899\n",
    );
    let (d, _) = one_doc(&csv, &IngestOptions::default());
    assert_eq!(d.meta.kind, dossier_core::DocKind::Sheet);
    assert!(
        d.chunks[0].text.contains("sku: P-204; price: 1,299"),
        "{:?}",
        d.chunks
    );
}

#[test]
fn a_csv_table_reports_bad_rows_by_row_number_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "orders.schema.yaml", SCHEMA);
    let p = write(
        dir.path(),
        "orders.csv",
        "order_id,owner,signed_at\nA1,u7,2026-09-10\n,u7,2026-09-11\nA3,u8,yesterday\nA1,u9,\n",
    );
    let (items, problems) = parse_file(&p, &IngestOptions::default());
    let Some(Item::Records(t)) = items.first() else {
        panic!("{items:?}")
    };
    assert_eq!(
        t.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["A1"]
    );
    let lines: Vec<_> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, [Some(3), Some(4), Some(5)], "{problems:?}");
}

#[test]
fn a_sidecar_sets_metadata_and_names_itself_in_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let opts = IngestOptions::default();
    let txt = write(dir.path(), "runbook.txt", "Restart the gateway first.\n");
    write(
        dir.path(),
        "runbook.txt.meta.yaml",
        "id: rb-1\nversion: '2'\nkb: sre\n",
    );
    let (d, _) = one_doc(&txt, &opts);
    assert_eq!(
        (d.meta.doc_id.as_str(), d.meta.version.as_str()),
        ("rb-1", "2")
    );
    assert_eq!(d.meta.kb.as_deref(), Some("sre"));

    let md = write(dir.path(), "p.md", "---\nid: p\n---\n# P\ntext\n");
    write(dir.path(), "p.md.meta.yaml", "id: q\n");
    let why = refusal(&md, &opts);
    assert!(why.contains("given twice"), "{why}");

    let bad = write(dir.path(), "bad.txt", "text\n");
    write(
        dir.path(),
        "bad.txt.meta.yaml",
        "id: ok\neffective_from: soon\n",
    );
    let why = refusal(&bad, &opts);
    assert!(
        why.starts_with("bad.txt.meta.yaml:2:") && why.contains("YYYY-MM-DD"),
        "{why}"
    );

    // A changed sidecar is a changed document.
    let (before, _) = one_doc(&txt, &opts);
    write(
        dir.path(),
        "runbook.txt.meta.yaml",
        "id: rb-1\nversion: '2'\nkb: ops\n",
    );
    let (after, _) = one_doc(&txt, &opts);
    assert_ne!(before.meta.digest, after.meta.digest);
}
