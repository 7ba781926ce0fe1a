//! TLS to the database, against the cluster `scripts/with-postgres` starts with
//! a test CA. The role in `TAFEL_TEST_PG_SSL_URL` is let in over TLS only
//! (hostssl), so a store that works with it really did connect over TLS; the
//! one in `TAFEL_TEST_PG_CERT_URL` also needs the client certificate. The
//! server's certificate names 127.0.0.1, not localhost.

use std::path::PathBuf;

use tafel_store::postgres::{SslMode, SslOptions};

use super::*;

struct Cluster {
    ca: String,
    client_cert: PathBuf,
    client_key: PathBuf,
    /// The TLS-only role's database.
    ssl_url: String,
    /// The certificate-authenticated role's database.
    cert_url: String,
}

/// The TLS settings of the test cluster. As with [`url`], a test that runs was asked
/// to: a cluster without TLS fails it rather than pass it untested.
fn cluster() -> Cluster {
    url();
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (
        var("TAFEL_TEST_PG_CA"),
        var("TAFEL_TEST_PG_CLIENT_CERT"),
        var("TAFEL_TEST_PG_CLIENT_KEY"),
        var("TAFEL_TEST_PG_SSL_URL"),
        var("TAFEL_TEST_PG_CERT_URL"),
    ) {
        (Some(ca), Some(cert), Some(key), Some(ssl_url), Some(cert_url)) => Cluster {
            ca,
            client_cert: cert.into(),
            client_key: key.into(),
            ssl_url,
            cert_url,
        },
        _ => panic!(
            "the test cluster serves no TLS (TAFEL_TEST_PG_CA … unset: scripts/with-postgres \
             needs openssl): the PostgreSQL TLS tests cannot run"
        ),
    }
}

fn connect_with(
    url: &str,
    ssl: SslOptions,
) -> impl std::future::Future<Output = Result<PostgresStore, StoreError>> + '_ {
    PostgresStore::connect(
        url,
        PostgresOptions {
            pool_size: 2,
            ssl,
            ..PostgresOptions::default()
        },
    )
}

async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
    connect_with(url, SslOptions::default()).await
}

/// The store works: a table made and found.
async fn works(store: &PostgresStore) {
    let a = account();
    assert!(store.create_table(&a, "overtls").await.expect("create over TLS"));
    assert!(store.get_table(&a, "OverTls").await.expect("get over TLS").is_some());
}

fn failure(result: Result<PostgresStore, StoreError>) -> String {
    match result {
        Ok(_) => panic!("connected, but should not have"),
        // What the operator sees.
        Err(e) => e.to_string(),
    }
}

/// A CA the database does not know, as a PEM file.
fn other_ca() -> tempfile::NamedTempFile {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let pem = params.self_signed(&key).expect("self-signed").pem();
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut file, pem.as_bytes()).expect("write the CA");
    file
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn verify_full_with_the_test_ca_connects_over_tls() {
    let c = cluster();
    let store = connect(&format!("{}?sslmode=verify-full&sslrootcert={}", c.ssl_url, c.ca))
        .await
        .expect("verify-full with the test CA");
    works(&store).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn disable_is_refused_by_a_tls_only_role() {
    let c = cluster();
    let e = failure(connect(&format!("{}?sslmode=disable", c.ssl_url)).await);
    assert!(e.contains("pg_hba.conf rejects"), "{e}");
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn prefer_the_default_uses_tls_when_offered() {
    let c = cluster();
    works(&connect(&c.ssl_url).await.expect("prefer")).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn verify_full_refuses_a_name_the_certificate_lacks() {
    let c = cluster();
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        c.ssl_url.replace("127.0.0.1", "localhost"),
        c.ca
    );
    let e = failure(connect(&url).await);
    assert!(e.contains("TLS") && e.contains("not valid for name"), "{e}");
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn verify_ca_accepts_a_name_the_certificate_lacks() {
    let c = cluster();
    let url = format!(
        "{}?sslmode=verify-ca&sslrootcert={}",
        c.ssl_url.replace("127.0.0.1", "localhost"),
        c.ca
    );
    works(&connect(&url).await.expect("verify-ca ignores the name")).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn another_ca_is_refused() {
    let c = cluster();
    let other = other_ca();
    let root = other.path().display();
    for mode in ["verify-full", "verify-ca", "require"] {
        // require with a root certificate checks the chain, as libpq's does.
        let e = failure(connect(&format!("{}?sslmode={mode}&sslrootcert={root}", c.ssl_url)).await);
        assert!(e.contains("UnknownIssuer"), "{mode}: {e}");
    }
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn require_without_a_root_certificate_connects() {
    let c = cluster();
    works(
        &connect(&format!("{}?sslmode=require", c.ssl_url))
            .await
            .expect("require"),
    )
    .await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_client_certificate_authenticates() {
    let c = cluster();
    // Given as options (the serve flags), over a URL that says otherwise.
    let ssl = SslOptions {
        mode: Some(SslMode::VerifyFull),
        root_cert: Some(c.ca.clone().into()),
        cert: Some(c.client_cert.clone()),
        key: Some(c.client_key.clone()),
    };
    let url = format!("{}?sslmode=disable", c.cert_url);
    works(&connect_with(&url, ssl).await.expect("certificate authentication")).await;
    // Without it, the role is not let in.
    let e = failure(connect(&format!("{}?sslmode=verify-full&sslrootcert={}", c.cert_url, c.ca)).await);
    assert!(e.contains("certificate"), "{e}");
}

#[tokio::test]
#[ignore = "needs PostgreSQL: run under scripts/with-postgres with -- --include-ignored"]
async fn a_missing_root_certificate_file_is_named() {
    let c = cluster();
    let e = failure(
        connect(&format!(
            "{}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            c.ssl_url
        ))
        .await,
    );
    assert!(
        e.contains("/nonexistent/ca.pem") && e.contains("--postgres-sslrootcert"),
        "{e}"
    );
}
