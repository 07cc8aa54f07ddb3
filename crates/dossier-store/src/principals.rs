//! The one rule for writing principals.
//!
//! A principal's tenant and groups decide what it reads, so every path that writes one
//! — `PUT /v1/principals/{id}`, a `principals.yaml` uploaded or ingested by a job, the
//! CLI, `dossier migrate` — goes through [`grant`]. A commit takes principals only as
//! [`GrantedPrincipal`], which nothing outside this module can build, so a path that
//! skips the rule does not compile.
//!
//! **The rule.** The operator (whoever runs the CLI on the store, an operator key, a
//! migration) may write any principal with valid ids. A tenant's admin may write only
//! principals of its own tenant, never its own principal (an admin key never widens its
//! own reach), never an id another tenant holds (ids are global: that would move a user
//! between tenants), and never create a principal whose id an API key already names
//! (the key would gain the groups chosen here). Ids — principal, tenant, groups,
//! knowledge bases — follow [`dossier_core::ids`]; a tenant is also a name, not a path
//! ([`dossier_core::ids::check_tenant`]), because uploads are kept under it.

use dossier_core::ids::{check_id, check_tenant, IdError};
use dossier_core::Principal;

/// Who writes principals.
#[derive(Clone, Copy)]
pub enum PrincipalWriter<'a> {
    /// The operator: the CLI on the store, an operator key, a migration.
    Operator,
    /// An admin key of one tenant.
    TenantAdmin {
        /// The key's tenant.
        tenant: &'a str,
        /// The principal the key acts as.
        principal: &'a str,
        /// The key also has the operator scope: it may change its own principal (still
        /// only in its tenant, and never an id another tenant holds).
        operator: bool,
        /// Whether some API key runs as this principal id.
        key_names: &'a dyn Fn(&str) -> bool,
    },
}

impl std::fmt::Debug for PrincipalWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrincipalWriter::Operator => write!(f, "Operator"),
            PrincipalWriter::TenantAdmin {
                tenant, principal, ..
            } => write!(f, "TenantAdmin({principal} of {tenant})"),
        }
    }
}

/// Why a principal was not written. The wording never says which tenant holds an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalRefusal {
    #[error("{0}")]
    BadId(#[from] IdError),
    #[error(
        "principal {0:?}: `kbs: []` names no knowledge base; leave it out to read all of them"
    )]
    NoKnowledgeBase(String),
    #[error("principal {id:?} names tenant {tenant:?}, not {own:?} (the only tenant this key may write)")]
    OtherTenant {
        id: String,
        tenant: String,
        own: String,
    },
    #[error("an admin cannot change their own principal")]
    OwnPrincipal(String),
    /// Another tenant holds the id, or a key names it and it does not exist yet.
    /// Worded the same whoever holds the id, and without it (the refusal of a held id
    /// and of a key's id must read alike).
    #[error("this principal id cannot be used")]
    Unusable(String),
}

/// A principal that passed [`grant`]: the only form a commit takes one in. Its groups
/// and knowledge bases are sorted and without duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedPrincipal {
    principal: Principal,
    /// For a tenant admin's write: the tenant that held the id when it was granted
    /// (`None`: nobody). The commit checks it again inside its transaction, so two
    /// admins racing for one id cannot move it between tenants.
    held_by: Option<Option<String>>,
}

impl GrantedPrincipal {
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    pub fn into_principal(self) -> Principal {
        self.principal
    }

    /// Whether the write still holds when the catalog holds `stored` under the id: an
    /// operator's always does; an admin's only while the id is held as when granted.
    pub(crate) fn still_holds(&self, stored: Option<&Principal>) -> bool {
        match &self.held_by {
            None => true,
            Some(t) => t.as_deref() == stored.map(|p| p.tenant.as_str()),
        }
    }

    /// [`GrantedPrincipal::still_holds`] as the commit's error: both backends call it
    /// inside their transaction, with the principal stored under the id.
    pub(crate) fn check_still_holds(&self, stored: Option<&Principal>) -> crate::Result<()> {
        if self.still_holds(stored) {
            return Ok(());
        }
        Err(crate::Error::Invalid(format!(
            "principal id {:?} changed while it was written; try again",
            self.principal.id
        )))
    }
}

