//! PDF: the text layer, page by page, through poppler's `pdftohtml -xml`.
//!
//! poppler is the well-kept reader here; the project does not parse PDF itself. It runs
//! as a child process on a private copy of the file, under a time limit and with its
//! output bounded, so that a hostile PDF costs at most that time and memory. What it
//! prints (positioned text pieces with their font sizes, and the outline) is turned into
//! a body the chunker reads ([`layout`], pure and fuzzed):
//! - pieces on one baseline form a line, lines close together form a paragraph;
//! - a line set larger than the body text is a heading, its level from the rank of its
//!   size; a line the outline names is a heading even at body size;
//! - a line repeated in the top or bottom margin of most pages (running header, page
//!   number) is dropped;
//! - each page starts a paragraph, and where it starts in the body is kept, so that every
//!   chunk can name its page.
//!
//! Hidden text is read (`-hidden`): an OCR'd scan keeps its text layer there. A PDF with
//! no text on any page is refused as a scan; pages without text are reported.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::office::{attr, name_of, walk, Tag};
use crate::{Error, IngestOptions, Result};

/// The program that reads PDFs; `DOSSIER_PDFTOHTML` names another.
pub const PDFTOHTML: &str = "pdftohtml";

/// What a PDF yields.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The text with `#` headings and blank lines between paragraphs.
    pub body: String,
    /// (page number, byte offset in `body` where its text starts), in page order; pages
    /// without text are not listed.
    pub pages: Vec<(u32, usize)>,
    /// Pages that have no text layer.
    pub empty_pages: Vec<u32>,
    pub page_count: u32,
}

impl Layout {
    /// The page the byte at `offset` of the body is on.
    pub fn page_at(&self, offset: usize) -> Option<u32> {
        let i = self.pages.partition_point(|(_, start)| *start <= offset);
        i.checked_sub(1).map(|i| self.pages[i].0)
    }
}

/// Reads a PDF's text layer with poppler, then lays it out.
pub(crate) fn extract(bytes: &[u8], opts: &IngestOptions) -> Result<Layout> {
    if !bytes.starts_with(b"%PDF-")
        && !bytes[..bytes.len().min(1024)]
            .windows(5)
            .any(|w| w == b"%PDF-")
    {
        return Err(Error::invalid(None, "not a PDF file (no %PDF- header)"));
    }
    let xml = run_pdftohtml(bytes, opts)?;
    let layout = layout(&xml)?;
    if layout.pages.is_empty() {
        return Err(Error::invalid(
            None,
            format!(
                "no text layer on any of its {} pages: a scanned PDF? Run OCR on it (e.g. ocrmypdf) and ingest the result",
                layout.page_count
            ),
        ));
    }
    Ok(layout)
}

fn run_pdftohtml(bytes: &[u8], opts: &IngestOptions) -> Result<String> {
    let program = std::env::var("DOSSIER_PDFTOHTML").unwrap_or_else(|_| PDFTOHTML.into());
    // poppler reads from a file; the copy is private and removed with `dir`.
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("in.pdf");
    std::fs::File::create(&input)?.write_all(bytes)?;
    let mut child = Command::new(&program)
        .args(["-xml", "-i", "-hidden", "-q", "-stdout", "-enc", "UTF-8"])
        .arg(&input)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(
                None,
                format!(
                    "reading PDF needs poppler's `{program}`, which was not found: install poppler-utils (scripts/setup-pdf, or apt-get install poppler-utils)"
                ),
            ),
            _ => Error::Io(e),
        })?;
    let limit = opts
        .max_file_bytes
        .saturating_mul(crate::office::UNPACK_RATIO);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    // Read both pipes beside the wait; stopping at the limit closes the pipe, which ends
    // a child that writes on.
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.take(limit + 1).read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.take(4096).read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + opts.max_convert_time;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    let Some(status) = status else {
        return Err(Error::invalid(
            None,
            format!(
                "reading the PDF took longer than {} s; refused",
                opts.max_convert_time.as_secs()
            ),
        ));
    };
    if out.len() as u64 > limit {
        return Err(Error::invalid(
            None,
            format!("the PDF's text is larger than {limit} bytes; refused"),
        ));
    }
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        let first = msg
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(Error::invalid(
            None,
            format!("cannot read the PDF ({program}: {first})"),
        ));
    }
    String::from_utf8(out).map_err(|_| Error::invalid(None, "the PDF's text is not UTF-8"))
}

