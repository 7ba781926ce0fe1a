//! The keys `--oauth strict` verifies token signatures with: a JWKS file, or the
//! `jwks_uri` of OpenID issuers' discovery documents, fetched at start, refreshed
//! hourly and when a token names a key not yet seen (at most every 30 s).

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};

use super::bearer::issuer_tenant;

/// Where the keys come from.
#[derive(Debug, Clone)]
pub enum KeySource {
    File(PathBuf),
    /// Issuer URLs: `<issuer>/.well-known/openid-configuration` names the key set.
    Issuers(Vec<String>),
}

struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    key: DecodingKey,
    /// The issuer whose discovery document named the key (its tokens only); `None`
    /// for a JWKS file's keys, which verify any accepted issuer's tokens.
    issuer: Option<String>,
}

pub struct Keys {
    source: KeySource,
    keys: RwLock<Vec<Key>>,
    last_load: Mutex<Instant>,
}

/// How often a token naming an unknown key may make the keys load again.
const MISS_RELOAD: Duration = Duration::from_secs(30);
/// How often the keys load again anyway (issuers rotate their keys).
pub const REFRESH: Duration = Duration::from_secs(3600);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest discovery document or key set read (Entra's are a few KiB).
const MAX_DOCUMENT: usize = 1 << 20;

impl Keys {
    /// Loads the keys once; fails (and so does the start) if none load.
    pub async fn load(source: KeySource) -> Result<Self, String> {
        let keys = fetch_keys(&source).await?;
        Ok(Keys {
            source,
            keys: RwLock::new(keys),
            last_load: Mutex::new(Instant::now()),
        })
    }

    /// Loads the keys again; on failure the keys in use stay.
    pub async fn reload(&self) -> Result<usize, String> {
        *self.last_load.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let keys = fetch_keys(&self.source).await?;
        let n = keys.len();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys;
        Ok(n)
    }

    /// The key for a token's `kid` and `alg` that may sign for `iss`, loading the
    /// keys again (rate-limited) when no key has that id.
    pub async fn find(&self, kid: Option<&str>, alg: Algorithm, iss: &str) -> Option<DecodingKey> {
        if let Some(k) = self.lookup(kid, alg, iss) {
            return Some(k);
        }
        let due = self.last_load.lock().unwrap_or_else(PoisonError::into_inner).elapsed() >= MISS_RELOAD;
        if due {
            if let Err(e) = self.reload().await {
                tracing::warn!(error = %e, "reloading the OAuth signing keys failed");
            }
            return self.lookup(kid, alg, iss);
        }
        None
    }

    fn lookup(&self, kid: Option<&str>, alg: Algorithm, iss: &str) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        let iss = iss.trim_end_matches('/');
        keys.iter()
            .filter(|k| k.alg.is_none_or(|a| a == alg))
            .filter(|k| k.issuer.as_deref().is_none_or(|i| signs_for(i, iss)))
            .find(|k| kid.is_none() || k.kid.as_deref() == kid)
            .map(|k| k.key.clone())
    }
}

/// Whether keys from `issuer`'s discovery document may sign a token claiming `iss`.
/// Entra's two issuer forms of one tenant (v1 `sts.windows.net`, v2 `login.microsoftonline.com`)
/// are one issuer, and Entra's multi-tenant documents (`common`, `organizations`) sign for
/// every tenant (`--oauth-tenant` narrows which are accepted).
fn signs_for(issuer: &str, iss: &str) -> bool {
    let iss = iss.trim_end_matches('/');
    match (issuer_tenant(issuer), issuer_tenant(iss)) {
        (Some(bound), Some(claimed)) => {
            bound.eq_ignore_ascii_case(&claimed)
                || ["common", "organizations"]
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(&bound))
        }
        _ => issuer == iss,
    }
}

fn parse_jwks(what: &str, body: &[u8], issuer: Option<&str>) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_slice(body).map_err(|e| format!("{what}: not a JWK set ({e})"))?;
    let keys: Vec<Key> = set
        .keys
        .iter()
        .filter_map(|jwk| {
            let key = DecodingKey::from_jwk(jwk).ok()?;
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            Some(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
                issuer: issuer.map(|i| i.trim_end_matches('/').to_owned()),
            })
        })
        .collect();
    if keys.is_empty() {
        return Err(format!("{what}: holds no usable key"));
    }
    Ok(keys)
}

async fn fetch_keys(source: &KeySource) -> Result<Vec<Key>, String> {
    match source {
        KeySource::File(path) => {
            // A small file, read at start and on a rare reload.
            let body = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            parse_jwks(&path.display().to_string(), &body, None)
        }
        KeySource::Issuers(issuers) => {
            let mut all = Vec::new();
            for issuer in issuers {
                let discovery = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
                let doc: serde_json::Value = serde_json::from_slice(&get(&discovery).await?)
                    .map_err(|e| format!("{discovery}: not JSON ({e})"))?;
                let jwks_uri = doc["jwks_uri"]
                    .as_str()
                    .ok_or_else(|| format!("{discovery}: names no jwks_uri"))?;
                all.extend(parse_jwks(jwks_uri, &get(jwks_uri).await?, Some(issuer))?);
            }
            Ok(all)
        }
    }
}

/// GETs a URL (http or https, trusting the system's CA certificates).
async fn get(url: &str) -> Result<Bytes, String> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("loading the system's CA certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let fetch = async {
        let resp = client.get(uri).await.map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        let body = http_body_util::Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(body.to_bytes())
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("{url}: no answer within {FETCH_TIMEOUT:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuers_keys_sign_only_for_it() {
        let t = "72f988bf-86f1-41af-91ab-2d7cd011db47";
        let v1 = format!("https://sts.windows.net/{t}/");
        let v2 = format!("https://login.microsoftonline.com/{t}/v2.0");
        // Stored trimmed of a trailing `/`, as parse_jwks keeps them.
        let bound_v1 = v1.trim_end_matches('/');
        assert!(signs_for(&v2, &v1) && signs_for(&v2, &v2) && signs_for(bound_v1, &v1) && signs_for(bound_v1, &v2));
        let other = "https://sts.windows.net/00000000-0000-0000-0000-000000000001/";
        assert!(!signs_for(&v2, other));
        assert!(signs_for("https://login.microsoftonline.com/common/v2.0", other));
        assert!(signs_for("https://login.microsoftonline.com/organizations/v2.0", &v1));
        assert!(signs_for(
            "http://127.0.0.1:8080/issuer",
            "http://127.0.0.1:8080/issuer/"
        ));
        assert!(!signs_for("http://127.0.0.1:8080/issuer", &v1));
        assert!(!signs_for(&v2, "http://127.0.0.1:8080/issuer"));
        assert!(!signs_for(
            "https://login.microsoftonline.com/common/v2.0",
            "http://127.0.0.1:8080/issuer"
        ));
    }
}
