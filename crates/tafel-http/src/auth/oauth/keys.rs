//! `--oauth strict`'s signing keys: RS256 and ES256 public keys from a JWKS
//! file (`--oauth-jwks`) and from the JWKS of each `--oauth-issuer`'s OpenID
//! discovery document (`ISSUER/.well-known/openid-configuration` → `jwks_uri`).
//! Loaded at start, reloaded every [`REFRESH_EVERY`] and when a token names a
//! key id not known (at most once per [`MISS_REFRESH_MIN`]). A key from an
//! issuer's document verifies only that issuer's tokens; a key from the file,
//! any accepted issuer's.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, DecodingKey};

use super::claims::Refusal;
use super::claims::{Token, BAD_ALGORITHM, BAD_SIGNATURE, UNKNOWN_KEY};

/// How often the keys are reloaded in the background.
pub const REFRESH_EVERY: Duration = Duration::from_secs(60 * 60);
/// The least time between two reloads for an unknown key id.
pub const MISS_REFRESH_MIN: Duration = Duration::from_secs(2);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_DOCUMENT: usize = 1 << 20;

struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
    /// The issuer whose discovery document named this key; `None` for the file's.
    issuer: Option<String>,
}

/// Where keys come from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub jwks_file: Option<PathBuf>,
    /// Issuers whose discovery documents are read.
    pub issuers: Vec<String>,
}

pub struct KeySet {
    sources: Sources,
    keys: RwLock<Arc<Vec<Key>>>,
    /// Serialises reloads; holds when the last one ended.
    reload: tokio::sync::Mutex<Option<Instant>>,
}

fn trim_slash(s: &str) -> &str {
    s.strip_suffix('/').unwrap_or(s)
}

/// The keys of a JWKS document Tafel can use: RSA (RS256) and EC P-256 (ES256),
/// not marked for encryption only. Other keys are skipped.
fn parse_jwks(doc: &serde_json::Value, issuer: Option<&str>) -> Result<Vec<Key>, String> {
    let list = doc
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or("the JWKS has no `keys` array")?;
    let s = |k: &serde_json::Value, name: &str| k.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    let mut out = Vec::new();
    for k in list {
        if s(k, "use").is_some_and(|u| u != "sig") {
            continue;
        }
        let (alg, key) = match (s(k, "kty").as_deref(), s(k, "crv").as_deref()) {
            (Some("RSA"), _) => {
                let (Some(n), Some(e)) = (s(k, "n"), s(k, "e")) else {
                    continue;
                };
                (Algorithm::RS256, DecodingKey::from_rsa_components(&n, &e))
            }
            (Some("EC"), Some("P-256")) => {
                let (Some(x), Some(y)) = (s(k, "x"), s(k, "y")) else {
                    continue;
                };
                (Algorithm::ES256, DecodingKey::from_ec_components(&x, &y))
            }
            _ => continue,
        };
        let Ok(key) = key else { continue };
        out.push(Key {
            kid: s(k, "kid"),
            alg,
            key,
            issuer: issuer.map(|i| trim_slash(i).to_owned()),
        });
    }
    Ok(out)
}

/// GETs a JSON document over http or https (rustls with the webpki roots).
async fn fetch_json(url: &str) -> Result<serde_json::Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| format!("TLS setup: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    // No pooling: a refresh may run on any serving thread's runtime.
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build::<_, Empty<Bytes>>(connector);
    let req = http::Request::get(uri)
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let get = async {
        let resp = client.request(req).await.map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    };
    tokio::time::timeout(FETCH_TIMEOUT, get)
        .await
        .map_err(|_| format!("{url}: timed out"))?
}

impl KeySet {
    /// Loads every source; fails if any fails (a server that cannot verify tokens
    /// should not start).
    pub async fn load(sources: Sources) -> Result<KeySet, String> {
        let keys = Self::read(&sources).await?;
        Ok(KeySet {
            sources,
            keys: RwLock::new(Arc::new(keys)),
            reload: tokio::sync::Mutex::new(Some(Instant::now())),
        })
    }

    pub fn len(&self) -> usize {
        self.current().len()
    }