/// A piece of text as poppler placed it.
#[derive(Debug, Clone)]
struct Piece {
    top: f32,
    left: f32,
    width: f32,
    height: f32,
    size: f32,
    text: String,
}

#[derive(Debug, Default)]
struct Page {
    number: u32,
    height: f32,
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone)]
struct Line {
    top: f32,
    height: f32,
    size: f32,
    text: String,
}

/// Lays out `pdftohtml -xml` output: lines, paragraphs, headings and page offsets.
pub fn layout(xml: &str) -> Result<Layout> {
    let (pages, outline) = read_xml(xml)?;
    let page_count = pages.len() as u32;
    let lines: Vec<(u32, f32, Vec<Line>)> = pages
        .into_iter()
        .map(|p| (p.number, p.height, lines_of(p.pieces)))
        .collect();
    let furniture = furniture(&lines);
    let body_size = body_size(&lines);
    // Heading sizes, largest first: their rank is the level.
    let mut sizes: Vec<f32> = lines
        .iter()
        .flat_map(|(_, _, ls)| ls.iter())
        .filter(|l| is_heading_size(l, body_size))
        .map(|l| round(l.size))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    sizes.dedup();
    sizes.truncate(5);
    let outlined: HashMap<(u32, String), usize> = outline
        .into_iter()
        .map(|(depth, title, page)| ((page, squash(&title)), depth))
        .collect();

    let mut body = String::new();
    let mut starts = Vec::new();
    let mut empty_pages = Vec::new();
    for (number, height, page_lines) in lines {
        let kept: Vec<&Line> = page_lines
            .iter()
            .filter(|l| !furniture.contains(&key(l, height)))
            .collect();
        if kept.is_empty() {
            empty_pages.push(number);
            continue;
        }
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        starts.push((number, body.len()));
        let mut prev: Option<&Line> = None;
        let mut prev_heading = false;
        for l in kept {
            let level = match outlined.get(&(number, squash(&l.text))) {
                Some(depth) => Some(
                    sizes
                        .iter()
                        .position(|s| *s == round(l.size))
                        .map_or(sizes.len() + depth, |i| i + 1),
                ),
                None if is_heading_size(l, body_size) => sizes
                    .iter()
                    .position(|s| *s == round(l.size))
                    .map(|i| i + 1),
                None => None,
            };
            let new_paragraph = match prev {
                None => true,
                Some(p) => {
                    level.is_some()
                        || prev_heading
                        || (l.top - (p.top + p.height)) > 0.5 * p.height.min(l.height)
                        || (l.size - p.size).abs() > 0.5
                        || starts_item(&l.text)
                }
            };
            if prev.is_some() {
                if new_paragraph {
                    body.push_str("\n\n");
                } else {
                    join_line(&mut body, &l.text);
                    prev = Some(l);
                    continue;
                }
            }
            if let Some(level) = level {
                body.push_str(&"#".repeat(level.clamp(1, 6)));
                body.push(' ');
            }
            body.push_str(&l.text);
            prev = Some(l);
            prev_heading = level.is_some();
        }
    }
    let body = body.trim_end().to_string() + "\n";
    Ok(Layout {
        body,
        pages: starts,
        empty_pages,
        page_count,
    })
}

/// An outline entry: depth (from 1), title, page.
type OutlineItem = (usize, String, u32);

