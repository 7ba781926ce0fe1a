//! The configuration file's `[[table]]` entries: tables a server keeps, with
//! their expiry (TTL) policies and secondary indexes, made so at every start
//! (docs/operations.md, "Tables in the configuration file").
//!
//! This module reads the entries and checks their shape; applying them goes
//! through the calls the admin API makes (`Service::set_table_ttl`,
//! `Store::create_index`) and their checks, so the file and the API cannot
//! disagree on what is valid. A bad entry stops the start, naming the file and
//! the entry.

use std::path::Path;

use anyhow::{anyhow, Context as _};
use tafel_service::{Service, TtlPolicy};

/// The file's key for the entries (`[[table]]`), which names no serve flag.
pub(crate) const KEY: &str = "table";
/// The account of an entry that names none, as `tafel ttl`/`tafel index` default.
const DEFAULT_ACCOUNT: &str = "devstoreaccount1";
const KEYS: &str = "account, name, ttl-seconds, ttl-property, indexes";

/// One `[[table]]`.
#[derive(Debug)]
pub(crate) struct TableEntry {
    /// The file and the entry, as messages name them.
    at: String,
    account: String,
    name: String,
    /// The policy the table is to have; `None`: none (a stored one is cleared).
    ttl: Option<TtlPolicy>,
    /// Indexes the table is to have (others it has are kept).
    indexes: Vec<String>,
}

