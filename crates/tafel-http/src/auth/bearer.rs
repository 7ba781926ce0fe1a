//! Microsoft Entra ID bearer tokens (`Authorization: Bearer <JWT>`), as Azure
//! accepts them for the Table service: over HTTPS, from x-ms-version 2019-02-02,
//! for the storage audience or the account's own endpoint, from an Entra issuer.
//! A request answered as Cosmos DB for Table takes Cosmos's audiences instead
//! (`https://cosmos.azure.com`, which the SDKs ask for on a Cosmos endpoint, or
//! the account's Cosmos endpoints), and a storage token is no Cosmos token nor the
//! reverse. The audiences accepted come from configuration and the request's
//! dialect alone (Azure's URIs, the account's Azure endpoints, this server's
//! endpoints and `--oauth-audience`), never from the request's `Host`: a token for
//! another service must not pass because the request names that service.
//!
//! `--oauth basic` checks those claims and the token's lifetime but not its
//! signature (Azurite's mode, for local development); `--oauth strict` also
//! verifies the signature with the issuer's keys ([`super::jwks`]). A refused
//! token is 401 `InvalidAuthenticationInfo` with the `WWW-Authenticate`
//! challenge the SDKs read to find the tenant (and, on Cosmos, the resource).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;
use tafel_service::{Access, Error, ErrorCode, Result, TokenGrant};

use super::jwks::Keys;
use super::roles::Roles;
use super::Signed;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Claims and lifetime only: anyone can mint an accepted token.
    Basic,
    /// Signatures verified against the issuer's keys.
    Strict,
}

/// Clock difference allowed between the token's issuer and this server.
const SKEW_SECONDS: i64 = 300;
/// The first version whose requests may carry a bearer token (Table service).
const FIRST_VERSION: &str = "2019-02-02";
const STORAGE_AUDIENCE: &str = "https://storage.azure.com";
/// Azure Storage's application ID, which Azure accepts as an audience beside its URI.
const STORAGE_APP_ID: &str = "e406a681-f3d4-42a8-90b6-c2b029497af1";
/// What the SDKs ask for on a Cosmos endpoint (`https://cosmos.azure.com/.default`).
const COSMOS_AUDIENCE: &str = "https://cosmos.azure.com";

pub struct OAuth {
    mode: Mode,
    /// Signature keys (strict mode).
    keys: Option<Arc<Keys>>,
    /// Issuers accepted besides Entra's two forms.
    issuers: Vec<String>,
    /// Who may do what; without a file, every accepted token is the owner.
    roles: Option<Roles>,
    /// `--oauth-tenant` unless it is `common`/`organizations`: the only tenant whose
    /// Entra issuers are accepted.
    tenant: Option<String>,
    /// This server's endpoints (`https://127.0.0.1:10002`) and `--oauth-audience`
    /// values: accepted as audiences, each also with `/<account>` after it.
    endpoints: Vec<String>,
    /// The `WWW-Authenticate` values for Storage's requests and for Cosmos's.
    challenge: String,
    cosmos_challenge: String,
}

fn challenge(tenant: &str, resource: &str) -> String {
    format!(
        "Bearer authorization_uri=https://login.microsoftonline.com/{tenant}/oauth2/authorize resource_id={resource}"
    )
}

fn refused(detail: &str) -> Error {
    Error::new(ErrorCode::InvalidBearerToken).with_detail(detail)
}

