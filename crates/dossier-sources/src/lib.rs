//! Live record sources: a record table whose rows stay in the business system (a SQL
//! database, an HTTP JSON API) and are read at question time, one key at a time.
//!
//! The schema names the source ([`dossier_core::RecordSource`]); the deployment names
//! the connections ([`SourcesSpec`]: `--sources FILE`, or `DOSSIER_SOURCE_<NAME>=URL`),
//! so no URL or credential sits in a schema. The program binds the key and the caller's
//! identity — a SQL query filters by `:principal` itself, an HTTP service is told who
//! asks — and checks the row it gets against the schema once more; a row the caller may
//! not read and no row read the same ([`Fetched::Missing`]).
//!
//! Every read is bounded: a timeout per source (the schema's `timeout_ms`, else the
//! connection's, else [`DEFAULT_TIMEOUT_MS`]), at most one retry of a transient failure
//! (a refused connection, a 5xx) within that time, and a circuit breaker per connection
//! that stops calling a source for a cooldown ([`BREAKER_COOLDOWN`] unless the connection
//! sets `breaker_cooldown_ms`) after [`BREAKER_THRESHOLD`] failures in a row. A source that fails is [`Unavailable`] — `timeout` or `error` —
//! never "no such row".

mod http;
mod sql;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dossier_core::{RecordSchema, RecordSource};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Timeout of a read when neither the schema nor the connection sets one.
pub const DEFAULT_TIMEOUT_MS: u64 = 3_000;
/// Failures in a row that open a connection's breaker.
pub const BREAKER_THRESHOLD: u32 = 3;
/// How long an open breaker refuses calls before one is let through to try.
pub const BREAKER_COOLDOWN: Duration = Duration::from_secs(20);
/// Longest cooldown a connection may set: a breaker is a pause, not a switch-off.
pub const MAX_BREAKER_COOLDOWN: Duration = Duration::from_secs(600);
/// Largest HTTP response body read as a row.
pub const MAX_ROW_BYTES: usize = 1 << 20;

/// The deployment's connections (YAML).
///
/// ```yaml
/// connections:
///   orders_db: {url: "postgres://reader:secret@db.internal:5432/shop"}
///   crm: {url: "https://crm.internal/api", headers: {Authorization: "Bearer …"}, timeout_ms: 2000}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesSpec {
    #[serde(default)]
    pub connections: BTreeMap<String, ConnectionSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSpec {
    /// `postgres://…` for SQL sources, `http(s)://…` (the base) for HTTP sources.
    pub url: String,
    /// Sent with every HTTP request (credentials).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Connections a SQL pool keeps at most (default 4).
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// How long the breaker stays open after [`BREAKER_THRESHOLD`] failures in a row
    /// (default [`BREAKER_COOLDOWN`], at most [`MAX_BREAKER_COOLDOWN`]).
    #[serde(default)]
    pub breaker_cooldown_ms: Option<u64>,
}

impl ConnectionSpec {
    /// A connection to `url` with every setting at its default.
    pub fn to(url: impl Into<String>) -> ConnectionSpec {
        ConnectionSpec {
            url: url.into(),
            headers: BTreeMap::new(),
            timeout_ms: None,
            max_connections: None,
            breaker_cooldown_ms: None,
        }
    }

    fn cooldown(&self) -> Duration {
        self.breaker_cooldown_ms
            .map_or(BREAKER_COOLDOWN, Duration::from_millis)
    }
}

/// Who reads: bound into every query and request by the program.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    pub principal: &'a str,
    pub tenant: &'a str,
    pub groups: &'a [String],
}

/// What a live read found.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    Row(serde_json::Map<String, serde_json::Value>),
    /// No row the caller may read: absent, or someone else's.
    Missing,
}

/// Why a live read has no answer: the source did not answer in time, or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    Timeout(String),
    Failed(String),
}

impl Unavailable {
    pub fn message(&self) -> &str {
        match self {
            Unavailable::Timeout(m) | Unavailable::Failed(m) => m,
        }
    }
}

/// How one attempt ended, for the retry rule.
pub(crate) enum Attempt {
    Done(Fetched),
    Timeout(String),
    /// Worth one more try (a refused connection, a 5xx, a 429).
    Transient(String),
    Failed(String),
}

/// The connections of a deployment and their breakers.
#[derive(Default)]
pub struct Sources {
    connections: BTreeMap<String, Connection>,
}

struct Connection {
    spec: ConnectionSpec,
    kind: Kind,
    breaker: Mutex<Breaker>,
}

enum Kind {
    Sql(sql::Pool),
    Http(http::Client),
}

#[derive(Default)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

impl Sources {
    /// No connections: every live table reads as unavailable.
    pub fn none() -> Sources {
        Sources::default()
    }

