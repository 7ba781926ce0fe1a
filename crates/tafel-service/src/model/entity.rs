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
    let iso = ts.to_iso();
    let mut s = String::with_capacity(52);
    s.push_str("W/\"datetime'");
    for c in iso.chars() {
        if c == ':' {
            s.push_str("%3A");
        } else {
            s.push(c);
        }
    }
    s.push_str("'\"");
    s
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
    }
}
