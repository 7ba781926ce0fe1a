//! Table ACLs: up to five stored access policies per table (Get/Set Table ACL,
//! operations.md §4–§5). A service SAS naming one with `si` takes its missing
//! fields from it, so changing or removing a policy changes or revokes every SAS
//! bound to it at once.

use crate::access::{Action, TablePermissions};
use crate::blob::{Dec, Enc};
use crate::error::{Error, ErrorCode, Result};
use crate::model::DateTime;
use crate::ops::{Ctx, Service};

/// At most this many signed identifiers per table.
pub(crate) const MAX_POLICIES: usize = 5;
/// Signed identifier Ids are 1 to 64 characters.
pub(crate) const MAX_ID_CHARS: usize = 64;

const FORMAT: u8 = 1;

/// One `AccessPolicy`: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessPolicy {
    pub start: Option<DateTime>,
    pub expiry: Option<DateTime>,
    /// Letters from `raud`, canonical order once stored.
    pub permission: Option<String>,
}

/// One `SignedIdentifier`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignedIdentifier {
    pub id: String,
    pub policy: AccessPolicy,
}

fn node_value(message: String) -> Error {
    Error::with_message(ErrorCode::InvalidXmlNodeValue, message)
}

/// Checks a new ACL and puts its permissions in canonical `raud` order.
pub fn validate(mut ids: Vec<SignedIdentifier>) -> Result<Vec<SignedIdentifier>> {
    if ids.len() > MAX_POLICIES {
        return Err(Error::with_message(
            ErrorCode::InvalidXmlDocument,
            format!(
                "A table can have at most {MAX_POLICIES} signed identifiers; {} were given.",
                ids.len()
            ),
        ));
    }
    for i in 0..ids.len() {
        let id = &ids[i].id;
        let len = id.chars().count();
        if len == 0 || len > MAX_ID_CHARS {
            return Err(node_value(format!(
                "The signed identifier Id must be 1 to {MAX_ID_CHARS} characters long."
            )));
        }
        if ids[..i].iter().any(|o| &o.id == id) {
            return Err(node_value(format!(
                "The signed identifier Id '{id}' is given more than once."
            )));
        }
        let policy = &mut ids[i].policy;
        if let Some(p) = &policy.permission {
            let parsed = TablePermissions::parse(p)
                .ok_or_else(|| node_value(format!("The permission '{p}' has letters other than r, a, u and d.")))?;
            let canonical = parsed.canonical();
            policy.permission = (!canonical.is_empty()).then_some(canonical);
        }
        if let (Some(s), Some(e)) = (policy.start, policy.expiry) {
            if e < s {
                return Err(node_value("The access policy expires before it starts.".to_owned()));
            }
        }
    }
    Ok(ids)
}

pub fn encode(ids: &[SignedIdentifier]) -> Vec<u8> {
    let mut e = Enc::new(FORMAT);
    e.u32(ids.len() as u32);
    for s in ids {
        let opt_time = |t: Option<DateTime>| t.map_or(i64::MIN, |d| d.ticks());
        e.str(&s.id)
            .i64(opt_time(s.policy.start))
            .i64(opt_time(s.policy.expiry))
            .opt_bool(s.policy.permission.as_ref().map(|_| true))
            .str(s.policy.permission.as_deref().unwrap_or(""));
    }
    e.finish()
}

/// Decodes a stored ACL; an empty blob (never set) is no policies.
pub fn decode(bytes: &[u8]) -> Result<Vec<SignedIdentifier>> {
    decode_parts(bytes).map(|(ids, _)| ids)
}

/// The ACL and what the blob holds after it (the table's TTL policy, `ttl.rs`).
pub(crate) fn decode_parts(bytes: &[u8]) -> Result<(Vec<SignedIdentifier>, &[u8])> {
    if bytes.is_empty() {
        return Ok((Vec::new(), &[]));
    }
    let corrupt = || Error::internal("corrupt stored table ACL");
    let mut d = Dec::new(bytes, FORMAT).ok_or_else(corrupt)?;
    let n = d.u32().ok_or_else(corrupt)? as usize;
    let mut out = Vec::with_capacity(n.min(MAX_POLICIES));
    for _ in 0..n {
        let id = d.str().ok_or_else(corrupt)?;
        let time = |t: i64| (t != i64::MIN).then_some(DateTime(t));
        let start = time(d.i64().ok_or_else(corrupt)?);
        let expiry = time(d.i64().ok_or_else(corrupt)?);
        let has_permission = d.opt_bool().ok_or_else(corrupt)?.is_some();
        let permission = d.str().ok_or_else(corrupt)?;
        out.push(SignedIdentifier {
            id,
            policy: AccessPolicy {
                start,
                expiry,
                permission: has_permission.then_some(permission),
            },
        });
    }
    Ok((out, d.rest()))
}

