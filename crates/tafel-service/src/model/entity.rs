//! Entities: two key strings, the server-managed Timestamp and custom properties.

use super::{DateTime, Iso, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Property {
    pub name: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entity {
    pub partition_key: String,
    pub row_key: String,
    /// Set by the server on every write; `None` only before the first write.
    pub timestamp: Option<DateTime>,
    /// Custom properties in the order they were written. Never contains nulls or
    /// the system properties.
    pub properties: Vec<Property>,
}

impl Entity {
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Self {
        Entity {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            ..Default::default()
        }
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.properties.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    /// Sets a property, replacing any previous value of that name.
    pub fn set(&mut self, name: impl Into<String>, value: Value) {
        let name = name.into();
        match self.properties.iter_mut().find(|p| p.name == name) {
            Some(p) => p.value = value,
            None => self.properties.push(Property { name, value }),
        }
    }

    /// The weak ETag clients rebuild from the Timestamp, so it must be exactly this.
    pub fn etag(&self) -> Option<String> {
        self.timestamp.map(etag_for)
    }
}

/// `W/"datetime'<Timestamp with ':' percent-encoded>'"`, the Timestamp in the form
/// Azure writes it ([`DateTime::iso`]: trailing zeros of the fraction dropped).
pub fn etag_for(ts: DateTime) -> String {
    etag_bytes(ts).as_str().to_owned()
}

/// [`etag_for`] on the stack, for encoders that copy it without a String.
pub fn etag_bytes(ts: DateTime) -> Etag {
    etag_of_iso(&ts.iso())
}

/// The ETag of a timestamp whose ISO form (`DateTime::iso`) is at hand: query
/// encoding writes both for every entity, and formats the time once.
pub fn etag_of_iso(iso: &Iso) -> Etag {
    // The ISO form has exactly two ':' (bytes 13 and 16), each written as `%3A`.
    let iso = iso.as_bytes();
    let mut buf = [0u8; ETAG_MAX];
    let mut at = 0;
    for part in [
        &b"W/\"datetime'"[..],
        &iso[..13],
        b"%3A",
        &iso[14..16],
        b"%3A",
        &iso[17..],
        b"'\"",
    ] {
        buf[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    Etag { buf, len: at }
}

/// `W/"datetime'` + at most 28 ISO bytes with two ':' grown to `%3A` + `'"`.
const ETAG_MAX: usize = 12 + 28 + 4 + 2;

/// An entity's ETag as ASCII bytes on the stack ([`etag_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Etag {
    buf: [u8; ETAG_MAX],
    len: usize,
}

impl Etag {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn as_str(&self) -> &str {
        // All its bytes are ASCII (`DateTime::iso` and the literals above).
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_the_percent_encoded_timestamp() {
        let ts = DateTime::parse("2024-06-04T08:15:30.1234567Z");
        assert_eq!(
            ts.map(etag_for).as_deref(),
            Some("W/\"datetime'2024-06-04T08%3A15%3A30.1234567Z'\"")
        );
        for t in [i64::MIN, 0, i64::MAX] {
            assert!(etag_for(DateTime(t)).len() <= ETAG_MAX);
        }
    }

    #[test]
    fn etag_drops_the_timestamps_trailing_zeros_as_azure_does() {
        // Azure's answer to a JS SDK test (azure-sdk-for-js, recording_should_list_by_page.json).
        let ts = DateTime::parse("2022-02-01T20:52:36.5694050Z");
        assert_eq!(
            ts.map(etag_for).as_deref(),
            Some("W/\"datetime'2022-02-01T20%3A52%3A36.569405Z'\"")
        );
        let whole = DateTime::parse("2022-02-01T20:52:36Z");
        assert_eq!(
            whole.map(etag_for).as_deref(),
            Some("W/\"datetime'2022-02-01T20%3A52%3A36Z'\"")
        );
    }
}
