//! Record tables (`TABLE.jsonl` beside `TABLE.schema.yaml`) and `principals.yaml`.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use dossier_core::{Principal, RecordRow, RecordSchema};
use serde::Deserialize;
use serde_json::Value;

use crate::guard::{self, Problems};
use crate::sheet;
use crate::{
    check_size, each_line, from_yaml, json_error, read_bytes, Error, IngestOptions, Item, Problem,
    RecordTable, Result,
};

/// Field types a schema may declare under `fields:`.
const FIELD_TYPES: &[&str] = &[
    "string",
    "text",
    "integer",
    "int",
    "number",
    "float",
    "boolean",
    "bool",
    "date",
    "datetime",
    "timestamp",
    "json",
    "object",
    "array",
    "list",
];

/// The schema beside a `TABLE.jsonl` (or `TABLE.csv`, `TABLE.xlsx`), if there is one,
/// which makes the file a table, not a corpus or a document.
pub(crate) fn schema_path(table: &Path) -> Option<PathBuf> {
    let name = table.file_name()?.to_str()?;
    let stem = name.rsplit_once('.')?.0;
    ["schema.yaml", "schema.yml"]
        .iter()
        .map(|ext| table.with_file_name(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
}

/// Whether `path` is a `TABLE.schema.yaml` with no table file beside it: a live table's
/// schema may stand alone (its rows are read from its source at question time).
pub(crate) fn schema_stands_alone(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let lower = name.to_ascii_lowercase();
    let Some(stem_len) = [".schema.yaml", ".schema.yml"]
        .iter()
        .find_map(|ext| lower.strip_suffix(ext).map(str::len))
    else {
        return false;
    };
    let stem = &name[..stem_len];
    !stem.is_empty()
        && ["jsonl", "csv", "xlsx"]
            .iter()
            .all(|ext| !path.with_file_name(format!("{stem}.{ext}")).exists())
}

/// A schema that stands alone: a live table with no rows of its own when it names a
/// `source`; otherwise nothing (a schema without its table file describes nothing to
/// ingest, as before live tables).
pub(crate) fn parse_lone_schema(path: &Path, opts: &IngestOptions) -> (Vec<Item>, Vec<Problem>) {
    let schema = match read_bytes(path, yaml_limit(opts))
        .and_then(|b| guard::text(&b).and_then(parse_schema))
    {
        Ok(s) => s,
        Err(e) => return (vec![], vec![Problem::from_error(path, &e)]),
    };
    if schema.source.is_none() {
        return (vec![], vec![]);
    }
    let table = RecordTable {
        schema,
        rows: Vec::new(),
        path: path.to_path_buf(),
    };
    (vec![Item::Records(table)], vec![])
}

/// 1-based number of the first line at or after line `from` (0-based) whose text,
/// less indentation and a list dash, starts with `prefix`.
fn find_line(src: &str, from: usize, prefix: &str) -> Option<usize> {
    src.lines()
        .enumerate()
        .skip(from)
        .find(|(_, l)| {
            let t = l.trim_start();
            t.strip_prefix("- ")
                .unwrap_or(t)
                .trim_start()
                .starts_with(prefix)
        })
        .map(|(i, _)| i + 1)
}

pub(crate) fn parse_schema(src: &str) -> Result<RecordSchema> {
    let schema: RecordSchema = from_yaml(src, 1)?;
    for (name, value) in [
        ("table", &schema.table),
        ("tenant", &schema.tenant),
        ("key", &schema.key),
    ] {
        let line = find_line(src, 0, &format!("{name}:"));
        if value.trim().is_empty() {
            return Err(Error::invalid(line, format!("`{name}` is empty")));
        }
        guard::id(&format!("`{name}`"), value, line)?;
    }
    guard::tenant("`tenant`", &schema.tenant, find_line(src, 0, "tenant:"))?;
    if let Some(f) = &schema.owner_field {
        guard::id("`owner_field`", f, find_line(src, 0, "owner_field:"))?;
    }
    let groups_line = find_line(src, 0, "read_groups:");
    for g in &schema.read_groups {
        guard::id("`read_groups` group", g, groups_line)?;
    }
    for l in &schema.links {
        if let Some(t) = &l.table {
            guard::id(
                "linked `table`",
                t,
                find_line(src, 0, &format!("field: {}", l.field)),
            )?;
        }
        let targets = [l.table.is_some(), l.document, l.entity.is_some()];
        if targets.iter().filter(|&&t| t).count() != 1 {
            return Err(Error::invalid(
                find_line(src, 0, &format!("field: {}", l.field)),
                format!(
                    "link of `{}` must name exactly one of `table`, `document`, `entity`",
                    l.field
                ),
            ));
        }
    }
    if let Some(source) = &schema.source {
        source
            .check(&schema)
            .map_err(|m| Error::invalid(find_line(src, 0, "source:"), m))?;
    }
    for shape in &schema.key_shapes {
        if shape.is_empty() || shape.len() > 64 || shape.chars().any(char::is_whitespace) {
            return Err(Error::invalid(
                find_line(src, 0, "key_shapes:"),
                format!("key shape {shape:?} must be 1-64 characters without spaces"),
            ));
        }
    }
    // `fields:` is optional and not kept in the schema; it is checked so that a typo
    // in a type is caught at ingest rather than ignored.
    let doc: serde_norway::Value = from_yaml(src, 1)?;
    if let Some(fields) = doc.get("fields") {
        let start = find_line(src, 0, "fields:").unwrap_or(1);
        let Some(map) = fields.as_mapping() else {
            return Err(Error::invalid(
                Some(start),
                "`fields` must map field names to types",
            ));
        };
        for (name, ty) in map {
            let name = name.as_str().unwrap_or_default();
            let ty_name = ty.as_str().or_else(|| ty.get("type")?.as_str());
            if !ty_name.is_some_and(|t| FIELD_TYPES.contains(&t)) {
                return Err(Error::invalid(
                    find_line(src, start, &format!("{name}:")),
                    format!(
                        "unknown type {} for field `{name}` (known: {})",
                        ty_name.map_or_else(|| format!("{ty:?}"), |t| format!("`{t}`")),
                        FIELD_TYPES.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(schema)
}

fn yaml_limit(opts: &IngestOptions) -> u64 {
    opts.max_yaml_bytes.min(opts.max_file_bytes)
}

/// Reads a table from its files.
pub(crate) fn parse_table_file(
    path: &Path,
    schema_path: &Path,
    opts: &IngestOptions,
) -> (Option<RecordTable>, Vec<Problem>) {
    let schema = match read_bytes(schema_path, yaml_limit(opts)) {
        Ok(b) => b,
        Err(e) => return (None, vec![Problem::from_error(schema_path, &e)]),
    };
    let rows = crate::open_regular(path).and_then(|(file, size)| {
        check_size(size, opts.max_file_bytes)?;
        // Bounded here too, in case the file grows while it is read.
        let bounded = std::io::Read::take(file, opts.max_file_bytes + 1);
        Ok(std::io::BufReader::new(bounded))
    });
    table(path, schema_path, &schema, rows, opts)
}

/// Reads a table from the content of its files.
pub(crate) fn parse_table(
    path: &Path,
    schema_path: &Path,
    schema: &[u8],
    rows: &[u8],
    opts: &IngestOptions,
) -> (Option<RecordTable>, Vec<Problem>) {
    if let Err(e) = check_size(schema.len() as u64, yaml_limit(opts)) {
        return (None, vec![Problem::from_error(schema_path, &e)]);
    }
    let rows = check_size(rows.len() as u64, opts.max_file_bytes).map(|()| rows);
    table(path, schema_path, schema, rows, opts)
}

/// Reads a table. A bad schema rejects the table; a bad row is a problem and is left
/// out, and the other rows land.
fn table(
    path: &Path,
    schema_path: &Path,
    schema: &[u8],
    rows_in: Result<impl BufRead>,
    opts: &IngestOptions,
) -> (Option<RecordTable>, Vec<Problem>) {
    let schema = match guard::text(schema).and_then(parse_schema) {
        Ok(s) => s,
        Err(e) => return (None, vec![Problem::from_error(schema_path, &e)]),
    };
    let mut problems = Problems::new(path);
    let mut rows = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let read = rows_in.and_then(|r| {
        each_line(r, opts.max_file_bytes, |n, line| {
            let blank = line.as_ref().is_ok_and(|l| l.trim().is_empty());
            if blank {
                return true;
            }
            if rows.len() >= opts.max_rows {
                let msg = format!(
                    "the table has more than {} rows; this and later lines are not read",
                    opts.max_rows
                );
                problems.push(Some(n), msg);
                return false;
            }
            let problem = match line.and_then(|l| row(&schema, l)) {
                Ok(r) => match seen.get(&r.key) {
                    Some(first) => format!("duplicate key {:?} (first on line {first})", r.key),
                    None => {
                        seen.insert(r.key.clone(), n);
                        rows.push(r);
                        return true;
                    }
                },
                Err(e) => e.to_string(),
            };
            problems.push(Some(n), problem);
            true
        })
    });
    if let Err(e) = read {
        return (None, vec![Problem::from_error(path, &e)]);
    }
    // A live table's rows are read from its source at question time; a snapshot beside
    // it would be a second, stale truth.
    if schema.source.is_some() && !rows.is_empty() {
        let msg = "the schema names a live `source`: its table file must hold no rows".to_string();
        return (None, vec![Problem::new(path, None, msg)]);
    }
    let table = RecordTable {
        schema,
        rows,
        path: path.to_path_buf(),
    };
    (Some(table), problems.finish())
}

fn row(schema: &RecordSchema, line: &str) -> Result<RecordRow> {
    let Value::Object(fields) = serde_json::from_str(line).map_err(json_error)? else {
        return Err(Error::invalid(None, "a row must be a JSON object"));
    };
    row_of(schema, fields)
}

/// Reads a table kept as a spreadsheet or CSV file (its first sheet, or the sheet named
/// like the table): the first row names the fields, each further row is a record.
pub(crate) fn parse_grid_file(
    path: &Path,
    schema_path: &Path,
    opts: &IngestOptions,
) -> (Option<RecordTable>, Vec<Problem>) {
    let schema = match read_bytes(schema_path, yaml_limit(opts))
        .and_then(|b| guard::text(&b).and_then(parse_schema))
    {
        Ok(s) => s,
        Err(e) => return (None, vec![Problem::from_error(schema_path, &e)]),
    };
    let is_csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let grid = read_bytes(path, opts.max_file_bytes).and_then(|bytes| {
        if is_csv {
            return sheet::read_csv(&schema.table, &bytes, opts);
        }
        let mut sheets = sheet::read_xlsx(&bytes, opts)?;
        let at = sheets
            .iter()
            .position(|g| g.name == schema.table)
            .unwrap_or(0);
        if sheets.is_empty() {
            return Err(Error::invalid(None, "the workbook has no sheets"));
        }
        Ok(sheets.swap_remove(at))
    });
    let grid = match grid {
        Ok(g) => g,
        Err(e) => return (None, vec![Problem::from_error(path, &e)]),
    };
    let mut problems = Problems::new(path);
    let mut rows = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (n, fields) in sheet::objects(&grid, &schema.date_fields) {
        match row_of(&schema, fields) {
            Ok(r) => match seen.get(&r.key) {
                Some(first) => problems.push(
                    Some(n),
                    format!("duplicate key {:?} (first on row {first})", r.key),
                ),
                None => {
                    seen.insert(r.key.clone(), n);
                    rows.push(r);
                }
            },
            Err(e) => problems.push(Some(n), e.to_string()),
        }
    }
    let table = RecordTable {
        schema,
        rows,
        path: path.to_path_buf(),
    };
    (Some(table), problems.finish())
}

/// A record from its fields, checked against the schema.
fn row_of(schema: &RecordSchema, fields: serde_json::Map<String, Value>) -> Result<RecordRow> {
    let key = match fields.get(&schema.key) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(Error::invalid(
                None,
                format!(
                    "row has no key: `{}` must be a non-empty string or a number",
                    schema.key
                ),
            ))
        }
    };
    guard::id("row key", &key, None)?;
    for f in &schema.date_fields {
        match fields.get(f) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if is_date(s) => {}
            Some(v) => {
                return Err(Error::invalid(
                    None,
                    format!("date field `{f}` must be YYYY-MM-DD, not {v}"),
                ))
            }
        }
    }
    Ok(RecordRow {
        table: schema.table.clone(),
        key,
        fields,
    })
}

/// A date, or a date-time whose date part is one.
fn is_date(s: &str) -> bool {
    let (d, rest) = s.split_at_checked(10).unwrap_or((s, ""));
    NaiveDate::parse_from_str(d, "%Y-%m-%d").is_ok()
        && (rest.is_empty() || rest.starts_with(['T', ' ']))
}

#[derive(Deserialize)]
struct PrincipalsFile {
    principals: Vec<Principal>,
}

/// Reads `principals.yaml`. Identity decides access, so a file with an ambiguous or
/// incomplete principal is rejected whole rather than loaded in part.
pub(crate) fn parse_principals(path: &Path, src: &str) -> Result<Item> {
    let file: PrincipalsFile = from_yaml(src, 1)?;
    let id_lines: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            t.strip_prefix("- ")
                .unwrap_or(t)
                .trim_start()
                .starts_with("id:")
        })
        .map(|(i, _)| i + 1)
        .collect();
    let line_of = |i: usize| (id_lines.len() == file.principals.len()).then(|| id_lines[i]);
    let mut seen = HashSet::new();
    for (i, p) in file.principals.iter().enumerate() {
        if p.id.trim().is_empty() || p.tenant.trim().is_empty() {
            return Err(Error::invalid(
                line_of(i),
                "a principal needs an `id` and a `tenant`",
            ));
        }
        guard::id("principal `id`", &p.id, line_of(i))?;
        guard::tenant("principal `tenant`", &p.tenant, line_of(i))?;
        for g in &p.groups {
            guard::id("principal group", g, line_of(i))?;
        }
        match &p.kbs {
            Some(kbs) if kbs.is_empty() => {
                return Err(Error::invalid(
                    line_of(i),
                    "`kbs: []` names no knowledge base; leave it out to read all of them",
                ))
            }
            Some(kbs) => {
                for k in kbs {
                    guard::id("principal `kbs`", k, line_of(i))?;
                }
            }
            None => {}
        }
        if !seen.insert(p.id.as_str()) {
            return Err(Error::invalid(
                line_of(i),
                format!("duplicate principal id {:?}", p.id),
            ));
        }
    }
    Ok(Item::Principals {
        path: path.to_path_buf(),
        principals: file.principals,
    })
}
