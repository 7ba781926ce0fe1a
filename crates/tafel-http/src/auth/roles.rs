//! The role file (`--oauth-roles`): which token principals hold which of Azure's
//! built-in table roles, per account and optionally per table.
//!
//! ```toml
//! [[grant]]
//! principal = "oid:6f1c0e3a-…"            # or appid:…, role:<app role>, group:<group id>
//! role = "Storage Table Data Reader"      # or …Contributor, "owner" (reader, contributor too)
//! account = "devstoreaccount1"            # optional: every account
//! table = "orders"                        # optional: every table
//! ```

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use tafel_service::{TableRole, TokenGrant};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    grant: Vec<GrantSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantSpec {
    principal: String,
    role: String,
    account: Option<String>,
    table: Option<String>,
}

/// A principal a grant names: a claim and the value it must have (or contain).
#[derive(Debug, Clone, PartialEq)]
enum Principal {
    Oid(String),
    AppId(String),
    Role(String),
    Group(String),
}

#[derive(Debug, Clone)]
struct Assignment {
    principal: Principal,
    role: TableRole,
    account: Option<String>,
    table: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Roles {
    assignments: Vec<Assignment>,
}

fn role(name: &str) -> Option<TableRole> {
    match name.to_ascii_lowercase().as_str() {
        "reader" | "storage table data reader" => Some(TableRole::Reader),
        "contributor" | "storage table data contributor" => Some(TableRole::Contributor),
        "owner" => Some(TableRole::Owner),
        _ => None,
    }
}

impl Roles {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Self::parse(&text, json).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// TOML, or JSON (`{"grant": [{"principal": …, "role": …}, …]}`) when `json`.
    fn parse(text: &str, json: bool) -> Result<Self, String> {
        let file: File = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        } else {
            toml::from_str(text).map_err(|e| e.to_string())?
        };
        let mut assignments = Vec::new();
        for g in file.grant {
            let principal = match g.principal.split_once(':') {
                Some(("oid", v)) => Principal::Oid(v.to_owned()),
                Some(("appid", v)) => Principal::AppId(v.to_owned()),
                Some(("role", v)) => Principal::Role(v.to_owned()),
                Some(("group", v)) => Principal::Group(v.to_owned()),
                _ => {
                    return Err(format!(
                        "principal `{}`: expected oid:, appid:, role: or group: and a value",
                        g.principal
                    ))
                }
            };
            let role = role(&g.role).ok_or_else(|| {
                format!(
                    "role `{}`: expected Storage Table Data Reader, Storage Table Data Contributor or owner",
                    g.role
                )
            })?;
            assignments.push(Assignment {
                principal,
                role,
                account: g.account,
                table: g.table,
            });
        }
        Ok(Roles { assignments })
    }

    /// What the token's claims grant in `account`.
    pub fn grant(&self, account: &str, claims: &Value) -> TokenGrant {
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let listed = |name: &str, v: &str| {
            claims
                .get(name)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(v)))
        };
        let mut grant = TokenGrant::default();
        for a in &self.assignments {
            let holds = match &a.principal {
                Principal::Oid(v) => text("oid") == Some(v),
                Principal::AppId(v) => text("appid") == Some(v) || text("azp") == Some(v),
                Principal::Role(v) => listed("roles", v),
                Principal::Group(v) => listed("groups", v),
            };
            if !holds || a.account.as_deref().is_some_and(|acc| acc != account) {
                continue;
            }
            match &a.table {
                None => grant.account = grant.account.max(Some(a.role)),
                Some(t) => grant.tables.push((t.clone(), a.role)),
            }
        }
        grant
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn principals_map_to_roles_per_account_and_table() {
        let roles = Roles::parse(
            r#"
            [[grant]]
            principal = "oid:alice"
            role = "Storage Table Data Reader"
            [[grant]]
            principal = "role:Tables.Write"
            role = "contributor"
            account = "acct"
            table = "orders"
            [[grant]]
            principal = "appid:admin-app"
            role = "owner"
            account = "other"
            "#,
            false,
        )
        .unwrap();
        let g = roles.grant("acct", &json!({"oid": "alice", "roles": ["Tables.Write"]}));
        assert_eq!(g.account, Some(TableRole::Reader));
        assert_eq!(g.tables, vec![("orders".to_owned(), TableRole::Contributor)]);
        assert_eq!(roles.grant("acct", &json!({"azp": "admin-app"})), TokenGrant::default());
        assert_eq!(
            roles.grant("other", &json!({"appid": "admin-app"})).account,
            Some(TableRole::Owner)
        );
        assert_eq!(roles.grant("acct", &json!({"oid": "bob"})), TokenGrant::default());
    }

    #[test]
    fn an_unknown_role_or_principal_kind_is_refused_by_name() {
        let e = Roles::parse("[[grant]]\nprincipal = \"oid:a\"\nrole = \"admin\"", false).unwrap_err();
        assert!(e.contains("`admin`"), "{e}");
        let e = Roles::parse("[[grant]]\nprincipal = \"upn:a\"\nrole = \"reader\"", false).unwrap_err();
        assert!(e.contains("`upn:a`"), "{e}");
    }

    #[test]
    fn the_role_file_may_be_json() {
        let roles = Roles::parse(
            r#"{"grant": [{"principal": "group:g1", "role": "Storage Table Data Contributor", "table": "t"}]}"#,
            true,
        )
        .unwrap();
        let g = roles.grant("acct", &json!({"groups": ["g1"]}));
        assert_eq!(g.tables, vec![("t".to_owned(), TableRole::Contributor)]);
        assert!(Roles::parse(
            r#"{"grant": [{"principal": "oid:a", "role": "reader", "scope": "x"}]}"#,
            true
        )
        .is_err());
    }
}