/// Checks the ids of `p` (every writer).
fn check_ids(p: &Principal) -> Result<(), PrincipalRefusal> {
    check_id("principal id", &p.id)?;
    check_tenant(&p.tenant)?;
    for g in &p.groups {
        check_id("principal group", g)?;
    }
    match &p.kbs {
        Some(kbs) if kbs.is_empty() => Err(PrincipalRefusal::NoKnowledgeBase(p.id.clone())),
        Some(kbs) => kbs
            .iter()
            .try_for_each(|k| check_id("knowledge base", k).map_err(Into::into)),
        None => Ok(()),
    }
}

/// The rule: may `writer` write `p`, given the principal the catalog holds under the
/// same id (`existing`)? Pure; [`crate::Store::grant_principals`] looks `existing` up.
pub fn grant(
    writer: PrincipalWriter<'_>,
    p: Principal,
    existing: Option<&Principal>,
) -> Result<GrantedPrincipal, PrincipalRefusal> {
    check_ids(&p)?;
    let mut held_by = None;
    if let PrincipalWriter::TenantAdmin {
        tenant,
        principal,
        operator,
        key_names,
    } = writer
    {
        if p.tenant != tenant {
            return Err(PrincipalRefusal::OtherTenant {
                id: p.id,
                tenant: p.tenant,
                own: tenant.to_string(),
            });
        }
        if p.id == principal && !operator {
            return Err(PrincipalRefusal::OwnPrincipal(p.id));
        }
        match existing {
            Some(q) if q.tenant != tenant => return Err(PrincipalRefusal::Unusable(p.id)),
            Some(_) => {}
            None if key_names(&p.id) => return Err(PrincipalRefusal::Unusable(p.id)),
            None => {}
        }
        held_by = Some(existing.map(|q| q.tenant.clone()));
    }
    let mut p = p;
    p.groups.sort();
    p.groups.dedup();
    if let Some(kbs) = &mut p.kbs {
        kbs.sort();
        kbs.dedup();
    }
    Ok(GrantedPrincipal {
        principal: p,
        held_by,
    })
}

