//! Resource paths below the account root (README §1): the table collection, one
//! table, an entity set, one entity, `$batch` and the service root.

use std::borrow::Cow;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tafel_service::{Error, ErrorCode, Result};

/// A resource, its names and keys borrowed from the path when it had nothing to
/// unescape (no `%XX`, no doubled quote in a key), so a request's path is parsed
/// once and copies nothing on the common paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource<'a> {
    /// `/` (service properties and stats).
    Service,
    /// `/Tables` or `/Tables()`.
    Tables,
    /// `/Tables('name')`.
    Table(Cow<'a, str>),
    /// `/name` or `/name()`.
    EntitySet(Cow<'a, str>),
    /// `/name/$count` or `/name()/$count`: how many entities (OData's count path).
    Count(Cow<'a, str>),
    /// `/name(PartitionKey='p',RowKey='r')`.
    Entity {
        table: Cow<'a, str>,
        partition_key: Cow<'a, str>,
        row_key: Cow<'a, str>,
    },
    /// `/$batch`.
    Batch,
    /// `/$changes`: the account's change feed (docs/change-feed.md).
    Changes,
    /// `/name/Tables` or `/name/$batch`: an account URL that ends in a table name
    /// (a common mistake) with the SDK's path after it. Azure reads `name` as the
    /// table, so a POST there is an insert into it.
    BelowTable(Cow<'a, str>),
    /// `/name/Tables('x')`, the same mistake on a table's own path (Delete Table):
    /// Azure reads `name` as the table, so 404 when it does not exist, else one key
    /// where a table's entities have two.
    KeyedBelowTable(Cow<'a, str>),
}

impl Resource<'_> {
    /// The same resource owning its names and keys.
    pub fn into_owned(self) -> Resource<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Resource::Service => Resource::Service,
            Resource::Tables => Resource::Tables,
            Resource::Table(t) => Resource::Table(own(t)),
            Resource::EntitySet(t) => Resource::EntitySet(own(t)),
            Resource::Count(t) => Resource::Count(own(t)),
            Resource::Entity {
                table,
                partition_key,
                row_key,
            } => Resource::Entity {
                table: own(table),
                partition_key: own(partition_key),
                row_key: own(row_key),
            },
            Resource::Batch => Resource::Batch,
            Resource::Changes => Resource::Changes,
            Resource::BelowTable(t) => Resource::BelowTable(own(t)),
            Resource::KeyedBelowTable(t) => Resource::KeyedBelowTable(own(t)),
        }
    }
}

/// The kind of resource a path names, without its names and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Service,
    Tables,
    Table,
    EntitySet,
    /// `/name/$count`.
    Count,
    Entity,
    Batch,
    /// `/$changes`, the change feed (ours, not Azure's).
    Changes,
    /// `/name/Tables`, `/name/$batch`: Azure inserts into `name`.
    BelowTable,
    /// `/name/Tables('x')`.
    KeyedBelowTable,
}

impl From<&Resource<'_>> for Shape {
    fn from(r: &Resource<'_>) -> Self {
        match r {
            Resource::Service => Shape::Service,
            Resource::Tables => Shape::Tables,
            Resource::Table(_) => Shape::Table,
            Resource::EntitySet(_) => Shape::EntitySet,
            Resource::Count(_) => Shape::Count,
            Resource::Entity { .. } => Shape::Entity,
            Resource::Batch => Shape::Batch,
            Resource::Changes => Shape::Changes,
            Resource::BelowTable(_) => Shape::BelowTable,
            Resource::KeyedBelowTable(_) => Shape::KeyedBelowTable,
        }
    }
}

/// A path that names no resource, with the shape it has if it has one: a
/// malformed entity path (bad keys) is still an entity operation for metrics.
#[derive(Debug, Clone)]
pub struct Invalid {
    pub shape: Option<Shape>,
    /// Boxed: a route keeps it beside the request's other state.
    pub error: Box<Error>,
}

fn invalid_uri() -> Error {
    Error::with_message(
        ErrorCode::InvalidUri,
        "The requested URI does not represent any resource on the server.",
    )
}

fn shapeless(error: Error) -> Invalid {
    Invalid {
        shape: None,
        error: Box::new(error),
    }
}

/// Parses a path relative to the account root, still percent-encoded as sent.
pub fn parse(raw_path: &str) -> Result<Resource<'_>> {
    parse_shaped(raw_path).map_err(|i| *i.error)
}

