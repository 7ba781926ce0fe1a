//! The serve command's flags, and what they build: the store, the access log,
//! bearer-token checking, the TLS source.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use tafel_http::auth::bearer::{self, OAuth};
use tafel_http::auth::jwks::{KeySource, Keys, REFRESH};
use tafel_http::auth::roles::Roles;
use tafel_http::ops::{AccessLog, Destination, LogFormat};
use tafel_http::tls;
use tafel_store::Store;

#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// A TOML file setting any of these flags under its own name (`port = 10002`);
    /// flags and environment variables take precedence over it. Its `[[table]]`
    /// entries declare tables with their TTL policy and indexes, made so at every
    /// start (docs/operations.md, "Tables in the configuration file").
    #[arg(long, env = "TAFEL_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "TAFEL_HOST", default_value = "127.0.0.1", alias = "tableHost")]
    pub(crate) host: String,
    /// Port to listen on (Azurite's table port by default).
    #[arg(long, env = "TAFEL_PORT", default_value_t = 10002, alias = "tablePort")]
    pub(crate) port: u16,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) change_feed: crate::change_feed_args::ChangeFeedArgs,
    /// Keep a deleted table restorable this long (e.g. 90s, 30m, 12h, 7d):
    /// `tafel undelete`, docs/lifecycle.md. Off unless given: Delete Table
    /// removes it at once, as Azure does.
    #[arg(long, env = "TAFEL_TABLE_SOFT_DELETE", value_parser = crate::undelete::parse_keep)]
    pub(crate) table_soft_delete: Option<std::time::Duration>,
    /// Keep everything in memory: no file is made, nothing is synced, and the
    /// data is gone when the process exits (for test suites). Embedded backend only.
    #[arg(long, env = "TAFEL_IN_MEMORY", alias = "inMemoryPersistence", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) in_memory: bool,
    /// MiB the data of --in-memory may take; a write past it fails as on a full
    /// disk (default: half the machine's memory, or of a container's memory limit).
    /// The store's page cache (--cache-mb, at most a quarter of this) comes on top.
    #[arg(long, env = "TAFEL_IN_MEMORY_MAX_MB", requires = "in_memory", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) in_memory_max_mb: Option<u64>,
    #[command(flatten)]
    pub(crate) azurite: crate::azurite::AzuriteArgs,
    /// Serve HTTPS with this PEM certificate chain (leaf first), with --key.
    /// `tafel cert` makes one for local development. SIGHUP reloads it.
    #[arg(long, env = "TAFEL_TLS_CERT", conflicts_with = "pfx")]
    pub(crate) cert: Option<PathBuf>,
    /// The PEM private key of --cert.
    #[arg(long, env = "TAFEL_TLS_KEY", requires = "cert")]
    pub(crate) key: Option<PathBuf>,
    /// Serve HTTPS with the key and certificate chain in this PKCS#12 (.pfx) file.
    #[arg(long, env = "TAFEL_TLS_PFX")]
    pub(crate) pfx: Option<PathBuf>,
    /// The password of --pfx.
    #[arg(long, env = "TAFEL_TLS_PFX_PASSWORD", hide_env_values = true, conflicts_with = "key")]
    pub(crate) pwd: Option<String>,
    /// Accept Microsoft Entra ID bearer tokens (HTTPS only): `basic` checks audience,
    /// issuer and lifetime but not the signature (local development only); `strict`
    /// also verifies the signature (--oauth-jwks or --oauth-issuer).
    #[arg(long, env = "TAFEL_OAUTH", value_enum)]
    pub(crate) oauth: Option<OAuthMode>,
    /// A JWKS file of the keys strict mode verifies signatures with.
    #[arg(long, env = "TAFEL_OAUTH_JWKS", requires = "oauth")]
    pub(crate) oauth_jwks: Option<PathBuf>,
    /// An issuer to accept besides Entra's (`https://sts.windows.net/<tenant>/`,
    /// `https://login.microsoftonline.com/<tenant>/v2.0`); repeatable. In strict mode
    /// without --oauth-jwks, its OpenID discovery document names the keys.
    #[arg(
        long = "oauth-issuer",
        env = "TAFEL_OAUTH_ISSUERS",
        value_delimiter = ';',
        requires = "oauth"
    )]
    pub(crate) oauth_issuers: Vec<String>,
    /// Role file mapping token principals to table roles (docs/oauth.md); required
    /// by strict mode; without one, basic mode lets every accepted token do everything.
    #[arg(long, env = "TAFEL_OAUTH_ROLES", requires = "oauth")]
    pub(crate) oauth_roles: Option<PathBuf>,
    /// An audience (`aud`) to accept besides Azure Storage's, the account's Azure
    /// endpoint and this server's own (`https://<host>:<port>`, and with
    /// `/<account>`); repeatable, each also with `/<account>` after it. For the
    /// names clients reach this server by, behind a proxy or DNS.
    #[arg(
        long = "oauth-audience",
        env = "TAFEL_OAUTH_AUDIENCES",
        value_delimiter = ';',
        requires = "oauth"
    )]
    pub(crate) oauth_audiences: Vec<String>,
    /// The Entra ID tenant: the only one whose issuers are accepted (unless `common`
    /// or `organizations`: any), and the one named in the WWW-Authenticate challenge.
    #[arg(long, env = "TAFEL_OAUTH_TENANT", default_value = "common")]
    pub(crate) oauth_tenant: String,
    /// An account as NAME:BASE64KEY[:BASE64KEY2]; repeatable. Default: the
    /// emulator account devstoreaccount1 with its well-known key.
    #[arg(
        long = "account",
        env = "TAFEL_ACCOUNTS",
        value_delimiter = ';',
        hide_env_values = true
    )]
    pub(crate) accounts: Vec<String>,
    /// A file of accounts, one NAME:BASE64KEY[:BASE64KEY2] per line (`#` starts a
    /// comment line); combined with --account.
    #[arg(long = "accounts-file", env = "TAFEL_ACCOUNTS_FILE")]
    pub(crate) accounts_file: Option<PathBuf>,
    /// Log filter (error, warn, info, debug, trace, or a tracing directive).
    #[arg(long, env = "TAFEL_LOG", default_value = "info")]
    pub(crate) log: String,
    /// Threads serving HTTP connections (default: one per CPU but one, at least
    /// one: a core is left to clients on the same machine).
    #[arg(long, env = "TAFEL_THREADS")]
    pub(crate) threads: Option<usize>,
    /// Threads of each of the two runtimes for long requests, one for queries and one
    /// for batches (default: one per CPU).
    #[arg(long, env = "TAFEL_LONG_THREADS")]
    pub(crate) long_threads: Option<usize>,
    /// Address of the admin listener (/health, /ready, /metrics).
    #[arg(long, env = "TAFEL_ADMIN_HOST", default_value = "127.0.0.1")]
    pub(crate) admin_host: String,
    /// Port of the admin listener; left unset, 10012, or a free port when another
    /// server has 10012 (the log says which).
    #[arg(long, env = "TAFEL_ADMIN_PORT", default_value_t = crate::listeners::DEFAULT_ADMIN_PORT)]
    pub(crate) admin_port: u16,
    /// Whether --admin-port was asked for (by flag, variable or file), not defaulted.
    #[arg(skip)]
    pub(crate) admin_port_given: bool,
    /// Write where this server listens (`table=ADDR`, `admin=ADDR` or `admin=off`)
    /// to this file once it listens, and remove it at exit; `tafel health` reads it.
    #[arg(long, env = "TAFEL_LISTENERS_FILE")]
    pub(crate) listeners_file: Option<PathBuf>,
    /// Run no admin listener.
    #[arg(long, env = "TAFEL_NO_ADMIN", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) no_admin: bool,
    /// Serve no web explorer on the admin listener.
    #[arg(long, env = "TAFEL_NO_EXPLORER", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) no_explorer: bool,
    /// Bearer token the admin listener asks for (/metrics, /ready's reason, /backup);
    /// required when it listens on a non-loopback address, and for online backups.
    #[arg(long, env = "TAFEL_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<String>,
    /// Fault rules to start with: a TOML file of `[[rule]]` tables
    /// (docs/testing.md). The admin listener's `/faults` replaces them at run time.
    #[arg(long, env = "TAFEL_FAULTS")]
    pub(crate) faults: Option<PathBuf>,
    /// Where the access log goes: off, stdout, or a file to append to.
    #[arg(long, env = "TAFEL_ACCESS_LOG", default_value = "off")]
    pub(crate) access_log: String,
    /// Log a warning for each entity query that examines more than this many
    /// rows without a secondary index (a table scan or a wide key range), naming
    /// its table and filter: the scans the code would pay for on Azure.
    #[arg(long, env = "TAFEL_SCAN_WARN_ROWS", value_name = "ROWS")]
    pub(crate) scan_warn_rows: Option<u64>,
    /// Format of the access log and of the server's own log lines.
    #[arg(long, env = "TAFEL_LOG_FORMAT", value_enum, default_value_t = LogFormatArg::Text)]
    pub(crate) log_format: LogFormatArg,
    /// On SIGTERM, seconds at most to keep serving with /ready at 503 (so load
    /// balancers stop sending here) while requests are in flight; the server stops
    /// as soon as none is.
    #[arg(long, env = "TAFEL_DRAIN_SECONDS", default_value_t = 5)]
    pub(crate) drain_seconds: u64,
    /// Connections served at once on the Table API port; more wait to be accepted
    /// (default 16384, or as many as the open-file limit allows, which Tafel raises
    /// to its hard maximum).
    #[arg(long, env = "TAFEL_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,
    /// MiB of request bodies held in memory at once, over all requests; a request
    /// beyond it waits for room (its client's sends stall), up to the body timeout.
    #[arg(long, env = "TAFEL_MAX_BODY_MEMORY_MB", default_value_t = 256, value_parser = clap::value_parser!(u32).range(4..))]
    pub(crate) max_body_memory_mb: u32,
    /// MiB of request heads (request lines and headers still arriving) held at
    /// once, over all connections; a connection whose head finds it spent is closed.
    /// One head is at most 64 KiB (larger ones are answered 431).
    #[arg(long, env = "TAFEL_MAX_HEADER_MEMORY_MB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_header_memory_mb: u32,
    /// Seconds a client may take to send a request's head; then the connection is closed.
    #[arg(long, env = "TAFEL_HEADER_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..), alias = "tableKeepAliveTimeout")]
    pub(crate) header_timeout: u32,
    /// Seconds a client may take to send a request's body once its head has come;
    /// then it is answered 500 OperationTimedOut, as Azure answers a request past its timeout.
    #[arg(long, env = "TAFEL_BODY_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) body_timeout: u32,
    /// Answer as Azure Cosmos DB for Table does, whatever host a request names
    /// (docs/cosmos.md); also serve the Cosmos emulator's account `localhost` with its
    /// well-known key at the endpoint's root, on its Table port 8902 unless --port is given.
    #[arg(long, env = "TAFEL_COSMOS", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) cosmos: bool,
    /// Throttle as Azure does past its scalability targets: 503 ServerBusy for a
    /// partition past --partition-limit entities per second, an account past
    /// --account-limit (docs/testing.md). Off by default.
    #[arg(long, env = "TAFEL_AZURE_LIMITS", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) azure_limits: bool,
    /// Entities per second one partition (table and PartitionKey) serves under
    /// --azure-limits (without it, no limit applies).
    #[arg(long, env = "TAFEL_PARTITION_LIMIT", default_value_t = tafel_http::AZURE_PARTITION_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) partition_limit: u32,
    /// Entities per second one account serves under --azure-limits.
    #[arg(long, env = "TAFEL_ACCOUNT_LIMIT", default_value_t = tafel_http::AZURE_ACCOUNT_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) account_limit: u32,
}

