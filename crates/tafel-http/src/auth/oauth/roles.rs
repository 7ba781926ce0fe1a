//! The role file (`--oauth-roles`): which token principals hold which of Azure's
//! built-in table data roles, per account and optionally per table. TOML, or
//! JSON when the file name ends in `.json`:
//!
//! ```toml
//! [[assignment]]
//! principal = "oid:00000000-0000-0000-0000-000000000001"  # oid: appid: role: group: sub:
//! role = "Storage Table Data Reader"                      # or Contributor, Owner
//! account = "devstoreaccount1"                            # optional, default "*" (every account)
//! table = "orders"                                        # optional, default the whole account
//! ```

use std::path::Path;

use serde::Deserialize;
use tafel_service::{Role, TokenGrant};

use super::claims::Claims;

/// Who an assignment is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Principal {
    /// The `oid` claim: a user, group member or service principal object.
    Oid(String),
    /// The `appid` (v1 tokens) or `azp` (v2 tokens) claim: a client application.
    App(String),
    /// A value of the `roles` claim (app roles).
    AppRole(String),
    /// A value of the `groups` claim.
    Group(String),
    /// The `sub` claim.
    Sub(String),
}

impl Principal {
    fn parse(s: &str) -> Result<Principal, String> {
        let (kind, value) = s
            .split_once(':')
            .ok_or_else(|| format!("principal `{s}` is not KIND:VALUE (oid, appid, role, group, sub)"))?;
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err(format!("principal `{s}` has no value"));
        }
        Ok(match kind.trim().to_ascii_lowercase().as_str() {
            "oid" => Principal::Oid(value),
            "appid" | "azp" => Principal::App(value),
            "role" | "roles" => Principal::AppRole(value),
            "group" | "groups" => Principal::Group(value),
            "sub" => Principal::Sub(value),
            other => {
                return Err(format!(
                    "principal kind `{other}` is not oid, appid, role, group or sub"
                ))
            }
        })
    }

    fn matches(&self, c: &Claims) -> bool {
        let is = |claim: &Option<String>, v: &str| claim.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(v));
        match self {
            Principal::Oid(v) => is(&c.oid, v),
            Principal::App(v) => is(&c.appid, v) || is(&c.azp, v),
            Principal::AppRole(v) => c.roles.iter().any(|r| r == v),
            Principal::Group(v) => c.groups.iter().any(|g| g.eq_ignore_ascii_case(v)),
            Principal::Sub(v) => c.sub.as_deref() == Some(v.as_str()),
        }
    }
}

#[derive(Debug, Clone)]
struct Assignment {
    principal: Principal,
    role: Role,
    /// `None` = every account.
    account: Option<String>,
    /// `None` = the whole account.
    table: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAssignment {
    principal: String,
    role: String,
    #[serde(default)]
    account: Option<String>,
    #[serde(default)]
    table: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    assignment: Vec<FileAssignment>,
}

/// The role assignments of `--oauth-roles`.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    assignments: Vec<Assignment>,
}