/// [`parse`], telling the shape of a path whose names or keys are invalid.
pub fn parse_shaped(raw_path: &str) -> std::result::Result<Resource<'_>, Invalid> {
    // Most paths have no escape at all: a memchr is cheaper than the decoder's scan.
    if memchr::memchr(b'%', raw_path.as_bytes()).is_none() {
        return parse_decoded(raw_path, Slashes::Separate);
    }
    // An SDK escapes every '/' of a table name (`a//` → `a%2F%2F`): that name is
    // one segment, which Azure refuses for its characters (InvalidResourceName),
    // never a path below a table.
    let name_end = memchr::memchr(b'(', raw_path.as_bytes()).unwrap_or(raw_path.len());
    let slashes = if contains_escaped_slash(&raw_path[..name_end]) {
        Slashes::InName
    } else {
        Slashes::Separate
    };
    match percent_decode_str(raw_path).decode_utf8() {
        Ok(Cow::Borrowed(path)) => parse_decoded(path, slashes),
        Ok(Cow::Owned(path)) => parse_decoded(&path, slashes).map(Resource::into_owned),
        Err(_) => Err(shapeless(invalid_uri())),
    }
}

/// What a '/' after the first segment of a decoded path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slashes {
    /// A separator (as sent): `/t/Tables` is a path below table `t`.
    Separate,
    /// Part of the table's name: the name was sent with its '/' escaped.
    InName,
}

fn contains_escaped_slash(raw: &str) -> bool {
    raw.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'2' && w[2].eq_ignore_ascii_case(&b'f'))
}

fn parse_decoded(decoded: &str, slashes: Slashes) -> std::result::Result<Resource<'_>, Invalid> {
    let path = decoded.strip_prefix('/').unwrap_or(decoded);
    if path.is_empty() {
        return Ok(Resource::Service);
    }
    // A trailing slash is tolerated here as it is after a table or entity set name.
    if path == "$batch" || path == "$batch/" {
        return Ok(Resource::Batch);
    }
    if path == "$changes" || path == "$changes/" {
        return Ok(Resource::Changes);
    }
    if let Some(set) = path.strip_suffix("/$count").filter(|_| slashes == Slashes::Separate) {
        return match parse_decoded(set, slashes) {
            Ok(Resource::EntitySet(table)) => Ok(Resource::Count(table)),
            Ok(_) => Err(shapeless(invalid_uri())),
            Err(e) => Err(e),
        };
    }
    let (name, args) = match path.find('(') {
        Some(i) => {
            let rest = path[i + 1..]
                .strip_suffix(')')
                .ok_or_else(|| shapeless(invalid_uri()))?;
            (&path[..i], Some(rest))
        }
        None if slashes == Slashes::InName => (path, None),
        None => (path.strip_suffix('/').unwrap_or(path), None),
    };
    if let Some((table, below)) = name.split_once('/').filter(|_| slashes == Slashes::Separate) {
        return below_table(table, below, args).map_err(shapeless);
    }
    if name.is_empty() {
        return Err(shapeless(invalid_uri()));
    }
    let shaped = |shape| {
        move |error| Invalid {
            shape: Some(shape),
            error: Box::new(error),
        }
    };
    if name == "Tables" {
        return match args.map(str::trim) {
            None | Some("") => Ok(Resource::Tables),
            Some(a) => Ok(Resource::Table(parse_string_literal(a).map_err(shaped(Shape::Table))?)),
        };
    }
    match args.map(str::trim) {
        None | Some("") => Ok(Resource::EntitySet(Cow::Borrowed(name))),
        Some(a) => {
            let (partition_key, row_key) = parse_keys(a).map_err(shaped(Shape::Entity))?;
            Ok(Resource::Entity {
                table: Cow::Borrowed(name),
                partition_key,
                row_key,
            })
        }
    }
}

/// A path below a table name, as an SDK given an account URL that ends in one
/// sends it: `/t/Tables`, `/t/$batch`, `/t/Tables('x')`. Answered as Azure does, so
/// the SDKs' "check your account URL" hint, keyed to these answers, shows.
fn below_table<'a>(table: &'a str, below: &str, args: Option<&str>) -> Result<Resource<'a>> {
    if table.is_empty() || below.contains('/') {
        return Err(invalid_uri());
    }
    match (below, args.map(str::trim)) {
        ("Tables" | "$batch", None | Some("")) => Ok(Resource::BelowTable(Cow::Borrowed(table))),
        // `Tables('x')` is one key where a table's entities have two: the handler
        // answers so once it knows the table exists.
        ("Tables", Some(_)) => Ok(Resource::KeyedBelowTable(Cow::Borrowed(table))),
        _ => Err(invalid_uri()),
    }
}

/// `'text'` with `''` standing for one quote.
fn parse_string_literal(s: &str) -> Result<Cow<'_, str>> {
    let (value, rest) = take_literal(s)?;
    if !rest.trim().is_empty() {
        return Err(invalid_uri());
    }
    Ok(value)
}

