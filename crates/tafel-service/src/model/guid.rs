//! `Edm.Guid`, kept as its 16 bytes in textual order so that byte order equals the
//! order of the lowercase canonical string.

use std::fmt;

use uuid::fmt::Hyphenated;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Guid(pub [u8; 16]);

impl Guid {
    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (any case, optionally in braces).
    /// Only the hyphenated form: `Uuid::parse_str` would also take 32 bare hex
    /// digits and `urn:uuid:`, which an `Edm.Guid` is not.
    pub fn parse(s: &str) -> Option<Guid> {
        let s = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or(s);
        let uuid = s.parse::<Hyphenated>().ok()?.into_uuid();
        Some(Guid(uuid.into_bytes()))
    }

    /// The canonical lowercase form, 36 ASCII bytes, written without `core::fmt`
    /// (this runs for every Guid of every response).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        let mut buf = [0u8; Hyphenated::LENGTH];
        out.extend_from_slice(Uuid::from_bytes(self.0).hyphenated().encode_lower(&mut buf).as_bytes());
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `Hyphenated`'s Display is the lowercase canonical form.
        fmt::Display::fmt(&Uuid::from_bytes(self.0).hyphenated(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_canonical_lowercase() {
        let g = Guid::parse("3F2504E0-4F89-11D3-9A0C-0305E82C3301").map(|g| g.to_string());
        assert_eq!(g.as_deref(), Some("3f2504e0-4f89-11d3-9a0c-0305e82c3301"));
        assert!(Guid::parse("3f2504e04f8911d39a0c0305e82c3301").is_none());
        assert!(Guid::parse("3f2504e0-4f89-11d3-9a0c-0305e82c330g").is_none());
        assert!(Guid::parse("urn:uuid:3f2504e0-4f89-11d3-9a0c-0305e82c3301").is_none());
        assert!(Guid::parse("{3f2504e0-4f89-11d3-9a0c-0305e82c3301").is_none());
        let braced = Guid::parse("{3F2504E0-4F89-11D3-9A0C-0305E82C3301}").map(|g| g.to_string());
        assert_eq!(braced.as_deref(), Some("3f2504e0-4f89-11d3-9a0c-0305e82c3301"));
        let mut out = Vec::new();
        Guid([0xab; 16]).write_canonical(&mut out);
        assert_eq!(out, b"abababab-abab-abab-abab-abababababab");
    }
}
