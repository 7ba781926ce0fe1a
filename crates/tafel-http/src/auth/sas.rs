//! Shared access signatures (spec/auth.md §4–§5): a request whose query carries
//! `sig` and no `Authorization` header. The signature is checked first, in
//! constant time against every key of the account; then the signed time window,
//! source IP and protocol. What the grant allows per operation is decided by the
//! service layer ([`tafel_service::Access::check`]).
//!
//! Nothing here logs: a SAS query string is a bearer credential.

use std::net::IpAddr;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use tafel_service::model::DateTime;
use tafel_service::{
    Access, AccountGrant, AccountPermissions, Error, ErrorCode, ResourceTypes, Result, SasGrant, Service, TableGrant,
    TablePermissions,
};

use super::Signed;
use crate::accounts::AccountKey;

fn failed(detail: impl Into<String>) -> Error {
    Error::new(ErrorCode::AuthenticationFailed).with_detail(detail)
}

/// The first value of a query parameter, empty values counting as absent.
fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Which kind of SAS the query holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Service,
    Account,
}

pub fn kind(query: &[(String, String)]) -> Option<Kind> {
    if param(query, "ss").is_some() || param(query, "srt").is_some() {
        Some(Kind::Account)
    } else if param(query, "tn").is_some() {
        Some(Kind::Service)
    } else {
        None
    }
}

/// The service-SAS string-to-sign of the signed version `sv`, as the SDKs build
/// it: `sip`/`spr` from 2015-04-05, the `/table/` resource prefix from 2015-02-21.
pub(crate) fn service_string_to_sign(account: &str, query: &[(String, String)]) -> String {
    let v = |n| param(query, n).unwrap_or("");
    let sv = v("sv");
    let table = v("tn").to_ascii_lowercase();
    let resource = if sv >= "2015-02-21" {
        format!("/table/{account}/{table}")
    } else {
        format!("/{account}/{table}")
    };
    let mut fields = vec![v("sp"), v("st"), v("se"), &resource, v("si")];
    if sv >= "2015-04-05" {
        fields.extend([v("sip"), v("spr")]);
    }
    fields.extend([sv, v("spk"), v("srk"), v("epk"), v("erk")]);
    fields.join("\n")
}

/// The account-SAS string-to-sign (with a trailing newline; `ses` from 2020-12-06).
pub(crate) fn account_string_to_sign(account: &str, query: &[(String, String)]) -> String {
    let v = |n| param(query, n).unwrap_or("");
    let sv = v("sv");
    let mut s = [
        account,
        v("sp"),
        v("ss"),
        v("srt"),
        v("st"),
        v("se"),
        v("sip"),
        v("spr"),
        sv,
    ]
    .join("\n");
    s.push('\n');
    if sv >= "2020-12-06" {
        s.push_str(v("ses"));
        s.push('\n');
    }
    s
}

/// Checks `sig` against the string-to-sign under each key, in constant time.
fn check_signature(keys: &[AccountKey], string_to_sign: &str, sig: &str) -> Result<()> {
    let signature = STANDARD
        .decode(sig.trim())
        .map_err(|_| failed("The signature (sig) is not valid base64."))?;
    if super::signed_by_any(keys, string_to_sign, &signature) {
        return Ok(());
    }
    Err(failed(format!(
        "Signature did not match. String to sign used was {string_to_sign}"
    )))
}

fn parse_time(name: &str, value: &str) -> Result<DateTime> {
    let parsed = if value.len() == 10 {
        DateTime::parse(&format!("{value}T00:00:00Z"))
    } else {
        DateTime::parse(value)
    };
    parsed.ok_or_else(|| failed(format!("The signed {name} '{value}' is not a valid ISO 8601 UTC time.")))
}

fn check_window(start: Option<DateTime>, expiry: DateTime, now: DateTime) -> Result<()> {
    if start.is_some_and(|s| expiry < s) {
        return Err(failed("Signed expiry time has to be after signed start time."));
    }
    if start.is_some_and(|s| now < s) || now > expiry {
        return Err(failed("Signed start and expiry times do not include the current time."));
    }
    Ok(())
}

