//! DOCX (Office Open XML word processing) to a body the chunker reads.
//!
//! Paragraphs in a heading style (by name, `Heading N` / `Title`, or by outline level,
//! following `basedOn`) become `#` lines, so that sections are the document's own;
//! numbered paragraphs get the label Word would show (`1.`, `a)`, `第一条`), computed
//! from `numbering.xml`; a table becomes one line per row, cells joined by ` | `.
//! Deleted text of tracked changes (`w:delText`) is not read; inserted text is.

use std::collections::HashMap;

use crate::office::{attr, name_of, walk, Package, Tag};
use crate::{IngestOptions, Result};

/// What a DOCX file yields: the body with `#` headings, and its title if it names one.
pub(crate) struct Extracted {
    pub body: String,
    pub title: Option<String>,
}

pub(crate) fn extract(bytes: &[u8], opts: &IngestOptions) -> Result<Extracted> {
    let mut pkg = Package::open(bytes, "DOCX", opts)?;
    let document = pkg.required("word/document.xml")?;
    let styles = match pkg.part("word/styles.xml")? {
        Some(x) => Styles::read(&x)?,
        None => Styles::default(),
    };
    let numbering = match pkg.part("word/numbering.xml")? {
        Some(x) => Numbering::read(&x)?,
        None => Numbering::default(),
    };
    let title = match pkg.part("docProps/core.xml")? {
        Some(x) => core_title(&x)?,
        None => None,
    };
    let body = Body::read(&document, &styles, numbering)?;
    Ok(Extracted { body, title })
}

/// `dc:title` of the package's core properties.
fn core_title(xml: &str) -> Result<Option<String>> {
    let mut inside = false;
    let mut title = String::new();
    walk(xml, |t| match t {
        Tag::Open(e) if name_of(&e) == b"title" => inside = true,
        Tag::Close(n) if n == b"title" => inside = false,
        Tag::Text(s) if inside => title.push_str(&s),
        _ => {}
    })?;
    let title = title.trim().to_string();
    Ok((!title.is_empty()).then_some(title))
}

#[derive(Default)]
struct Style {
    name: String,
    outline: Option<usize>,
    based_on: Option<String>,
}

/// Paragraph styles by id.
#[derive(Default)]
struct Styles(HashMap<String, Style>);

impl Styles {
    fn read(xml: &str) -> Result<Styles> {
        let mut styles = HashMap::new();
        let mut cur: Option<(String, Style)> = None;
        walk(xml, |t| match t {
            Tag::Open(e) if name_of(&e) == b"style" => {
                cur = attr(&e, b"styleId").map(|id| (id, Style::default()));
            }
            Tag::Open(e) | Tag::Empty(e) => {
                let Some((_, s)) = cur.as_mut() else { return };
                match name_of(&e) {
                    b"name" => s.name = attr(&e, b"val").unwrap_or_default(),
                    b"basedOn" => s.based_on = attr(&e, b"val"),
                    b"outlineLvl" => s.outline = attr(&e, b"val").and_then(|v| v.parse().ok()),
                    _ => {}
                }
            }
            Tag::Close(n) if n == b"style" => {
                if let Some((id, s)) = cur.take() {
                    styles.insert(id, s);
                }
            }
            _ => {}
        })?;
        Ok(Styles(styles))
    }

    /// The heading level (1-based) a paragraph style gives, if it is a heading.
    fn heading_level(&self, id: &str) -> Option<usize> {
        let mut id = id;
        // `basedOn` chains are short; the bound keeps a cycle from looping.
        for _ in 0..16 {
            let own = level_from_name(id);
            let Some(s) = self.0.get(id) else { return own };
            if let Some(l) = own.or_else(|| level_from_name(&s.name)) {
                return Some(l);
            }
            // Outline level 9 is "body text".
            if let Some(o) = s.outline.filter(|o| *o < 9) {
                return Some(o + 1);
            }
            id = s.based_on.as_deref()?;
        }
        None
    }
}

