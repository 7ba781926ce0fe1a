//! HTTPS for the Table API port: the certificate (PEM pair or PKCS#12), a
//! resolver whose certificate can be swapped while the server runs (SIGHUP),
//! and the acceptor the server wraps each connection in.
//!
//! Only the certificate changes on reload: open connections keep the session
//! they negotiated, new handshakes get the new certificate.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::InconsistentKeys;
use rustls::ServerConfig;

pub use tokio_rustls::TlsAcceptor;

/// Where the server's certificate and key come from.
#[derive(Clone)]
pub enum Source {
    /// A PEM certificate chain (leaf first) and a PEM private key.
    Pem { cert: PathBuf, key: PathBuf },
    /// A PKCS#12 archive holding the key and its chain.
    Pfx { path: PathBuf, password: String },
}

impl fmt::Debug for Source {
    // The password never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Pem { cert, key } => write!(f, "PEM {} + {}", cert.display(), key.display()),
            Source::Pfx { path, .. } => write!(f, "PKCS#12 {}", path.display()),
        }
    }
}

/// Why a certificate could not be loaded; names the file.
#[derive(Debug)]
pub struct LoadError(String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

fn err(path: &Path, what: impl fmt::Display) -> LoadError {
    LoadError(format!("{}: {what}", path.display()))
}

impl Source {
    /// Reads and checks the certificate and key (the key must sign, and match).
    pub fn load(&self) -> Result<Arc<CertifiedKey>, LoadError> {
        let (chain, key, path) = match self {
            Source::Pem { cert, key } => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| err(cert, format!("not a PEM certificate file ({e})")))?;
                let private =
                    PrivateKeyDer::from_pem_file(key).map_err(|e| err(key, format!("not a PEM private key ({e})")))?;
                (chain, private, cert)
            }
            Source::Pfx { path, password } => {
                let data = std::fs::read(path).map_err(|e| err(path, e))?;
                let store =
                    p12_keystore::KeyStore::from_pkcs12(&data, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
                        .map_err(|e| err(path, format!("not a PKCS#12 file this password opens ({e})")))?;
                let chain = store
                    .entries()
                    .find_map(|(_, entry)| match entry {
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(c) => Some(c),
                        _ => None,
                    })
                    .ok_or_else(|| err(path, "holds no private key with a certificate"))?;
                let certs = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
                (certs, key, path)
            }
        };
        if chain.is_empty() {
            return Err(err(path, "holds no certificate"));
        }
        let signing = provider::default_provider()
            .key_provider
            .load_private_key(key)
            .map_err(|e| err(path, format!("the private key cannot sign ({e})")))?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(Arc::new(certified)),
            Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                Err(err(path, "the key does not fit the certificate (they are not a pair)"))
            }
            // rustls reads certificates as webpki does, which takes X.509 v3 only; an old
            // self-signed v1 one (`openssl x509 -req` without extensions) is served, its key
            // checked here, as Azurite and OpenSSL-based clients take it.
            Err(e) => match v1_public_key(certified.end_entity_cert().map_err(|e| err(path, e))?) {
                Some(spki) if certified.key.public_key().is_none_or(|k| k.as_ref() == spki) => {
                    tracing::warn!(
                        file = %path.display(),
                        "the certificate is X.509 version 1: served, but clients that check certificates \
                         as rustls does (Rust, some Go) refuse it; `tafel cert` makes a version 3 one"
                    );
                    Ok(Arc::new(certified))
                }
                Some(_) => Err(err(path, "the key does not fit the certificate (they are not a pair)")),
                None => Err(err(path, format!("the certificate cannot be read ({e})"))),
            },
        }
    }
}

/// The subjectPublicKeyInfo (whole, as DER) of an X.509 version 1 certificate;
/// None for any other, or for bytes that are not a certificate.
fn v1_public_key(cert: &[u8]) -> Option<&[u8]> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    (parsed.version() == x509_parser::x509::X509Version::V1).then_some(parsed.tbs_certificate.subject_pki.raw)
}

/// The certificate every new handshake is given; replaced by [`Certificate::reload`].
#[derive(Debug)]
pub struct Certificate {
    source: Source,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificate {
    pub fn open(source: Source) -> Result<Arc<Self>, LoadError> {
        let current = RwLock::new(source.load()?);
        Ok(Arc::new(Certificate { source, current }))
    }

    /// Loads the files again; on failure the certificate in use stays.
    pub fn reload(&self) -> Result<(), LoadError> {
        let fresh = self.source.load()?;
        match self.current.write() {
            Ok(mut slot) => *slot = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }

    /// The acceptor for the Table API port: TLS 1.2 and 1.3, HTTP/1.1.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, LoadError> {
        let config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| LoadError(format!("TLS configuration: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        let mut config = config;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        })
    }
}

/// The first byte of every TLS connection (a handshake record). Anything else on
/// the TLS port is a client speaking plain HTTP to it.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// The answer to plain HTTP on the TLS port, sent before the connection closes.
pub const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
content-type: text/plain; charset=utf-8\r\n\
connection: close\r\n\
content-length: 62\r\n\
\r\n\
This port serves HTTPS. Send the request to https:// instead.\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_http_answer_declares_its_length() {
        let text = std::str::from_utf8(PLAIN_HTTP_ANSWER).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
    }

    #[test]
    fn a_missing_file_is_named_in_the_error() {
        let e = Source::Pem {
            cert: "/nonexistent/cert.pem".into(),
            key: "/nonexistent/key.pem".into(),
        }
        .load()
        .unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/cert.pem: "), "{e}");
        let e = Source::Pfx {
            path: "/nonexistent/c.pfx".into(),
            password: "secret".into(),
        }
        .load()
        .unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/c.pfx: "), "{e}");
        assert!(!format!(
            "{:?}",
            Source::Pfx {
                path: "p".into(),
                password: "secret".into()
            }
        )
        .contains("secret"));
    }
}