/// Reads a quoted literal at the start of `s`; returns it (borrowed unless it
/// holds a doubled quote) and what follows.
fn take_literal(s: &str) -> Result<(Cow<'_, str>, &str)> {
    let s = s.trim_start();
    let body = s.strip_prefix('\'').ok_or_else(invalid_uri)?;
    let mut doubled = false;
    let mut quotes = memchr::memchr_iter(b'\'', body.as_bytes()).peekable();
    while let Some(i) = quotes.next() {
        if quotes.peek() == Some(&(i + 1)) {
            quotes.next();
            doubled = true;
            continue;
        }
        let text = &body[..i];
        let value = match doubled {
            true => Cow::Owned(text.replace("''", "'")),
            false => Cow::Borrowed(text),
        };
        return Ok((value, &body[i + 1..]));
    }
    Err(invalid_uri())
}

/// `PartitionKey='p',RowKey='r'` (either order, whitespace tolerated).
fn parse_keys(s: &str) -> Result<(Cow<'_, str>, Cow<'_, str>)> {
    let mut pk = None;
    let mut rk = None;
    let mut rest = s;
    for i in 0..2 {
        let (name, after) = rest.split_once('=').ok_or_else(invalid_uri)?;
        let (value, after) = take_literal(after)?;
        match name.trim() {
            "PartitionKey" if pk.is_none() => pk = Some(value),
            "RowKey" if rk.is_none() => rk = Some(value),
            _ => return Err(invalid_uri()),
        }
        let after = after.trim_start();
        rest = if i == 0 {
            after.strip_prefix(',').ok_or_else(invalid_uri)?
        } else {
            after
        };
    }
    if !rest.trim().is_empty() {
        return Err(invalid_uri());
    }
    match (pk, rk) {
        (Some(p), Some(r)) => Ok((p, r)),
        _ => Err(invalid_uri()),
    }
}

/// Characters kept raw in key literals of `odata.id` / `Location` URLs.
const KEY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'\'');