impl Roles {
    pub fn load(path: &Path) -> Result<Roles, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Roles::parse(&text, json).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str, json: bool) -> Result<Roles, String> {
        let file: File = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        } else {
            toml::from_str(text).map_err(|e| e.to_string())?
        };
        let assignments = file
            .assignment
            .into_iter()
            .map(|a| {
                let role = Role::parse(&a.role).ok_or_else(|| {
                    format!(
                        "role `{}` is not Storage Table Data Reader, Storage Table Data Contributor or Owner",
                        a.role
                    )
                })?;
                Ok(Assignment {
                    principal: Principal::parse(&a.principal)?,
                    role,
                    account: a.account.filter(|s| s != "*"),
                    table: a.table.filter(|s| s != "*"),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Roles { assignments })
    }

    pub fn len(&self) -> usize {
        self.assignments.len()
    }

    /// What the token's principal may do on `account`.
    pub fn grant(&self, claims: &Claims, account: &str) -> TokenGrant {
        let mut grant = TokenGrant::default();
        for a in &self.assignments {
            if a.account.as_deref().is_some_and(|acct| acct != account) || !a.principal.matches(claims) {
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

    const TOML: &str = r#"
[[assignment]]
principal = "oid:user-1"
role = "Storage Table Data Reader"

[[assignment]]
principal = "appid:app-1"
role = "Storage Table Data Contributor"
account = "devstoreaccount1"

[[assignment]]
principal = "role:Tables.Admin"
role = "owner"

[[assignment]]
principal = "group:g-1"
role = "contributor"
table = "orders"

[[assignment]]
principal = "oid:user-1"
role = "contributor"
account = "other"
"#;

    fn claims(json: serde_json::Value) -> Claims {
        serde_json::from_value(json).expect("claims")
    }

    #[test]
    fn principals_map_to_roles_per_account_and_table() {
        let roles = Roles::parse(TOML, false).expect("parses");
        assert_eq!(roles.len(), 5);
        let user = claims(serde_json::json!({ "oid": "USER-1" }));
        let g = roles.grant(&user, "devstoreaccount1");
        assert_eq!(
            (g.unrestricted, g.account, g.tables.len()),
            (false, Some(Role::Reader), 0)
        );
        assert_eq!(roles.grant(&user, "other").account, Some(Role::Contributor));

        let app_v1 = claims(serde_json::json!({ "appid": "app-1" }));
        let app_v2 = claims(serde_json::json!({ "azp": "app-1" }));
        assert_eq!(
            roles.grant(&app_v1, "devstoreaccount1").account,
            Some(Role::Contributor)
        );
        assert_eq!(
            roles.grant(&app_v2, "devstoreaccount1").account,
            Some(Role::Contributor)
        );
        assert_eq!(roles.grant(&app_v1, "other").account, None);

        let admin = claims(serde_json::json!({ "roles": ["Tables.Read", "Tables.Admin"] }));
        assert_eq!(roles.grant(&admin, "any").account, Some(Role::Owner));
        // App roles are matched exactly (case matters in the roles claim).
        let admin_lower = claims(serde_json::json!({ "roles": ["tables.admin"] }));
        assert_eq!(roles.grant(&admin_lower, "any").account, None);

        let member = claims(serde_json::json!({ "groups": ["g-1"], "oid": "user-1" }));
        let g = roles.grant(&member, "devstoreaccount1");
        assert_eq!(g.account, Some(Role::Reader));
        assert_eq!(g.tables, vec![("orders".to_owned(), Role::Contributor)]);

        let nobody = claims(serde_json::json!({ "oid": "someone-else" }));
        assert_eq!(roles.grant(&nobody, "devstoreaccount1"), TokenGrant::default());
    }

    #[test]
    fn json_form_and_errors() {
        let json = r#"{"assignment":[{"principal":"sub:s","role":"Storage Table Data Owner","table":"*"}]}"#;
        let roles = Roles::parse(json, true).expect("parses");
        let g = roles.grant(&claims(serde_json::json!({ "sub": "s" })), "a");
        assert_eq!(g.account, Some(Role::Owner));
        for (bad, why) in [
            (
                r#"[[assignment]]
principal = "upn:x"
role = "reader""#,
                "kind",
            ),
            (
                r#"[[assignment]]
principal = "oid"
role = "reader""#,
                "KIND:VALUE",
            ),
            (
                r#"[[assignment]]
principal = "oid:x"
role = "Storage Blob Data Reader""#,
                "role",
            ),
            (
                r#"[[assignment]]
principal = "oid:x"
role = "reader"
scope = "x""#,
                "unknown field",
            ),
        ] {
            let err = Roles::parse(bad, false).expect_err(bad);
            assert!(err.contains(why), "{err}");
        }
    }
}
