//! The configuration file (`--config tafel.toml`) and `tafel config print`.
//!
//! The file sets any serve flag under the flag's own name (`port = 10002`,
//! `admin-token = "…"`, `account = ["name:key", …]`, `no-admin = true`).
//! Precedence is flag > environment variable > file > default: every setting
//! the file holds that neither a flag nor a variable gave is added to the
//! command line as `--name=value` and the command line parsed again, so the
//! file's values go through exactly the parsing and checks a flag's do. A key
//! that names no flag is refused, by name. The file's `[[table]]` entries
//! (tables' TTL policies and indexes) are not flags: `table_config.rs` reads them.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// Settings the file cannot hold.
const NOT_IN_FILE: &[&str] = &["config", "help", "version"];

/// The command line with the file's settings added; and the names of those settings.
pub fn layered(cmd: &Command, argv: Vec<OsString>) -> anyhow::Result<(Vec<OsString>, BTreeSet<String>)> {
    let matches = match cmd.clone().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    let (serve, m) = serve_matches(cmd, &matches);
    let mut from_file = BTreeSet::new();
    // Subcommands without serve flags (`cert`) have no --config.
    let Ok(Some(path)) = m.try_get_one::<PathBuf>("config") else {
        return Ok((argv, from_file));
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    let mut extra = Vec::new();
    for (key, value) in &table {
        if key == crate::table_config::KEY {
            continue;
        }
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && !NOT_IN_FILE.contains(&key.as_str()))
            .ok_or_else(|| {
                anyhow!(
                    "{}: unknown key `{key}` (keys are the serve flags' names)",
                    path.display()
                )
            })?;
        let given = matches!(
            m.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if given {
            continue;
        }
        push(&mut extra, key, arg, value).with_context(|| format!("{}: key `{key}`", path.display()))?;
        from_file.insert(key.clone());
    }
    let mut argv = argv;
    argv.extend(extra);
    Ok((argv, from_file))
}

/// The command and matches that hold the serve flags: `serve`'s, `config
/// print`'s, or the top level's (where they are flattened).
fn serve_matches<'a>(cmd: &'a Command, m: &'a ArgMatches) -> (&'a Command, &'a ArgMatches) {
    match m.subcommand() {
        Some((name, sub)) => {
            let Some(sub_cmd) = cmd.find_subcommand(name) else {
                return (cmd, m);
            };
            match sub.subcommand() {
                Some((inner, inner_m)) => match sub_cmd.find_subcommand(inner) {
                    Some(inner_cmd) => (inner_cmd, inner_m),
                    None => (sub_cmd, sub),
                },
                None => (sub_cmd, sub),
            }
        }
        None => (cmd, m),
    }
}

/// Adds `value` as what the flag would have been given.
fn push(out: &mut Vec<OsString>, key: &str, arg: &Arg, value: &toml::Value) -> anyhow::Result<()> {
    let flag = |v: &str| OsString::from(format!("--{key}={v}"));
    match (arg.get_action(), value) {
        (ArgAction::SetTrue, toml::Value::Boolean(true)) => out.push(format!("--{key}").into()),
        (ArgAction::SetTrue, toml::Value::Boolean(false)) => {}
        (ArgAction::SetTrue, _) => bail!("expected true or false"),
        (ArgAction::Append, toml::Value::Array(items)) => {
            for item in items {
                out.push(flag(&scalar(item)?));
            }
        }
        (_, toml::Value::Array(_)) => bail!("takes one value, not a list"),
        (_, v) => out.push(flag(&scalar(v)?)),
    }
    Ok(())
}

fn scalar(v: &toml::Value) -> anyhow::Result<String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => bail!("expected a string, number or boolean"),
    }
}

