//! Who asks, and what that lets them see.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::doc::DocumentVersion;

/// A principal as ingested from `principals.yaml`. Identity comes only from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub id: String,
    pub tenant: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The filter every retrieval runs under: tenant, groups, and the date at which
/// versions are judged in force. Built by the program from a [`Principal`], never
/// from a request's own claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub principal_id: String,
    pub tenant: String,
    pub groups: Vec<String>,
    /// Versions are judged in force on this date (`--as-of`, or else `--now`).
    pub at: NaiveDate,
}

impl Scope {
    pub fn new(p: &Principal, at: NaiveDate) -> Scope {
        Scope {
            principal_id: p.id.clone(),
            tenant: p.tenant.clone(),
            groups: p.groups.clone(),
            at,
        }
    }

    /// Tenant and ACL admission of one document version (validity is judged apart,
    /// see [`crate::validity`]).
    pub fn may_read(&self, d: &DocumentVersion) -> bool {
        d.tenant == self.tenant && d.readable_by(&self.groups)
    }
}