impl OAuth {
    pub fn new(
        mode: Mode,
        keys: Option<Arc<Keys>>,
        issuers: Vec<String>,
        roles: Option<Roles>,
        tenant: &str,
        endpoints: Vec<String>,
    ) -> Self {
        let any_tenant = ["common", "organizations"]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(tenant));
        OAuth {
            mode,
            keys,
            issuers,
            roles,
            tenant: (!any_tenant).then(|| tenant.to_owned()),
            endpoints: endpoints
                .into_iter()
                .map(|e| e.trim_end_matches('/').to_owned())
                .collect(),
            challenge: challenge(tenant, STORAGE_AUDIENCE),
            cosmos_challenge: challenge(tenant, COSMOS_AUDIENCE),
        }
    }

    /// The `WWW-Authenticate` value of a 401: the resource named is the one whose
    /// token the request needs, as the SDKs ask for a new token for it.
    pub fn challenge(&self, cosmos: bool) -> &str {
        match cosmos {
            true => &self.cosmos_challenge,
            false => &self.challenge,
        }
    }

    /// Checks the token of `Authorization: Bearer <token>`; what it grants.
    pub(crate) async fn verify(&self, req: &Signed<'_>, token: &str) -> Result<Access> {
        // Azure's answers to a token sent over http or with too old a version: 403
        // AuthenticationFailed, without a challenge (a new token would not help).
        if !req.https {
            return Err(Error::new(ErrorCode::AuthenticationFailed)
                .with_detail("Authentication scheme Bearer is not allowed with HTTP."));
        }
        let version = req
            .headers
            .get("x-ms-version")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        // Versions are ISO dates: they compare as strings.
        if version < FIRST_VERSION {
            return Err(Error::new(ErrorCode::AuthenticationFailed)
                .with_detail("Authentication scheme Bearer is not supported in this version."));
        }
        let claims = match self.mode {
            Mode::Basic => unverified_claims(token)?,
            Mode::Strict => self.verified_claims(token).await?,
        };
        check_claims(
            &claims,
            &self.issuers,
            self.tenant.as_deref(),
            &self.audiences(req.account, req.cosmos),
            now(),
        )?;
        let grant = match &self.roles {
            Some(roles) => roles.grant(req.account, &claims),
            None => TokenGrant::owner(),
        };
        Ok(Access::Token(Arc::new(grant)))
    }

    async fn verified_claims(&self, token: &str) -> Result<Value> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| refused("The token is not a valid JWT."))?;
        if !matches!(
            header.alg,
            Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 | Algorithm::ES256 | Algorithm::ES384
        ) {
            return Err(refused("The token's signature algorithm is not accepted."));
        }
        let keys = self
            .keys
            .as_ref()
            .ok_or_else(|| refused("No signing keys are configured."))?;
        // The issuer the token claims picks the keys: an issuer's own keys, or the file's.
        let claimed = unverified_claims(token)?;
        let iss = claimed["iss"].as_str().unwrap_or("");
        let key = keys
            .find(header.kid.as_deref(), header.alg, iss)
            .await
            .ok_or_else(|| refused("Signature validation failed. The token's key was not found."))?;
        // Claims are checked below, the same way in both modes.
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|_| refused("Signature validation failed."))
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The payload of a JWT, its signature unchecked (basic mode).
fn unverified_claims(token: &str) -> Result<Value> {
    let malformed = || refused("The token is not a valid JWT.");
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(malformed());
    };
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).map_err(|_| malformed())?).map_err(|_| malformed())?;
    if !header.is_object() {
        return Err(malformed());
    }
    let claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).map_err(|_| malformed())?).map_err(|_| malformed())?;
    if !claims.is_object() {
        return Err(malformed());
    }
    Ok(claims)
}

impl OAuth {
    /// The audiences a token for `account` may name: Azure Storage's URI and
    /// application ID and the account's Azure endpoint — or, answered as Cosmos,
    /// Cosmos's URI and the account's Cosmos endpoints (its Table endpoint and the
    /// `documents` endpoint every Cosmos account has) — and each configured
    /// endpoint alone and with the account after it.
    fn audiences(&self, account: &str, cosmos: bool) -> Vec<String> {
        let mut out = match cosmos {
            false => vec![
                STORAGE_AUDIENCE.to_owned(),
                STORAGE_APP_ID.to_owned(),
                format!("https://{account}.table.core.windows.net"),
            ],
            true => vec![
                COSMOS_AUDIENCE.to_owned(),
                format!("https://{account}.table.cosmos.azure.com"),
                format!("https://{account}.documents.azure.com"),
            ],
        };
        for e in &self.endpoints {
            out.push(e.clone());
            out.push(format!("{e}/{account}"));
        }
        out
    }
}