/// Where the data lives: what `serve`, `backup` and `restore` open.
#[derive(Args, Clone)]
pub(crate) struct StoreArgs {
    /// Directory holding the data.
    #[arg(
        long,
        env = "TAFEL_DATA_DIR",
        default_value = "./tafel-data",
        alias = "location",
        short_alias = 'l'
    )]
    pub(crate) data_dir: PathBuf,
    /// Where data lives: the embedded store in --data-dir, or a PostgreSQL-wire
    /// database shared by any number of nodes.
    #[arg(long, env = "TAFEL_BACKEND", value_enum, default_value_t = Backend::Embedded)]
    pub(crate) backend: Backend,
    /// The database of the postgres backend, as a libpq-style URL or conninfo
    /// (`postgresql://user@host:5432/db`, `host=… dbname=…`).
    #[arg(
        long,
        env = "TAFEL_POSTGRES_URL",
        required_if_eq("backend", "postgres"),
        hide_env_values = true
    )]
    pub(crate) postgres_url: Option<String>,
    /// Connections to the database this node keeps at most.
    #[arg(long, env = "TAFEL_POSTGRES_POOL", default_value_t = 16)]
    pub(crate) postgres_pool: usize,
    /// Seconds a statement may run on the database before it is ended; a request
    /// whose database does not answer within about that long fails with 503.
    #[arg(long, env = "TAFEL_POSTGRES_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) postgres_timeout: u32,
    /// TLS to the database, as libpq's sslmode (docs/scale-out-tls.md); overrides
    /// the URL's `sslmode`, which defaults to prefer.
    #[arg(long, env = "TAFEL_POSTGRES_SSLMODE", value_enum)]
    pub(crate) postgres_sslmode: Option<PgSslMode>,
    /// PEM root certificate(s) the database's certificate must chain to (`system`:
    /// the system's); overrides the URL's `sslrootcert`.
    #[arg(long, env = "TAFEL_POSTGRES_SSLROOTCERT")]
    pub(crate) postgres_sslrootcert: Option<PathBuf>,
    /// PEM client certificate for certificate authentication, with
    /// --postgres-sslkey; overrides the URL's `sslcert`.
    #[arg(long, env = "TAFEL_POSTGRES_SSLCERT")]
    pub(crate) postgres_sslcert: Option<PathBuf>,
    /// PEM private key of --postgres-sslcert; overrides the URL's `sslkey`.
    #[arg(long, env = "TAFEL_POSTGRES_SSLKEY")]
    pub(crate) postgres_sslkey: Option<PathBuf>,
    /// Page cache of the embedded store, in MiB.
    #[arg(long, env = "TAFEL_CACHE_MB", default_value_t = 256)]
    pub(crate) cache_mb: usize,
    /// Write buffer of the embedded store, in MiB: acknowledged changes (synced
    /// to the log) held in memory until a checkpoint folds them into the store
    /// file; writes wait for the fold when it is full. 0 commits each group of
    /// writes to the file. In memory, it counts in --in-memory-max-mb (an eighth
    /// of it at most).
    #[arg(long, env = "TAFEL_WRITE_BUFFER_MB", default_value_t = 64)]
    pub(crate) write_buffer_mb: usize,
}

