//! The server's keys file: a YAML list of API-key hashes, each bound to one principal.
//!
//! ```yaml
//! - {key_sha256: 9f86d0…, principal: u7, admin: false}
//! - {key_sha256: 2c26b4…, principal: ops, admin: true, operator: true}
//! ```
//!
//! Read here, beside the other input formats, so that it gets the same limits (YAML
//! depth and alias expansion, size, binary content, ids) and the same fuzzing; the
//! server only decides what a parsed key grants.

use serde::Deserialize;

/// Bytes a keys file may have.
pub const MAX_KEYS_FILE_BYTES: usize = 1024 * 1024;

/// One key as the file states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGrant {
    /// The SHA-256 of the key.
    pub hash: [u8; 32],
    pub principal: String,
    /// `admin` as written, or implied by `operator`.
    pub admin: bool,
    pub operator: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyLine {
    key_sha256: String,
    principal: String,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    operator: bool,
}

/// 64 hex digits as 32 bytes.
pub fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The keys of a keys file, in file order; the message says which entry is wrong.
/// An empty file has no keys. A hash that appears twice is an error (which of the two
/// grants would hold is not for the parser to guess).
pub fn parse_keys(text: &str) -> Result<Vec<KeyGrant>, String> {
    if text.len() > MAX_KEYS_FILE_BYTES {
        return Err(format!(
            "{} bytes, over the {MAX_KEYS_FILE_BYTES} a keys file may have",
            text.len()
        ));
    }
    crate::guard::check_text(text).map_err(|e| e.to_string())?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    crate::guard::check_yaml(text)?;
    let lines: Vec<KeyLine> = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    let mut out: Vec<KeyGrant> = Vec::with_capacity(lines.len());
    for (i, line) in lines.into_iter().enumerate() {
        let n = i + 1;
        let hash = parse_hex32(&line.key_sha256).ok_or_else(|| {
            format!("entry {n}: key_sha256 must be 64 hex digits (the SHA-256 of the key)")
        })?;
        if line.principal.trim().is_empty() {
            return Err(format!("entry {n}: empty principal"));
        }
        dossier_core::ids::check_id("principal", &line.principal)
            .map_err(|e| format!("entry {n}: {e}"))?;
        if out.iter().any(|k| k.hash == hash) {
            return Err(format!("entry {n}: the same key hash appears twice"));
        }
        out.push(KeyGrant {
            hash,
            principal: line.principal,
            admin: line.admin || line.operator,
            operator: line.operator,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_refuse_what_is_wrong() {
        let h = "a".repeat(64);
        let k = parse_keys(&format!(
            "- {{key_sha256: {h}, principal: u7, operator: true}}\n"
        ))
        .unwrap();
        assert_eq!(k.len(), 1);
        assert!(k[0].admin && k[0].operator);
        assert!(parse_keys("- {key_sha256: zz, principal: u7}").is_err());
        assert!(parse_keys("- {key: abc, principal: u7}").is_err());
        assert!(parse_keys(&format!("- {{key_sha256: {h}, principal: \"u\\x1f7\"}}")).is_err());
        let twice =
            format!("- {{key_sha256: {h}, principal: a}}\n- {{key_sha256: {h}, principal: b}}\n");
        assert!(parse_keys(&twice).unwrap_err().contains("twice"));
        assert!(parse_keys("").unwrap().is_empty());
        assert!(parse_keys("\0\0\0").is_err());
    }
}
