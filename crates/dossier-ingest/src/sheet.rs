//! Spreadsheets (XLSX) and CSV: grids of cells, read as a record table where a
//! `TABLE.schema.yaml` stands beside the file, and as a text document otherwise.
//!
//! The first row names the columns. As a table, each further row is a record whose
//! fields are the named cells (`true`/`false` and numbers typed, empty cells absent, a
//! spreadsheet date serial in a schema date field written as `YYYY-MM-DD`); as text, each
//! row is one paragraph of `column: value` pairs under a heading per sheet, so that a row
//! is never cut from its column names.

use std::collections::HashMap;

use chrono::{Duration, NaiveDate};
use serde_json::{Map, Value};

use crate::office::{attr, name_of, walk, Package, Tag};
use crate::{Error, IngestOptions, Result};

/// One cell as the file typed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Empty,
    Text(String),
    Number(f64),
    Bool(bool),
}

impl Cell {
    fn display(&self) -> String {
        match self {
            Cell::Empty => String::new(),
            Cell::Text(s) => s.clone(),
            Cell::Number(n) => number_text(*n),
            Cell::Bool(b) => b.to_string(),
        }
    }
}

fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// A named grid: a sheet, or the whole of a CSV file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grid {
    pub name: String,
    pub rows: Vec<Vec<Cell>>,
}

/// Reads a CSV file (comma-separated, `"` quoting, rows of any length). CSV has no
/// types: a cell is text, typed later where a table reads it.
pub(crate) fn read_csv(name: &str, bytes: &[u8], opts: &IngestOptions) -> Result<Grid> {
    let text = crate::guard::text(bytes)?;
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| Error::invalid(Some(i + 1), format!("invalid CSV: {e}")))?;
        if rows.len() > opts.max_rows {
            return Err(Error::invalid(
                Some(i + 1),
                format!("more than {} rows", opts.max_rows),
            ));
        }
        rows.push(
            rec.iter()
                .map(|c| match c.trim() {
                    "" => Cell::Empty,
                    t => Cell::Text(t.to_string()),
                })
                .collect(),
        );
    }
    Ok(Grid {
        name: name.to_string(),
        rows,
    })
}

/// Reads every sheet of an XLSX workbook, in workbook order.
pub(crate) fn read_xlsx(bytes: &[u8], opts: &IngestOptions) -> Result<Vec<Grid>> {
    let mut pkg = Package::open(bytes, "XLSX", opts)?;
    let workbook = pkg.required("xl/workbook.xml")?;
    let rels = pkg.part("xl/_rels/workbook.xml.rels")?.unwrap_or_default();
    let shared = match pkg.part("xl/sharedStrings.xml")? {
        Some(x) => shared_strings(&x)?,
        None => Vec::new(),
    };
    let mut targets = HashMap::new();
    walk(&rels, |t| {
        if let Tag::Open(e) | Tag::Empty(e) = t {
            if name_of(&e) == b"Relationship" {
                if let (Some(id), Some(target)) = (attr(&e, b"Id"), attr(&e, b"Target")) {
                    targets.insert(id, target);
                }
            }
        }
    })?;
    let mut sheets = Vec::new();
    walk(&workbook, |t| {
        if let Tag::Open(e) | Tag::Empty(e) = t {
            if name_of(&e) == b"sheet" {
                let name = attr(&e, b"name").unwrap_or_default();
                let target = attr(&e, b"id").and_then(|id| targets.get(&id).cloned());
                sheets.push((name, target));
            }
        }
    })?;
    let mut grids = Vec::new();
    for (i, (name, target)) in sheets.into_iter().enumerate() {
        let part = match target {
            Some(t) if t.starts_with('/') => t.trim_start_matches('/').to_string(),
            Some(t) => format!("xl/{t}"),
            None => format!("xl/worksheets/sheet{}.xml", i + 1),
        };
        let Some(xml) = pkg.part(&part)? else {
            continue;
        };
        grids.push(Grid {
            name,
            rows: sheet_rows(&xml, &shared, opts)?,
        });
    }
    Ok(grids)
}

