//! What the credential of a request may do. The HTTP layer authenticates and
//! builds an [`Access`]; every service operation asks it before acting.
//!
//! Shared Key is the account owner ([`Access::Full`]). A shared access signature
//! is a [`SasGrant`]: a service SAS names one table, a subset of `raud` and
//! optionally a key range; an account SAS names resource types (`s`ervice,
//! `c`ontainer = table, `o`bject = entity) and a subset of `rwdlacup`. The
//! operation → permission tables are those of spec/auth.md §4–§5.

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
    /// A verified bearer token: what its principal's roles allow.
    Token(Arc<TokenGrant>),
}

/// Azure's built-in data roles for tables, weakest first: Storage Table Data Reader,
/// Storage Table Data Contributor, and an owner who may also manage table ACLs and
/// the service's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableRole {
    Reader,
    Contributor,
    Owner,
}

impl TableRole {
    fn allows(self, action: Action) -> bool {
        use Action::*;
        match action {
            QueryTables | ReadEntity => true,
            CreateTable | DeleteTable | InsertEntity | UpdateEntity | UpsertEntity | DeleteEntity => {
                self >= TableRole::Contributor
            }
            GetTableAcl | SetTableAcl | GetServiceProperties | SetServiceProperties | GetServiceStats => {
                self == TableRole::Owner
            }
        }
    }
}

/// The roles a token's principal holds in the account: one for the whole account,
/// and any for single tables (names compared ignoring case, as tables are).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenGrant {
    pub account: Option<TableRole>,
    pub tables: Vec<(String, TableRole)>,
}

impl TokenGrant {
    /// Every operation (a token accepted with no role file).
    pub fn owner() -> Self {
        TokenGrant {
            account: Some(TableRole::Owner),
            tables: Vec::new(),
        }
    }

    /// Whether some role of the principal, on the account or on any table, allows `action`.
    fn may(&self, action: Action) -> Result<()> {
        let roles = self.account.into_iter().chain(self.tables.iter().map(|(_, r)| *r));
        match roles.max() {
            Some(role) if role.allows(action) => Ok(()),
            _ => Err(Error::new(ErrorCode::AuthorizationPermissionMismatch)),
        }
    }

    fn check(&self, action: Action, table: Option<&str>) -> Result<()> {
        let on_table = table.into_iter().flat_map(|t| {
            self.tables
                .iter()
                .filter(move |(name, _)| name.eq_ignore_ascii_case(t))
                .map(|(_, role)| *role)
        });
        let best = self.account.into_iter().chain(on_table).max();
        match best {
            Some(role) if role.allows(action) => Ok(()),
            _ => Err(Error::new(ErrorCode::AuthorizationPermissionMismatch)),
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

    /// [`Access::check`] for what a request's head tells: `table` `None` when the
    /// table is not known yet (a `$batch`'s or a new table's, named in the body),
    /// which then passes if the grant allows `action` on any table. The HTTP layer
    /// asks it before reading a body, the service checks again once it is read.
    pub fn may(&self, action: Action, table: Option<&str>, keys: Option<(&str, &str)>) -> Result<()> {
        match (self, table) {
            (_, Some(_)) => self.check(action, table, keys),
            (Access::Full, None) => Ok(()),
            (Access::Sas(grant), None) => match &**grant {
                SasGrant::Table(g) => g.check(action, Some(&g.table), None),
                SasGrant::Account(g) => g.check(action),
            },
            (Access::Token(grant), None) => grant.may(action),
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
#[path = "access_tests.rs"]
mod tests;
