//! The TLS keys libpq takes (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`)
//! taken out of a URL or a conninfo string, before tokio-postgres, which
//! rejects the ones it does not know, parses the rest.

use super::{SslOptions, TlsError};

const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// `url` without the TLS keys, and their values.
pub(super) fn split(url: &str) -> Result<(String, SslOptions), TlsError> {
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
    use std::path::Path;
    use std::str::FromStr;

    use tokio_postgres::Config;

    use super::*;
    use crate::postgres::tls::SslMode;

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
}
