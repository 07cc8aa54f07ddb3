//! SQL sources on PostgreSQL (and anything that speaks its protocol): the schema's query
//! with its `:names` bound as parameters, in a read-only transaction whose
//! `statement_timeout` is what is left of the read's time.

use std::time::Duration;

use postgres::types::{ToSql, Type};
use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;
use serde_json::{Map, Number, Value};

use crate::{Attempt, ConnectionSpec, Fetched, Reader};

pub(crate) struct Pool {
    pool: r2d2::Pool<PostgresConnectionManager<NoTls>>,
}

impl Pool {
    pub(crate) fn new(spec: &ConnectionSpec) -> Result<Pool, String> {
        let config: postgres::Config = spec.url.parse().map_err(|e| format!("{e}"))?;
        let manager = PostgresConnectionManager::new(config, NoTls);
        // Lazily: a source that is down at start is an unavailable source, not a
        // server that does not start.
        let pool = r2d2::Pool::builder()
            .max_size(spec.max_connections.unwrap_or(4).clamp(1, 32))
            .min_idle(Some(0))
            .connection_timeout(Duration::from_millis(spec.timeout_ms.unwrap_or(3_000)))
            .build_unchecked(manager);
        Ok(Pool { pool })
    }

    pub(crate) fn fetch(
        &self,
        query: &str,
        key: &str,
        reader: &Reader,
        reads_all: bool,
        left: Duration,
    ) -> Attempt {
        let (sql, names) = match dossier_core::record::sql_binds(query) {
            Ok(q) => q,
            Err(e) => return Attempt::Failed(e),
        };
        let groups: Vec<String> = reader.groups.to_vec();
        let params: Vec<&(dyn ToSql + Sync)> = names
            .iter()
            .map(|n| -> &(dyn ToSql + Sync) {
                match n.as_str() {
                    "key" => &key,
                    "principal" => &reader.principal,
                    "tenant" => &reader.tenant,
                    "groups" => &groups,
                    _ => &reads_all,
                }
            })
            .collect();
        let mut client = match self.pool.get_timeout(left) {
            Ok(c) => c,
            Err(e) => return Attempt::Transient(format!("no connection: {e}")),
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128);
        let rows = (|| {
            let mut tx = client.build_transaction().read_only(true).start()?;
            tx.batch_execute(&format!("SET LOCAL statement_timeout = {ms}"))?;
            let rows = tx.query(sql.as_str(), &params)?;
            tx.commit()?;
            Ok::<_, postgres::Error>(rows)
        })();
        match rows {
            Ok(rows) => match rows.first() {
                None => Attempt::Done(Fetched::Missing),
                Some(row) => match fields_of(row) {
                    Ok(f) => Attempt::Done(Fetched::Row(f)),
                    Err(e) => Attempt::Failed(e),
                },
            },
            Err(e) => {
                let code = e.code().map(|c| c.code().to_string());
                match code.as_deref() {
                    // query_canceled: the statement timeout.
                    Some("57014") => Attempt::Timeout(format!("query ran past {ms} ms")),
                    // Connection and shutdown classes: worth one more try.
                    Some(c) if c.starts_with("08") || c.starts_with("57P") => {
                        Attempt::Transient(e.to_string())
                    }
                    Some(_) => Attempt::Failed(e.to_string()),
                    None if e.is_closed() => Attempt::Transient(e.to_string()),
                    None => Attempt::Transient(e.to_string()),
                }
            }
        }
    }
}

/// A row as JSON: text, numbers, booleans, dates and times (ISO 8601), JSON, and arrays
/// of text; another type is an error naming the column, so that the query casts it.
fn fields_of(row: &postgres::Row) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (i, col) in row.columns().iter().enumerate() {
        let t = col.type_();
        let bad = |e: postgres::Error| format!("column {}: {e}", col.name());
        let v = match *t {
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => opt(
                row.try_get::<_, Option<String>>(i).map_err(bad)?,
                Value::String,
            ),
            Type::INT2 => opt(row.try_get::<_, Option<i16>>(i).map_err(bad)?, |n| n.into()),
            Type::INT4 => opt(row.try_get::<_, Option<i32>>(i).map_err(bad)?, |n| n.into()),
            Type::INT8 => opt(row.try_get::<_, Option<i64>>(i).map_err(bad)?, |n| n.into()),
            Type::FLOAT4 => opt(row.try_get::<_, Option<f32>>(i).map_err(bad)?, |n| {
                Number::from_f64(f64::from(n)).map_or(Value::Null, Value::Number)
            }),
            Type::FLOAT8 => opt(row.try_get::<_, Option<f64>>(i).map_err(bad)?, |n| {
                Number::from_f64(n).map_or(Value::Null, Value::Number)
            }),
            Type::BOOL => opt(row.try_get::<_, Option<bool>>(i).map_err(bad)?, Value::Bool),
            Type::DATE => opt(
                row.try_get::<_, Option<chrono::NaiveDate>>(i)
                    .map_err(bad)?,
                |d| Value::String(d.to_string()),
            ),
            Type::TIMESTAMP => opt(
                row.try_get::<_, Option<chrono::NaiveDateTime>>(i)
                    .map_err(bad)?,
                |d| Value::String(d.format("%Y-%m-%dT%H:%M:%S").to_string()),
            ),
            Type::TIMESTAMPTZ => opt(
                row.try_get::<_, Option<chrono::DateTime<chrono::Utc>>>(i)
                    .map_err(bad)?,
                |d| Value::String(d.to_rfc3339()),
            ),
            Type::JSON | Type::JSONB => row
                .try_get::<_, Option<Value>>(i)
                .map_err(bad)?
                .unwrap_or(Value::Null),
            Type::TEXT_ARRAY | Type::VARCHAR_ARRAY => opt(
                row.try_get::<_, Option<Vec<String>>>(i).map_err(bad)?,
                |v| Value::Array(v.into_iter().map(Value::String).collect()),
            ),
            _ => {
                return Err(format!(
                    "column {} has type {}; cast it in the query (e.g. `{}::text`)",
                    col.name(),
                    t.name(),
                    col.name()
                ))
            }
        };
        out.insert(col.name().to_string(), v);
    }
    Ok(out)
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}