/// Pages and outline entries from poppler's XML.
fn read_xml(xml: &str) -> Result<(Vec<Page>, Vec<OutlineItem>)> {
    let mut pages: Vec<Page> = Vec::new();
    let mut fonts: HashMap<String, f32> = HashMap::new();
    let mut piece: Option<Piece> = None;
    let mut outline = Vec::new();
    let mut depth = 0usize;
    let mut item: Option<(String, u32)> = None;
    let num = |e: &quick_xml::events::BytesStart, k: &[u8]| -> f32 {
        attr(e, k)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    walk(xml, |t| match t {
        Tag::Open(e) | Tag::Empty(e) if name_of(&e) == b"page" => pages.push(Page {
            number: attr(&e, b"number")
                .and_then(|v| v.parse().ok())
                .unwrap_or(pages.len() as u32 + 1),
            height: num(&e, b"height"),
            pieces: Vec::new(),
        }),
        Tag::Open(e) | Tag::Empty(e) if name_of(&e) == b"fontspec" => {
            if let Some(id) = attr(&e, b"id") {
                fonts.insert(id, num(&e, b"size"));
            }
        }
        Tag::Open(e) if name_of(&e) == b"text" => {
            piece = Some(Piece {
                top: num(&e, b"top"),
                left: num(&e, b"left"),
                width: num(&e, b"width"),
                height: num(&e, b"height"),
                size: attr(&e, b"font")
                    .and_then(|f| fonts.get(&f).copied())
                    .unwrap_or(0.0),
                text: String::new(),
            })
        }
        Tag::Open(e) if name_of(&e) == b"outline" => depth += 1,
        Tag::Open(e) if name_of(&e) == b"item" => {
            let page = attr(&e, b"page").and_then(|v| v.parse().ok()).unwrap_or(0);
            item = Some((String::new(), page));
        }
        Tag::Text(s) => {
            if let Some(p) = piece.as_mut() {
                p.text.push_str(&s);
            } else if let Some((title, _)) = item.as_mut() {
                title.push_str(&s);
            }
        }
        Tag::Close(n) => match n.as_slice() {
            b"text" => {
                if let (Some(p), Some(page)) = (piece.take(), pages.last_mut()) {
                    if !p.text.trim().is_empty() {
                        page.pieces.push(p);
                    }
                }
            }
            b"item" => {
                if let Some((title, page)) = item.take() {
                    outline.push((depth.max(1), title.trim().to_string(), page));
                }
            }
            b"outline" => depth = depth.saturating_sub(1),
            _ => {}
        },
        _ => {}
    })?;
    Ok((pages, outline))
}

/// Pieces on one baseline joined into lines, top to bottom.
fn lines_of(mut pieces: Vec<Piece>) -> Vec<Line> {
    pieces.sort_by(|a, b| a.top.total_cmp(&b.top).then(a.left.total_cmp(&b.left)));
    let mut lines: Vec<(Line, f32)> = Vec::new();
    for p in pieces {
        let text = p.text.replace(['\u{a0}', '\t'], " ");
        match lines.last_mut() {
            Some((l, right)) if (p.top - l.top).abs() <= 0.5 * l.height.min(p.height).max(1.0) => {
                let gap = p.left - *right;
                let needs_space =
                    gap > 0.2 * p.size.max(1.0) && !l.text.ends_with(' ') && !text.starts_with(' ');
                if needs_space {
                    l.text.push(' ');
                }
                l.text.push_str(&text);
                if text.trim().chars().count() * 2 > l.text.trim().chars().count() {
                    l.size = p.size;
                }
                l.height = l.height.max(p.height);
                *right = right.max(p.left + p.width);
            }
            _ => lines.push((
                Line {
                    top: p.top,
                    height: p.height,
                    size: p.size,
                    text,
                },
                p.left + p.width,
            )),
        }
    }
    lines
        .into_iter()
        .map(|(mut l, _)| {
            l.text = l.text.split_whitespace().collect::<Vec<_>>().join(" ");
            l
        })
        .filter(|l| !l.text.is_empty())
        .collect()
}

/// The font size most of the text is set in.
fn body_size(pages: &[(u32, f32, Vec<Line>)]) -> f32 {
    let mut chars: HashMap<u32, usize> = HashMap::new();
    for l in pages.iter().flat_map(|(_, _, ls)| ls.iter()) {
        *chars.entry(round(l.size).to_bits()).or_default() += l.text.chars().count();
    }
    chars
        .into_iter()
        .max_by_key(|(size, n)| (*n, *size))
        .map_or(0.0, |(size, _)| f32::from_bits(size))
}

fn is_heading_size(l: &Line, body: f32) -> bool {
    body > 0.0 && l.size > body * 1.15 && l.text.chars().count() <= 120
}

fn round(size: f32) -> f32 {
    (size * 2.0).round() / 2.0
}

/// A line's text with every digit run the same, so that "Page 3" and "Page 4" match.
fn key(l: &Line, page_height: f32) -> (bool, String) {
    let top = page_height > 0.0 && l.top < page_height * 0.08;
    let mut k = String::new();
    let mut digit = false;
    for c in l.text.chars() {
        if c.is_ascii_digit() {
            if !digit {
                k.push('#');
            }
            digit = true;
        } else {
            k.push(c);
            digit = false;
        }
    }
    (top, k)
}

/// Running headers and footers: lines in the top or bottom 8 % of the page whose text
/// (digits aside) recurs on at least three pages and half of them. Only pages with text
/// outside the margins count: a header frames a body, so a document whose pages hold
/// nothing but one line each (a line that differs only in its digits) is that text,
/// not furniture around nothing (issue 39: it was called "a scanned PDF?").
fn furniture(pages: &[(u32, f32, Vec<Line>)]) -> std::collections::HashSet<(bool, String)> {
    let mut seen: HashMap<(bool, String), usize> = HashMap::new();
    for (_, height, lines) in pages {
        let in_margin =
            |l: &Line| *height > 0.0 && (l.top < height * 0.08 || l.top + l.height > height * 0.92);
        if lines.iter().all(in_margin) {
            continue;
        }
        let mut on_page = std::collections::HashSet::new();
        for l in lines.iter().filter(|l| in_margin(l)) {
            on_page.insert(key(l, *height));
        }
        for k in on_page {
            *seen.entry(k).or_default() += 1;
        }
    }
    let need = (pages.len() / 2).max(3);
    seen.into_iter()
        .filter(|(_, n)| *n >= need)
        .map(|(k, _)| k)
        .collect()
}

/// Whether a line opens a list item or clause (`• `, `- `, `1. `, `a) `, `3、`,
/// `第 2 条`), so that it starts a paragraph.
fn starts_item(text: &str) -> bool {
    let t = text.trim_start();
    let mut cs = t.chars();
    let first = cs.next().unwrap_or(' ');
    if matches!(first, '•' | '·' | '▪' | '◦' | '-' | '–' | '*') {
        return cs.next().is_some_and(char::is_whitespace);
    }
    if first == '第' {
        return t.chars().take(8).any(|c| matches!(c, '条' | '章' | '节'));
    }
    let marker: String = t.chars().take_while(char::is_ascii_alphanumeric).collect();
    let enumerator = (1..=3).contains(&marker.len()) && marker.chars().all(|c| c.is_ascii_digit())
        || (marker.len() == 1 && marker.chars().all(|c| c.is_ascii_alphabetic()));
    let mut after = t[marker.len()..].chars();
    enumerator
        && after
            .next()
            .is_some_and(|c| matches!(c, '.' | ')' | '、' | '）'))
        && after
            .next()
            .is_some_and(|c| c.is_whitespace() || !c.is_ascii())
}

/// Appends a wrapped line to its paragraph: CJK runs on without a space, and so does a
/// line that ends in a hyphen (kept: it cannot be told from a soft one); anything else
/// gets one space.
fn join_line(body: &mut String, next: &str) {
    let last = body.chars().last().unwrap_or(' ');
    let first = next.chars().next().unwrap_or(' ');
    if !(is_cjk(last) || is_cjk(first) || last == '-') {
        body.push(' ');
    }
    body.push_str(next);
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x303F | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF)
}