/// Grants principals written by the operator (no catalog needed: the operator may
/// write any principal with valid ids).
pub fn by_operator(
    ps: impl IntoIterator<Item = Principal>,
) -> Result<Vec<GrantedPrincipal>, PrincipalRefusal> {
    ps.into_iter()
        .map(|p| grant(PrincipalWriter::Operator, p, None))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, tenant: &str, groups: &[&str]) -> Principal {
        Principal {
            id: id.into(),
            tenant: tenant.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            kbs: None,
        }
    }

    /// One case: who writes, what, what the catalog holds under that id, whether a key
    /// names the id, and whether it is granted.
    struct Case {
        what: &'static str,
        writer_tenant: Option<&'static str>,
        writer: &'static str,
        new: Principal,
        existing: Option<Principal>,
        key_named: bool,
        granted: bool,
    }

    fn cases() -> Vec<Case> {
        let admin = Some("shop");
        vec![
            Case {
                what: "issue 39: an admin raises its own groups",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("shop-admin", "shop", &["sre", "support"]),
                existing: Some(p("shop-admin", "shop", &["staff"])),
                key_named: true,
                granted: false,
            },
            Case {
                what: "an admin manages another principal of its tenant",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("clerk", "shop", &["support"]),
                existing: Some(p("clerk", "shop", &[])),
                key_named: true,
                granted: true,
            },
            Case {
                what: "an admin creates a new principal no key names",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("new-hire", "shop", &["staff"]),
                existing: None,
                key_named: false,
                granted: true,
            },
            Case {
                what: "issue 39: a new principal whose id a key names",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("acme-reader", "shop", &["sre"]),
                existing: None,
                key_named: true,
                granted: false,
            },
            Case {
                what: "an id another tenant holds",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("acme-reader", "shop", &[]),
                existing: Some(p("acme-reader", "acme", &[])),
                key_named: false,
                granted: false,
            },
            Case {
                what: "a principal of another tenant",
                writer_tenant: admin,
                writer: "shop-admin",
                new: p("x", "acme", &[]),
                existing: None,
                key_named: false,
                granted: false,
            },
            Case {
                what: "the operator may change any principal, its own too",
                writer_tenant: None,
                writer: "root",
                new: p("shop-admin", "shop", &["sre"]),
                existing: Some(p("shop-admin", "shop", &[])),
                key_named: true,
                granted: true,
            },
            Case {
                what: "issue 39: a tenant that is a path, even from the operator",
                writer_tenant: None,
                writer: "root",
                new: p("u", "../../../../outside", &[]),
                existing: None,
                key_named: false,
                granted: false,
            },
            Case {
                what: "a Cyrillic look-alike of a Latin group",
                writer_tenant: None,
                writer: "root",
                new: p("u", "shop", &["\u{0455}re"]),
                existing: None,
                key_named: false,
                granted: false,
            },
        ]
    }

    #[test]
    fn the_principal_rule_decides_every_case() {
        for c in cases() {
            let key_named = c.key_named;
            let key_names = move |_: &str| key_named;
            let writer = match c.writer_tenant {
                None => PrincipalWriter::Operator,
                Some(tenant) => PrincipalWriter::TenantAdmin {
                    tenant,
                    principal: c.writer,
                    operator: false,
                    key_names: &key_names,
                },
            };
            let got = grant(writer, c.new.clone(), c.existing.as_ref());
            assert_eq!(got.is_ok(), c.granted, "{}: {got:?}", c.what);
        }
    }

    #[test]
    fn granted_groups_are_sorted_and_unique() {
        let g = grant(
            PrincipalWriter::Operator,
            p("u", "t", &["b", "a", "b"]),
            None,
        )
        .unwrap();
        assert_eq!(g.principal().groups, ["a", "b"]);
    }

    /// Random writers, principals and catalogs: whatever a tenant admin is granted
    /// stays in its tenant, is never its own principal (unless an operator key), never
    /// takes an id another tenant holds, and never creates an id a key names.
    #[test]
    fn no_random_write_lets_an_admin_widen_itself_or_leave_its_tenant() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(39);
        let ids = ["a", "b", "c", "admin", "other-admin"];
        let tenants = ["t1", "t2"];
        let groups = ["g1", "g2", "root"];
        for _ in 0..20_000 {
            let pick =
                |rng: &mut rand::rngs::StdRng, xs: &[&'static str]| xs[rng.gen_range(0..xs.len())];
            let (tenant, me) = (pick(&mut rng, &tenants), pick(&mut rng, &ids));
            let operator = rng.gen_bool(0.2);
            let named: Vec<&str> = ids.iter().copied().filter(|_| rng.gen_bool(0.4)).collect();
            let key_names = |id: &str| named.contains(&id);
            let new = p(
                pick(&mut rng, &ids),
                pick(&mut rng, &tenants),
                &[pick(&mut rng, &groups)],
            );
            let existing = rng.gen_bool(0.5).then(|| {
                p(
                    &new.id,
                    pick(&mut rng, &tenants),
                    &[pick(&mut rng, &groups)],
                )
            });
            let writer = PrincipalWriter::TenantAdmin {
                tenant,
                principal: me,
                operator,
                key_names: &key_names,
            };
            if let Ok(g) = grant(writer, new.clone(), existing.as_ref()) {
                let q = g.principal();
                assert_eq!(q.tenant, tenant, "{new:?} by {writer:?}");
                assert!(operator || q.id != me, "{new:?} by {writer:?}");
                match &existing {
                    Some(e) => assert_eq!(e.tenant, tenant, "{new:?} over {e:?}"),
                    None => assert!(!key_names(&q.id), "{new:?} named by a key"),
                }
                // A commit made later finds the id moved: it does not hold.
                let moved = p(&q.id, if tenant == "t1" { "t2" } else { "t1" }, &[]);
                assert!(!g.still_holds(Some(&moved)));
            }
        }
    }
}
