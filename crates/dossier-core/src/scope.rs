//! Who asks. (What that lets them see is `dossier_store::Scope`, built only by the store
//! from a principal in its catalog.)

use serde::{Deserialize, Serialize};

/// A principal as ingested from `principals.yaml`. Identity comes only from here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub id: String,
    pub tenant: String,
    #[serde(default)]
    pub groups: Vec<String>,
    /// The knowledge bases the principal may read documents of; absent: all of its
    /// tenant's (documents without a `kb` included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kbs: Option<Vec<String>>,
}
