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

mod conninfo;
use conninfo::split;

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

#[cfg(test)]
mod tests {
    use super::*;

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