/// Text compared without spaces, for matching outline entries to lines.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A PDF whose pages each hold lines of (font size, text), top to bottom, in Helvetica
/// (Latin-1 text only), written object by object: for tests of this reader and of the
/// routes that take PDFs, which need a real PDF without LibreOffice.
#[doc(hidden)]
pub fn simple_pdf(pages: &[Vec<(u32, &str)>]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 page tree, 3 font, then a page and its content per page.
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".into(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            (0..n)
                .map(|i| format!("{} 0 R", 4 + 2 * i))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    ];
    for (i, lines) in pages.iter().enumerate() {
        let mut content = String::new();
        let mut y = 760;
        for (size, text) in lines {
            let esc = text
                .replace('\\', "\\\\")
                .replace('(', "\\(")
                .replace(')', "\\)");
            content += &format!("BT /F1 {size} Tf 72 {y} Td ({esc}) Tj ET\n");
            y -= size * 2;
        }
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}endstream",
            content.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for o in offsets {
        out.extend(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: u32, texts: &[(f32, f32, u32, &str)]) -> String {
        let mut s = format!(r#"<page number="{n}" height="1000" width="800">"#);
        for (top, left, font, t) in texts {
            s += &format!(
                r#"<text top="{top}" left="{left}" width="{}" height="20" font="{font}">{t}</text>"#,
                t.chars().count() * 9
            );
        }
        s + "</page>"
    }

    #[test]
    fn lines_paragraphs_headings_and_pages() {
        let xml = format!(
            r#"<pdf2xml><fontspec id="0" size="28"/><fontspec id="1" size="18"/>{}{}<outline><item page="2">Annex</item></outline></pdf2xml>"#,
            page(
                1,
                &[
                    (40.0, 100.0, 1, "Acme Policy"),
                    (100.0, 100.0, 0, "Clause 1 Scope"),
                    (150.0, 100.0, 1, "This policy applies to"),
                    (150.0, 305.0, 1, "every refund."),
                    (172.0, 100.0, 1, "It is binding."),
                    (960.0, 400.0, 1, "1"),
                ]
            ),
            page(
                2,
                &[
                    (40.0, 100.0, 1, "Acme Policy"),
                    (100.0, 100.0, 1, "Annex"),
                    (150.0, 100.0, 1, "退货须在签收后七天内"),
                    (172.0, 100.0, 1, "提出。"),
                    (960.0, 400.0, 1, "2"),
                ]
            ),
        );
        let l = layout(&xml).unwrap();
        assert_eq!(l.page_count, 2);
        assert!(
            l.body.contains(
                "# Clause 1 Scope\n\nThis policy applies to every refund. It is binding."
            ),
            "{}",
            l.body
        );
        assert!(
            l.body.contains("## Annex\n\n退货须在签收后七天内提出。"),
            "{}",
            l.body
        );
        // Two pages is too few to call the repeated header furniture.
        assert_eq!(l.pages.len(), 2);
        let p2 = l.body.find("## Annex").unwrap();
        assert_eq!(l.page_at(p2), Some(2));
        assert_eq!(l.page_at(0), Some(1));
    }

    #[test]
    fn list_items_start_paragraphs_and_wrapped_words_do_not() {
        for item in [
            "• one",
            "- two",
            "1. three",
            "12) four",
            "a) five",
            "3、六",
            "第 2 条 七",
            "第十二章 八",
        ] {
            assert!(starts_item(item), "{item}");
        }
        for not in [
            "gw、PGW）出现超时",
            "3.5 million",
            "pay-gw",
            "-5 degrees",
            "第一次",
        ] {
            assert!(!starts_item(not), "{not}");
        }
        let mut b = "又称 pay-".to_string();
        join_line(&mut b, "gw、PGW");
        assert_eq!(b, "又称 pay-gw、PGW");
    }

    #[test]
    fn running_headers_and_page_numbers_are_dropped_and_empty_pages_listed() {
        let mut pages = String::new();
        for n in 1..=4 {
            pages += &page(
                n,
                &[
                    (30.0, 100.0, 0, "ACME CONFIDENTIAL"),
                    (200.0, 100.0, 0, &format!("Body text of page {n}.")),
                    (960.0, 400.0, 0, &format!("Page {n} of 5")),
                ],
            );
        }
        pages += &page(5, &[]);
        let xml = format!(r#"<pdf2xml><fontspec id="0" size="12"/>{pages}</pdf2xml>"#);
        let l = layout(&xml).unwrap();
        assert!(!l.body.contains("CONFIDENTIAL"), "{}", l.body);
        assert!(!l.body.contains("of 5"), "{}", l.body);
        assert!(l.body.contains("Body text of page 3."));
        assert_eq!(l.empty_pages, vec![5]);
        assert_eq!(l.page_count, 5);
    }

    #[test]
    fn a_pdf_of_one_line_a_page_differing_in_digits_is_text_not_a_scan() {
        let mut pages = String::new();
        for n in 1..=6 {
            pages += &page(n, &[(30.0, 100.0, 0, &format!("Receipt 2026-{n:04} paid"))]);
        }
        let xml = format!(r#"<pdf2xml><fontspec id="0" size="12"/>{pages}</pdf2xml>"#);
        let l = layout(&xml).expect("its text layer is read");
        assert_eq!(l.pages.len(), 6, "{}", l.body);
        assert!(l.body.contains("Receipt 2026-0004 paid"), "{}", l.body);
    }
}