/// Azure's checks of a token's claims, each failure with Azure's detail.
fn check_claims(
    claims: &Value,
    extra_issuers: &[String],
    tenant: Option<&str>,
    audiences: &[String],
    now: i64,
) -> Result<()> {
    let aud_ok = |a: &str| audiences.iter().any(|want| a.trim_end_matches('/') == want);
    let aud = match &claims["aud"] {
        Value::String(a) => aud_ok(a),
        Value::Array(list) => list.iter().filter_map(Value::as_str).any(aud_ok),
        _ => false,
    };
    if !aud {
        return Err(refused("Audience validation failed. Audience did not match."));
    }
    let iss = claims["iss"].as_str().unwrap_or("");
    let entra_ok = entra_tenant(iss).is_some_and(|t| tenant.is_none_or(|want| want.eq_ignore_ascii_case(t)));
    if !entra_ok
        && !extra_issuers
            .iter()
            .any(|i| i.trim_end_matches('/') == iss.trim_end_matches('/'))
    {
        return Err(refused("Issuer validation failed. Issuer did not match."));
    }
    let exp = claims["exp"]
        .as_i64()
        .ok_or_else(|| refused("Lifetime validation failed. The token has no expiry."))?;
    if exp + SKEW_SECONDS < now {
        return Err(refused("Lifetime validation failed. The token is expired."));
    }
    // A `nbf` that is not a number is refused as an `exp` that is not one is; so
    // is `"nbf": null` (RFC 7519 allows a NumericDate or no claim, and a
    // lifetime check is no place to guess which the issuer meant).
    let nbf = match claims.get("nbf") {
        None => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| refused("Lifetime validation failed. The token's nbf is not a number."))?,
        ),
    };
    if nbf.is_some_and(|nbf| nbf - SKEW_SECONDS > now) {
        return Err(refused("Lifetime validation failed. The token is not yet valid."));
    }
    Ok(())
}

/// The Entra tenant of an issuer as configuration writes it: the v1 form with or
/// without its trailing `/`, or the v2 form.
pub(super) fn issuer_tenant(issuer: &str) -> Option<String> {
    entra_tenant(&format!("{issuer}/"))
        .or_else(|| entra_tenant(issuer))
        .map(str::to_owned)
}

