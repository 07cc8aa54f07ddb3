//! The filter every retrieval runs under, and the only way to get one.
//!
//! A [`Scope`] has no public constructor and cannot be deserialised: the one way to get
//! one is [`crate::Store::scope`], which reads the principal from the catalog. So a
//! tenant or a group can never come from a request body, a flag, a header or a model —
//! the compiler refuses the code that would try.

use chrono::NaiveDate;
use dossier_core::{DocumentVersion, Principal};
use serde::Serialize;

/// Tenant, groups and the date versions are judged in force at, of one stored
/// principal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    principal_id: String,
    tenant: String,
    groups: Vec<String>,
    /// Versions are judged in force on this date (`--as-of`, or else `--now`).
    at: NaiveDate,
}

impl Scope {
    /// Only the store builds scopes, from a principal it read from its catalog.
    pub(crate) fn of_stored(p: &Principal, at: NaiveDate) -> Scope {
        Scope {
            principal_id: p.id.clone(),
            tenant: p.tenant.clone(),
            groups: p.groups.clone(),
            at,
        }
    }

    pub fn principal_id(&self) -> &str {
        &self.principal_id
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The date versions are judged in force at.
    pub fn at(&self) -> NaiveDate {
        self.at
    }

    /// The same principal, judging versions on another date (an as-of question, or a
    /// record's business date). Identity cannot change this way.
    pub fn judged_at(&self, at: NaiveDate) -> Scope {
        Scope { at, ..self.clone() }
    }

    /// Tenant and ACL admission of one document version (validity is judged apart,
    /// see [`dossier_core::validity`]).
    pub fn may_read(&self, d: &DocumentVersion) -> bool {
        d.tenant == self.tenant && d.readable_by(&self.groups)
    }
}