fn ip_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `peer` is within `sip` (one address or `from-to`); `None` if `sip`
/// is malformed.
pub(crate) fn ip_allowed(sip: &str, peer: IpAddr) -> Option<bool> {
    let (from, to) = match sip.split_once('-') {
        Some((a, b)) => (a.trim().parse::<IpAddr>().ok()?, b.trim().parse::<IpAddr>().ok()?),
        None => {
            let a = sip.trim().parse::<IpAddr>().ok()?;
            (a, a)
        }
    };
    let (from, to, peer) = (ip_key(from), ip_key(to), ip_key(peer));
    Some(match (from, to, peer) {
        (IpAddr::V4(f), IpAddr::V4(t), IpAddr::V4(p)) => (u32::from(f)..=u32::from(t)).contains(&u32::from(p)),
        (IpAddr::V6(f), IpAddr::V6(t), IpAddr::V6(p)) => (u128::from(f)..=u128::from(t)).contains(&u128::from(p)),
        (IpAddr::V4(_), IpAddr::V4(_), IpAddr::V6(_)) | (IpAddr::V6(_), IpAddr::V6(_), IpAddr::V4(_)) => false,
        _ => return None,
    })
}

fn check_ip(query: &[(String, String)], peer: Option<IpAddr>) -> Result<()> {
    let Some(sip) = param(query, "sip") else { return Ok(()) };
    let allowed = match peer {
        Some(p) => ip_allowed(sip, p).ok_or_else(|| failed(format!("The signed IP '{sip}' is not valid.")))?,
        None => false,
    };
    if !allowed {
        return Err(Error::new(ErrorCode::AuthorizationSourceIPMismatch));
    }
    Ok(())
}

fn check_protocol(query: &[(String, String)], https: bool) -> Result<()> {
    match param(query, "spr") {
        None | Some("https,http") | Some("http,https") => Ok(()),
        Some("https") if https => Ok(()),
        Some("https") => Err(Error::new(ErrorCode::AuthorizationProtocolMismatch)),
        Some(other) => Err(failed(format!("The signed protocol '{other}' is not valid."))),
    }
}

/// The query parameters a SAS is made of.
const SAS_PARAMS: [&str; 16] = [
    "sv", "ss", "srt", "sp", "st", "se", "sip", "spr", "ses", "tn", "si", "spk", "srk", "epk", "erk", "sig",
];

/// Refuses a SAS that gives one of its parameters twice: which value was signed,
/// and which one the grant would be read from, is ambiguous.
fn check_unique(query: &[(String, String)]) -> Result<()> {
    for name in SAS_PARAMS {
        if query.iter().filter(|(k, _)| k == name).nth(1).is_some() {
            return Err(failed(format!(
                "The shared access signature gives the parameter '{name}' more than once."
            )));
        }
    }
    Ok(())
}

/// Verifies a SAS request and returns what it grants.
pub async fn verify(keys: &[AccountKey], service: &Service, req: &Signed<'_>) -> Result<Access> {
    let q = req.query;
    check_unique(q)?;
    let sig = param(q, "sig").ok_or_else(|| failed("The shared access signature has an empty sig."))?;
    if param(q, "sv").is_none() {
        return Err(failed("The shared access signature has no signed version (sv)."));
    }
    let kind =
        kind(q).ok_or_else(|| failed("The shared access signature names neither a table (tn) nor services (ss)."))?;
    let grant = match kind {
        Kind::Account => {
            check_signature(keys, &account_string_to_sign(req.account, q), sig)?;
            account_grant(q, req.peer)?
        }
        Kind::Service => {
            check_signature(keys, &service_string_to_sign(req.account, q), sig)?;
            table_grant(service, req.account, q, req.peer).await?
        }
    };
    check_protocol(q, req.https)?;
    Ok(Access::Sas(Arc::new(grant)))
}

fn account_grant(q: &[(String, String)], peer: Option<IpAddr>) -> Result<SasGrant> {
    let ss = param(q, "ss").unwrap_or("");
    if !ss.contains('t') {
        return Err(Error::new(ErrorCode::AuthorizationServiceMismatch));
    }
    let (Some(sp), Some(se)) = (param(q, "sp"), param(q, "se")) else {
        return Err(failed("An account SAS must give permissions (sp) and an expiry (se)."));
    };
    let start = param(q, "st").map(|s| parse_time("start", s)).transpose()?;
    check_window(start, parse_time("expiry", se)?, DateTime::now())?;
    check_ip(q, peer)?;
    let resource_types = ResourceTypes::parse(param(q, "srt").unwrap_or(""))
        .ok_or_else(|| failed("The signed resource types (srt) are not valid."))?;
    let permissions =
        AccountPermissions::parse(sp).ok_or_else(|| failed(format!("The signed permissions '{sp}' are not valid.")))?;
    Ok(SasGrant::Account(AccountGrant {
        resource_types,
        permissions,
    }))
}