/// The tenant of `https://sts.windows.net/<tenant>/` (v1 tokens) or
/// `https://login.microsoftonline.com/<tenant>/v2.0` (v2 tokens).
pub(super) fn entra_tenant(iss: &str) -> Option<&str> {
    let tenant_ok = |t: &&str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if let Some(rest) = iss.strip_prefix("https://sts.windows.net/") {
        return rest.strip_suffix('/').filter(tenant_ok);
    }
    if let Some(rest) = iss.strip_prefix("https://login.microsoftonline.com/") {
        return rest.strip_suffix("/v2.0").filter(tenant_ok);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000;

    fn check(claims: Value) -> std::result::Result<(), String> {
        let auds = vec![STORAGE_AUDIENCE.to_owned(), "https://127.0.0.1:10002".to_owned()];
        check_claims(&claims, &["https://issuer.test".to_owned()], None, &auds, NOW)
            .map_err(|e| e.detail.unwrap_or_default())
    }

    fn good() -> Value {
        json!({"aud": "https://storage.azure.com/", "iss": "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/", "exp": NOW + 3600, "nbf": NOW - 10})
    }

    #[test]
    fn a_token_for_storage_from_entra_within_its_lifetime_passes() {
        assert_eq!(check(good()), Ok(()));
        let mut v2 = good();
        v2["iss"] = json!("https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0");
        v2["aud"] = json!(["other", "https://127.0.0.1:10002"]);
        assert_eq!(check(v2), Ok(()));
        let mut extra = good();
        extra["iss"] = json!("https://issuer.test/");
        assert_eq!(check(extra), Ok(()));
        let mut skewed = good();
        skewed["exp"] = json!(NOW - 60);
        assert_eq!(check(skewed), Ok(()), "inside the clock skew");
    }

    #[test]
    fn each_failed_check_says_which_as_azure_does() {
        let with = |k: &str, v: Value| {
            let mut c = good();
            c[k] = v;
            check(c).unwrap_err()
        };
        assert!(with("aud", json!("https://vault.azure.net")).starts_with("Audience validation failed"));
        assert!(with("iss", json!("https://evil.example/")).starts_with("Issuer validation failed"));
        assert!(with("iss", json!("https://sts.windows.net/")).starts_with("Issuer validation failed"));
        assert!(with("exp", json!(NOW - 3600)).contains("expired"));
        assert!(with("nbf", json!(NOW + 3600)).contains("not yet valid"));
        assert!(with("nbf", json!("0")).contains("nbf is not a number"));
        assert!(
            with("nbf", Value::Null).contains("nbf is not a number"),
            "a null nbf is no absent nbf"
        );
        assert!(with("exp", json!("9999999999")).contains("no expiry"));
        let mut no_exp = good();
        no_exp.as_object_mut().unwrap().remove("exp");
        assert!(check(no_exp).unwrap_err().contains("no expiry"));
    }

    #[test]
    fn a_pinned_tenant_is_the_only_entra_tenant_accepted() {
        let auds = vec![STORAGE_AUDIENCE.to_owned()];
        let pinned = |iss: &str| {
            let mut c = good();
            c["iss"] = json!(iss);
            let extra = ["https://issuer.test".to_owned()];
            check_claims(&c, &extra, Some("72F988BF-86F1-41AF-91AB-2D7CD011DB47"), &auds, NOW).is_ok()
        };
        assert!(pinned("https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/"));
        assert!(pinned(
            "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0"
        ));
        assert!(!pinned("https://sts.windows.net/00000000-0000-0000-0000-000000000001/"));
        assert!(!pinned(
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0"
        ));
        assert!(pinned("https://issuer.test"), "--oauth-issuer values are not Entra's");
        for any in ["common", "Organizations"] {
            let o = OAuth::new(Mode::Basic, None, vec![], None, any, vec![]);
            assert_eq!(o.tenant, None, "{any}");
        }
        let o = OAuth::new(Mode::Basic, None, vec![], None, "contoso.onmicrosoft.com", vec![]);
        assert_eq!(o.tenant.as_deref(), Some("contoso.onmicrosoft.com"));
    }

    #[test]
    fn audiences_come_from_configuration_not_the_request() {
        let o = OAuth::new(
            Mode::Basic,
            None,
            vec![],
            None,
            "common",
            vec!["https://127.0.0.1:10002/".to_owned()],
        );
        let auds = o.audiences("acct", false);
        for want in [
            "https://storage.azure.com",
            STORAGE_APP_ID,
            "https://acct.table.core.windows.net",
            "https://127.0.0.1:10002",
            "https://127.0.0.1:10002/acct",
        ] {
            assert!(auds.iter().any(|a| a == want), "{want}");
        }
        assert!(!auds.iter().any(|a| a.contains("other-api")));
        assert!(!auds.iter().any(|a| a.contains("cosmos")), "no Cosmos token on Storage");
    }

    #[test]
    fn cosmos_takes_cosmos_audiences_and_storage_s_are_refused_there() {
        let o = OAuth::new(
            Mode::Basic,
            None,
            vec![],
            None,
            "common",
            vec!["https://127.0.0.1:10002".to_owned()],
        );
        let auds = o.audiences("acct", true);
        for want in [
            COSMOS_AUDIENCE,
            "https://acct.table.cosmos.azure.com",
            "https://acct.documents.azure.com",
            "https://127.0.0.1:10002",
        ] {
            assert!(auds.iter().any(|a| a == want), "{want}");
        }
        for refused in [STORAGE_AUDIENCE, STORAGE_APP_ID, "https://acct.table.core.windows.net"] {
            assert!(!auds.iter().any(|a| a == refused), "{refused}");
        }
        let mut cosmos = good();
        cosmos["aud"] = json!("https://cosmos.azure.com/");
        assert!(check_claims(&cosmos, &[], None, &auds, NOW).is_ok());
        assert!(check(cosmos).is_err(), "a Cosmos token on a Storage request");
        assert!(o.challenge(true).ends_with("resource_id=https://cosmos.azure.com"));
        assert!(o.challenge(false).ends_with("resource_id=https://storage.azure.com"));
    }

    #[test]
    fn a_token_that_is_not_a_jwt_is_malformed() {
        for t in ["", "abc", "a.b", "a.b.c.d", "e30.bm90IGpzb24.x", "WzFd.e30.x"] {
            let e = unverified_claims(t).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidBearerToken, "{t}");
            assert_eq!(e.status(), 401);
            assert_eq!(e.code.as_str(), "InvalidAuthenticationInfo");
        }
        assert_eq!(unverified_claims("e30.e30.").unwrap(), json!({}));
    }
}