/// libpq's sslmode values.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PgSslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

#[cfg(feature = "postgres")]
impl StoreArgs {
    /// The TLS flags, which override the URL's settings.
    fn ssl_options(&self) -> tafel_store::postgres::SslOptions {
        use tafel_store::postgres::SslMode;
        tafel_store::postgres::SslOptions {
            mode: self.postgres_sslmode.map(|m| match m {
                PgSslMode::Disable => SslMode::Disable,
                PgSslMode::Prefer => SslMode::Prefer,
                PgSslMode::Require => SslMode::Require,
                PgSslMode::VerifyCa => SslMode::VerifyCa,
                PgSslMode::VerifyFull => SslMode::VerifyFull,
            }),
            root_cert: self.postgres_sslrootcert.clone(),
            cert: self.postgres_sslcert.clone(),
            key: self.postgres_sslkey.clone(),
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OAuthMode {
    Basic,
    Strict,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormatArg {
    Text,
    Json,
}

impl ServeArgs {
    /// Bearer-token checking, if --oauth is on; loads the keys and the role file.
    pub(crate) async fn oauth(&self) -> anyhow::Result<Option<Arc<OAuth>>> {
        let Some(mode) = self.oauth else { return Ok(None) };
        let roles = match &self.oauth_roles {
            Some(path) => Some(Roles::load(path).map_err(anyhow::Error::msg)?),
            None => None,
        };
        // Verified signatures say who a principal is, not what it may do: strict mode
        // grants only what the role file says (Entra ID signs every tenant's tokens
        // with the same keys).
        if mode == OAuthMode::Strict && roles.is_none() {
            anyhow::bail!("--oauth strict needs --oauth-roles (which principals may do what)");
        }
        let keys = match (mode, &self.oauth_jwks) {
            (OAuthMode::Basic, _) => {
                tracing::warn!("--oauth basic: token signatures are NOT checked; anyone can mint an accepted token. For local development only.");
                None
            }
            (OAuthMode::Strict, Some(path)) => Some(KeySource::File(path.clone())),
            (OAuthMode::Strict, None) if !self.oauth_issuers.is_empty() => {
                Some(KeySource::Issuers(self.oauth_issuers.clone()))
            }
            (OAuthMode::Strict, None) => {
                anyhow::bail!("--oauth strict needs --oauth-jwks or --oauth-issuer (the keys to verify tokens with)")
            }
        };
        let keys = match keys {
            Some(source) => {
                let keys = Arc::new(
                    Keys::load(source)
                        .await
                        .map_err(anyhow::Error::msg)
                        .context("loading the OAuth signing keys")?,
                );
                tokio::spawn(refresh_keys(keys.clone()));
                Some(keys)
            }
            None => None,
        };
        let mode = match mode {
            OAuthMode::Basic => bearer::Mode::Basic,
            OAuthMode::Strict => bearer::Mode::Strict,
        };
        Ok(Some(Arc::new(OAuth::new(
            mode,
            keys,
            self.oauth_issuers.clone(),
            roles,
            &self.oauth_tenant,
            self.oauth_endpoints(),
        ))))
    }

    /// This server's endpoints as token audiences: `https://<host>:<port>` for the
    /// listen address, or for every loopback name when it listens on loopback or
    /// on every address; and `--oauth-audience`.
    fn oauth_endpoints(&self) -> Vec<String> {
        let ip = self.host.parse::<std::net::IpAddr>().ok();
        let hosts: Vec<String> = match ip {
            Some(ip) if ip.is_loopback() || ip.is_unspecified() => {
                ["127.0.0.1", "localhost", "[::1]"].map(str::to_owned).to_vec()
            }
            Some(std::net::IpAddr::V6(v6)) => vec![format!("[{v6}]")],
            _ => vec![self.host.clone()],
        };
        let mut out: Vec<String> = hosts.iter().map(|h| format!("https://{h}:{}", self.port)).collect();
        out.extend(self.oauth_audiences.iter().cloned());
        out
    }

    /// The TLS certificate to serve with, if any. `--cert` with `--pwd` and no
    /// `--key` is a PKCS#12 file, as Azurite takes it.
    pub(crate) fn tls_source(&self) -> Option<tls::Source> {
        match (&self.cert, &self.key, &self.pfx) {
            (Some(cert), Some(key), _) => Some(tls::Source::Pem {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (_, _, Some(path)) | (Some(path), None, None) => Some(tls::Source::Pfx {
                path: path.clone(),
                password: self.pwd.clone().unwrap_or_default(),
            }),
            _ => None,
        }
    }

    /// Refuses TLS flags that do not make a whole source.
    pub(crate) fn check_tls_flags(&self) -> anyhow::Result<()> {
        match (&self.cert, &self.key, &self.pfx, &self.pwd) {
            (Some(_), None, None, None) => anyhow::bail!(
                "--cert needs --key (a PEM certificate and its key) or --pwd (a PKCS#12 .pfx file and its password)"
            ),
            (None, Some(_), _, _) => anyhow::bail!("--key needs --cert (the PEM certificate it belongs to)"),
            (None, None, None, Some(_)) => anyhow::bail!("--pwd needs --pfx or --cert (the PKCS#12 file it opens)"),
            _ => Ok(()),
        }
    }

    /// The store to serve: the one `--backend` names, or one in memory.
    pub(crate) async fn open_store(&self) -> anyhow::Result<Arc<dyn Store>> {
        if !self.in_memory {
            return open_store(&self.store).await;
        }
        if self.store.backend != Backend::Embedded {
            anyhow::bail!("--in-memory keeps the embedded store in memory; it cannot be used with --backend postgres");
        }
        #[cfg(feature = "embedded")]
        {
            let cap = match self.in_memory_max_mb {
                Some(mb) => mb.saturating_mul(1 << 20),
                None => half_the_memory(),
            };
            // The same cache as on disk: a page read from the in-memory disk is
            // still a lock, a map lookup and a copy, and a 16 MiB cache churned
            // on every scan and halved its rate (benchmark-history §23). At most a
            // quarter of the data's cap (but 16 MiB), as the cache holds copies of
            // its pages: a small memory limit is not overrun by the cache.
            let quarter = usize::try_from(cap / 4).unwrap_or(usize::MAX).max(16 << 20);
            let cache = (self.store.cache_mb << 20).min(quarter);
            let buffer = (self.store.write_buffer_mb << 20).min(usize::try_from(cap / 8).unwrap_or(usize::MAX));
            tracing::info!(
                max_mb = cap >> 20,
                "in memory: no file is written; the data is gone at exit"
            );
            Ok(Arc::new(
                tafel_store::embedded::EmbeddedStore::open_in_memory(cap, cache, buffer)
                    .context("opening the in-memory store")?,
            ))
        }
        #[cfg(not(feature = "embedded"))]
        anyhow::bail!(
            "this tafel was built without the embedded backend (cargo feature `embedded`), which --in-memory needs"
        )
    }

    /// Installs the rules of `--faults` in `ops`; a bad file stops the start.
    pub(crate) fn install_faults(&self, ops: &tafel_http::ops::Ops) -> anyhow::Result<()> {
        let Some(path) = &self.faults else { return Ok(()) };
        let text = std::fs::read_to_string(path).with_context(|| format!("reading --faults {}", path.display()))?;
        let rules = tafel_http::faults::rules::from_toml(&text)
            .and_then(|r| ops.faults.replace(r))
            .map_err(|e| anyhow::anyhow!("--faults {}: {e}", path.display()))?;
        tracing::warn!(rules, file = %path.display(), "fault rules in force: chosen requests will fail");
        Ok(())
    }

    pub(crate) fn access_log(&self) -> anyhow::Result<Option<AccessLog>> {
        let destination = match self.access_log.as_str() {
            "off" | "" => return Ok(None),
            "stdout" | "-" => Destination::Stdout,
            path => Destination::File(PathBuf::from(path)),
        };
        let format = match self.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        };
        let log = AccessLog::open(&destination, format)
            .with_context(|| format!("opening the access log {}", self.access_log))?;
        Ok(Some(log))
    }
}

/// The backend `--backend` names, if this build has it (cargo features
/// `embedded` and `postgres`, both default).
/// Opens the store `args` name, keeping secondary indexes as a server does (a
/// restore or any other command's writes make their entries).
pub(crate) async fn open_store(args: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    let store = open_backend(args).await?;
    store.set_index_encoder(tafel_service::index::encoder());
    Ok(store)
}

async fn open_backend(args: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    match (args.backend, &args.postgres_url) {
        #[cfg(feature = "postgres")]
        (Backend::Postgres, Some(url)) => Ok(Arc::new(
            tafel_store::postgres::PostgresStore::connect(
                url,
                tafel_store::postgres::PostgresOptions {
                    pool_size: args.postgres_pool,
                    timeout: std::time::Duration::from_secs(u64::from(args.postgres_timeout)),
                    ssl: args.ssl_options(),
                },
            )
            .await
            .context("connecting to the postgres backend")?,
        )),
        #[cfg(feature = "postgres")]
        (Backend::Postgres, None) => anyhow::bail!("--backend postgres needs --postgres-url"),
        #[cfg(feature = "embedded")]
        (Backend::Embedded, _) => {
            let options = tafel_store::embedded::EmbeddedOptions {
                cache_size: args.cache_mb << 20,
                write_buffer: args.write_buffer_mb << 20,
                ..Default::default()
            };
            match tafel_store::embedded::EmbeddedStore::open(&args.data_dir, options) {
                Ok(store) => Ok(Arc::new(store)),
                Err(e) => {
                    let e = anyhow::Error::new(e).context(format!("opening the store in {}", args.data_dir.display()));
                    Err(match not_writable(&args.data_dir) {
                        Some(what_to_do) => e.context(what_to_do),
                        None => e,
                    })
                }
            }
        }
        #[allow(unreachable_patterns)]
        (backend, _) => anyhow::bail!(
            "this tafel was built without the {} backend (cargo feature `{}`)",
            backend.name(),
            backend.name()
        ),
    }
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Embedded,
    Postgres,
}

impl Backend {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Postgres => "postgres",
        }
    }
}

/// Half the memory this process may have: the machine's (`MemTotal` of
/// /proc/meminfo) or, in a container, its cgroup's limit if lower; no cap where
/// neither can be read.
#[cfg(feature = "embedded")]
fn half_the_memory() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    // cgroup v2, then v1; "max" (no limit) does not parse.
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse::<u64>().ok());
    match (total, limit) {
        (Some(t), Some(l)) => t.min(l) / 2,
        (Some(m), None) | (None, Some(m)) => m / 2,
        (None, None) => u64::MAX,
    }
}

/// Loads the OAuth signing keys again every hour (issuers rotate them).
async fn refresh_keys(keys: Arc<Keys>) {
    loop {
        tokio::time::sleep(REFRESH).await;
        if let Err(e) = keys.reload().await {
            tracing::warn!(error = %e, "reloading the OAuth signing keys failed; keeping the ones in use");
        }
    }
}

/// What to do when the data directory is not this process's to write, which
/// the store's own error ("Permission denied") does not say: most often a
/// host directory bind-mounted into the image, which runs as uid 10001.
#[cfg(feature = "embedded")]
fn not_writable(dir: &std::path::Path) -> Option<String> {
    let probe = dir.join(".tafel-write-check");
    let denied = match std::fs::create_dir_all(dir) {
        Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
        Ok(()) => match std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                false
            }
            Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
        },
    };
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    denied.then(|| {
        format!(
            "the data directory {} is not writable by the user Tafel runs as (uid {uid}, gid {gid}): \
             give it to that user (on the host: `chown -R {uid}:{gid} DIR`), or run Tafel as the directory's owner \
             (`docker run --user UID:GID …`); the container image runs as uid 10001 (docs/containers.md)",
            dir.display()
        )
    })
}
