//! A bearer token's parts and the claims Tafel checks: audience, issuer and
//! lifetime (`nbf`/`exp`, with Azure's five minutes of clock skew). Signatures
//! are checked in `keys.rs`; nothing here trusts a token.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;

/// Clock skew allowed on `nbf` and `exp`, as Azure allows.
pub const SKEW_SECS: i64 = 5 * 60;

/// Why a token was refused; `detail` is `AuthenticationErrorDetail`, in Azure's words
/// where they are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub &'static str);

pub const MALFORMED: Refusal = Refusal("The token is malformed.");
pub const EXPIRED: Refusal = Refusal("Lifetime validation failed. The token is expired.");
pub const NOT_YET_VALID: Refusal = Refusal("Lifetime validation failed. The token is not yet valid.");
pub const NO_EXPIRY: Refusal = Refusal("Lifetime validation failed. The token has no expiry.");
pub const BAD_AUDIENCE: Refusal = Refusal("Audience validation failed. Audience did not match.");
pub const BAD_ISSUER: Refusal = Refusal("Issuer validation failed. Issuer did not match.");
pub const BAD_SIGNATURE: Refusal = Refusal("Signature validation failed.");
pub const UNKNOWN_KEY: Refusal = Refusal("Signature validation failed. The token's signing key is not known.");
pub const BAD_ALGORITHM: Refusal = Refusal("Signature validation failed. The token's algorithm is not accepted.");

/// A token split into its parts, the header and the claims decoded.
#[derive(Debug)]
pub struct Token<'a> {
    pub header: Header,
    pub claims: Claims,
    /// `header.payload`, what the signature covers.
    pub signed: &'a str,
    /// The signature, base64url.
    pub signature: &'a str,
}

#[derive(Debug, Deserialize)]
pub struct Header {
    pub alg: String,
    #[serde(default)]
    pub kid: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The claims Tafel reads. Unknown claims are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct Claims {
    #[serde(default)]
    pub aud: Option<Audience>,
    #[serde(default)]
    pub iss: Option<String>,
    #[serde(default)]
    pub exp: Option<f64>,
    #[serde(default)]
    pub nbf: Option<f64>,
    #[serde(default)]
    pub oid: Option<String>,
    #[serde(default)]
    pub sub: Option<String>,
    #[serde(default)]
    pub appid: Option<String>,
    #[serde(default)]
    pub azp: Option<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, Refusal> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| MALFORMED)?;
    serde_json::from_slice(&bytes).map_err(|_| MALFORMED)
}

/// Splits a compact JWS (`header.payload.signature`) and decodes its header and claims.
pub fn parse(token: &str) -> Result<Token<'_>, Refusal> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(MALFORMED);
    };
    if h.is_empty() || p.is_empty() {
        return Err(MALFORMED);
    }
    Ok(Token {
        header: decode_json(h)?,
        claims: decode_json(p)?,
        signed: &token[..h.len() + 1 + p.len()],
        signature: s,
    })
}

/// What the claims must match for one request.
pub struct Expect<'a> {
    /// The addressed account.
    pub account: &'a str,
    /// The endpoints the request reached Tafel at (`https://host`, `https://host/account`).
    pub endpoints: &'a [String],
    /// `--oauth-tenant`: when set, the only tenant whose Entra issuers are accepted.
    pub tenant: Option<&'a str>,
    /// `--oauth-issuer` values, accepted as issuers as they are (trailing `/` aside).
    pub issuers: &'a [String],
    /// Seconds since the epoch.
    pub now: i64,
}

fn trim_slash(s: &str) -> &str {
    s.strip_suffix('/').unwrap_or(s)
}

fn audience_ok(aud: &str, expect: &Expect<'_>) -> bool {
    let aud = trim_slash(aud);
    if aud.eq_ignore_ascii_case("https://storage.azure.com") {
        return true;
    }
    let azure = format!("https://{}.table.core.windows.net", expect.account);
    aud.eq_ignore_ascii_case(&azure) || expect.endpoints.iter().any(|e| aud.eq_ignore_ascii_case(trim_slash(e)))
}

/// The tenant of an Entra issuer (`https://sts.windows.net/<t>/`,
/// `https://login.microsoftonline.com/<t>/v2.0`).
fn entra_tenant(iss: &str) -> Option<&str> {
    let t = iss
        .strip_prefix("https://sts.windows.net/")
        .and_then(|r| r.strip_suffix('/'))
        .or_else(|| {
            iss.strip_prefix("https://login.microsoftonline.com/")
                .and_then(|r| r.strip_suffix("/v2.0"))
        })?;
    (!t.is_empty() && !t.contains('/')).then_some(t)
}

fn issuer_ok(iss: &str, expect: &Expect<'_>) -> bool {
    if let Some(t) = entra_tenant(iss) {
        if expect.tenant.is_none_or(|want| want.eq_ignore_ascii_case(t)) {
            return true;
        }
    }
    expect.issuers.iter().any(|i| trim_slash(i) == trim_slash(iss))
}

