//! Bearer tokens (Microsoft Entra ID / OAuth 2.0) for the Table service,
//! `--oauth basic|strict` (SECURITY.md, docs/oauth.md).
//!
//! A token is accepted over TLS only, from `x-ms-version` 2019-02-02 on. Its
//! lifetime, audience and issuer are checked (`claims.rs`); in strict mode its
//! RS256/ES256 signature too (`keys.rs`). The principal's roles (`roles.rs`)
//! become a [`TokenGrant`] that the service layer enforces per operation.
//! Refusals are Azure's 401 `InvalidAuthenticationInfo` with a `WWW-Authenticate`
//! challenge (the pipeline adds it: [`OAuth::challenge`]).
//!
//! No token, nor any part of one, is logged.

mod claims;
mod keys;
mod roles;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderValue;
use tafel_service::{Access, Error, ErrorCode, Result, TokenGrant};

pub use keys::REFRESH_EVERY;
use keys::{KeySet, Sources};
use roles::Roles;

use super::Signed;

/// The first `x-ms-version` that takes bearer tokens for the Table service.
const FIRST_VERSION: &str = "2019-02-02";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Claims checked, signature not (Azurite's basic mode): local development only.
    Basic,
    /// Claims and signature checked; roles from `--oauth-roles`.
    Strict,
}

/// The `--oauth*` settings.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    pub mode: Mode,
    /// `--oauth-issuer`: accepted besides Entra's issuers; in strict mode their
    /// discovery documents give the signing keys.
    pub issuers: Vec<String>,
    /// `--oauth-jwks`: a JWKS file of signing keys (strict).
    pub jwks_file: Option<PathBuf>,
    /// `--oauth-roles`: the role file.
    pub roles_file: Option<PathBuf>,
    /// `--oauth-tenant`: the only Entra tenant accepted, and the challenge's tenant.
    pub tenant: Option<String>,
}

/// Bearer-token authentication, as configured.
pub struct OAuth {
    mode: Mode,
    issuers: Vec<String>,
    tenant: Option<String>,
    roles: Option<Roles>,
    keys: Option<KeySet>,
    challenge: HeaderValue,
}

impl OAuth {
    /// Loads the role file and, in strict mode, the signing keys.
    pub async fn start(config: OAuthConfig) -> std::result::Result<Arc<OAuth>, String> {
        let roles = config.roles_file.as_deref().map(Roles::load).transpose()?;
        let keys = match config.mode {
            Mode::Basic => {
                tracing::warn!(
                    "--oauth basic: bearer tokens' claims are checked but not their signatures, so anyone can \
                     mint one; for local development only"
                );
                None
            }
            Mode::Strict => {
                if roles.is_none() {
                    return Err("--oauth strict needs --oauth-roles (who may do what)".into());
                }
                if config.jwks_file.is_none() && config.issuers.is_empty() {
                    return Err("--oauth strict needs signing keys: --oauth-jwks FILE or --oauth-issuer URL".into());
                }
                let keys = KeySet::load(Sources {
                    jwks_file: config.jwks_file.clone(),
                    issuers: config.issuers.clone(),
                })
                .await?;
                if keys.len() == 0 {
                    return Err("--oauth strict: the signing key sources hold no RS256 or ES256 key".into());
                }
                Some(keys)
            }
        };
        let tenant_for_challenge = config.tenant.as_deref().unwrap_or("common");
        let challenge = HeaderValue::from_str(&challenge_value(tenant_for_challenge))
            .map_err(|_| format!("--oauth-tenant `{tenant_for_challenge}` is not header text"))?;
        tracing::info!(
            mode = ?config.mode,
            issuers = ?config.issuers,
            role_assignments = roles.as_ref().map(Roles::len),
            signing_keys = keys.as_ref().map(KeySet::len),
            "bearer tokens accepted over HTTPS"
        );
        Ok(Arc::new(OAuth {
            mode: config.mode,
            issuers: config.issuers,
            tenant: config.tenant,
            roles,
            keys,
            challenge,
        }))
    }

    /// Reloads the signing keys every [`REFRESH_EVERY`], for as long as the
    /// returned future runs (spawn it).
    pub async fn refresh_keys(self: Arc<Self>) {
        if self.keys.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(REFRESH_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Some(keys) = &self.keys {
                keys.reload(None).await;
            }
        }
    }

    /// The `WWW-Authenticate` value sent with every 401.
    pub fn challenge(&self) -> &HeaderValue {
        &self.challenge
    }

