//! The change feed's flags (docs/change-feed.md): off unless a retention is
//! given, for every account or per account.

use std::collections::HashMap;
use std::time::Duration;

use clap::Args;
use tafel_store::feed::{FeedSettings, Retention};
use tafel_store::Store;

#[derive(Args, Clone, Debug, Default)]
pub(crate) struct ChangeFeedArgs {
    /// Record every account's changes in its change feed (`GET /$changes`), kept
    /// this long (e.g. 90s, 30m, 24h, 7d). Off unless given.
    #[arg(long, env = "TAFEL_CHANGE_RETENTION", value_parser = parse_duration)]
    pub(crate) change_retention: Option<Duration>,
    /// Bytes of changes each account's feed keeps at most (e.g. 512MiB, 1GiB);
    /// the oldest are dropped first.
    #[arg(long, env = "TAFEL_CHANGE_RETENTION_SIZE", value_parser = parse_size)]
    pub(crate) change_retention_size: Option<u64>,
    /// ACCOUNT=DURATION: record this account's changes, kept this long (repeatable;
    /// over --change-retention).
    #[arg(long, env = "TAFEL_CHANGE_RETENTION_FOR", value_delimiter = ',', value_parser = parse_account_retention)]
    pub(crate) change_retention_for: Vec<(String, Duration)>,
}

impl ChangeFeedArgs {
    pub(crate) fn settings(&self) -> FeedSettings {
        let max_bytes = self.change_retention_size;
        let retention = |age| Retention { age, max_bytes };
        FeedSettings {
            all: self.change_retention.map(retention),
            accounts: self
                .change_retention_for
                .iter()
                .map(|(account, age)| (account.clone(), retention(*age)))
                .collect::<HashMap<_, _>>(),
        }
    }

    /// Turns the feed on in `store`, when any retention is given.
    pub(crate) fn apply(&self, store: &dyn Store) -> anyhow::Result<()> {
        let settings = self.settings();
        if !settings.any() {
            if self.change_retention_size.is_some() {
                anyhow::bail!("--change-retention-size needs --change-retention or --change-retention-for");
            }
            return Ok(());
        }
        store
            .set_change_feed(settings)
            .map_err(|e| anyhow::anyhow!("--change-retention: {e}"))
    }
}

/// `90s`, `30m`, `24h`, `7d`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("'{s}' is not a duration such as 90s, 30m, 24h or 7d"))?;
    let secs = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("'{s}': the unit is one of s, m, h, d")),
    };
    if n == 0 {
        return Err("a retention of 0 keeps nothing; leave the flag out to turn the feed off".into());
    }
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

/// `1048576`, `512KiB`, `100MB`, `1GiB`, ...
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("'{s}' is not a size such as 512MiB or 1GiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "'{s}': the unit is one of B, KB, KiB, MB, MiB, GB, GiB, TB, TiB"
            ))
        }
    };
    Ok(n.saturating_mul(scale))
}

fn parse_account_retention(s: &str) -> Result<(String, Duration), String> {
    let (account, age) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not ACCOUNT=DURATION"))?;
    Ok((account.trim().to_owned(), parse_duration(age)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("7w").is_err());
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert!(parse_size("x").is_err());
        assert_eq!(
            parse_account_retention("acct=1h"),
            Ok(("acct".to_owned(), Duration::from_secs(3600)))
        );
    }
}
