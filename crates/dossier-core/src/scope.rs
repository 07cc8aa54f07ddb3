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
}
