//! For test suites that must hold on both backends: one suite, run once as it is and
//! once with `DOSSIER_TEST_POSTGRES` naming a PostgreSQL server (`scripts/test` does
//! both), never two copies of the tests.

use std::path::Path;

use crate::StoreLocation;

/// The environment variable naming the server (`postgres://user@host:port/db`).
pub const POSTGRES_ENV: &str = "DOSSIER_TEST_POSTGRES";

/// Where a test should open its store: `dir` itself, or — when [`POSTGRES_ENV`] is set —
/// a database of that server named after `dir` (created empty on first use, so tests
/// never share data and reopening `dir` reopens the same store), with this process's
/// lexical index under `dir`.
pub fn location(dir: &Path) -> StoreLocation {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => StoreLocation::Postgres {
            url: database_for(&url, dir),
            index_dir: Some(dir.join("replica-indexes")),
        },
        _ => StoreLocation::Dir(dir.to_path_buf()),
    }
}

/// Whether the suite runs against PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(POSTGRES_ENV).is_ok_and(|u| !u.is_empty())
}

/// The URL of the database for `dir` on the server of `url`, created if missing.
pub fn database_for(url: &str, dir: &Path) -> String {
    let path = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let digest = blake3::hash(path.to_string_lossy().as_bytes()).to_hex();
    let name = format!("dossier_t_{}", &digest[..20]);
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("{POSTGRES_ENV}={url}: {e}"));
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .unwrap_or_else(|e| panic!("{POSTGRES_ENV}={url}: {e}"))
        .is_some();
    if !exists {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }
    with_database(url, &name)
}

/// `url` with its database replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_end = base
        .find("://")
        .map(|s| s + 3)
        .and_then(|s| base[s..].find('/').map(|i| s + i))
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_only_the_database() {
        assert_eq!(
            with_database("postgres://u:p@h:5/db?sslmode=disable", "x"),
            "postgres://u:p@h:5/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:5", "x"), "postgres://u@h:5/x");
    }
}
