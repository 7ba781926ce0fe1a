//! TLS on the connection to the database, with libpq's `sslmode`,
//! `sslrootcert`, `sslcert` and `sslkey`.
//!
//! tokio-postgres knows only `sslmode=disable|prefer|require` and rejects the
//! other keys, so they are taken out of the URL or conninfo here, before it is
//! parsed, and turned into a rustls configuration. Modes, as libpq has them:
//! - `prefer` (the default): TLS if the server offers it, else plain;
//! - `require`: TLS, the certificate not checked (but checked like `verify-ca`
//!   when a root certificate is given, as libpq does);
//! - `verify-ca`: the chain checked against the root certificates, not the name;
//! - `verify-full`: the chain and the host name.
//!
//! Without `sslrootcert` (or with `sslrootcert=system`) the verifying modes
//! trust the system's root certificates.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the connection to the database is protected (libpq's `sslmode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = TlsError;

    fn from_str(s: &str) -> Result<Self, TlsError> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return Err(TlsError::BadSslMode(s.to_owned())),
        })
    }
}

/// The TLS settings, each optional: the serve flags' override the URL's.
#[derive(Clone, Debug, Default)]
pub struct SslOptions {
    pub mode: Option<SslMode>,
    /// PEM root certificate(s) the server's chain must lead to; `system` for the
    /// system's roots.
    pub root_cert: Option<PathBuf>,
    /// PEM client certificate (chain) and its key, for certificate authentication.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl SslOptions {
    /// These settings, with `fallback`'s where these have none.
    fn or(self, fallback: SslOptions) -> SslOptions {
        SslOptions {
            mode: self.mode.or(fallback.mode),
            root_cert: self.root_cert.or(fallback.root_cert),
            cert: self.cert.or(fallback.cert),
            key: self.key.or(fallback.key),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("unknown sslmode `{0}` (expected disable, prefer, require, verify-ca or verify-full)")]
    BadSslMode(String),
    #[error("bad --postgres-url: {0}")]
    BadUrl(#[source] tokio_postgres::Error),
    #[error("reading {what} {} (--postgres-{what} or the URL's {what}): {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{what} {} (--postgres-{what} or the URL's {what}) holds no PEM {expected}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
    },
    #[error("sslcert and sslkey go together (--postgres-sslcert, --postgres-sslkey): only {0} is set")]
    HalfPair(&'static str),
    #[error("sslmode={0} needs root certificates: set sslrootcert (--postgres-sslrootcert); the system has none")]
    NoRoots(SslMode),
    #[error("sslrootcert: {0}")]
    Roots(#[source] rustls::server::VerifierBuilderError),
    #[error("the TLS client configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// Opens connections plain or over TLS, as the sslmode says.
#[derive(Clone)]
pub(super) enum Connector {
    Plain,
    Tls(MakeRustlsConnect),
}

/// The connection settings of `url` (a URL or conninfo) with `flags` applied
/// over its TLS keys, and the connector they call for. Reads the certificate
/// files now, so a bad one stops the start.
pub(super) fn configure(url: &str, flags: SslOptions) -> Result<(Config, Connector), TlsError> {
    let (rest, from_url) = split(url)?;
    let mut config = Config::from_str(&rest).map_err(TlsError::BadUrl)?;
    let ssl = flags.or(from_url);
    let mode = ssl.mode.unwrap_or(SslMode::Prefer);
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
    });
    let roots = match ssl.root_cert.as_deref() {
        Some(p) if p == Path::new("system") => "system",
        Some(_) => "sslrootcert",
        None if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) => "system",
        None => "none",
    };
    tracing::info!(
        sslmode = %mode,
        roots,
        client_cert = ssl.cert.is_some(),
        "postgres backend: TLS to the database"
    );
    if mode == SslMode::Disable {
        return Ok((config, Connector::Plain));
    }
    Ok((
        config,
        Connector::Tls(MakeRustlsConnect::new(client_config(mode, &ssl)?)),
    ))
}

fn client_config(mode: SslMode, ssl: &SslOptions) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, &ssl.root_cert) {
        (SslMode::VerifyFull, root) => web_pki(root.as_deref(), mode, &provider)?,
        (SslMode::VerifyCa, root) => Arc::new(ChainOnly(web_pki(root.as_deref(), mode, &provider)?)),
        // libpq's rule: a root certificate given makes require (and prefer) verify-ca.
        (_, Some(root)) => Arc::new(ChainOnly(web_pki(Some(root), mode, &provider)?)),
        (_, None) => Arc::new(AnyCertificate(provider.clone())),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match (&ssl.cert, &ssl.key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(_), None) => Err(TlsError::HalfPair("sslcert")),
        (None, Some(_)) => Err(TlsError::HalfPair("sslkey")),
        (Some(cert), Some(key)) => {
            let chain = certificates("sslcert", cert)?;
            let key = private_key(key)?;
            builder.with_client_auth_cert(chain, key).map_err(TlsError::Config)
        }
    }
}