/// Checks lifetime, audience and issuer, in that order (Azure reports an expired
/// token as expired whatever else is wrong with it).
pub fn check(claims: &Claims, expect: &Expect<'_>) -> Result<(), Refusal> {
    let exp = claims.exp.ok_or(NO_EXPIRY)?;
    if (exp as i64) + SKEW_SECS < expect.now {
        return Err(EXPIRED);
    }
    if let Some(nbf) = claims.nbf {
        if (nbf as i64) - SKEW_SECS > expect.now {
            return Err(NOT_YET_VALID);
        }
    }
    let aud_ok = match &claims.aud {
        Some(Audience::One(a)) => audience_ok(a, expect),
        Some(Audience::Many(list)) => list.iter().any(|a| audience_ok(a, expect)),
        None => false,
    };
    if !aud_ok {
        return Err(BAD_AUDIENCE);
    }
    match &claims.iss {
        Some(iss) if issuer_ok(iss, expect) => Ok(()),
        _ => Err(BAD_ISSUER),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn claims(json: serde_json::Value) -> Claims {
        serde_json::from_value(json).expect("claims")
    }

    fn expect<'a>(endpoints: &'a [String], issuers: &'a [String], tenant: Option<&'a str>) -> Expect<'a> {
        Expect {
            account: "devstoreaccount1",
            endpoints,
            tenant,
            issuers,
            now: NOW,
        }
    }

    fn with(aud: &str, iss: &str, exp: i64, nbf: Option<i64>) -> Claims {
        let mut c = claims(serde_json::json!({ "aud": aud, "iss": iss, "exp": exp }));
        c.nbf = nbf.map(|n| n as f64);
        c
    }

    const STS: &str = "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/";

    #[test]
    fn audiences() {
        let endpoints = vec![
            "https://127.0.0.1:10002".to_owned(),
            "https://127.0.0.1:10002/devstoreaccount1".to_owned(),
        ];
        let e = expect(&endpoints, &[], None);
        for aud in [
            "https://storage.azure.com",
            "https://storage.azure.com/",
            "https://devstoreaccount1.table.core.windows.net",
            "https://devstoreaccount1.table.core.windows.net/",
            "https://127.0.0.1:10002",
            "https://127.0.0.1:10002/devstoreaccount1/",
        ] {
            assert_eq!(check(&with(aud, STS, NOW + 60, None), &e), Ok(()), "{aud}");
        }
        for aud in [
            "https://management.azure.com",
            "https://other.table.core.windows.net",
            "https://devstoreaccount1.blob.core.windows.net",
            "http://127.0.0.1:10002",
            "",
        ] {
            assert_eq!(check(&with(aud, STS, NOW + 60, None), &e), Err(BAD_AUDIENCE), "{aud}");
        }
        let many = claims(serde_json::json!({
            "aud": ["api://x", "https://storage.azure.com"], "iss": STS, "exp": NOW + 60
        }));
        assert_eq!(check(&many, &e), Ok(()));
        let none = claims(serde_json::json!({ "iss": STS, "exp": NOW + 60 }));
        assert_eq!(check(&none, &e), Err(BAD_AUDIENCE));
    }

    #[test]
    fn issuers() {
        let aud = "https://storage.azure.com";
        let extra = vec!["http://127.0.0.1:9999/issuer".to_owned()];
        let any = expect(&[], &extra, None);
        for iss in [
            STS,
            "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0",
            "http://127.0.0.1:9999/issuer",
            "http://127.0.0.1:9999/issuer/",
        ] {
            assert_eq!(check(&with(aud, iss, NOW + 60, None), &any), Ok(()), "{iss}");
        }
        for iss in [
            "https://sts.windows.net//",
            "https://sts.windows.net/a/b/",
            "https://sts.windows.net/t",
            "https://login.microsoftonline.com/t/v1.0",
            "https://evil.example/72f988bf/",
            "http://127.0.0.1:9999/other",
        ] {
            assert_eq!(check(&with(aud, iss, NOW + 60, None), &any), Err(BAD_ISSUER), "{iss}");
        }
        let pinned = expect(&[], &[], Some("72F988BF-86F1-41AF-91AB-2D7CD011DB47"));
        assert_eq!(check(&with(aud, STS, NOW + 60, None), &pinned), Ok(()));
        assert_eq!(
            check(&with(aud, "https://sts.windows.net/other/", NOW + 60, None), &pinned),
            Err(BAD_ISSUER)
        );
    }

    #[test]
    fn lifetime_with_five_minutes_of_skew() {
        let e = expect(&[], &[], None);
        let aud = "https://storage.azure.com";
        assert_eq!(check(&with(aud, STS, NOW - 299, None), &e), Ok(()));
        assert_eq!(check(&with(aud, STS, NOW - 301, None), &e), Err(EXPIRED));
        assert_eq!(check(&with(aud, STS, NOW + 60, Some(NOW + 299)), &e), Ok(()));
        assert_eq!(
            check(&with(aud, STS, NOW + 600, Some(NOW + 301)), &e),
            Err(NOT_YET_VALID)
        );
        let no_exp = claims(serde_json::json!({ "aud": aud, "iss": STS }));
        assert_eq!(check(&no_exp, &e), Err(NO_EXPIRY));
        // An expired token is reported as expired even when its audience is wrong too.
        assert_eq!(check(&with("x", "y", NOW - 1000, None), &e), Err(EXPIRED));
    }

    #[test]
    fn parsing() {
        let enc = |v: serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let h = enc(serde_json::json!({ "alg": "RS256", "kid": "k1" }));
        let p = enc(serde_json::json!({ "oid": "o", "roles": ["r"], "exp": 1 }));
        let token = format!("{h}.{p}.c2ln");
        let t = parse(&token).expect("parses");
        assert_eq!(t.header.alg, "RS256");
        assert_eq!(t.header.kid.as_deref(), Some("k1"));
        assert_eq!(t.claims.oid.as_deref(), Some("o"));
        assert_eq!(t.claims.roles, vec!["r".to_owned()]);
        assert_eq!(t.signed, format!("{h}.{p}"));
        assert_eq!(t.signature, "c2ln");
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            &format!("{h}..c2ln"),
            &format!("{h}.!!!.c2ln"),
            &format!("{h}.{}.x", enc(serde_json::json!([1]))),
        ] {
            assert_eq!(parse(bad).err(), Some(MALFORMED), "{bad}");
        }
    }
}
