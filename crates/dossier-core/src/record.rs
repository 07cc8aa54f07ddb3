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