    /// Authenticates `Authorization: Bearer <token>` (the scheme already matched).
    pub async fn authenticate(&self, req: &Signed<'_>, token: &str) -> Result<Access> {
        if !req.https {
            return Err(Error::new(ErrorCode::AuthenticationFailed)
                .with_detail("Authentication scheme Bearer is not allowed with HTTP."));
        }
        let version = req.headers.get("x-ms-version").and_then(|v| v.to_str().ok());
        if version.is_some_and(|v| v.trim() < FIRST_VERSION) {
            return Err(Error::new(ErrorCode::AuthenticationFailed)
                .with_detail("Authentication scheme Bearer is not supported in this version."));
        }
        let refused = |r: claims::Refusal| Error::new(ErrorCode::InvalidBearerToken).with_detail(r.0);
        let token = claims::parse(token.trim()).map_err(refused)?;
        let endpoints = [
            format!("https://{}", req.host),
            format!("https://{}/{}", req.host, req.account),
        ];
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        claims::check(
            &token.claims,
            &claims::Expect {
                account: req.account,
                endpoints: &endpoints,
                tenant: self.tenant.as_deref(),
                issuers: &self.issuers,
                now,
            },
        )
        .map_err(refused)?;
        if let Some(keys) = &self.keys {
            keys.verify(&token).await.map_err(refused)?;
        }
        let grant = match (&self.roles, self.mode) {
            (Some(roles), _) => roles.grant(&token.claims, req.account),
            (None, Mode::Basic) => TokenGrant::unrestricted(),
            // Not started without a role file.
            (None, Mode::Strict) => TokenGrant::default(),
        };
        Ok(Access::Token(Arc::new(grant)))
    }
}

/// Azure's challenge: the tenant's authorize endpoint and the storage resource.
fn challenge_value(tenant: &str) -> String {
    format!(
        "Bearer authorization_uri=https://login.microsoftonline.com/{tenant}/oauth2/authorize \
         resource_id=https://storage.azure.com"
    )
}

/// `Bearer <token>` → the token; the scheme is matched case-insensitively.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_is_azures() {
        assert_eq!(
            challenge_value("72f988bf-86f1-41af-91ab-2d7cd011db47"),
            "Bearer authorization_uri=https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/authorize resource_id=https://storage.azure.com"
        );
    }

    const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgybWo2Y576CMSWBMc