    /// The connections of `spec`, plus `DOSSIER_SOURCE_<NAME>=URL` entries of `env`
    /// (name lower-cased; they replace the file's URL of the same name). Checks URLs;
    /// connects lazily.
    pub fn new(
        spec: &SourcesSpec,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Sources, String> {
        let mut specs = spec.connections.clone();
        for (k, v) in env {
            if let Some(name) = k.strip_prefix("DOSSIER_SOURCE_") {
                let name = name.to_ascii_lowercase();
                match specs.get_mut(&name) {
                    Some(s) => s.url = v,
                    None => {
                        specs.insert(name, ConnectionSpec::to(v));
                    }
                }
            }
        }
        let mut connections = BTreeMap::new();
        for (name, spec) in specs {
            if spec.cooldown() > MAX_BREAKER_COOLDOWN || spec.cooldown().is_zero() {
                return Err(format!(
                    "source {name}: breaker_cooldown_ms must be between 1 and {}",
                    MAX_BREAKER_COOLDOWN.as_millis()
                ));
            }
            let kind =
                if spec.url.starts_with("postgres://") || spec.url.starts_with("postgresql://") {
                    Kind::Sql(sql::Pool::new(&spec).map_err(|e| format!("source {name}: {e}"))?)
                } else if spec.url.starts_with("http://") || spec.url.starts_with("https://") {
                    Kind::Http(http::Client::new(&spec).map_err(|e| format!("source {name}: {e}"))?)
                } else {
                    return Err(format!(
                        "source {name}: the URL must start with postgres://, http:// or https://"
                    ));
                };
            connections.insert(
                name,
                Connection {
                    spec,
                    kind,
                    breaker: Mutex::default(),
                },
            );
        }
        Ok(Sources { connections })
    }

    /// The names of the configured connections.
    pub fn names(&self) -> Vec<&str> {
        self.connections.keys().map(String::as_str).collect()
    }

    /// The row `key` of live table `schema` as `reader` may read it.
    pub fn fetch(
        &self,
        schema: &RecordSchema,
        key: &str,
        reader: &Reader,
    ) -> Result<Fetched, Unavailable> {
        let Some(source) = &schema.source else {
            return Err(Unavailable::Failed(format!(
                "table {} has no live source",
                schema.table
            )));
        };
        let name = source.connection();
        let Some(conn) = self.connections.get(name) else {
            return Err(Unavailable::Failed(format!(
                "source {name} of table {} is not configured on this server",
                schema.table
            )));
        };
        let timeout = Duration::from_millis(
            source
                .timeout_ms()
                .or(conn.spec.timeout_ms)
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .clamp(1, dossier_core::record::MAX_SOURCE_TIMEOUT_MS),
        );
        conn.admit(name)?;
        let reads_all = schema
            .read_groups
            .iter()
            .any(|g| g == "*" || reader.groups.contains(g));
        let started = Instant::now();
        let mut tries = 0;
        let outcome = loop {
            tries += 1;
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                break Attempt::Timeout(format!("source {name} did not answer within {timeout:?}"));
            }
            let attempt = match (&conn.kind, source) {
                (Kind::Sql(pool), RecordSource::Sql { query, .. }) => {
                    pool.fetch(query, key, reader, reads_all, left)
                }
                (Kind::Http(client), RecordSource::Http { path, .. }) => {
                    client.fetch(path, key, reader, left)
                }
                _ => Attempt::Failed(format!(
                    "source {name} is not a {} connection",
                    match source {
                        RecordSource::Sql { .. } => "SQL",
                        RecordSource::Http { .. } => "HTTP",
                    }
                )),
            };
            match attempt {
                Attempt::Transient(_) if tries < 2 => continue,
                other => break other,
            }
        };
        let result = match outcome {
            Attempt::Done(Fetched::Row(fields)) => {
                // The source's own filter is the rule; this is the second check.
                let row = dossier_core::RecordRow {
                    table: schema.table.clone(),
                    key: key.to_string(),
                    fields,
                };
                // A row for another key than the one asked is no answer to it.
                let same_key = row.fields.get(&schema.key).is_none_or(|v| match v {
                    serde_json::Value::String(s) => s == key,
                    serde_json::Value::Number(n) => n.to_string() == key,
                    _ => false,
                });
                if same_key && schema.row_readable_by(&row, reader.principal, reader.groups) {
                    Ok(Fetched::Row(row.fields))
                } else {
                    Ok(Fetched::Missing)
                }
            }
            Attempt::Done(Fetched::Missing) => Ok(Fetched::Missing),
            Attempt::Timeout(m) => Err(Unavailable::Timeout(m)),
            Attempt::Transient(m) | Attempt::Failed(m) => {
                Err(Unavailable::Failed(format!("source {name}: {m}")))
            }
        };
        conn.settle(result.is_ok());
        result
    }
}

impl Connection {
    /// Refuses at once while the breaker is open; lets one call through after it.
    fn admit(&self, name: &str) -> Result<(), Unavailable> {
        let mut b = self.breaker.lock();
        match b.open_until {
            Some(t) if Instant::now() < t => Err(Unavailable::Failed(format!(
                "source {name} failed {BREAKER_THRESHOLD} times in a row; not called again until it has rested"
            ))),
            Some(_) => {
                // Half open: this call tries; a failure re-opens at once.
                b.open_until = None;
                b.failures = BREAKER_THRESHOLD - 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn settle(&self, ok: bool) {
        let mut b = self.breaker.lock();
        if ok {
            *b = Breaker::default();
        } else {
            b.failures += 1;
            if b.failures >= BREAKER_THRESHOLD {
                b.open_until = Some(Instant::now() + self.spec.cooldown());
            }
        }
    }
}

/// Shared handle.
pub type SharedSources = Arc<Sources>;

#[cfg(test)]
mod tests;
