//! Azurite's command line (`azurite-table`'s flags) and its `AZURITE_ACCOUNTS`
//! variable, so a script, compose file or CI job that starts Azurite starts
//! Tafel by swapping the program name (docs/azurite.md). Its flags that name a
//! Tafel setting are aliases on that setting (`--tableHost` of `--host`,
//! `--location` of `--data-dir`, `--inMemoryPersistence` of `--in-memory`, and
//! `--cert/--key/--pwd/--oauth`, which are Tafel's own); the rest live here.
//! All are hidden from `--help`.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Clone, Default)]
pub(crate) struct AzuriteArgs {
    /// Azurite: skip the request API version check. Tafel never refuses a
    /// published `x-ms-version`, so there is nothing to skip.
    #[arg(long = "skipApiVersionCheck", hide = true)]
    pub(crate) skip_api_version_check: bool,
    /// Azurite: ignore unsupported headers and parameters. Tafel does already.
    #[arg(long = "loose", short = 'L', hide = true)]
    pub(crate) loose: bool,
    /// Azurite: take the account from the path only, never from the host name.
    #[arg(long = "disableProductStyleUrl", hide = true)]
    pub(crate) disable_product_style_url: bool,
    /// Azurite: no access log. Tafel writes none unless --access-log asks.
    #[arg(long = "silent", short = 's', hide = true, conflicts_with = "access_log")]
    pub(crate) silent: bool,
    /// Azurite: write a debug log to this file. Tafel writes its own log there,
    /// at debug level unless --log says otherwise.
    #[arg(long = "debug", short = 'd', hide = true)]
    pub(crate) debug: Option<PathBuf>,
    /// Azurite: send no telemetry. Tafel sends none.
    #[arg(long = "disableTelemetry", hide = true)]
    pub(crate) disable_telemetry: bool,
    /// Azurite: `-v` prints the version (`--version` is clap's own, as is `-h`/`--help`).
    #[arg(short = 'v', hide = true, action = clap::ArgAction::Version)]
    azurite_version: Option<bool>,
    /// Azurite: MiB its in-memory extents (blob and queue data) may take. The
    /// nearest Tafel has is the cap of --in-memory's data: it is that cap, unless
    /// --in-memory-max-mb gives one.
    #[arg(long = "extentMemoryLimit", hide = true, value_parser = positive_megabytes)]
    pub(crate) extent_memory_limit: Option<u64>,
    /// The all-in-one `azurite` command's flags for its blob and queue services,
    /// which Tafel does not have: refused (see `refused`), never ignored.
    #[arg(long = "blobHost", hide = true)]
    blob_host: Option<String>,
    #[arg(long = "blobPort", hide = true)]
    blob_port: Option<String>,
    #[arg(long = "queueHost", hide = true)]
    queue_host: Option<String>,
    #[arg(long = "queuePort", hide = true)]
    queue_port: Option<String>,
    #[arg(long = "blobKeepAliveTimeout", hide = true)]
    blob_keep_alive_timeout: Option<String>,
    #[arg(long = "queueKeepAliveTimeout", hide = true)]
    queue_keep_alive_timeout: Option<String>,
}

/// Azurite's `--extentMemoryLimit`: megabytes, possibly with a fraction, rounded up.
fn positive_megabytes(s: &str) -> Result<u64, String> {
    match s.parse::<f64>() {
        Ok(mb) if mb > 0.0 && mb.is_finite() => Ok(mb.ceil() as u64),
        _ => Err(format!("{s}: expected a number of megabytes above 0")),
    }
}

impl AzuriteArgs {
    /// An Azurite flag given that Tafel cannot honour: refused, by name.
    pub(crate) fn refused(&self) -> anyhow::Result<()> {
        let given = [
            ("--blobHost", &self.blob_host),
            ("--blobPort", &self.blob_port),
            ("--queueHost", &self.queue_host),
            ("--queuePort", &self.queue_port),
            ("--blobKeepAliveTimeout", &self.blob_keep_alive_timeout),
            ("--queueKeepAliveTimeout", &self.queue_keep_alive_timeout),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, v)| v.is_some()) {
            anyhow::bail!(
                "{flag} is Azurite's flag for its blob or queue service; Tafel serves the Table service \
                 only (as `azurite-table` does): drop the blob and queue flags and keep \
                 --tableHost/--tablePort (docs/azurite.md)"
            );
        }
        Ok(())
    }
}

/// Azurite's accounts variable: `name1:key1:key2;name2:key1`, the format of
/// `--account`/`TAFEL_ACCOUNTS`. Used when Tafel's own name none.
pub(crate) const ACCOUNTS_VAR: &str = "AZURITE_ACCOUNTS";

/// The accounts `AZURITE_ACCOUNTS` names, if it is set and not empty.
pub(crate) fn accounts_from_env() -> Vec<String> {
    std::env::var(ACCOUNTS_VAR)
        .map(|v| {
            v.split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
