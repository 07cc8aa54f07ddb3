//! Structured records and the schema that says who may read them.

use serde::{Deserialize, Serialize};

/// `TABLE.schema.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordSchema {
    pub table: String,
    pub tenant: String,
    pub key: String,
    #[serde(default)]
    pub owner_field: Option<String>,
    /// Groups that may read every row; `"*"` means any principal of the tenant.
    #[serde(default)]
    pub read_groups: Vec<String>,
    #[serde(default)]
    pub date_fields: Vec<String>,
    #[serde(default)]
    pub links: Vec<RecordLink>,
    /// Fields whose values are personal or sensitive: shown as `[field]` to every reader
    /// the deployment's PII policy does not grant them (`unmask_groups`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive: Vec<String>,
    /// Where the rows live when they are not copied in: a SQL query or an HTTP JSON API
    /// read at question time with the caller's identity bound (see [`RecordSource`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RecordSource>,
    /// The shapes of the table's keys (letters kept, digits as `9`: `A999`), for a live
    /// table, whose keys are not stored to learn them from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_shapes: Vec<String>,
}

/// A live table's source. The program binds the parameters; the query or path names
/// them and cannot name anything else:
///
/// - SQL (`kind: sql`): `:key`, `:principal`, `:tenant`, `:groups` (text array) and
///   `:reads_all` (whether the caller is in one of `read_groups`), e.g.
///   `SELECT * FROM orders WHERE order_id = :key AND (owner = :principal OR :reads_all)`.
///   A table with an `owner_field` must filter by `:principal` in the query itself.
/// - HTTP (`kind: http`): `GET` of the connection's base URL + `path`, whose `{key}` is
///   the key (percent-encoded); the identity goes as `X-Dossier-Principal`,
///   `X-Dossier-Tenant` and `X-Dossier-Groups` headers. `200` with a JSON object is the
///   row; `404` and `403` are "no such row" alike.
///
/// `connection` names an entry of the deployment's sources file (`--sources`) or
/// the environment (`DOSSIER_SOURCE_<NAME>`): URLs and credentials never sit in a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum RecordSource {
    Sql {
        connection: String,
        query: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    Http {
        connection: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
}

/// The parameters a SQL source may name.
pub const SQL_BINDS: &[&str] = &["key", "principal", "tenant", "groups", "reads_all"];

/// Longest query or path a source may hold, and the longest timeout it may ask for.
pub const MAX_SOURCE_TEXT: usize = 8 * 1024;
pub const MAX_SOURCE_TIMEOUT_MS: u64 = 60_000;

impl RecordSource {
    pub fn connection(&self) -> &str {
        match self {
            RecordSource::Sql { connection, .. } | RecordSource::Http { connection, .. } => {
                connection
            }
        }
    }

    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            RecordSource::Sql { timeout_ms, .. } | RecordSource::Http { timeout_ms, .. } => {
                *timeout_ms
            }
        }
    }

    /// Whether the source can serve `schema` safely: the key is bound, an owned table's
    /// owner filter is in the query, only known parameters are named.
    pub fn check(&self, schema: &RecordSchema) -> Result<(), String> {
        let c = self.connection();
        if c.is_empty()
            || c.len() > 64
            || !c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "source `connection` {c:?} must be 1-64 of letters, digits, _ and -"
            ));
        }
        if self
            .timeout_ms()
            .is_some_and(|t| t == 0 || t > MAX_SOURCE_TIMEOUT_MS)
        {
            return Err(format!(
                "source `timeout_ms` must be 1 to {MAX_SOURCE_TIMEOUT_MS}"
            ));
        }
        match self {
            RecordSource::Sql { query, .. } => {
                if query.len() > MAX_SOURCE_TEXT {
                    return Err(format!("source `query` is over {MAX_SOURCE_TEXT} bytes"));
                }
                let (_, names) = sql_binds(query)?;
                if !names.iter().any(|n| n == "key") {
                    return Err("source `query` must bind the key as `:key`".into());
                }
                if schema.owner_field.is_some() && !names.iter().any(|n| n == "principal") {
                    return Err(format!(
                        "source `query` of a table with `owner_field` must filter by `:principal` \
                         (e.g. `AND ({} = :principal OR :reads_all)`): the owner check belongs \
                         in the query, not after it",
                        schema.owner_field.as_deref().unwrap_or("owner")
                    ));
                }
                Ok(())
            }
            RecordSource::Http { path, .. } => {
                if path.len() > MAX_SOURCE_TEXT {
                    return Err(format!("source `path` is over {MAX_SOURCE_TEXT} bytes"));
                }
                if !path.starts_with('/') || path.matches("{key}").count() != 1 {
                    return Err("source `path` must start with / and hold `{key}` once".into());
                }
                Ok(())
            }
        }
    }
}

