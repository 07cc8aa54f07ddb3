//! API keys: a YAML file of SHA-256 hashes, each bound to one principal.
//!
//! ```yaml
//! - {key_sha256: 9f86d0…, principal: u7, admin: false}
//! - {key_sha256: 2c26b4…, principal: ops, admin: true, operator: true}
//! ```
//!
//! Three levels: a plain key reads as its principal; `admin` also writes within the
//! principal's tenant (documents, principals, review decisions, ingest jobs);
//! `operator` (which implies admin) may also run store-wide operations such as a
//! reindex, which touch every tenant.
//!
//! The file holds only hashes; a presented key is hashed and looked up. The file is
//! re-read when its modification time, size or inode changes (checked on every
//! lookup) or on [`KeyStore::reload`] (SIGHUP), so keys rotate without a restart.

use dossier_engine::Scope;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, Failure};
use crate::request_id::{self, RequestId};
use crate::AppState;

/// The keys file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error("keys file {path}: {message}")]
pub struct KeysError {
    pub path: PathBuf,
    pub message: String,
}

/// What a key grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// The principal id every request with this key runs as.
    pub principal: String,
    /// May write (documents, principals, review decisions, jobs) within its tenant.
    pub admin: bool,
    /// May also run store-wide operations (reindex). Implies `admin`.
    pub operator: bool,
}

/// Identifies one state of the keys file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Stamp {
            modified: m.modified().ok(),
            len: m.len(),
            inode,
        })
    }
}

struct Loaded {
    stamp: Option<Stamp>,
    keys: HashMap<[u8; 32], KeyEntry>,
}

/// The API keys in force, re-read when the file changes.
pub struct KeyStore {
    path: PathBuf,
    loaded: RwLock<Loaded>,
}

