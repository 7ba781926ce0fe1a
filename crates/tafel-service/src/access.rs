//! What the credential of a request may do. The HTTP layer authenticates and
//! builds an [`Access`]; every service operation asks it before acting.
//!
//! Shared Key is the account owner ([`Access::Full`]). A shared access signature
//! is a [`SasGrant`]: a service SAS names one table, a subset of `raud` and
//! optionally a key range; an account SAS names resource types (`s`ervice,
//! `c`ontainer = table, `o`bject = entity) and a subset of `rwdlacup`. The
//! operation → permission tables are those of spec/auth.md §4–§5.
//!
//! A bearer token (Microsoft Entra ID / OAuth) is a [`TokenGrant`]: the roles
//! the HTTP layer found for the token's principal, for the whole account or for
//! single tables, each one of Azure's built-in data roles ([`Role`]).

use std::sync::Arc;

use tafel_store::{EntityKey, KeyRange};

use crate::error::{Error, ErrorCode, Result};

/// The kinds of action the Table service authorises separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    QueryTables,
    CreateTable,
    DeleteTable,
    ReadEntity,
    InsertEntity,
    UpdateEntity,
    /// Insert-or-replace and insert-or-merge need both insert and update rights.
    UpsertEntity,
    DeleteEntity,
    GetTableAcl,
    SetTableAcl,
    GetServiceProperties,
    SetServiceProperties,
    GetServiceStats,
}

/// The rights of the request's credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Shared Key / Shared Key Lite: the account's owner.
    Full,
    /// A verified, currently valid shared access signature.
    Sas(Arc<SasGrant>),
    /// A verified, currently valid bearer token, with its principal's roles.
    Token(Arc<TokenGrant>),
}

/// Azure's built-in data roles for tables, each including the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Storage Table Data Reader: query tables, read and query entities.
    Reader,
    /// Storage Table Data Contributor: the reader's rights, insert, update, merge
    /// and delete entities, create and delete tables.
    Contributor,
    /// The contributor's rights, table ACLs and the service properties and stats
    /// (what an account owner does with the control plane on Azure).
    Owner,
}

impl Role {
    /// A role by Azure's name (`Storage Table Data Reader`) or a short one
    /// (`reader`, `contributor`, `owner`), case-insensitively.
    pub fn parse(s: &str) -> Option<Role> {
        let s = s.trim().to_ascii_lowercase();
        let short = s.strip_prefix("storage table data ").unwrap_or(&s);
        match short {
            "reader" => Some(Role::Reader),
            "contributor" => Some(Role::Contributor),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }

    /// The least role an action needs.
    pub fn needed_for(action: Action) -> Role {
        match action {
            Action::QueryTables | Action::ReadEntity => Role::Reader,
            Action::CreateTable
            | Action::DeleteTable
            | Action::InsertEntity
            | Action::UpdateEntity
            | Action::UpsertEntity
            | Action::DeleteEntity => Role::Contributor,
            Action::GetTableAcl
            | Action::SetTableAcl
            | Action::GetServiceProperties
            | Action::SetServiceProperties
            | Action::GetServiceStats => Role::Owner,
        }
    }
}

/// What a bearer token's principal may do on the addressed account.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenGrant {
    /// Every operation (`--oauth basic` without a role file, as Azurite's).
    pub unrestricted: bool,
    /// The highest role assigned for the whole account.
    pub account: Option<Role>,
    /// Roles assigned for single tables (names matched case-insensitively).
    pub tables: Vec<(String, Role)>,
}

impl TokenGrant {
    /// Every operation on the account.
    pub fn unrestricted() -> Self {
        TokenGrant {
            unrestricted: true,
            ..TokenGrant::default()
        }
    }

    /// The highest role that applies to `table` (or, with none, to the account).
    fn role_for(&self, table: Option<&str>) -> Option<Role> {
        let on_table = table.and_then(|t| {
            self.tables
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case(t))
                .map(|(_, r)| *r)
                .max()
        });
        self.account.max(on_table)
    }

    fn check(&self, action: Action, table: Option<&str>) -> Result<()> {
        if self.unrestricted {
            return Ok(());
        }
        // Query Tables lists the account: only an account-wide role reaches it.
        let table = match action {
            Action::QueryTables
            | Action::GetServiceProperties
            | Action::SetServiceProperties
            | Action::GetServiceStats => None,
            _ => table,
        };
        match self.role_for(table) {
            Some(role) if role >= Role::needed_for(action) => Ok(()),
            _ => Err(permission_mismatch()),
        }
    }
}