/// The effective configuration as a file `--config` would take, one line per
/// serve flag, with where each value came from, secrets masked.
pub fn print(cmd: &Command, argv: Vec<OsString>, from_file: &BTreeSet<String>) -> anyhow::Result<String> {
    let matches = match cmd.clone().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    let (serve, m) = serve_matches(cmd, &matches);
    let mut out = String::from("# tafel: effective configuration (flag > env > file > default)\n");
    for arg in serve.get_arguments() {
        let Some(key) = arg.get_long() else { continue };
        // Azurite's flags (`azurite.rs`) are aliases for a command line, not settings.
        if NOT_IN_FILE.contains(&key) || arg.is_hide_set() {
            continue;
        }
        let id = arg.get_id().as_str();
        let source = match m.value_source(id) {
            _ if from_file.contains(key) => "file",
            Some(ValueSource::CommandLine) => "flag",
            Some(ValueSource::EnvVariable) => "env",
            _ => "default",
        };
        let line = match arg.get_action() {
            ArgAction::SetTrue => format!("{key} = {}", m.get_flag(id)),
            ArgAction::Append => {
                let values: Vec<String> = raw_values(m, id).iter().map(|v| quote(&mask(key, v))).collect();
                format!("{key} = [{}]", values.join(", "))
            }
            _ => match raw_values(m, id).first() {
                Some(v) => format!("{key} = {}", render(&mask(key, v))),
                None => format!("# {key} is not set"),
            },
        };
        out.push_str(&format!("{line:<48} # {source}\n"));
    }
    let config = m.try_get_one::<PathBuf>("config").ok().flatten();
    out.push_str(&crate::table_config::render(&crate::table_config::read(
        config.map(PathBuf::as_path),
    )?));
    Ok(out)
}

fn raw_values(m: &ArgMatches, id: &str) -> Vec<String> {
    m.get_raw(id)
        .map(|vs| vs.map(|v| v.to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// A number as a TOML number, anything else as a string.
fn render(v: &str) -> String {
    if !v.is_empty() && v.parse::<i64>().is_ok() {
        v.to_owned()
    } else {
        quote(v)
    }
}

fn quote(v: &str) -> String {
    toml::Value::String(v.to_owned()).to_string()
}

const MASK: &str = "********";

/// `key`'s value with its secret part replaced: the admin token, account keys,
/// a database password.
fn mask(key: &str, v: &str) -> String {
    match key {
        "admin-token" | "pwd" => MASK.to_owned(),
        // NAME:KEY[:KEY2]
        "account" => match v.split_once(':') {
            Some((name, _)) => format!("{name}:{MASK}"),
            None => v.to_owned(),
        },
        "postgres-url" => mask_password(v),
        _ => v.to_owned(),
    }
}

/// A URL's `user:password@` or a conninfo's `password=…`, masked.
fn mask_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                return format!("{scheme}://{}:{MASK}{}", &rest[..colon], &rest[at..]);
            }
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        if query.is_empty() {
            return url.to_owned();
        }
        let query: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("password", _)) => format!("password={MASK}"),
                _ => p.to_owned(),
            })
            .collect();
        return format!("{base}?{}", query.join("&"));
    }
    url.split_whitespace()
        .map(|p| match p.split_once('=') {
            Some(("password", _)) => format!("password={MASK}"),
            _ => p.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_in_urls_and_conninfo() {
        assert_eq!(
            mask_password("postgresql://tafel:s3cret@db:5432/tafel"),
            "postgresql://tafel:********@db:5432/tafel"
        );
        assert_eq!(
            mask_password("postgresql://tafel@db/tafel"),
            "postgresql://tafel@db/tafel"
        );
        assert_eq!(
            mask_password("postgresql://db/tafel?user=a&password=s3cret"),
            "postgresql://db/tafel?user=a&password=********"
        );
        assert_eq!(
            mask_password("host=db password=s3cret dbname=t"),
            "host=db password=******** dbname=t"
        );
        // The TLS settings are paths, shown as given; the password is still masked.
        assert_eq!(
            mask_password("postgresql://tafel:s3cret@db/tafel?sslmode=verify-full&sslrootcert=/ca.pem"),
            "postgresql://tafel:********@db/tafel?sslmode=verify-full&sslrootcert=/ca.pem"
        );
        assert_eq!(
            mask_password("postgresql://db/tafel?sslmode=require&password=s3cret&sslkey=/k.pem"),
            "postgresql://db/tafel?sslmode=require&password=********&sslkey=/k.pem"
        );
        assert_eq!(mask("postgres-sslkey", "/etc/tafel/k.pem"), "/etc/tafel/k.pem");
        assert_eq!(mask("account", "acct:a2V5:a2V5Mg=="), "acct:********");
    }
}
