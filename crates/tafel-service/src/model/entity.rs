//! Entities: two key strings, the server-managed Timestamp and custom properties.

use super::{DateTime, Value};

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

/// `W/"datetime'<Timestamp with ':' percent-encoded>'"`.
pub fn etag_for(ts: DateTime) -> String {
    // All bytes of etag_bytes are ASCII: the checked conversion is a fast scan
    // where `from_utf8_lossy` walked chunks.
    let bytes = etag_bytes(ts);
    std::str::from_utf8(&bytes).map_or_else(|_| String::from_utf8_lossy(&bytes).into_owned(), str::to_owned)
}

/// [`etag_for`] as ASCII bytes, for encoders that copy it without a String.
pub fn etag_bytes(ts: DateTime) -> [u8; ETAG_LEN] {
    etag_of_iso(&ts.iso_bytes())
}

/// The ETag of a timestamp whose ISO form (`DateTime::iso_bytes`) is at hand: query
/// encoding writes both for every entity, and formats the time once.
pub fn etag_of_iso(iso: &[u8; 28]) -> [u8; ETAG_LEN] {
    // The ISO form has exactly two ':' (bytes 13 and 16), each written as `%3A`.
    let mut out = [0u8; ETAG_LEN];
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
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    out
}

/// `W/"datetime'` + 28 ISO bytes with two ':' grown to `%3A` + `'"`.
pub(crate) const ETAG_LEN: usize = 12 + 28 + 4 + 2;

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
            assert_eq!(etag_for(DateTime(t)).len(), ETAG_LEN);
        }
    }
}