impl Service {
    /// Get Table ACL (Shared Key only).
    pub async fn get_table_acl(&self, ctx: &Ctx, table: &str) -> Result<Vec<SignedIdentifier>> {
        ctx.access.check(Action::GetTableAcl, Some(table), None)?;
        match self.store().get_table(&ctx.account, table).await? {
            Some(record) => decode(&record.acl),
            None => Err(Error::new(ErrorCode::TableNotFound)),
        }
    }

    /// Set Table ACL (Shared Key only): replaces every policy of the table.
    pub async fn set_table_acl(&self, ctx: &Ctx, table: &str, ids: Vec<SignedIdentifier>) -> Result<()> {
        ctx.access.check(Action::SetTableAcl, Some(table), None)?;
        let ids = validate(ids)?;
        // The blob holds the table's TTL policy after the ACL: keep it.
        let record = self.store().get_table(&ctx.account, table).await?;
        let Some(record) = record else {
            return Err(Error::new(ErrorCode::TableNotFound));
        };
        let mut blob = encode(&ids);
        blob.extend_from_slice(decode_parts(&record.acl)?.1);
        if self.store().set_table_acl(&ctx.account, table, blob).await? {
            Ok(())
        } else {
            Err(Error::new(ErrorCode::TableNotFound))
        }
    }

    /// The stored access policy `id` of `table`, for validating a SAS that names
    /// it (no access check: the SAS's own signature is the credential). `None`
    /// when the table or the policy does not exist.
    pub async fn stored_access_policy(&self, account: &str, table: &str, id: &str) -> Result<Option<AccessPolicy>> {
        let Some(record) = self.store().get_table(account, table).await? else {
            return Ok(None);
        };
        Ok(decode(&record.acl)?.into_iter().find(|s| s.id == id).map(|s| s.policy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(id: &str, permission: Option<&str>) -> SignedIdentifier {
        SignedIdentifier {
            id: id.into(),
            policy: AccessPolicy {
                start: None,
                expiry: DateTime::parse("2030-01-01T00:00:00Z"),
                permission: permission.map(Into::into),
            },
        }
    }

    #[test]
    fn validation() {
        let ok = validate(vec![sid("a", Some("dura")), sid("b", None), sid("c", Some(""))]).expect("valid");
        assert_eq!(ok[0].policy.permission.as_deref(), Some("raud"));
        assert_eq!(ok[1].policy.permission, None);
        assert_eq!(ok[2].policy.permission, None);
        let code = |v| validate(v).err().map(|e| e.code);
        assert_eq!(
            code((0..6).map(|i| sid(&i.to_string(), None)).collect()),
            Some(ErrorCode::InvalidXmlDocument)
        );
        assert_eq!(code(vec![sid("", None)]), Some(ErrorCode::InvalidXmlNodeValue));
        assert_eq!(
            code(vec![sid(&"x".repeat(65), None)]),
            Some(ErrorCode::InvalidXmlNodeValue)
        );
        assert!(validate(vec![sid(&"é".repeat(64), None)]).is_ok());
        assert_eq!(
            code(vec![sid("a", None), sid("a", None)]),
            Some(ErrorCode::InvalidXmlNodeValue)
        );
        assert_eq!(code(vec![sid("a", Some("rw"))]), Some(ErrorCode::InvalidXmlNodeValue));
    }

    #[test]
    fn blob_round_trip() {
        let ids = vec![
            sid("a", Some("raud")),
            SignedIdentifier {
                id: "b".into(),
                policy: AccessPolicy::default(),
            },
            SignedIdentifier {
                id: "c".into(),
                policy: AccessPolicy {
                    start: DateTime::parse("2024-01-01T00:00:00.1234567Z"),
                    expiry: None,
                    permission: Some(String::new()),
                },
            },
        ];
        assert_eq!(decode(&encode(&ids)).ok(), Some(ids));
        assert_eq!(decode(&[]).ok(), Some(Vec::new()));
        assert!(decode(&[9, 9]).is_err());
    }
}
