//! Where a table service is and how to sign in to it, from what users have at
//! hand: a connection string (Azure's, Azurite's, Tafel's, `UseDevelopmentStorage=true`)
//! or an endpoint URL carrying a SAS.

use base64::Engine as _;

use crate::TransferError;

/// The development account every emulator knows.
pub const DEV_ACCOUNT: &str = "devstoreaccount1";
pub const DEV_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

#[derive(Clone)]
pub enum Credential {
    /// Shared Key: the decoded account key.
    Key(Vec<u8>),
    /// A SAS query string (without `?`), appended to every request.
    Sas(String),
}

impl std::fmt::Debug for Credential {
    // Never a key or a signature in a log line or an error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Key(_) => f.write_str("Key(…)"),
            Credential::Sas(_) => f.write_str("Sas(…)"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The service root requests go below: `http://127.0.0.1:10002/devstoreaccount1`
    /// (path-style) or `https://acct.table.core.windows.net` (host-style), no slash at the end.
    pub base: String,
    pub account: String,
    pub credential: Credential,
    /// The path prefix Shared Key signs before the request's own path (`/account` for
    /// path-style endpoints, empty for host-style).
    pub path_prefix: String,
}

impl Endpoint {
    /// A connection string, or a URL with a SAS (`https://acct.table.core.windows.net/?sv=…`,
    /// `http://127.0.0.1:10002/devstoreaccount1?sv=…`).
    pub fn parse(s: &str) -> Result<Endpoint, TransferError> {
        let s = s.trim();
        if s.starts_with("http://") || s.starts_with("https://") {
            return Self::from_url(s);
        }
        Self::from_connection_string(s)
    }

    fn from_url(s: &str) -> Result<Endpoint, TransferError> {
        let (url, sas) = s.split_once('?').unwrap_or((s, ""));
        if sas.is_empty() {
            return Err(TransferError::Usage(
                "an endpoint URL needs a SAS (…?sv=…&sig=…); with a key, use a connection string".into(),
            ));
        }
        let url = url.trim_end_matches('/');
        let (account, path_prefix) = account_of(url)?;
        Ok(Endpoint {
            base: url.to_owned(),
            account,
            credential: Credential::Sas(sas.to_owned()),
            path_prefix,
        })
    }

    fn from_connection_string(s: &str) -> Result<Endpoint, TransferError> {
        let mut fields = std::collections::HashMap::new();
        for part in s.split(';').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| TransferError::Usage(format!("not a connection string: '{part}' has no '='")))?;
            fields.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
        let get = |k: &str| fields.get(k).map(String::as_str);
        if get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(Endpoint {
                base: format!("http://127.0.0.1:10002/{DEV_ACCOUNT}"),
                account: DEV_ACCOUNT.into(),
                credential: Credential::Key(decode_key(DEV_KEY)?),
                path_prefix: format!("/{DEV_ACCOUNT}"),
            });
        }
        let credential = match (get("accountkey"), get("sharedaccesssignature")) {
            (Some(key), _) => Credential::Key(decode_key(key)?),
            (None, Some(sas)) => Credential::Sas(sas.trim_start_matches('?').to_owned()),
            (None, None) => {
                return Err(TransferError::Usage(
                    "the connection string has neither AccountKey nor SharedAccessSignature".into(),
                ))
            }
        };
        let base = match (get("tableendpoint"), get("accountname")) {
            (Some(url), _) => url.trim_end_matches('/').to_owned(),
            (None, Some(name)) => {
                let protocol = get("defaultendpointsprotocol").unwrap_or("https");
                let suffix = get("endpointsuffix").unwrap_or("core.windows.net");
                format!("{protocol}://{name}.table.{suffix}")
            }
            (None, None) => {
                return Err(TransferError::Usage(
                    "the connection string names neither TableEndpoint nor AccountName".into(),
                ))
            }
        };
        let (from_url, path_prefix) = account_of(&base)?;
        Ok(Endpoint {
            account: get("accountname").map_or(from_url, str::to_owned),
            base,
            credential,
            path_prefix,
        })
    }
}

fn decode_key(key: &str) -> Result<Vec<u8>, TransferError> {
    base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|_| TransferError::Usage("the account key is not base64".into()))
}

/// The account an endpoint URL names, and the path prefix Shared Key signs: the
/// first path segment (path-style, as emulators use), else the host's first label.
fn account_of(url: &str) -> Result<(String, String), TransferError> {
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| TransferError::Usage(format!("'{url}' is not an http(s) URL")))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    if !path.is_empty() {
        let account = path.split('/').next().unwrap_or(path);
        return Ok((account.to_owned(), format!("/{path}")));
    }
    let hostname = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let account = hostname.split('.').next().unwrap_or(hostname);
    if account.is_empty() {
        return Err(TransferError::Usage(format!("'{url}' names no account")));
    }
    Ok((account.to_owned(), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_of_every_kind() {
        let e = Endpoint::parse("UseDevelopmentStorage=true").unwrap();
        assert_eq!(
            (e.base.as_str(), e.account.as_str()),
            ("http://127.0.0.1:10002/devstoreaccount1", DEV_ACCOUNT)
        );
        let tafel = format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"
        );
        let e = Endpoint::parse(&tafel).unwrap();
        assert_eq!(
            (e.path_prefix.as_str(), e.account.as_str()),
            ("/devstoreaccount1", DEV_ACCOUNT)
        );
        assert!(matches!(e.credential, Credential::Key(_)));
        let azure = format!(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={DEV_KEY};EndpointSuffix=core.windows.net"
        );
        let e = Endpoint::parse(&azure).unwrap();
        assert_eq!(
            (e.base.as_str(), e.path_prefix.as_str()),
            ("https://acct.table.core.windows.net", "")
        );
        let sas = "TableEndpoint=https://acct.table.core.windows.net/;SharedAccessSignature=sv=2019-02-02&sig=x";
        assert!(matches!(Endpoint::parse(sas).unwrap().credential, Credential::Sas(s) if s == "sv=2019-02-02&sig=x"));
    }

    #[test]
    fn urls_with_a_sas_and_what_is_refused() {
        let e = Endpoint::parse("http://127.0.0.1:10002/devstoreaccount1?sv=2019-02-02&sig=x").unwrap();
        assert_eq!(
            (e.account.as_str(), e.base.as_str()),
            (DEV_ACCOUNT, "http://127.0.0.1:10002/devstoreaccount1")
        );
        let e = Endpoint::parse("https://acct.table.core.windows.net/?sv=1&sig=y").unwrap();
        assert_eq!((e.account.as_str(), e.path_prefix.as_str()), ("acct", ""));
        for bad in [
            "https://acct.table.core.windows.net",
            "AccountName=a",
            "nonsense",
            "AccountKey=!!;AccountName=a",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{:?}", Endpoint::parse("UseDevelopmentStorage=true").unwrap()).contains("Eby8"));
    }
}