fn shared_strings(xml: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut in_t = false;
    // Phonetic runs (`rPh`) annotate the text; they are not part of it.
    let mut in_phonetic = false;
    walk(xml, |t| match t {
        Tag::Open(e) => match name_of(&e) {
            b"si" => cur = Some(String::new()),
            b"t" => in_t = true,
            b"rPh" => in_phonetic = true,
            _ => {}
        },
        Tag::Empty(e) if name_of(&e) == b"si" => out.push(String::new()),
        Tag::Text(s) if in_t && !in_phonetic => {
            if let Some(c) = cur.as_mut() {
                c.push_str(&s);
            }
        }
        Tag::Close(n) => match n.as_slice() {
            b"t" => in_t = false,
            b"rPh" => in_phonetic = false,
            b"si" => out.extend(cur.take()),
            _ => {}
        },
        _ => {}
    })?;
    Ok(out)
}

/// Zero-based column of a cell reference (`C7` → 2).
fn column(reference: &str) -> Option<usize> {
    let letters: String = reference
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    if letters.is_empty() || letters.len() > 3 {
        return None;
    }
    letters
        .chars()
        .try_fold(0usize, |acc, c| {
            Some(acc * 26 + (c.to_ascii_uppercase() as usize - 'A' as usize + 1))
        })
        .map(|n| n - 1)
}

/// The columns a sheet may have (XFD is Excel's last); beyond is refused.
const MAX_COLUMNS: usize = 16_384;

fn sheet_rows(xml: &str, shared: &[String], opts: &IngestOptions) -> Result<Vec<Vec<Cell>>> {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut row: Option<Vec<Cell>> = None;
    let mut cell: Option<(Option<usize>, String, String)> = None; // (column, type, value)
    let mut in_value = false;
    let mut too_many = false;
    walk(xml, |t| match t {
        Tag::Open(e) if name_of(&e) == b"row" => row = Some(Vec::new()),
        Tag::Empty(e) if name_of(&e) == b"row" => rows.push(Vec::new()),
        Tag::Open(e) if name_of(&e) == b"c" => {
            let col = attr(&e, b"r").and_then(|r| column(&r));
            cell = Some((col, attr(&e, b"t").unwrap_or_default(), String::new()));
        }
        Tag::Open(e) if matches!(name_of(&e), b"v" | b"t") => in_value = true,
        Tag::Text(s) if in_value => {
            if let Some((_, _, v)) = cell.as_mut() {
                v.push_str(&s);
            }
        }
        Tag::Close(n) => match n.as_slice() {
            b"v" | b"t" => in_value = false,
            b"c" => {
                let (Some(r), Some((col, ty, v))) = (row.as_mut(), cell.take()) else {
                    return;
                };
                let at = col.unwrap_or(r.len());
                if at >= MAX_COLUMNS {
                    too_many = true;
                    return;
                }
                let value = match ty.as_str() {
                    "s" => v
                        .trim()
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| shared.get(i))
                        .map_or(Cell::Empty, |s| Cell::Text(s.clone())),
                    "b" => Cell::Bool(v.trim() == "1"),
                    "str" | "inlineStr" => Cell::Text(v),
                    "e" => Cell::Empty,
                    _ => v.trim().parse().map_or(Cell::Empty, Cell::Number),
                };
                if r.len() <= at {
                    r.resize(at + 1, Cell::Empty);
                }
                r[at] = value;
            }
            b"row" => {
                if rows.len() <= opts.max_rows {
                    rows.extend(row.take());
                } else {
                    too_many = true;
                }
            }
            _ => {}
        },
        _ => {}
    })?;
    if too_many {
        return Err(Error::invalid(
            None,
            format!(
                "a sheet has more than {} rows or {MAX_COLUMNS} columns",
                opts.max_rows
            ),
        ));
    }
    Ok(rows)
}