/// The standard verifier over the roots in `root` (the system's when `None`
/// or `system`).
fn web_pki(
    root: Option<&Path>,
    mode: SslMode,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, TlsError> {
    let mut store = RootCertStore::empty();
    match root {
        Some(path) if path != Path::new("system") => {
            for cert in certificates("sslrootcert", path)? {
                store.add(cert).map_err(TlsError::Config)?;
            }
        }
        _ => {
            // Unreadable entries are skipped: one bad file in the system store
            // should not stop the rest from being used.
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(TlsError::NoRoots(mode));
            }
        }
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
        .build()
        .map_err(TlsError::Roots)
}

fn read(what: &'static str, path: &Path) -> Result<BufReader<File>, TlsError> {
    File::open(path).map(BufReader::new).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in the PEM file at `path` (at least one).
fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = || TlsError::Pem {
        what,
        path: path.to_owned(),
        expected: "certificate",
    };
    let certs = CertificateDer::pem_reader_iter(read(what, path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad())?;
    if certs.is_empty() {
        return Err(bad());
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_reader(read("sslkey", path)?).map_err(|_| TlsError::Pem {
        what: "sslkey",
        path: path.to_owned(),
        expected: "private key (PKCS#8, PKCS#1 or SEC1)",
    })
}

/// verify-ca: the chain must lead to a trusted root, the name may be any.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // The name is checked last, after the chain: this error means the chain passed.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// require without a root certificate: any certificate is accepted, but the
/// handshake must still be signed by its key (an encrypted channel to whoever
/// holds that key, as libpq's require gives).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// `url` without the TLS keys, and their values.
fn split(url: &str) -> Result<(String, SslOptions), TlsError> {
    let mut found = SslOptions::default();
    let mut take = |key: &str, value: String| -> Result<(), TlsError> {
        match key {
            "sslmode" => found.mode = Some(value.parse()?),
            "sslrootcert" => found.root_cert = Some(value.into()),
            "sslcert" => found.cert = Some(value.into()),
            _ => found.key = Some(value.into()),
        }
        Ok(())
    };
    let rest = match ["postgresql://", "postgres://"].iter().find(|p| url.starts_with(*p)) {
        Some(prefix) => split_url(url, prefix.len(), &mut take)?,
        None => split_conninfo(url, &mut take)?,
    };
    Ok((rest, found))
}

type Take<'a> = dyn FnMut(&str, String) -> Result<(), TlsError> + 'a;

/// A URL's query parameters are `&`-separated and percent-encoded.
fn split_url(url: &str, prefix: usize, take: &mut Take<'_>) -> Result<String, TlsError> {
    // tokio-postgres ends the credentials at the first `@`: a `?` in a password is not the query.
    let from = url[prefix..].find('@').map_or(prefix, |at| prefix + at);
    let Some(q) = url[from..].find('?').map(|i| from + i) else {
        return Ok(url.to_owned());
    };
    let mut kept = Vec::new();
    for param in url[q + 1..].split('&') {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let key = decode(key);
        if KEYS.contains(&key.as_str()) {
            take(&key, decode(value))?;
        } else {
            kept.push(param);
        }
    }
    Ok(match kept.is_empty() {
        true => url[..q].to_owned(),
        false => format!("{}?{}", &url[..q], kept.join("&")),
    })
}

/// Percent-decoded as tokio-postgres decodes a URL's parameters (`+` stays `+`).
fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Conninfo is `key=value` pairs separated by spaces; a value may be quoted in
/// `'…'`, and `\` escapes the next character. The pairs kept are copied as
/// written; one that does not parse is left for tokio-postgres to report.
fn split_conninfo(s: &str, take: &mut Take<'_>) -> Result<String, TlsError> {
    let mut kept = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(kept.join(" "));
        }
        let Some((key, value, len)) = pair(rest) else {
            kept.push(rest);
            return Ok(kept.join(" "));
        };
        if KEYS.contains(&key) {
            take(key, value)?;
        } else {
            kept.push(&rest[..len]);
        }
        rest = &rest[len..];
    }
}

/// The first `key=value` of `s` (which starts with the key), and its length.
fn pair(s: &str) -> Option<(&str, String, usize)> {
    let key_end = s.find(|c: char| c == '=' || c.is_whitespace())?;
    let key = &s[..key_end];
    let after = s[key_end..].trim_start();
    let after = after.strip_prefix('=')?.trim_start();
    let start = s.len() - after.len();
    let mut value = String::new();
    let mut chars = after.char_indices();
    let quoted = after.starts_with('\'');
    if quoted {
        chars.next();
    }
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '\'' if quoted => return Some((key, value, start + i + 1)),
            c if c.is_whitespace() && !quoted => return Some((key, value, start + i)),
            c => value.push(c),
        }
    }
    // Unterminated quotes and empty values are tokio-postgres' to report.
    (!quoted && !value.is_empty()).then_some((key, value, s.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, SslOptions) {
        split(url).expect("split")
    }

    #[test]
    fn url_keys_are_taken_out() {
        let (rest, o) =
            parts("postgresql://u:p%3Fw@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem");
        assert_eq!(rest, "postgresql://u:p%3Fw@h:5/db?application_name=x");
        assert_eq!(o.mode, Some(SslMode::VerifyFull));
        assert_eq!(o.root_cert.as_deref(), Some(Path::new("/tmp/ca.pem")));
        let (rest, o) = parts("postgres://h/db?sslcert=c.pem&sslkey=k.pem");
        assert_eq!(rest, "postgres://h/db");
        assert_eq!((o.cert.unwrap(), o.key.unwrap()), ("c.pem".into(), "k.pem".into()));
        // A `?` in the password is not the query.
        assert_eq!(parts("postgresql://u:a?b@h/db").0, "postgresql://u:a?b@h/db");
    }

    #[test]
    fn conninfo_keys_are_taken_out() {
        let (rest, o) = parts("host=h  sslmode = require password='a b\\'c' sslrootcert='/x y/ca.pem' dbname=d");
        assert_eq!(rest, "host=h password='a b\\'c' dbname=d");
        assert_eq!(o.mode, Some(SslMode::Require));
        assert_eq!(o.root_cert.as_deref(), Some(Path::new("/x y/ca.pem")));
        assert!(Config::from_str(&rest).is_ok());
        // What does not parse is left for tokio-postgres to report.
        assert_eq!(parts("host=h password='open").0, "host=h password='open");
    }

    #[test]
    fn a_bad_mode_is_named() {
        let e = split("postgresql://h/db?sslmode=verify_full")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("`verify_full`")));
        assert!(matches!(split("sslmode=allow host=h"), Err(TlsError::BadSslMode(_))));
    }

    #[test]
    fn flags_override_the_url() {
        let flags = SslOptions {
            mode: Some(SslMode::Disable),
            ..Default::default()
        };
        let (config, connector) = configure("postgresql://h/db?sslmode=verify-full&sslrootcert=/nonexistent", flags)
            .expect("disable reads no file");
        assert_eq!(config.get_ssl_mode(), PgSslMode::Disable);
        assert!(matches!(connector, Connector::Plain));
    }

    #[test]
    fn a_missing_file_names_its_flag() {
        let e = configure(
            "host=h sslmode=verify-ca sslrootcert=/nonexistent/ca.pem",
            SslOptions::default(),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            e.contains("--postgres-sslrootcert") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let e = configure("host=h sslcert=/c.pem", SslOptions::default()).err();
        assert!(matches!(e, Some(TlsError::HalfPair("sslcert"))));
    }
}
