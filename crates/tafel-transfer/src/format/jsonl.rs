//! JSONL: one entity per line in the Table service's own JSON, copied as it
//! came (values never parsed), and read back the same way.

use std::borrow::Cow;
use std::io::BufRead;

use serde_json::value::RawValue;

use super::Row;
use crate::read::Parsed;
use crate::TransferError;

/// A query page's entities as the service sent them (full metadata), each cut to
/// the export form and appended to `out` as a line: no `odata.*` members, keys
/// first. Values are copied as they came, never parsed into numbers or strings,
/// so nothing is lost or rewritten and a page costs one pass. Returns how many,
/// and the last one's PartitionKey.
pub fn export_page(body: &[u8], out: &mut Vec<u8>) -> Result<(usize, Option<String>), TransferError> {
    let page = RawPage::of(body)?;
    for entity in &page.value {
        write_entity(&entity.0, out);
        out.push(b'\n');
    }
    Ok((page.value.len(), page.last_partition_key()))
}

/// A member name and its colon. A name borrowed from the page had no escapes in it
/// (serde_json borrows only those) and goes back as it came.
#[allow(clippy::ptr_arg)] // which variant it is is the point
fn push_name(out: &mut Vec<u8>, name: &Cow<'_, str>) {
    match name {
        Cow::Borrowed(n) => {
            out.push(b'"');
            out.extend_from_slice(n.as_bytes());
            out.push(b'"');
        }
        // Writing a str into a Vec cannot fail.
        Cow::Owned(n) => drop(serde_json::to_writer(&mut *out, n)),
    }
    out.push(b':');
}

const KEYS_FIRST: [&str; 4] = ["PartitionKey", "RowKey", "Timestamp@odata.type", "Timestamp"];

fn write_entity(members: &[(Cow<'_, str>, &RawValue)], out: &mut Vec<u8>) {
    out.push(b'{');
    let mut first = true;
    let mut put = |k: &Cow<'_, str>, v: &RawValue, out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
        push_name(out, k);
        out.extend_from_slice(v.get().as_bytes());
    };
    for key in KEYS_FIRST {
        if let Some((k, v)) = members.iter().find(|(k, _)| k == key) {
            put(k, v, out);
        }
    }
    for (k, v) in members {
        if !KEYS_FIRST.contains(&k.as_ref()) && !k.starts_with("odata.") {
            put(k, v, out);
        }
    }
    out.push(b'}');
}

#[derive(serde::Deserialize)]
struct RawPage<'a> {
    #[serde(borrow)]
    value: Vec<RawEntity<'a>>,
}

/// An entity's members in the order sent, values unparsed.
struct RawEntity<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawEntity<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = RawEntity<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an entity (a JSON object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some(key) = map.next_key::<Key<'a>>()? {
                    members.push((key.0, map.next_value::<&'a RawValue>()?));
                }
                Ok(RawEntity(members))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

impl<'a> RawPage<'a> {
    fn of(body: &'a [u8]) -> Result<Self, TransferError> {
        let bad = |e: &dyn std::fmt::Display| {
            TransferError::Protocol(format!("a query answered with a page that is not JSON: {e}"))
        };
        // Checked as UTF-8 once as a whole: parsing a `str` then skips the check of
        // each string, a tenth of the export's time.
        let text = std::str::from_utf8(body).map_err(|e| bad(&e))?;
        serde_json::from_str(text).map_err(|e| bad(&e))
    }

    fn last_partition_key(&self) -> Option<String> {
        let last = self.value.last()?;
        let (_, v) = last.0.iter().find(|(k, _)| k == "PartitionKey")?;
        serde_json::from_str(v.get()).ok()
    }
}

/// A member name, borrowed from the page unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Name<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(Name(std::marker::PhantomData))
    }
}

/// A JSONL line as a row to write.
pub fn import_line(line: &str) -> Result<Row, String> {
    let entity: RawEntity<'_> = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    import_raw(&entity.0)
}

/// A query page's entities (full metadata, as [`export_page`] reads them) as rows
/// to write, each or why not.
pub fn import_page(body: &[u8]) -> Result<Parsed<Vec<Result<Row, String>>>, TransferError> {
    let page = RawPage::of(body)?;
    Ok(Parsed {
        rows: page.value.len(),
        last_partition_key: page.last_partition_key(),
        page: page.value.iter().map(|e| import_raw(&e.0)).collect(),
    })
}

/// As [`import_value`], from an entity's members as sent: values are copied, not
/// parsed, so a row costs one pass over its line and nothing is rewritten.
fn import_raw(members: &[(Cow<'_, str>, &RawValue)]) -> Result<Row, String> {
    let key = |name: &str| match members.iter().rev().find(|(k, _)| k == name) {
        Some((_, v)) => serde_json::from_str::<String>(v.get()).map_err(|_| format!("{name} must be a string")),
        None => Err(format!("{name} must be a string")),
    };
    let (partition_key, row_key) = (key("PartitionKey")?, key("RowKey")?);
    let mut body = Vec::with_capacity(members.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum());
    body.push(b'{');
    for (k, v) in members {
        if k.starts_with("odata.") || k == "Timestamp" || k == "Timestamp@odata.type" {
            continue;
        }
        if body.len() > 1 {
            body.push(b',');
        }
        push_name(&mut body, k);
        body.extend_from_slice(v.get().as_bytes());
    }
    body.push(b'}');
    Ok(Row {
        partition_key,
        row_key,
        // Member names written by serde_json and values copied from a str: UTF-8.
        body: String::from_utf8(body).map_err(|e| e.to_string())?,
    })
}

/// A JSONL reader's lines with their numbers, skipping blank ones.
pub fn read_jsonl(input: impl BufRead) -> impl Iterator<Item = (u64, Result<Row, String>)> {
    input.lines().enumerate().filter_map(|(i, line)| {
        let n = i as u64 + 1;
        match line {
            Ok(l) if l.trim().is_empty() => None,
            Ok(l) => Some((n, import_line(&l))),
            Err(e) => Some((n, Err(format!("reading: {e}")))),
        }
    })
}