/// Column names of a grid's first row (unnamed columns are `column N`).
fn header(grid: &Grid) -> Vec<String> {
    grid.rows
        .first()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(|(i, c)| match c.display().trim() {
                    "" => format!("column {}", i + 1),
                    t => t.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The grid's rows under its header as JSON objects, one per non-empty row, with the
/// 1-based row number; `date_fields` turn spreadsheet date serials into dates.
pub(crate) fn objects(grid: &Grid, date_fields: &[String]) -> Vec<(usize, Map<String, Value>)> {
    let names = header(grid);
    let mut out = Vec::new();
    for (i, row) in grid.rows.iter().enumerate().skip(1) {
        let mut fields = Map::new();
        for (name, cell) in names.iter().zip(row) {
            let v = match cell {
                Cell::Empty => continue,
                Cell::Bool(b) => Value::Bool(*b),
                Cell::Number(n) if date_fields.contains(name) => Value::String(serial_date(*n)),
                Cell::Number(n) => json_number(*n),
                Cell::Text(t) => typed(t),
            };
            fields.insert(name.clone(), v);
        }
        if !fields.is_empty() {
            out.push((i + 1, fields));
        }
    }
    out
}

/// CSV text typed as JSON would have it: booleans and numbers, else text.
fn typed(t: &str) -> Value {
    match t.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    // Leading zeros (postcodes, ids) stay text.
    let numeric = !(t.len() > 1 && t.starts_with('0') && !t.starts_with("0."));
    match t.parse::<f64>() {
        Ok(n) if numeric && n.is_finite() && !t.contains(['e', 'E']) => json_number(n),
        _ => Value::String(t.to_string()),
    }
}

fn json_number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// A spreadsheet date serial (days since 1899-12-30) as `YYYY-MM-DD`.
fn serial_date(n: f64) -> String {
    let epoch = NaiveDate::from_ymd_opt(1899, 12, 30).expect("valid date");
    match epoch.checked_add_signed(Duration::days(n.floor() as i64)) {
        Some(d) if (1.0..2_958_466.0).contains(&n) => d.format("%Y-%m-%d").to_string(),
        _ => number_text(n),
    }
}

/// The grids as text: a heading per grid (where there are several), a paragraph per row.
pub(crate) fn text(grids: &[Grid]) -> String {
    let mut out = String::new();
    for g in grids {
        if g.rows.iter().all(|r| r.iter().all(|c| *c == Cell::Empty)) {
            continue;
        }
        if grids.len() > 1 {
            out.push_str(&format!("## {}\n\n", g.name.trim()));
        }
        let names = header(g);
        for row in g.rows.iter().skip(1) {
            let pairs: Vec<String> = names
                .iter()
                .zip(row)
                .filter(|(_, c)| **c != Cell::Empty)
                .map(|(n, c)| {
                    format!(
                        "{n}: {}",
                        c.display().split_whitespace().collect::<Vec<_>>().join(" ")
                    )
                })
                .collect();
            if !pairs.is_empty() {
                out.push_str(&pairs.join("; "));
                out.push_str("\n\n");
            }
        }
    }
    out.trim_end().to_string() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_become_typed_objects_and_text() {
        let opts = IngestOptions::default();
        let g = read_csv(
            "orders",
            b"order_id,owner,opened,amount,zip,signed_at\nA1,u7,true,12.5,02139,2026-09-10\nA2,u8,FALSE,3,,\n",
            &opts,
        )
        .unwrap();
        let rows = objects(&g, &["signed_at".into()]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, 2);
        assert_eq!(rows[0].1["opened"], Value::Bool(true));
        assert_eq!(rows[0].1["amount"], serde_json::json!(12.5));
        assert_eq!(rows[0].1["zip"], Value::String("02139".into()));
        assert_eq!(rows[1].1["amount"], serde_json::json!(3));
        assert!(!rows[1].1.contains_key("zip"));
        let t = text(&[g]);
        assert!(
            t.starts_with("order_id: A1; owner: u7; opened: true; amount: 12.5"),
            "{t}"
        );
    }

    #[test]
    fn columns_and_serial_dates() {
        assert_eq!(column("A1"), Some(0));
        assert_eq!(column("AB12"), Some(27));
        assert_eq!(column("1"), None);
        assert_eq!(serial_date(46275.0), "2026-09-10");
    }
}