/// What a shared access signature grants, once its signature, time window, IP
/// and protocol have been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SasGrant {
    /// Service SAS (`tn=`): entity operations on one table.
    Table(TableGrant),
    /// Account SAS (`ss=`/`srt=`).
    Account(AccountGrant),
}

/// Reads a string of SAS letters into one flag per letter of `letters`, set
/// when the letter appears (any order, repeats allowed). Letters in `ignored`
/// grant nothing; any other letter makes the string invalid (`None`).
fn letter_flags<const N: usize>(s: &str, letters: [char; N], ignored: &str) -> Option<[bool; N]> {
    let mut flags = [false; N];
    for c in s.chars() {
        match letters.iter().position(|l| *l == c) {
            Some(i) => flags[i] = true,
            None if ignored.contains(c) => {}
            None => return None,
        }
    }
    Some(flags)
}

/// The service-SAS `sp` letters, in Azure's canonical order.
const TABLE_LETTERS: [char; 4] = ['r', 'a', 'u', 'd'];

/// Service-SAS permissions (`sp` letters `r a u d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TablePermissions {
    pub query: bool,
    pub add: bool,
    pub update: bool,
    pub delete: bool,
}

impl TablePermissions {
    /// Parses letters from `raud` in any order; `None` for any other letter.
    pub fn parse(s: &str) -> Option<Self> {
        let [query, add, update, delete] = letter_flags(s, TABLE_LETTERS, "")?;
        Some(TablePermissions {
            query,
            add,
            update,
            delete,
        })
    }

    /// The letters in Azure's canonical order (`raud`).
    pub(crate) fn canonical(&self) -> String {
        let flags = [self.query, self.add, self.update, self.delete];
        TABLE_LETTERS
            .into_iter()
            .zip(flags)
            .filter(|(_, on)| *on)
            .map(|(c, _)| c)
            .collect()
    }
}

/// Account-SAS permissions (`sp` letters `r w d l a c u p`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccountPermissions {
    pub read: bool,
    pub write: bool,
    pub delete: bool,
    pub list: bool,
    pub add: bool,
    pub create: bool,
    pub update: bool,
    pub process: bool,
}

impl AccountPermissions {
    /// Parses account-SAS letters. Letters that only other Storage services use
    /// (`x t f i y`) are accepted and grant nothing here; unknown letters → `None`.
    pub fn parse(s: &str) -> Option<Self> {
        let letters = ['r', 'w', 'd', 'l', 'a', 'c', 'u', 'p'];
        let [read, write, delete, list, add, create, update, process] = letter_flags(s, letters, "xtfiy")?;
        Some(AccountPermissions {
            read,
            write,
            delete,
            list,
            add,
            create,
            update,
            process,
        })
    }
}

/// Account-SAS resource types (`srt` letters `s c o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceTypes {
    pub service: bool,
    pub container: bool,
    pub object: bool,
}

impl ResourceTypes {
    /// Parses `srt` letters in any order; `None` for any other letter.
    pub fn parse(s: &str) -> Option<Self> {
        let [service, container, object] = letter_flags(s, ['s', 'c', 'o'], "")?;
        Some(ResourceTypes {
            service,
            container,
            object,
        })
    }
}

/// A service SAS: one table, `raud` permissions, optionally a key range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableGrant {
    /// `tn`, matched case-insensitively.
    pub table: String,
    pub permissions: TablePermissions,
    /// `[spk,srk] ..= [epk,erk]` as encoded keys; `None` = the whole table.
    pub range: Option<KeyRange>,
}