async fn table_grant(
    service: &Service,
    account: &str,
    q: &[(String, String)],
    peer: Option<IpAddr>,
) -> Result<SasGrant> {
    let table = param(q, "tn").unwrap_or("");
    let mut start = param(q, "st").map(|s| parse_time("start", s)).transpose()?;
    let mut expiry = param(q, "se").map(|s| parse_time("expiry", s)).transpose()?;
    let mut permission = param(q, "sp").map(str::to_owned);
    if let Some(id) = param(q, "si") {
        let policy = service
            .stored_access_policy(account, table, id)
            .await?
            .ok_or_else(|| failed(format!("The table has no stored access policy '{id}'.")))?;
        let both = |name: &str| {
            failed(format!(
                "The field {name} is given by both the signature and the stored access policy."
            ))
        };
        if policy.start.is_some() {
            if start.is_some() {
                return Err(both("start"));
            }
            start = policy.start;
        }
        if policy.expiry.is_some() {
            if expiry.is_some() {
                return Err(both("expiry"));
            }
            expiry = policy.expiry;
        }
        if policy.permission.is_some() {
            if permission.is_some() {
                return Err(both("permissions"));
            }
            permission = policy.permission;
        }
    }
    let (Some(sp), Some(expiry)) = (permission, expiry) else {
        return Err(failed(
            "A service SAS must give permissions (sp) and an expiry (se), itself or through its policy.",
        ));
    };
    check_window(start, expiry, DateTime::now())?;
    check_ip(q, peer)?;
    let permissions =
        TablePermissions::parse(&sp).ok_or_else(|| failed(format!("The signed permissions '{sp}' are not valid.")))?;
    let range = TableGrant::key_range(param(q, "spk"), param(q, "srk"), param(q, "epk"), param(q, "erk"))?;
    Ok(SasGrant::Table(TableGrant {
        table: table.to_owned(),
        permissions,
        range,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn service_string_to_sign_per_version() {
        // auth.md §4 example.
        let query = q(&[
            ("sv", "2019-02-02"),
            ("tn", "Orders"),
            ("sp", "raud"),
            ("se", "2024-06-05T00:00:00Z"),
            ("spr", "https,http"),
            ("spk", "2024-06"),
            ("epk", "2024-06"),
            ("sig", "x"),
        ]);
        assert_eq!(
            service_string_to_sign("devstoreaccount1", &query),
            "raud\n\n2024-06-05T00:00:00Z\n/table/devstoreaccount1/orders\n\n\nhttps,http\n2019-02-02\n2024-06\n\n2024-06\n"
        );
        let old = q(&[("sv", "2013-08-15"), ("tn", "T"), ("sp", "r"), ("se", "2030-01-01")]);
        assert_eq!(
            service_string_to_sign("acct", &old),
            "r\n\n2030-01-01\n/acct/t\n\n2013-08-15\n\n\n\n"
        );
        let mid = q(&[("sv", "2015-02-21"), ("tn", "T"), ("sp", "r"), ("se", "2030-01-01")]);
        assert_eq!(
            service_string_to_sign("acct", &mid),
            "r\n\n2030-01-01\n/table/acct/t\n\n2015-02-21\n\n\n\n"
        );
    }

    #[test]
    fn account_string_to_sign_per_version() {
        let base = [
            ("ss", "t"),
            ("srt", "sco"),
            ("sp", "rl"),
            ("se", "2030-01-01T00:00:00Z"),
            ("spr", "https"),
        ];
        let mut old = base.to_vec();
        old.push(("sv", "2019-02-02"));
        assert_eq!(
            account_string_to_sign("acct", &q(&old)),
            "acct\nrl\nt\nsco\n\n2030-01-01T00:00:00Z\n\nhttps\n2019-02-02\n"
        );
        let mut new = base.to_vec();
        new.push(("sv", "2021-12-02"));
        assert_eq!(
            account_string_to_sign("acct", &q(&new)),
            "acct\nrl\nt\nsco\n\n2030-01-01T00:00:00Z\n\nhttps\n2021-12-02\n\n"
        );
    }

    #[test]
    fn signatures_verify_with_either_key_in_constant_time() {
        let k1 = b"first key".to_vec();
        let k2 = b"second key".to_vec();
        let sign = |k: &[u8], s: &str| {
            let mut mac = Hmac::<Sha256>::new_from_slice(k).expect("any key length");
            mac.update(s.as_bytes());
            STANDARD.encode(mac.finalize().into_bytes())
        };
        let keys = [AccountKey::new(k1.clone()), AccountKey::new(k2.clone())];
        assert!(check_signature(&keys, "abc", &sign(&k1, "abc")).is_ok());
        assert!(check_signature(&keys, "abc", &sign(&k2, "abc")).is_ok());
        let wrong = check_signature(&keys, "abd", &sign(&k2, "abc")).map_err(|e| e.code);
        assert_eq!(wrong, Err(ErrorCode::AuthenticationFailed));
        assert!(check_signature(&keys, "abc", "not base64!").is_err());
    }

    #[test]
    fn time_windows() {
        let now = DateTime::parse("2024-06-04T12:00:00Z").expect("valid");
        let t = |s: &str| parse_time("x", s).expect("valid");
        assert!(check_window(None, t("2024-06-05"), now).is_ok());
        assert!(check_window(Some(t("2024-06-04T11:00:00Z")), t("2024-06-04T13:00:00Z"), now).is_ok());
        assert!(check_window(None, t("2024-06-04T11:59:59Z"), now).is_err());
        assert!(check_window(Some(t("2024-06-04T12:00:01Z")), t("2024-06-05"), now).is_err());
        assert!(check_window(Some(t("2024-06-06")), t("2024-06-05"), now).is_err());
        assert!(parse_time("x", "tomorrow").is_err());
        assert_eq!(t("2024-06-04T12:00:00.1234567Z").ticks() - now.ticks(), 1_234_567);
    }

    #[test]
    fn ip_ranges() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(ip_allowed("127.0.0.1", ip("127.0.0.1")), Some(true));
        assert_eq!(ip_allowed("127.0.0.1", ip("::ffff:127.0.0.1")), Some(true));
        assert_eq!(ip_allowed("10.0.0.1-10.0.0.9", ip("10.0.0.5")), Some(true));
        assert_eq!(ip_allowed("10.0.0.1-10.0.0.9", ip("10.0.0.10")), Some(false));
        assert_eq!(ip_allowed("10.0.0.1", ip("::1")), Some(false));
        assert_eq!(ip_allowed("::1", ip("::1")), Some(true));
        assert_eq!(ip_allowed("nonsense", ip("::1")), None);
        assert_eq!(ip_allowed("10.0.0.1-::1", ip("::1")), None);
    }

    #[test]
    fn protocols() {
        let code = |spr: &str, https| check_protocol(&q(&[("spr", spr)]), https).err().map(|e| e.code);
        for https in [false, true] {
            assert_eq!(code("https,http", https), None);
            assert_eq!(code("", https), None);
            assert_eq!(code("ftp", https), Some(ErrorCode::AuthenticationFailed));
        }
        assert_eq!(code("https", false), Some(ErrorCode::AuthorizationProtocolMismatch));
        assert_eq!(code("https", true), None);
    }

    #[test]
    fn a_parameter_given_twice_is_refused() {
        let base = [
            ("sv", "2019-02-02"),
            ("tn", "t"),
            ("sp", "r"),
            ("se", "2030-01-01"),
            ("sig", "x"),
        ];
        assert!(check_unique(&q(&base)).is_ok());
        for twice in ["sig", "sp", "se", "tn", "sv"] {
            let mut pairs = base.to_vec();
            pairs.push((twice, "y"));
            let err = check_unique(&q(&pairs)).err().map(|e| e.code);
            assert_eq!(err, Some(ErrorCode::AuthenticationFailed), "{twice}");
        }
        // Other parameters may repeat; the handlers judge them.
        let mut pairs = base.to_vec();
        pairs.extend([("$select", "a"), ("$select", "b")]);
        assert!(check_unique(&q(&pairs)).is_ok());
    }

    #[test]
    fn kinds() {
        assert_eq!(kind(&q(&[("ss", "t"), ("tn", "x")])), Some(Kind::Account));
        assert_eq!(kind(&q(&[("tn", "x")])), Some(Kind::Service));
        assert_eq!(kind(&q(&[("sv", "x")])), None);
    }
}