HKkLFhPehy3mx6GygHIFoZT289GhRANCAATOQO7pHlVxZUxM+vtG5HXz6Wf5/tfq
wfxXRmSJoSMuNEQxx+uqvkw7/fYIjZl+shQzteCSGGBQeFpP2rDG7r/l
-----END PRIVATE KEY-----
";
    const EC_X: &str = "zkDu6R5VcWVMTPr7RuR18-ln-f7X6sH8V0ZkiaEjLjQ";
    const EC_Y: &str = "RDHH66q-TDv99giNmX6yFDO14JIYYFB4Wk_asMbuv-U";
    const STS: &str = "https://sts.windows.net/00000000-0000-0000-0000-00000000000a/";

    fn now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    }

    fn mint(kid: &str, claims: serde_json::Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        let key = jsonwebtoken::EncodingKey::from_ec_pem(EC_KEY.as_bytes()).expect("test key");
        jsonwebtoken::encode(&header, &claims, &key).expect("signs")
    }

    fn claims(oid: &str) -> serde_json::Value {
        serde_json::json!({
            "aud": "https://storage.azure.com", "iss": STS, "oid": oid,
            "nbf": now() - 10, "exp": now() + 600,
        })
    }

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tafel-oauth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    async fn run(oauth: &OAuth, token: &str, https: bool, version: &str) -> Result<Access> {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-ms-version", HeaderValue::from_str(version).expect("header"));
        let req = Signed {
            method: "GET",
            account: "devstoreaccount1",
            raw_path: "/devstoreaccount1/Tables",
            query: &[],
            headers: &headers,
            peer: None,
            https,
            host: "127.0.0.1:10002",
        };
        oauth.authenticate(&req, token).await
    }

    fn code(r: &Result<Access>) -> Option<(ErrorCode, Option<String>)> {
        r.as_ref().err().map(|e| (e.code, e.detail.clone()))
    }

    #[tokio::test]
    async fn strict_mode_verifies_es256_and_grants_roles() {
        let jwks = serde_json::json!({ "keys": [
            { "kty": "EC", "crv": "P-256", "kid": "k1", "x": EC_X, "y": EC_Y }
        ]});
        let oauth = OAuth::start(OAuthConfig {
            mode: Mode::Strict,
            issuers: vec![],
            jwks_file: Some(temp_file("jwks.json", &jwks.to_string())),
            roles_file: Some(temp_file(
                "roles.toml",
                "[[assignment]]\nprincipal = \"oid:reader\"\nrole = \"Storage Table Data Reader\"\n",
            )),
            tenant: None,
        })
        .await
        .expect("starts");
        let good = mint("k1", claims("reader"));
        let access = run(&oauth, &good, true, "2019-02-02").await.expect("accepted");
        let Access::Token(grant) = &access else {
            panic!("not a token grant: {access:?}")
        };
        assert_eq!(grant.account, Some(tafel_service::Role::Reader));
        assert!(!grant.unrestricted);
        // Another principal: authenticated, but no role.
        let other = run(&oauth, &mint("k1", claims("nobody")), true, "2019-02-02")
            .await
            .expect("accepted");
        assert_eq!(other, Access::Token(Arc::new(TokenGrant::default())));

        // A tampered payload, an unknown key id, another algorithm.
        let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
        parts[1] = mint("k1", claims("owner"))
            .split('.')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let bad_sig = code(&run(&oauth, &parts.join("."), true, "2019-02-02").await);
        assert_eq!(bad_sig.map(|c| c.0), Some(ErrorCode::InvalidBearerToken));
        let unknown = code(&run(&oauth, &mint("k2", claims("reader")), true, "2019-02-02").await);
        assert_eq!(unknown.and_then(|c| c.1), Some(claims::UNKNOWN_KEY.0.to_owned()));
        // `alg: none` (or any algorithm but RS256/ES256) is refused.
        use base64::Engine;
        let none_header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"k1"}"#);
        let none = format!("{none_header}.{}.", parts[1]);
        assert_eq!(
            code(&run(&oauth, &none, true, "2019-02-02").await).and_then(|c| c.1),
            Some(claims::BAD_ALGORITHM.0.to_owned())
        );

        // Plain HTTP and old versions are refused before the token is read.
        let http = code(&run(&oauth, &good, false, "2019-02-02").await);
        assert_eq!(http.map(|c| c.0), Some(ErrorCode::AuthenticationFailed));
        let old = code(&run(&oauth, &good, true, "2018-03-28").await);
        assert_eq!(
            old,
            Some((
                ErrorCode::AuthenticationFailed,
                Some("Authentication scheme Bearer is not supported in this version.".to_owned())
            ))
        );
    }

    #[tokio::test]
    async fn basic_mode_checks_claims_only_and_grants_everything_without_roles() {
        let oauth = OAuth::start(OAuthConfig {
            mode: Mode::Basic,
            issuers: vec![],
            jwks_file: None,
            roles_file: None,
            tenant: Some("00000000-0000-0000-0000-00000000000a".into()),
        })
        .await
        .expect("starts");
        assert_eq!(
            oauth.challenge().to_str().ok(),
            Some(challenge_value("00000000-0000-0000-0000-00000000000a").as_str())
        );
        // Signed with nothing Tafel knows: basic mode does not look.
        let token = mint("whatever", claims("someone"));
        let access = run(&oauth, &token, true, "2021-12-02").await.expect("accepted");
        assert_eq!(access, Access::Token(Arc::new(TokenGrant::unrestricted())));
        let mut expired = claims("someone");
        expired["exp"] = serde_json::json!(now() - 3600);
        let r = code(&run(&oauth, &mint("k", expired), true, "2021-12-02").await);
        assert_eq!(
            r,
            Some((ErrorCode::InvalidBearerToken, Some(claims::EXPIRED.0.to_owned())))
        );
        let mut other_tenant = claims("someone");
        other_tenant["iss"] = serde_json::json!("https://sts.windows.net/another/");
        let r = code(&run(&oauth, &mint("k", other_tenant), true, "2021-12-02").await);
        assert_eq!(r.and_then(|c| c.1), Some(claims::BAD_ISSUER.0.to_owned()));
        let r = code(&run(&oauth, "not-a-jwt", true, "2021-12-02").await);
        assert_eq!(r.and_then(|c| c.1), Some(claims::MALFORMED.0.to_owned()));
    }

    #[tokio::test]
    async fn strict_mode_needs_roles_and_keys() {
        let config = |roles: Option<PathBuf>, jwks: Option<PathBuf>| OAuthConfig {
            mode: Mode::Strict,
            issuers: vec![],
            jwks_file: jwks,
            roles_file: roles,
            tenant: None,
        };
        let roles = temp_file("empty-roles.toml", "");
        let err = OAuth::start(config(None, None)).await.err().unwrap_or_default();
        assert!(err.contains("--oauth-roles"), "{err}");
        let err = OAuth::start(config(Some(roles.clone()), None))
            .await
            .err()
            .unwrap_or_default();
        assert!(err.contains("--oauth-jwks"), "{err}");
        let empty = temp_file("empty-jwks.json", r#"{"keys":[]}"#);
        let err = OAuth::start(config(Some(roles), Some(empty)))
            .await
            .err()
            .unwrap_or_default();
        assert!(err.contains("no RS256 or ES256 key"), "{err}");
    }

    #[test]
    fn bearer_scheme() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("SharedKey a:b"), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