/// `query` with its `:name` parameters turned into `$1…` (each name one number, in
/// order of first use) and the names in that order. Quoted text (`'…'`, `"…"`), casts
/// (`::int`) and comments are left alone; an unknown name is an error.
pub fn sql_binds(query: &str) -> Result<(String, Vec<String>), String> {
    let b = query.as_bytes();
    let mut out = String::with_capacity(query.len());
    let mut names: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' => {
                let end = b[i + 1..]
                    .iter()
                    .position(|&x| x == c)
                    .map_or(b.len(), |p| i + 1 + p + 1);
                out.push_str(&query[i..end]);
                i = end;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                let end = b[i..]
                    .iter()
                    .position(|&x| x == b'\n')
                    .map_or(b.len(), |p| i + p);
                out.push_str(&query[i..end]);
                i = end;
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                out.push_str("::");
                i += 2;
            }
            b':' if b
                .get(i + 1)
                .is_some_and(|x| x.is_ascii_alphabetic() || *x == b'_') =>
            {
                let start = i + 1;
                let mut end = start;
                while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                    end += 1;
                }
                let name = &query[start..end];
                if !SQL_BINDS.contains(&name) {
                    return Err(format!(
                        "source `query` names `:{name}`; it may name only {}",
                        SQL_BINDS
                            .iter()
                            .map(|n| format!(":{n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let n = match names.iter().position(|x| x == name) {
                    Some(p) => p + 1,
                    None => {
                        names.push(name.to_string());
                        names.len()
                    }
                };
                out.push_str(&format!("${n}"));
                i = end;
            }
            b'$' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                return Err(
                    "source `query` must name its parameters (`:key`), not number them".into(),
                );
            }
            _ => {
                let ch = query[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    Ok((out, names))
}

/// A field of a row that points at another table, a document, or a typed entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordLink {
    pub field: String,
    #[serde(default)]
    pub table: Option<String>,
    #[serde(default)]
    pub document: bool,
    #[serde(default)]
    pub entity: Option<String>,
    pub relation: String,
}

/// One row with its key, as read from `TABLE.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordRow {
    pub table: String,
    pub key: String,
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl RecordSchema {
    /// Whether this principal may read the row: owner, a read group, or `"*"`.
    pub fn row_readable_by(&self, row: &RecordRow, principal_id: &str, groups: &[String]) -> bool {
        if self
            .read_groups
            .iter()
            .any(|g| g == "*" || groups.contains(g))
        {
            return true;
        }
        match &self.owner_field {
            Some(f) => row.fields.get(f).and_then(|v| v.as_str()) == Some(principal_id),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(owner: Option<&str>) -> RecordSchema {
        RecordSchema {
            table: "orders".into(),
            tenant: "shop".into(),
            key: "order_id".into(),
            owner_field: owner.map(str::to_string),
            read_groups: vec!["support".into()],
            date_fields: vec![],
            links: vec![],
            sensitive: vec![],
            source: None,
            key_shapes: vec![],
        }
    }

    #[test]
    fn named_parameters_become_numbered_ones_outside_quotes_and_casts() {
        let (q, names) = sql_binds(
            "SELECT *, ':key' AS s, x::text FROM o -- :nope\nWHERE id = :key AND (owner = :principal OR :reads_all) AND id <> :key",
        )
        .unwrap();
        assert_eq!(names, ["key", "principal", "reads_all"]);
        assert_eq!(
            q,
            "SELECT *, ':key' AS s, x::text FROM o -- :nope\nWHERE id = $1 AND (owner = $2 OR $3) AND id <> $1"
        );
        assert!(sql_binds("SELECT 1 WHERE a = :password")
            .unwrap_err()
            .contains(":password"));
        assert!(sql_binds("SELECT 1 WHERE a = $1").is_err());
        // Unterminated quotes and odd bytes are no panic.
        let _ = sql_binds("SELECT 'abc");
        let _ = sql_binds("SELECT \"é:key");
    }

    #[test]
    fn a_source_must_bind_the_key_and_an_owned_tables_owner() {
        let sql = |q: &str| RecordSource::Sql {
            connection: "db".into(),
            query: q.into(),
            timeout_ms: None,
        };
        let owned = schema(Some("owner"));
        assert!(
            sql("SELECT * FROM o WHERE id = :key AND (owner = :principal OR :reads_all)")
                .check(&owned)
                .is_ok()
        );
        assert!(sql("SELECT * FROM o WHERE id = :key")
            .check(&owned)
            .unwrap_err()
            .contains(":principal"));
        assert!(sql("SELECT * FROM o WHERE id = :key")
            .check(&schema(None))
            .is_ok());
        assert!(sql("SELECT * FROM o")
            .check(&schema(None))
            .unwrap_err()
            .contains(":key"));
        let http = |p: &str, c: &str| RecordSource::Http {
            connection: c.into(),
            path: p.into(),
            timeout_ms: Some(100),
        };
        assert!(http("/c/{key}", "crm").check(&owned).is_ok());
        assert!(http("/c", "crm").check(&owned).is_err());
        assert!(http("/c/{key}", "crm prod").check(&owned).is_err());
        assert!(RecordSource::Http {
            connection: "crm".into(),
            path: "/c/{key}".into(),
            timeout_ms: Some(0)
        }
        .check(&owned)
        .is_err());
    }
}