impl TableGrant {
    /// The encoded key range of `spk`/`srk`/`epk`/`erk` (all inclusive): a
    /// start PartitionKey without RowKey starts at the partition's first row, an
    /// end PartitionKey without RowKey ends after the partition's last row.
    /// `None` when no bound is given. A RowKey bound needs its PartitionKey.
    pub fn key_range(
        spk: Option<&str>,
        srk: Option<&str>,
        epk: Option<&str>,
        erk: Option<&str>,
    ) -> Result<Option<KeyRange>> {
        let malformed =
            || Error::new(ErrorCode::AuthenticationFailed).with_detail("srk and erk need spk and epk respectively.");
        let start = match (spk, srk) {
            (None, None) => Vec::new(),
            (Some(p), None) => KeyRange::pk_lower(p),
            (Some(p), Some(r)) => EntityKey::new(p, r).as_bytes().to_vec(),
            (None, Some(_)) => return Err(malformed()),
        };
        let end = match (epk, erk) {
            (None, None) => None,
            (Some(p), None) => Some(KeyRange::pk_after(p)),
            (Some(p), Some(r)) => Some(KeyRange::key_after(&EntityKey::new(p, r))),
            (None, Some(_)) => return Err(malformed()),
        };
        if start.is_empty() && end.is_none() {
            return Ok(None);
        }
        Ok(Some(KeyRange { start, end }))
    }

    fn check(&self, action: Action, table: Option<&str>, keys: Option<(&str, &str)>) -> Result<()> {
        let p = &self.permissions;
        let allowed = match action {
            Action::ReadEntity => p.query,
            Action::InsertEntity => p.add,
            Action::UpdateEntity => p.update,
            Action::UpsertEntity => p.add && p.update,
            Action::DeleteEntity => p.delete,
            // A service SAS reaches the entities of its table, nothing else.
            _ => return Err(resource_type_mismatch()),
        };
        if !table.is_some_and(|t| t.eq_ignore_ascii_case(&self.table)) {
            return Err(resource_type_mismatch());
        }
        if !allowed {
            return Err(permission_mismatch());
        }
        // A point operation (Get Entity too) outside the range is refused before the
        // entity is looked up, so a 404 never tells what lies outside it; queries
        // (no keys) are clipped to the range instead (see `Access::clip`).
        if let (Some(range), Some((pk, rk))) = (&self.range, keys) {
            if !range.contains(EntityKey::new(pk, rk).as_bytes()) {
                return Err(permission_mismatch());
            }
        }
        Ok(())
    }
}

/// An account SAS (with `ss` already known to include the Table service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountGrant {
    pub resource_types: ResourceTypes,
    pub permissions: AccountPermissions,
}

impl AccountGrant {
    fn check(&self, action: Action) -> Result<()> {
        let (t, p) = (&self.resource_types, &self.permissions);
        let (type_ok, allowed) = match action {
            Action::GetServiceProperties | Action::GetServiceStats => (t.service, p.read),
            Action::SetServiceProperties => (t.service, p.write),
            Action::QueryTables => (t.container, p.list),
            // Azure documents `a`/`c`, Azurite `c`/`w`: any of them creates.
            Action::CreateTable => (t.container, p.add || p.create || p.write),
            Action::DeleteTable => (t.container, p.delete),
            // Table ACLs are Shared Key only.
            Action::GetTableAcl | Action::SetTableAcl => (t.container, false),
            Action::ReadEntity => (t.object, p.read),
            Action::InsertEntity => (t.object, p.add),
            Action::UpdateEntity => (t.object, p.update),
            Action::UpsertEntity => (t.object, p.add && p.update),
            Action::DeleteEntity => (t.object, p.delete),
        };
        if !type_ok {
            return Err(resource_type_mismatch());
        }
        if !allowed {
            return Err(permission_mismatch());
        }
        Ok(())
    }
}

fn permission_mismatch() -> Error {
    Error::new(ErrorCode::AuthorizationPermissionMismatch)
}

fn resource_type_mismatch() -> Error {
    Error::new(ErrorCode::AuthorizationResourceTypeMismatch)
}

impl Access {
    /// Fails with Azure's authorization error if `action` on `table` (and, for
    /// entity writes, the entity with these keys) is outside the grant.
    pub fn check(&self, action: Action, table: Option<&str>, keys: Option<(&str, &str)>) -> Result<()> {
        match self {
            Access::Full => Ok(()),
            Access::Sas(grant) => match &**grant {
                SasGrant::Table(g) => g.check(action, table, keys),
                SasGrant::Account(g) => g.check(action),
            },
            Access::Token(grant) => grant.check(action, table),
        }
    }