/// The `[[table]]` entries of the file at `path`; none without a file.
pub(crate) fn read(path: Option<&Path>) -> anyhow::Result<Vec<TableEntry>> {
    let Some(path) = path else { return Ok(Vec::new()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: toml::Table = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    let Some(value) = file.get(KEY) else {
        return Ok(Vec::new());
    };
    let toml::Value::Array(items) = value else {
        anyhow::bail!(
            "{}: `table` must be a list of tables: write each as [[table]], not [table]",
            path.display()
        );
    };
    let mut entries: Vec<TableEntry> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let name = item.get("name").and_then(toml::Value::as_str);
        let at = match name {
            Some(n) => format!("{}: [[table]] #{} ({n:?})", path.display(), i + 1),
            None => format!("{}: [[table]] #{}", path.display(), i + 1),
        };
        let entry = entry(item, at.clone()).map_err(|e| anyhow!("{at}: {e}"))?;
        if let Some(first) = entries
            .iter()
            .find(|o| o.account == entry.account && o.name.eq_ignore_ascii_case(&entry.name))
        {
            anyhow::bail!("{at}: the table is listed twice (also as {})", first.at);
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// One entry, checked as far as it can be without the store.
fn entry(item: &toml::Value, at: String) -> Result<TableEntry, String> {
    let toml::Value::Table(t) = item else {
        return Err("expected a table of keys".into());
    };
    if let Some(k) = t.keys().find(|k| !KEYS.split(", ").any(|known| known == k.as_str())) {
        return Err(format!("unknown key `{k}` (a [[table]] takes {KEYS})"));
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("`{key}` must be a string, not {}", v.type_str())),
        }
    };
    let name = string("name")?.ok_or("`name` is missing: the table's name")?;
    tafel_service::validate::table_name(&name).map_err(|e| format!("`name`: {}", e.message))?;
    let account = string("account")?.unwrap_or_else(|| DEFAULT_ACCOUNT.to_owned());
    let seconds = match t.get("ttl-seconds") {
        None => None,
        Some(toml::Value::Integer(n)) => {
            Some(u64::try_from(*n).map_err(|_| format!("`ttl-seconds` must be a whole number from 1 up, not {n}"))?)
        }
        Some(v) => return Err(format!("`ttl-seconds` must be a whole number, not {}", v.type_str())),
    };
    let property = string("ttl-property")?;
    let ttl = match (seconds, property) {
        (None, None) => None,
        (seconds, property) => Some(
            TtlPolicy { seconds, property }
                .validate()
                .map_err(|e| format!("TTL: {}", e.message))?,
        ),
    };
    let indexes = match t.get("indexes") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                toml::Value::String(p) => match tafel_service::index::property_problem(p) {
                    Some(problem) => Err(format!("`indexes`: {problem}")),
                    None => Ok(p.clone()),
                },
                v => Err(format!(
                    "`indexes` lists property names (strings), not {}",
                    v.type_str()
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(format!(
                "`indexes` must be a list of property names (indexes = [\"Status\"]), not {}",
                v.type_str()
            ))
        }
    };
    Ok(TableEntry {
        at,
        account,
        name,
        ttl,
        indexes,
    })
}

/// Refuses an entry whose account this server does not serve.
pub(crate) fn check_accounts(entries: &[TableEntry], served: &[String]) -> anyhow::Result<()> {
    match entries.iter().find(|e| !served.contains(&e.account)) {
        Some(e) => Err(anyhow!(
            "{}: this server has no account named {:?} (it serves {}); name one with `account = \"…\"`",
            e.at,
            e.account,
            served.join(", ")
        )),
        None => Ok(()),
    }
}

/// Makes the store hold what the entries say: each table (created if missing)
/// with its indexes (created if missing, never dropped), then each TTL policy
/// (replacing the stored one; cleared where the entry has none). Indexes come
/// first so that a backend without them fails the start before a policy has
/// changed. Each step is idempotent: after a failure, fixing the
/// file and starting again finishes the work.
pub(crate) async fn apply(entries: &[TableEntry], service: &Service) -> anyhow::Result<()> {
    for e in entries {
        let (account, table) = (e.account.as_str(), e.name.as_str());
        let created = service
            .ensure_table(account, table)
            .await
            .map_err(|err| anyhow!("{}: creating the table: {}", e.at, err.message))?;
        if created {
            tracing::info!(account, table, "config file: table created");
        }
        for property in &e.indexes {
            let started = std::time::Instant::now();
            let created = service
                .store()
                .create_index(account, table, property)
                .await
                .map_err(|err| anyhow!("{}: the index on {property}: {err}", e.at))?;
            if created {
                let ms = started.elapsed().as_secs_f64() * 1e3;
                // On a table with entities it is built online from here.
                tracing::info!(account, table, property = %property, ms, "config file: index created");
            }
        }
    }
    for e in entries {
        let (account, table) = (e.account.as_str(), e.name.as_str());
        let fail = |err: tafel_service::Error| anyhow!("{}: the TTL policy: {}", e.at, err.message);
        let stored = service.table_ttl(account, table).await.map_err(fail)?;
        if stored == e.ttl {
            continue;
        }
        service
            .set_table_ttl(account, table, e.ttl.clone())
            .await
            .map_err(fail)?;
        match &e.ttl {
            Some(p) => {
                tracing::info!(account, table, seconds = ?p.seconds, property = ?p.property, "config file: TTL policy set")
            }
            None => tracing::info!(account, table, "config file: TTL policy cleared (the entry sets none)"),
        }
    }
    Ok(())
}

/// The entries as `[[table]]` blocks, for `tafel config print`.
pub(crate) fn render(entries: &[TableEntry]) -> String {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut out = String::new();
    for e in entries {
        out.push_str(&format!("\n[[table]]{:<39} # file\n", ""));
        out.push_str(&format!("account = {}\nname = {}\n", quote(&e.account), quote(&e.name)));
        if let Some(p) = &e.ttl {
            if let Some(s) = p.seconds {
                out.push_str(&format!("ttl-seconds = {s}\n"));
            }
            if let Some(prop) = &p.property {
                out.push_str(&format!("ttl-property = {}\n", quote(prop)));
            }
        }
        if !e.indexes.is_empty() {
            let list: Vec<String> = e.indexes.iter().map(|p| quote(p)).collect();
            out.push_str(&format!("indexes = [{}]\n", list.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Vec<TableEntry>, String> {
        let dir = std::env::temp_dir().join(format!("tafel-table-config-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("{n}.toml"));
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        read(Some(&path)).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn an_entry_takes_a_name_a_policy_and_indexes() {
        let entries = parsed(
            "port = 1\n[[table]]\nname = \"orders\"\nttl-seconds = 86400\nttl-property = \"ExpiresAt\"\n\
             indexes = [\"Status\", \"CustomerId\"]\n[[table]]\naccount = \"a1\"\nname = \"Logs\"\n",
        )
        .unwrap_or_default();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].account, DEFAULT_ACCOUNT);
        assert_eq!(
            entries[0].ttl,
            Some(TtlPolicy {
                seconds: Some(86400),
                property: Some("ExpiresAt".into())
            })
        );
        assert_eq!(entries[0].indexes, ["Status", "CustomerId"]);
        assert_eq!((entries[1].account.as_str(), entries[1].ttl.as_ref()), ("a1", None));
        let served = vec![DEFAULT_ACCOUNT.to_owned()];
        let refused = check_accounts(&entries, &served)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("#2 (\"Logs\")") && refused.contains("\"a1\""),
            "{refused}"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry_and_what_is_wrong() {
        for (text, says) in [
            ("[table]\nname = \"orders\"", "write each as [[table]]"),
            (
                "[[table]]\nname = \"orders\"\nttl = 5",
                "#1 (\"orders\"): unknown key `ttl`",
            ),
            ("[[table]]\nttl-seconds = 5", "`name` is missing"),
            ("[[table]]\nname = \"o\"", "`name`: The specified resource name length"),
            (
                "[[table]]\nname = \"orders\"\nttl-seconds = \"5\"",
                "must be a whole number, not string",
            ),
            ("[[table]]\nname = \"orders\"\nttl-seconds = -5", "from 1 up, not -5"),
            ("[[table]]\nname = \"orders\"\nttl-seconds = 0", "from 1 to"),
            (
                "[[table]]\nname = \"orders\"\nttl-property = \"RowKey\"",
                "system property",
            ),
            ("[[table]]\nname = \"orders\"\nindexes = \"Status\"", "must be a list"),
            (
                "[[table]]\nname = \"orders\"\nindexes = [\"Timestamp\"]",
                "other than PartitionKey",
            ),
            ("[[table]]\nname = \"orders\"\nindexes = [1]", "not integer"),
            (
                "[[table]]\nname = \"orders\"\n[[table]]\nname = \"Orders\"",
                "#2 (\"Orders\"): the table is listed twice",
            ),
        ] {
            let e = parsed(text).err().unwrap_or_default();
            assert!(e.contains(says) && e.contains(".toml"), "{text}: {e}");
        }
    }
}