/// `Heading 2`, `heading2`, `Title`: the level a style's name or id says.
fn level_from_name(name: &str) -> Option<usize> {
    let n = name.trim().to_ascii_lowercase();
    if n == "title" {
        return Some(1);
    }
    let rest = n.strip_prefix("heading")?.trim_start();
    let level: usize = rest.parse().ok()?;
    (1..=9).contains(&level).then_some(level.min(6))
}

/// One level of a list definition.
#[derive(Clone, Default)]
struct Level {
    format: String,
    text: String,
    start: u32,
}

/// List definitions: `numId` → abstract definition → levels.
#[derive(Default)]
struct Numbering {
    abstracts: HashMap<String, HashMap<u32, Level>>,
    nums: HashMap<String, String>,
    /// Counters by (abstract id, level): Word counts per abstract definition.
    counters: HashMap<(String, u32), u32>,
}

impl Numbering {
    fn read(xml: &str) -> Result<Numbering> {
        let mut n = Numbering::default();
        let mut abs: Option<(String, HashMap<u32, Level>)> = None;
        let mut lvl: Option<(u32, Level)> = None;
        let mut num: Option<String> = None;
        walk(xml, |t| {
            let (e, open) = match &t {
                Tag::Open(e) => (e, true),
                Tag::Empty(e) => (e, false),
                Tag::Close(name) => {
                    match name.as_slice() {
                        b"lvl" => {
                            if let (Some((_, levels)), Some((i, l))) = (abs.as_mut(), lvl.take()) {
                                levels.insert(i, l);
                            }
                        }
                        b"abstractNum" => {
                            if let Some((id, levels)) = abs.take() {
                                n.abstracts.insert(id, levels);
                            }
                        }
                        b"num" => num = None,
                        _ => {}
                    }
                    return;
                }
                Tag::Text(_) => return,
            };
            match name_of(e) {
                b"abstractNum" if open => {
                    abs = attr(e, b"abstractNumId").map(|id| (id, HashMap::new()));
                }
                b"lvl" if open => {
                    let i = attr(e, b"ilvl").and_then(|v| v.parse().ok()).unwrap_or(0);
                    lvl = Some((
                        i,
                        Level {
                            start: 1,
                            ..Level::default()
                        },
                    ));
                }
                b"start" => {
                    if let Some((_, l)) = lvl.as_mut() {
                        l.start = attr(e, b"val").and_then(|v| v.parse().ok()).unwrap_or(1);
                    }
                }
                b"numFmt" => {
                    if let Some((_, l)) = lvl.as_mut() {
                        l.format = attr(e, b"val").unwrap_or_default();
                    }
                }
                b"lvlText" => {
                    if let Some((_, l)) = lvl.as_mut() {
                        l.text = attr(e, b"val").unwrap_or_default();
                    }
                }
                b"num" if open => num = attr(e, b"numId"),
                b"abstractNumId" => {
                    if let (Some(id), Some(a)) = (num.clone(), attr(e, b"val")) {
                        n.nums.insert(id, a);
                    }
                }
                _ => {}
            }
        })?;
        Ok(n)
    }

    /// The label of the next paragraph of list `num` at level `ilvl`, counting it.
    fn label(&mut self, num: &str, ilvl: u32) -> Option<String> {
        let abs = self.nums.get(num)?.clone();
        let levels = self.abstracts.get(&abs)?;
        let level = levels.get(&ilvl)?.clone();
        self.counters
            .entry((abs.clone(), ilvl))
            .and_modify(|c| *c = c.saturating_add(1))
            .or_insert(level.start);
        // A new item restarts every deeper level.
        self.counters.retain(|(a, l), _| *a != abs || *l <= ilvl);
        match level.format.as_str() {
            "none" => return None,
            "bullet" => return Some("•".into()),
            _ => {}
        }
        let mut out = level.text.clone();
        for i in 0..=ilvl.min(8) {
            let placeholder = format!("%{}", i + 1);
            if !out.contains(&placeholder) {
                continue;
            }
            let l = levels.get(&i).cloned().unwrap_or_default();
            let n = self
                .counters
                .get(&(abs.clone(), i))
                .copied()
                .unwrap_or(l.start);
            out = out.replace(&placeholder, &format_number(n, &l.format));
        }
        let out = out.trim().to_string();
        (!out.is_empty()).then_some(out)
    }
}

