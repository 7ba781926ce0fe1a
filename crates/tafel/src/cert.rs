//! `tafel cert`: a local development CA and a server certificate it signs, for
//! `tafel serve --cert … --key …`, and how to make clients trust that CA.
//!
//! The CA is made once and reused (its key stays next to it), so a client that
//! trusts it keeps trusting every certificate a later run issues.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// `tafel cert`'s flags.
#[derive(clap::Args)]
pub struct CertArgs {
    /// Directory the files go to (default: `tls/` in the data directory).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The data directory whose `tls/` is the default --out.
    #[arg(long, env = "TAFEL_DATA_DIR", default_value = "./tafel-data")]
    data_dir: PathBuf,
    /// Another DNS name or IP address for the certificate, besides localhost,
    /// 127.0.0.1 and ::1; repeatable.
    #[arg(long = "name")]
    names: Vec<String>,
    /// Days the server certificate is valid (the CA: ten years).
    #[arg(long, default_value_t = 397)]
    days: u32,
}

const CA_NAME: &str = "Tafel development CA";

/// The CA's parameters: always the same, so a CA made by an earlier run signs
/// again from its key alone.
fn ca_params() -> anyhow::Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.distinguished_name.push(DnType::OrganizationName, "Tafel");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = time_from_now(-1);
    params.not_after = time_from_now(3650);
    Ok(params)
}

fn time_from_now(days: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::days(days)
}

fn write(path: &Path, contents: &str, private: bool) -> anyhow::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: CertArgs) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.data_dir.join("tls"));
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let (ca_pem, ca_key_pem) = (out.join("ca.pem"), out.join("ca-key.pem"));
    let (cert_pem, key_pem) = (out.join("cert.pem"), out.join("key.pem"));

    let reused = ca_pem.exists() && ca_key_pem.exists();
    let ca_key = if reused {
        let pem = fs::read_to_string(&ca_key_pem).with_context(|| format!("reading {}", ca_key_pem.display()))?;
        KeyPair::from_pem(&pem).with_context(|| format!("{} is not a private key", ca_key_pem.display()))?
    } else {
        if ca_pem.exists() != ca_key_pem.exists() {
            bail!(
                "{} and {} must both exist (to reuse the CA) or neither (to make one)",
                ca_pem.display(),
                ca_key_pem.display()
            );
        }
        let key = KeyPair::generate()?;
        write(&ca_key_pem, &key.serialize_pem(), true)?;
        write(&ca_pem, &ca_params()?.self_signed(&key)?.pem(), false)?;
        key
    };
    let issuer = Issuer::new(ca_params()?, ca_key);

    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    for n in args.names {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut params = CertificateParams::new(names.clone()).context("a --name is not a DNS name or IP address")?;
    params.distinguished_name.push(DnType::CommonName, names[0].as_str());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Strict verifiers (OpenSSL with X509_STRICT, as urllib3 2 asks) need it.
    params.use_authority_key_identifier_extension = true;
    params.not_before = time_from_now(-1);
    params.not_after = time_from_now(i64::from(args.days));
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    write(&key_pem, &key.serialize_pem(), true)?;
    write(&cert_pem, &cert.pem(), false)?;

    let ca = fs::canonicalize(&ca_pem).unwrap_or(ca_pem.clone());
    let ca = ca.display();
    println!(
        "{} {}\n",
        if reused { "Reused the CA in" } else { "Made a new CA in" },
        out.display()
    );
    println!("  CA certificate  {}   (trust this one)", ca_pem.display());
    println!(
        "  CA key          {}   (keep it private; the next `tafel cert` reuses it)",
        ca_key_pem.display()
    );
    println!("  certificate     {}   for {}", cert_pem.display(), names.join(", "));
    println!("  key             {}", key_pem.display());
    println!(
        "\nServe HTTPS:\n  tafel serve --cert {} --key {}\n",
        cert_pem.display(),
        key_pem.display()
    );
    println!("Connection string:\n  DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey=…;TableEndpoint=https://127.0.0.1:10002/devstoreaccount1;\n");
    println!("Make clients trust the CA:");
    println!("  Python (azure-data-tables): TableServiceClient.from_connection_string(cs, connection_verify=\"{ca}\")");
    println!("                              or export REQUESTS_CA_BUNDLE={ca}");
    println!("  Node.js:                    export NODE_EXTRA_CA_CERTS={ca}");
    println!("  Java:                       keytool -importcert -cacerts -alias tafel-dev-ca -file {ca}");
    println!("  Debian/Ubuntu (system):     sudo cp {ca} /usr/local/share/ca-certificates/tafel-dev-ca.crt && sudo update-ca-certificates");
    println!("  macOS (system):             sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain {ca}");
    println!("  Windows (system, .NET):     certutil -addstore -f Root {ca}");
    Ok(())
}