    /// The key range reads are limited to, if any.
    pub fn key_range(&self) -> Option<&KeyRange> {
        match self {
            Access::Sas(grant) => match &**grant {
                SasGrant::Table(g) => g.range.as_ref(),
                SasGrant::Account(_) => None,
            },
            Access::Full | Access::Token(_) => None,
        }
    }

    /// Restricts sorted, disjoint scan ranges to the grant's key range (Azure adds
    /// the range to the query's filter). The result stays sorted and disjoint.
    pub(crate) fn clip(&self, ranges: Vec<KeyRange>) -> Vec<KeyRange> {
        let Some(grant) = self.key_range() else { return ranges };
        ranges
            .into_iter()
            .filter_map(|mut r| {
                if r.start < grant.start {
                    r.start.clone_from(&grant.start);
                }
                if let Some(g_end) = &grant.end {
                    if r.end.as_ref().is_none_or(|e| e > g_end) {
                        r.end = Some(g_end.clone());
                    }
                }
                (!r.is_empty()).then_some(r)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Action; 13] = [
        Action::QueryTables,
        Action::CreateTable,
        Action::DeleteTable,
        Action::ReadEntity,
        Action::InsertEntity,
        Action::UpdateEntity,
        Action::UpsertEntity,
        Action::DeleteEntity,
        Action::GetTableAcl,
        Action::SetTableAcl,
        Action::GetServiceProperties,
        Action::SetServiceProperties,
        Action::GetServiceStats,
    ];

    fn table_sas(sp: &str, range: Option<KeyRange>) -> Access {
        let permissions = TablePermissions::parse(sp).expect("valid letters");
        Access::Sas(Arc::new(SasGrant::Table(TableGrant {
            table: "Orders".into(),
            permissions,
            range,
        })))
    }

    fn account_sas(srt: &str, sp: &str) -> Access {
        Access::Sas(Arc::new(SasGrant::Account(AccountGrant {
            resource_types: ResourceTypes::parse(srt).expect("valid srt"),
            permissions: AccountPermissions::parse(sp).expect("valid sp"),
        })))
    }

    fn code(r: Result<()>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn each_service_sas_letter_allows_exactly_its_operations() {
        let needs: [(Action, &str); 5] = [
            (Action::ReadEntity, "r"),
            (Action::InsertEntity, "a"),
            (Action::UpdateEntity, "u"),
            (Action::UpsertEntity, "au"),
            (Action::DeleteEntity, "d"),
        ];
        for sp in ["", "r", "a", "u", "d", "au", "raud"] {
            let access = table_sas(sp, None);
            for (action, need) in needs {
                let ok = need.chars().all(|c| sp.contains(c));
                let got = code(access.check(action, Some("orders"), Some(("p", "r"))));
                let want = if ok {
                    None
                } else {
                    Some(ErrorCode::AuthorizationPermissionMismatch)
                };
                assert_eq!(got, want, "sp={sp} {action:?}");
            }
        }
    }

    #[test]
    fn service_sas_is_bound_to_its_table_and_to_entities() {
        let access = table_sas("raud", None);
        assert_eq!(code(access.check(Action::ReadEntity, Some("ORDERS"), None)), None);
        assert_eq!(
            code(access.check(Action::ReadEntity, Some("other"), None)),
            Some(ErrorCode::AuthorizationResourceTypeMismatch)
        );
        for action in ALL {
            if matches!(
                action,
                Action::ReadEntity
                    | Action::InsertEntity
                    | Action::UpdateEntity
                    | Action::UpsertEntity
                    | Action::DeleteEntity
            ) {
                continue;
            }
            assert_eq!(
                code(access.check(action, Some("orders"), None)),
                Some(ErrorCode::AuthorizationResourceTypeMismatch),
                "{action:?}"
            );
        }
    }

    #[test]
    fn account_sas_mapping() {
        use ErrorCode::{AuthorizationPermissionMismatch as Perm, AuthorizationResourceTypeMismatch as Type};
        let cases: [(Action, &str, &str); 13] = [
            (Action::GetServiceProperties, "s", "r"),
            (Action::SetServiceProperties, "s", "w"),
            (Action::GetServiceStats, "s", "r"),
            (Action::QueryTables, "c", "l"),
            (Action::CreateTable, "c", "c"),
            (Action::DeleteTable, "c", "d"),
            (Action::GetTableAcl, "c", ""),
            (Action::SetTableAcl, "c", ""),
            (Action::ReadEntity, "o", "r"),
            (Action::InsertEntity, "o", "a"),
            (Action::UpdateEntity, "o", "u"),
            (Action::UpsertEntity, "o", "au"),
            (Action::DeleteEntity, "o", "d"),
        ];
        for (action, srt, sp) in cases {
            let full = account_sas("sco", "rwdlacup");
            let want = if sp.is_empty() { Some(Perm) } else { None };
            assert_eq!(code(full.check(action, Some("t"), None)), want, "{action:?}");
            let others: String = "sco".chars().filter(|c| !srt.contains(*c)).collect();
            assert_eq!(
                code(account_sas(&others, "rwdlacup").check(action, Some("t"), None)),
                Some(Type),
                "{action:?}"
            );
            if !sp.is_empty() {
                for letter in sp.chars() {
                    let without: String = "rwdlacup".chars().filter(|c| *c != letter).collect();
                    // Create Table also accepts `a` and `w`.
                    if action == Action::CreateTable {
                        continue;
                    }
                    assert_eq!(
                        code(account_sas(srt, &without).check(action, Some("t"), None)),
                        Some(Perm),
                        "{action:?} without {letter}"
                    );
                }
                assert_eq!(
                    code(account_sas(srt, sp).check(action, Some("t"), None)),
                    None,
                    "{action:?}"
                );
            }
        }
        for sp in ["a", "c", "w"] {
            assert_eq!(
                code(account_sas("c", sp).check(Action::CreateTable, Some("t"), None)),
                None
            );
        }
        assert_eq!(
            code(account_sas("c", "rdlup").check(Action::CreateTable, Some("t"), None)),
            Some(Perm)
        );
    }

    #[test]
    fn key_ranges_bound_writes_and_clip_reads() {
        let range = TableGrant::key_range(Some("b"), Some("2"), Some("d"), None)
            .expect("valid")
            .expect("bounded");
        let access = table_sas("raud", Some(range));
        let write = |pk, rk| code(access.check(Action::InsertEntity, Some("orders"), Some((pk, rk))));
        assert_eq!(write("b", "2"), None);
        assert_eq!(write("b", "3"), None);
        assert_eq!(write("c", ""), None);
        assert_eq!(write("d", "\u{FFFF}"), None);
        assert_eq!(write("b", "1"), Some(ErrorCode::AuthorizationPermissionMismatch));
        assert_eq!(write("a", "9"), Some(ErrorCode::AuthorizationPermissionMismatch));
        assert_eq!(write("da", ""), Some(ErrorCode::AuthorizationPermissionMismatch));
        // Reads by key are refused outside the range like writes; queries (no keys) pass.
        let read = |pk: &str, rk: &str| code(access.check(Action::ReadEntity, Some("orders"), Some((pk, rk))));
        assert_eq!(read("a", "1"), Some(ErrorCode::AuthorizationPermissionMismatch));
        assert_eq!(read("c", "x"), None);
        assert_eq!(code(access.check(Action::ReadEntity, Some("orders"), None)), None);

        let clipped = access.clip(vec![KeyRange::all()]);
        assert_eq!(clipped.len(), 1);
        assert!(clipped[0].contains(EntityKey::new("b", "2").as_bytes()));
        assert!(!clipped[0].contains(EntityKey::new("b", "1").as_bytes()));
        assert!(!clipped[0].contains(EntityKey::new("e", "").as_bytes()));
        let parts = access.clip(vec![
            KeyRange::partition("a"),
            KeyRange::partition("c"),
            KeyRange::partition("z"),
        ]);
        assert_eq!(parts, vec![KeyRange::partition("c")]);
        // A single-row range: spk=epk, srk=erk.
        let one = TableGrant::key_range(Some("p"), Some("r"), Some("p"), Some("r"))
            .expect("valid")
            .expect("bounded");
        assert!(one.contains(EntityKey::new("p", "r").as_bytes()));
        assert!(!one.contains(EntityKey::new("p", "r0").as_bytes()));
        assert!(!one.contains(EntityKey::new("p", "").as_bytes()));
        assert!(TableGrant::key_range(None, Some("r"), None, None).is_err());
        assert_eq!(TableGrant::key_range(None, None, None, None).ok(), Some(None));
    }

    fn token(account: Option<Role>, tables: &[(&str, Role)]) -> Access {
        Access::Token(Arc::new(TokenGrant {
            unrestricted: false,
            account,
            tables: tables.iter().map(|(t, r)| ((*t).to_owned(), *r)).collect(),
        }))
    }

    #[test]
    fn token_roles_include_each_other_and_map_every_action() {
        let reads = [Action::QueryTables, Action::ReadEntity];
        let owner_only = [
            Action::GetTableAcl,
            Action::SetTableAcl,
            Action::GetServiceProperties,
            Action::SetServiceProperties,
            Action::GetServiceStats,
        ];
        for action in ALL {
            let need = if reads.contains(&action) {
                Role::Reader
            } else if owner_only.contains(&action) {
                Role::Owner
            } else {
                Role::Contributor
            };
            assert_eq!(Role::needed_for(action), need, "{action:?}");
            for role in [Role::Reader, Role::Contributor, Role::Owner] {
                let got = code(token(Some(role), &[]).check(action, Some("t"), None));
                let want = (role < need).then_some(ErrorCode::AuthorizationPermissionMismatch);
                assert_eq!(got, want, "{role:?} {action:?}");
            }
            assert_eq!(
                code(token(None, &[]).check(action, Some("t"), None)),
                Some(ErrorCode::AuthorizationPermissionMismatch)
            );
            assert_eq!(
                code(Access::Token(Arc::new(TokenGrant::unrestricted())).check(action, Some("t"), None)),
                None
            );
        }
    }

    #[test]
    fn table_scoped_roles_reach_only_their_table() {
        let access = token(Some(Role::Reader), &[("Orders", Role::Contributor)]);
        assert_eq!(
            code(access.check(Action::InsertEntity, Some("orders"), Some(("p", "r")))),
            None
        );
        assert_eq!(code(access.check(Action::DeleteTable, Some("ORDERS"), None)), None);
        assert_eq!(
            code(access.check(Action::InsertEntity, Some("other"), Some(("p", "r")))),
            Some(ErrorCode::AuthorizationPermissionMismatch)
        );
        assert_eq!(code(access.check(Action::ReadEntity, Some("other"), None)), None);
        // Listing tables needs an account-wide role; a table's owner is no account owner.
        let scoped = token(None, &[("orders", Role::Owner)]);
        assert_eq!(
            code(scoped.check(Action::QueryTables, None, None)),
            Some(ErrorCode::AuthorizationPermissionMismatch)
        );
        assert_eq!(
            code(scoped.check(Action::GetServiceProperties, Some("orders"), None)),
            Some(ErrorCode::AuthorizationPermissionMismatch)
        );
        assert_eq!(code(scoped.check(Action::SetTableAcl, Some("orders"), None)), None);
        assert!(scoped.key_range().is_none());
    }

    #[test]
    fn role_names() {
        assert_eq!(Role::parse("Storage Table Data Reader"), Some(Role::Reader));
        assert_eq!(Role::parse("storage table data contributor"), Some(Role::Contributor));
        assert_eq!(Role::parse("Owner"), Some(Role::Owner));
        assert_eq!(Role::parse("Storage Blob Data Reader"), None);
    }

    #[test]
    fn permission_letters() {
        assert_eq!(
            TablePermissions::parse("dura").map(|p| p.canonical()),
            Some("raud".to_owned())
        );
        assert_eq!(TablePermissions::parse("rw"), None);
        assert!(AccountPermissions::parse("rwdlacupx").is_some());
        assert!(AccountPermissions::parse("rz").is_none());
        assert!(ResourceTypes::parse("sco").is_some());
        assert!(ResourceTypes::parse("b").is_none());
    }
}