/// A list number in a Word number format.
fn format_number(n: u32, format: &str) -> String {
    match format {
        "lowerLetter" => letters(n, b'a'),
        "upperLetter" => letters(n, b'A'),
        "lowerRoman" => roman(n).to_lowercase(),
        "upperRoman" => roman(n),
        f if f.starts_with("chinese") || f.starts_with("ideograph") || f == "taiwaneseCounting" => {
            chinese(n)
        }
        _ => n.to_string(),
    }
}

/// a … z, aa … zz (Word repeats the letter).
fn letters(n: u32, base: u8) -> String {
    if n == 0 {
        return "0".into();
    }
    let c = (base + ((n - 1) % 26) as u8) as char;
    c.to_string().repeat(((n - 1) / 26 + 1).min(8) as usize)
}

fn roman(mut n: u32) -> String {
    if n == 0 || n >= 4000 {
        return n.to_string();
    }
    const TABLE: [(u32, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut s = String::new();
    for (v, r) in TABLE {
        while n >= v {
            s.push_str(r);
            n -= v;
        }
    }
    s
}

/// Chinese numerals up to 9999 (一, 十二, 二十, 一百零五); larger as digits.
fn chinese(n: u32) -> String {
    const D: [&str; 10] = ["零", "一", "二", "三", "四", "五", "六", "七", "八", "九"];
    if n == 0 || n > 9999 {
        return n.to_string();
    }
    if (10..20).contains(&n) {
        return format!("十{}", if n == 10 { "" } else { D[(n % 10) as usize] });
    }
    let units = [(1000, "千"), (100, "百"), (10, "十"), (1, "")];
    let mut s = String::new();
    let mut zero = false;
    for (u, name) in units {
        let d = n / u % 10;
        if d == 0 {
            zero = !s.is_empty();
            continue;
        }
        if zero {
            s.push_str(D[0]);
            zero = false;
        }
        s.push_str(D[d as usize]);
        s.push_str(name);
    }
    s
}

/// The walk over `word/document.xml`.
struct Body<'s> {
    styles: &'s Styles,
    numbering: Numbering,
    out: String,
    /// The paragraph being read: its text, style, list and level.
    para: Option<Para>,
    in_text: bool,
    /// Nesting of tables; rows of the outermost are lines.
    tables: usize,
    row: Vec<String>,
    cell: Option<String>,
}

#[derive(Default)]
struct Para {
    text: String,
    style: Option<String>,
    outline: Option<usize>,
    num: Option<String>,
    ilvl: u32,
}

impl<'s> Body<'s> {
    fn read(xml: &str, styles: &'s Styles, numbering: Numbering) -> Result<String> {
        let mut b = Body {
            styles,
            numbering,
            out: String::new(),
            para: None,
            in_text: false,
            tables: 0,
            row: Vec::new(),
            cell: None,
        };
        walk(xml, |t| b.event(t))?;
        Ok(b.out.trim().to_string() + "\n")
    }

    fn event(&mut self, t: Tag) {
        match t {
            Tag::Open(e) => match name_of(&e) {
                b"p" => self.para = Some(Para::default()),
                b"t" => self.in_text = true,
                b"tbl" => self.tables += 1,
                b"tr" if self.tables == 1 => self.row.clear(),
                b"tc" if self.tables == 1 => self.cell = Some(String::new()),
                _ => self.property(&e),
            },
            Tag::Empty(e) => match name_of(&e) {
                b"tab" => self.push("\t"),
                b"br" | b"cr" => self.push("\n"),
                b"p" => self.para = None,
                _ => self.property(&e),
            },
            Tag::Text(s) if self.in_text => self.push(&s),
            Tag::Text(_) => {}
            Tag::Close(n) => match n.as_slice() {
                b"t" => self.in_text = false,
                b"p" => self.end_paragraph(),
                b"tc" if self.tables == 1 => {
                    if let Some(c) = self.cell.take() {
                        self.row
                            .push(c.split_whitespace().collect::<Vec<_>>().join(" "));
                    }
                }
                b"tr" if self.tables == 1 => {
                    let line = self.row.join(" | ");
                    if !line.replace('|', "").trim().is_empty() {
                        self.out.push_str(line.trim());
                        self.out.push('\n');
                    }
                    self.row.clear();
                }
                b"tbl" => {
                    self.tables = self.tables.saturating_sub(1);
                    if self.tables == 0 {
                        self.out.push('\n');
                    }
                }
                _ => {}
            },
        }
    }

    /// Paragraph properties: style, outline level, list membership.
    fn property(&mut self, e: &quick_xml::events::BytesStart) {
        let Some(p) = self.para.as_mut() else { return };
        match name_of(e) {
            b"pStyle" => p.style = attr(e, b"val"),
            b"outlineLvl" => p.outline = attr(e, b"val").and_then(|v| v.parse().ok()),
            b"numId" => p.num = attr(e, b"val").filter(|v| v != "0"),
            b"ilvl" => p.ilvl = attr(e, b"val").and_then(|v| v.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }

    fn push(&mut self, s: &str) {
        if let Some(p) = self.para.as_mut() {
            p.text.push_str(s);
        }
    }

    fn end_paragraph(&mut self) {
        let Some(p) = self.para.take() else { return };
        let label = p
            .num
            .as_deref()
            .and_then(|n| self.numbering.label(n, p.ilvl));
        let text = p.text.trim();
        if text.is_empty() {
            return;
        }
        let text = match label {
            Some(l) => format!("{l} {text}"),
            None => text.to_string(),
        };
        if let Some(cell) = self.cell.as_mut() {
            cell.push(' ');
            cell.push_str(&text);
            return;
        }
        let level = p
            .style
            .as_deref()
            .and_then(|s| self.styles.heading_level(s))
            .or(p.outline.filter(|o| *o < 9).map(|o| o + 1));
        match level {
            Some(l) => {
                let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
                self.out.push_str(&"#".repeat(l.min(6)));
                self.out.push(' ');
                self.out.push_str(&one_line);
            }
            None => self.out.push_str(&text),
        }
        self.out.push_str("\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_word_formats() {
        assert_eq!(format_number(3, "decimal"), "3");
        assert_eq!(format_number(28, "lowerLetter"), "bb");
        assert_eq!(format_number(14, "upperRoman"), "XIV");
        assert_eq!(chinese(1), "一");
        assert_eq!(chinese(12), "十二");
        assert_eq!(chinese(20), "二十");
        assert_eq!(chinese(105), "一百零五");
        assert_eq!(chinese(1010), "一千零一十");
    }

    #[test]
    fn heading_levels_come_from_names_outline_levels_and_based_on() {
        let xml = r#"<w:styles xmlns:w="x">
            <w:style w:styleId="H"><w:name w:val="heading 2"/></w:style>
            <w:style w:styleId="Custom"><w:name w:val="Clause"/><w:basedOn w:val="H"/></w:style>
            <w:style w:styleId="Out"><w:name w:val="Out"/><w:pPr><w:outlineLvl w:val="2"/></w:pPr></w:style>
            <w:style w:styleId="Loop"><w:name w:val="Loop"/><w:basedOn w:val="Loop"/></w:style>
        </w:styles>"#;
        let s = Styles::read(xml).unwrap();
        assert_eq!(s.heading_level("H"), Some(2));
        assert_eq!(s.heading_level("Custom"), Some(2));
        assert_eq!(s.heading_level("Out"), Some(3));
        assert_eq!(s.heading_level("Heading1"), Some(1));
        assert_eq!(s.heading_level("Loop"), None);
        assert_eq!(s.heading_level("Normal"), None);
    }
}