/// `{base_url}/table(PartitionKey='p',RowKey='r')`, an entity's `Location`, with
/// keys OData-quoted and percent-encoded; built in one buffer.
pub fn entity_url(base_url: &str, table: &str, pk: &str, rk: &str) -> String {
    let mut out = Vec::with_capacity(base_url.len() + table.len() + pk.len() + rk.len() + 40);
    out.extend_from_slice(base_url.as_bytes());
    out.push(b'/');
    out.extend_from_slice(table.as_bytes());
    push_entity_keys(&mut out, pk, rk);
    // The base URL and table name are UTF-8 and the key part ASCII, so this never
    // copies; the checked conversion is a fast scan where `from_utf8_lossy` walked chunks.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends `(PartitionKey='p',RowKey='r')`, the key part of [`entity_url`], as
/// ASCII that needs no escaping inside a JSON string.
pub(crate) fn push_entity_keys(out: &mut Vec<u8>, pk: &str, rk: &str) {
    out.extend_from_slice(b"(PartitionKey='");
    push_key_literal(out, pk);
    out.extend_from_slice(b"',RowKey='");
    push_key_literal(out, rk);
    out.extend_from_slice(b"')");
}

/// Appends `k` OData-quoted (`'` doubled) and percent-encoded, without building
/// Strings. `'` is kept raw by the encoding, so doubling it afterwards equals
/// doubling it before.
fn push_key_literal(out: &mut Vec<u8>, k: &str) {
    for chunk in utf8_percent_encode(k, KEY_ENCODE) {
        if !chunk.contains('\'') {
            out.extend_from_slice(chunk.as_bytes());
            continue;
        }
        for b in chunk.bytes() {
            match b {
                b'\'' => out.extend_from_slice(b"''"),
                b => out.push(b),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity<'a>(t: &'a str, p: &'a str, r: &'a str) -> Resource<'a> {
        Resource::Entity {
            table: t.into(),
            partition_key: p.into(),
            row_key: r.into(),
        }
    }

    #[test]
    fn paths() {
        assert_eq!(parse("/").ok(), Some(Resource::Service));
        assert_eq!(parse("").ok(), Some(Resource::Service));
        assert_eq!(parse("/Tables").ok(), Some(Resource::Tables));
        assert_eq!(parse("/Tables()").ok(), Some(Resource::Tables));
        assert_eq!(parse("/Tables('abc')").ok(), Some(Resource::Table("abc".into())));
        assert_eq!(parse("/Tables(%27abc%27)").ok(), Some(Resource::Table("abc".into())));
        assert_eq!(parse("/$batch").ok(), Some(Resource::Batch));
        assert_eq!(parse("/$batch/").ok(), Some(Resource::Batch));
        assert_eq!(parse("/mytable").ok(), Some(Resource::EntitySet("mytable".into())));
        assert_eq!(parse("/mytable()").ok(), Some(Resource::EntitySet("mytable".into())));
        assert_eq!(
            parse("/t(PartitionKey='a',RowKey='b')").ok(),
            Some(entity("t", "a", "b"))
        );
        assert_eq!(
            parse("/t(PartitionKey='a', RowKey='b')").ok(),
            Some(entity("t", "a", "b"))
        );
        assert_eq!(
            parse("/t(RowKey='b',PartitionKey='a')").ok(),
            Some(entity("t", "a", "b"))
        );
        assert_eq!(
            parse("/t(PartitionKey='O''Brien',RowKey='')").ok(),
            Some(entity("t", "O'Brien", ""))
        );
        assert_eq!(
            parse("/t(PartitionKey=%27a%20b%27,RowKey=%27(x,y)%27)").ok(),
            Some(entity("t", "a b", "(x,y)"))
        );
        assert_eq!(parse("/t/Tables").ok(), Some(Resource::BelowTable("t".into())));
        assert_eq!(parse("/t/$batch").ok(), Some(Resource::BelowTable("t".into())));
        let code = |p: &str| parse(p).err().map(|e| e.code);
        assert_eq!(
            parse("/t/Tables('t')").ok(),
            Some(Resource::KeyedBelowTable("t".into()))
        );
        assert_eq!(
            parse("/t/Tables('x')").ok(),
            Some(Resource::KeyedBelowTable("t".into()))
        );
        assert_eq!(code("/t/x"), Some(ErrorCode::InvalidUri));
        assert_eq!(code("/t/x/Tables"), Some(ErrorCode::InvalidUri));
        assert_eq!(code("/a//"), Some(ErrorCode::InvalidUri));
        assert_eq!(code("//Tables"), Some(ErrorCode::InvalidUri));
        // A name sent with its '/' escaped, as the SDKs send `a//`, is one segment.
        assert_eq!(parse("/a%2F%2F").ok(), Some(Resource::EntitySet("a//".into())));
        assert_eq!(parse("/a%2f%2f()").ok(), Some(Resource::EntitySet("a//".into())));
        assert_eq!(
            parse("/a%2F%2F(PartitionKey='p',RowKey='r')").ok(),
            Some(entity("a//", "p", "r"))
        );
        assert_eq!(
            parse("/a%2F%2F/Tables").ok(),
            Some(Resource::EntitySet("a///Tables".into()))
        );
        assert_eq!(
            parse("/t(PartitionKey='a%2Fb',RowKey='r')").ok(),
            Some(entity("t", "a/b", "r"))
        );
        assert!(parse("/t(PartitionKey='a')").is_err());
        assert!(parse("/t(PartitionKey='a',RowKey='b'").is_err());
        assert!(parse("/t(PartitionKey='a',RowKey='b',X='c')").is_err());
    }

    #[test]
    fn names_and_keys_are_borrowed_unless_they_had_to_be_unescaped() {
        let borrowed = |c: &Cow<'_, str>| matches!(c, Cow::Borrowed(_));
        let Ok(Resource::Entity {
            table,
            partition_key,
            row_key,
        }) = parse("/t(PartitionKey='a',RowKey='O''B')")
        else {
            panic!("not an entity");
        };
        assert!(borrowed(&table) && borrowed(&partition_key));
        assert_eq!((row_key.as_ref(), borrowed(&row_key)), ("O'B", false));
        assert_eq!(
            parse("/t(PartitionKey='''''',RowKey='')").ok(),
            Some(entity("t", "''", ""))
        );
        assert!(parse("/t(PartitionKey=''',RowKey='')").is_err());
        // A malformed entity path keeps its shape, for the operation it names.
        let invalid = parse_shaped("/t(PartitionKey='a')").err().map(|i| i.shape);
        assert_eq!(invalid, Some(Some(Shape::Entity)));
    }

    #[test]
    fn entity_paths_quote_and_encode() {
        assert_eq!(
            entity_url("http://h/a", "t", "O'B", "a b"),
            "http://h/a/t(PartitionKey='O''B',RowKey='a%20b')"
        );
    }

    #[test]
    fn entity_paths_quote_then_encode_each_key() {
        for k in [
            "",
            "plain",
            "O'B",
            "''",
            "a b/c?d#e",
            "ünï'code ✓ \u{1F600}",
            "\"q\"\\",
            "-_.~'%",
        ] {
            // The rule written the obvious way: double the quotes, then percent-encode.
            let quote = |k: &str| utf8_percent_encode(&k.replace('\'', "''"), KEY_ENCODE).to_string();
            let want = format!("b/t(PartitionKey='{}',RowKey='{}')", quote(k), quote(k));
            assert_eq!(entity_url("b", "t", k, k), want, "{k:?}");
        }
    }
}