/// The lowercase hex SHA-256 of a key: what the keys file stores.
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn parse(path: &Path, text: &str) -> Result<HashMap<[u8; 32], KeyEntry>, KeysError> {
    // The format (and its limits) is dossier-ingest's; what a key grants is decided here.
    let grants = dossier_ingest::keys::parse_keys(text).map_err(|message| KeysError {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(grants
        .into_iter()
        .map(|g| {
            (
                g.hash,
                KeyEntry {
                    principal: g.principal,
                    admin: g.admin,
                    operator: g.operator,
                },
            )
        })
        .collect())
}

impl KeyStore {
    /// Reads the keys file; a missing or malformed file is an error at start.
    pub fn load(path: &Path) -> Result<KeyStore, KeysError> {
        let store = KeyStore {
            path: path.to_path_buf(),
            loaded: RwLock::new(Loaded {
                stamp: None,
                keys: HashMap::new(),
            }),
        };
        store.reload()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many keys are in force.
    pub fn len(&self) -> usize {
        self.read().keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.loaded.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads the file now; on error the keys in force stay as they were.
    pub fn reload(&self) -> Result<usize, KeysError> {
        let stamp = Stamp::of(&self.path);
        let result = std::fs::read_to_string(&self.path)
            .map_err(|e| KeysError {
                path: self.path.clone(),
                message: e.to_string(),
            })
            .and_then(|text| parse(&self.path, &text));
        let mut loaded = self.loaded.write().unwrap_or_else(|p| p.into_inner());
        // Remember the stamp even on failure, so a broken file is not re-parsed (and
        // logged) on every request; the next change to it is picked up.
        loaded.stamp = stamp;
        let keys = result?;
        let n = keys.len();
        loaded.keys = keys;
        Ok(n)
    }

    /// Whether some key in force runs as principal `id`.
    pub fn names_principal(&self, id: &str) -> bool {
        self.reload_if_changed();
        self.read().keys.values().any(|k| k.principal == id)
    }

    fn reload_if_changed(&self) {
        let now = Stamp::of(&self.path);
        if now == self.read().stamp {
            return;
        }
        if let Err(e) = self.reload() {
            eprintln!("dossier-server: keys not reloaded, previous keys stay in force: {e}");
        }
    }

    /// The entry for a presented key (re-reading the file first if it changed).
    pub fn lookup(&self, key: &str) -> Option<KeyEntry> {
        self.reload_if_changed();
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        self.read().keys.get(&hash).cloned()
    }
}

/// The authenticated caller of a request: the principal bound to its API key, with the
/// tenant and groups the store holds for it (never anything the request says).
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: String,
    pub tenant: String,
    /// The principal's scope as the store holds it (judged today; routes move the date
    /// with [`Scope::judged_at`], never the identity).
    pub scope: Scope,
    pub admin: bool,
    pub operator: bool,
    pub request_id: RequestId,
}

impl Caller {
    /// `Failure::AdminRequired` unless the key has the admin scope.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::new(&self.request_id, Failure::AdminRequired))
        }
    }

    /// `Failure::OperatorRequired` unless the key has the operator scope (store-wide
    /// operations, which reach every tenant).
    pub fn require_operator(&self) -> Result<(), ApiError> {
        if self.operator {
            Ok(())
        } else {
            Err(ApiError::new(&self.request_id, Failure::OperatorRequired))
        }
    }
}

/// The key of `Authorization: Bearer KEY` (scheme case-insensitive), if present.
fn bearer(parts: &Parts) -> Option<&str> {
    bearer_of(&parts.headers)
}

/// The key of an `Authorization: Bearer KEY` header.
pub(crate) fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, key) = value.trim().split_once(' ')?;
    let key = key.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !key.is_empty()).then_some(key)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let request_id = request_id::of(parts);
        let Some(key) = bearer(parts).map(str::to_owned) else {
            return Err(ApiError::new(&request_id, Failure::Unauthorized));
        };
        // The lookup may stat and re-read the keys file, and the principal is read from
        // the catalog: off the async runtime.
        let keys = state.keys.clone();
        let engine = state.engine.clone();
        let found = tokio::task::spawn_blocking(move || {
            let entry = keys.lookup(&key).ok_or(Failure::Unauthorized)?;
            let today = chrono::Local::now().date_naive();
            let p = engine.scope(&entry.principal, today).map_err(|e| match e {
                dossier_engine::Error::NotFound(_) => Failure::UnknownPrincipal,
                other => other.into(),
            })?;
            Ok::<_, Failure>((entry, p))
        })
        .await
        .map_err(|e| Failure::Internal(e.to_string()))
        .and_then(|r| r);
        let (entry, p) = found.map_err(|f| ApiError::new(&request_id, f))?;
        // Every authenticated request counts against its tenant's rate and its
        // principal's own.
        state
            .limits
            .check_rate(p.tenant(), &entry.principal)
            .map_err(|f| ApiError::new(&request_id, f))?;
        // The response pass masks for this caller (see `masking`).
        if let (Some(slot), Some(m)) = (
            parts.extensions.get::<crate::masking::MaskSlot>(),
            p.masker_shared().filter(|m| m.masks_text()),
        ) {
            slot.set(m);
        }
        Ok(Caller {
            principal: entry.principal,
            tenant: p.tenant().to_string(),
            scope: p,
            admin: entry.admin,
            operator: entry.operator,
            request_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_parses() {
        let h = hash_key("secret");
        assert_eq!(h.len(), 64);
        let text = format!("- {{key_sha256: {h}, principal: u7, admin: false}}\n");
        let keys = parse(Path::new("k.yaml"), &text).unwrap();
        let want: [u8; 32] = Sha256::digest(b"secret").into();
        assert_eq!(keys[&want].principal, "u7");
        assert!(parse(Path::new("k.yaml"), "- {key_sha256: zz, principal: u7}").is_err());
        assert!(parse(Path::new("k.yaml"), "- {key: abc, principal: u7}").is_err());
        assert!(parse(Path::new("k.yaml"), "").unwrap().is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The keys file is operator input, but a broken one must be an error, never a
        /// panic or a key that was not written: arbitrary text, and YAML-shaped text
        /// with hostile values, either parses into entries that name what the text
        /// says or fails with a message.
        #[test]
        fn the_keys_parser_never_panics_and_never_invents_a_key(
            text in "\\PC{0,400}",
            principal in "\\PC{0,40}",
            hex in "[0-9a-fA-F]{0,70}",
            admin in proptest::bool::ANY,
        ) {
            let _ = parse(Path::new("k.yaml"), &text);
            let line = format!("- {{key_sha256: {hex}, principal: {principal:?}, admin: {admin}}}\n");
            match parse(Path::new("k.yaml"), &line) {
                Ok(keys) => {
                    proptest::prop_assert!(keys.len() <= 1);
                    for (hash, entry) in &keys {
                        proptest::prop_assert_eq!(hex.len(), 64);
                        proptest::prop_assert_eq!(dossier_ingest::keys::parse_hex32(&hex), Some(*hash));
                        proptest::prop_assert!(!entry.principal.trim().is_empty());
                        proptest::prop_assert!(!entry.operator);
                    }
                }
                Err(e) => proptest::prop_assert!(!e.message.is_empty()),
            }
        }
    }
}
