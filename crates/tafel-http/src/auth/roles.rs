//! The role file (`--oauth-roles`): which token principals hold which of Azure's
//! built-in table roles, per account and optionally per table.
//!
//! ```toml
//! [[grant]]
//! principal = "oid:6f1c0e3a-…"            # or appid:…, role:<app role>, group:<group id>
//! role = "Storage Table Data Reader"      # or …Contributor, "owner" (reader, contributor too)
//! account = "devstoreaccount1"            # optional: every account
//! table = "orders"                        # optional: every table
//! issuer = "https://issuer.example/"       # optional: Entra ID's
//! ```
//!
//! A principal is an issuer's: a grant holds only for tokens of its `issuer`,
//! and a grant naming none only for Entra ID's tokens, so a second trusted issuer
//! cannot mint a token with an Entra principal's `oid` and get its roles.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use tafel_service::{TableRole, TokenGrant};

use super::bearer::{entra_tenant, issuer_tenant};

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
    issuer: Option<String>,
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
    /// `None`: Entra ID (any of the tenants `--oauth-tenant` accepts).
    issuer: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Roles {
    assignments: Vec<Assignment>,
}

fn role(name: &str) -> Option<TableRole> {
    match name.to_ascii_lowercase().as_str() {
        // Cosmos DB for Table's built-in data roles grant the same (its Contributor's
        // `tables/*` takes in creating and deleting tables).
        "reader" | "storage table data reader" | "cosmos db built-in data reader" => Some(TableRole::Reader),
        "contributor" | "storage table data contributor" | "cosmos db built-in data contributor" => {
            Some(TableRole::Contributor)
        }
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
                    "role `{}`: expected Storage Table Data Reader, Storage Table Data Contributor, Cosmos DB Built-in Data Reader, Cosmos DB Built-in Data Contributor or owner",
                    g.role
                )
            })?;
            assignments.push(Assignment {
                principal,
                role,
                account: g.account,
                table: g.table,
                issuer: g.issuer,
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
        let iss = text("iss").unwrap_or_default();
        let mut grant = TokenGrant::default();
        for a in &self.assignments {
            if !issued_by(a.issuer.as_deref(), iss) {
                continue;
            }
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

/// Whether a token with issuer `iss` is one of `issuer`'s (`None`: Entra ID's).
/// Entra's v1 and v2 issuer forms of one tenant are one issuer.
fn issued_by(issuer: Option<&str>, iss: &str) -> bool {
    let entra = entra_tenant(iss);
    match issuer {
        None => entra.is_some(),
        Some(want) => {
            let want = want.trim_end_matches('/');
            want == iss.trim_end_matches('/')
                || issuer_tenant(want)
                    .zip(entra)
                    .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ENTRA: &str = "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/";

    /// What `roles` grant a token of Entra ID's with these claims.
    fn entra_grant(roles: &Roles, account: &str, mut claims: Value) -> TokenGrant {
        claims["iss"] = json!(ENTRA);
        roles.grant(account, &claims)
    }

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
        let g = entra_grant(&roles, "acct", json!({"oid": "alice", "roles": ["Tables.Write"]}));
        assert_eq!(g.account, Some(TableRole::Reader));
        assert_eq!(g.tables, vec![("orders".to_owned(), TableRole::Contributor)]);
        assert_eq!(
            entra_grant(&roles, "acct", json!({"azp": "admin-app"})),
            TokenGrant::default()
        );
        assert_eq!(
            entra_grant(&roles, "other", json!({"appid": "admin-app"})).account,
            Some(TableRole::Owner)
        );
        assert_eq!(
            entra_grant(&roles, "acct", json!({"oid": "bob"})),
            TokenGrant::default()
        );
    }

    #[test]
    fn cosmos_built_in_data_roles_are_reader_and_contributor() {
        let roles = Roles::parse(
            "[[grant]]\nprincipal = \"oid:r\"\nrole = \"Cosmos DB Built-in Data Reader\"\n\
             [[grant]]\nprincipal = \"oid:c\"\nrole = \"Cosmos DB Built-in Data Contributor\"",
            false,
        )
        .unwrap();
        let grant = |oid: &str| entra_grant(&roles, "acct", json!({ "oid": oid })).account;
        assert_eq!(grant("r"), Some(TableRole::Reader));
        assert_eq!(grant("c"), Some(TableRole::Contributor));
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
        let g = entra_grant(&roles, "acct", json!({"groups": ["g1"]}));
        assert_eq!(g.tables, vec![("t".to_owned(), TableRole::Contributor)]);
        assert!(Roles::parse(
            r#"{"grant": [{"principal": "oid:a", "role": "reader", "scope": "x"}]}"#,
            true
        )
        .is_err());
    }

    #[test]
    fn a_principal_is_its_issuers_only() {
        let roles = Roles::parse(
            r#"
            [[grant]]
            principal = "oid:alice"
            role = "owner"
            [[grant]]
            principal = "oid:bob"
            role = "reader"
            issuer = "https://issuer.test/"
            "#,
            false,
        )
        .unwrap();
        let as_of = |iss: &str, oid: &str| roles.grant("acct", &json!({"iss": iss, "oid": oid})).account;
        assert_eq!(as_of(ENTRA, "alice"), Some(TableRole::Owner));
        assert_eq!(
            as_of(
                "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0",
                "alice"
            ),
            Some(TableRole::Owner)
        );
        assert_eq!(as_of("https://issuer.test", "alice"), None, "another issuer's alice");
        assert_eq!(as_of("https://issuer.test", "bob"), Some(TableRole::Reader));
        assert_eq!(as_of(ENTRA, "bob"), None, "Entra's bob is not issuer.test's");
    }
}