    async fn read(sources: &Sources) -> Result<Vec<Key>, String> {
        let mut keys = Vec::new();
        if let Some(path) = &sources.jwks_file {
            let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            let doc: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
            keys.extend(parse_jwks(&doc, None).map_err(|e| format!("{}: {e}", path.display()))?);
        }
        for issuer in &sources.issuers {
            let discovery = format!("{}/.well-known/openid-configuration", trim_slash(issuer));
            let doc = fetch_json(&discovery).await?;
            let jwks_uri = doc
                .get("jwks_uri")
                .and_then(|u| u.as_str())
                .ok_or_else(|| format!("{discovery}: no jwks_uri"))?;
            let jwks = fetch_json(jwks_uri).await?;
            keys.extend(parse_jwks(&jwks, Some(issuer)).map_err(|e| format!("{jwks_uri}: {e}"))?);
        }
        Ok(keys)
    }

    fn current(&self) -> Arc<Vec<Key>> {
        match self.keys.read() {
            Ok(k) => k.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reloads the keys; `min_age` skips it when the last reload is younger.
    /// A failed reload keeps the keys held.
    pub async fn reload(&self, min_age: Option<Duration>) {
        let mut last = self.reload.lock().await;
        if let (Some(min), Some(at)) = (min_age, *last) {
            if at.elapsed() < min {
                return;
            }
        }
        match Self::read(&self.sources).await {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "OAuth signing keys reloaded");
                let keys = Arc::new(keys);
                match self.keys.write() {
                    Ok(mut k) => *k = keys,
                    Err(poisoned) => *poisoned.into_inner() = keys,
                }
            }
            Err(e) => tracing::warn!(error = %e, "reloading the OAuth signing keys failed; keeping the old ones"),
        }
        *last = Some(Instant::now());
    }

    fn try_verify(&self, token: &Token<'_>, alg: Algorithm, iss: &str) -> Result<(), Refusal> {
        let keys = self.current();
        let mut candidates = keys.iter().filter(|k| {
            k.alg == alg
                && k.issuer.as_deref().is_none_or(|i| i == trim_slash(iss))
                && (token.header.kid.is_none() || k.kid == token.header.kid)
        });
        let mut any = false;
        for k in candidates.by_ref() {
            any = true;
            if jsonwebtoken::crypto::verify(token.signature, token.signed.as_bytes(), &k.key, alg).unwrap_or(false) {
                return Ok(());
            }
        }
        Err(if any { BAD_SIGNATURE } else { UNKNOWN_KEY })
    }

    /// Verifies the token's signature (its claims already checked, so `iss` is
    /// an accepted issuer). An unknown key id reloads the keys once.
    pub async fn verify(&self, token: &Token<'_>) -> Result<(), Refusal> {
        let alg = match token.header.alg.as_str() {
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            _ => return Err(BAD_ALGORITHM),
        };
        let iss = token.claims.iss.as_deref().unwrap_or_default();
        match self.try_verify(token, alg, iss) {
            Err(r) if r == UNKNOWN_KEY => {
                self.reload(Some(MISS_REFRESH_MIN)).await;
                self.try_verify(token, alg, iss)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwks_keeps_signing_keys_it_can_use() {
        // A 2048-bit RSA modulus is not needed to test selection: any valid components parse.
        let doc = serde_json::json!({ "keys": [
            { "kty": "RSA", "kid": "r1", "use": "sig", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB" },
            { "kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB" },
            { "kty": "EC", "kid": "e1", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0" },
            { "kty": "EC", "kid": "e384", "crv": "P-384", "x": "AA", "y": "AA" },
            { "kty": "oct", "kid": "h", "k": "c2VjcmV0" },
            { "kty": "RSA", "kid": "incomplete", "n": "AQAB" }
        ]});
        let keys = parse_jwks(&doc, Some("https://issuer/")).expect("parses");
        let kids: Vec<_> = keys.iter().map(|k| (k.kid.as_deref(), k.alg)).collect();
        assert_eq!(
            kids,
            vec![(Some("r1"), Algorithm::RS256), (Some("e1"), Algorithm::ES256)]
        );
        assert!(keys.iter().all(|k| k.issuer.as_deref() == Some("https://issuer")));
        assert!(parse_jwks(&serde_json::json!({}), None).is_err());
    }
}
