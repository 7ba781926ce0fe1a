//! The data-model rules of the Table service, each with Azure's error code.

use crate::error::{Error, ErrorCode, Result};
use crate::model::{Entity, Value};

pub(crate) const MAX_CUSTOM_PROPERTIES: usize = 252;
pub(crate) const MAX_PROPERTY_NAME_CHARS: usize = 255;
/// Keys are at most 1 KiB as UTF-16.
pub(crate) const MAX_KEY_UTF16_UNITS: usize = 512;
/// Strings must stay under 64 KiB as UTF-16.
pub(crate) const MAX_STRING_UTF16_UNITS: usize = 32_767;
pub(crate) const MAX_BINARY_BYTES: usize = 65_535;
pub(crate) const MAX_ENTITY_BYTES: usize = 1 << 20;

/// `^[A-Za-z][A-Za-z0-9]{2,62}$`, and not the reserved name `tables`.
pub fn table_name(name: &str) -> Result<()> {
    let b = name.as_bytes();
    let chars_ok = b.first().is_some_and(u8::is_ascii_alphabetic) && b.iter().all(u8::is_ascii_alphanumeric);
    if !chars_ok || name.eq_ignore_ascii_case("tables") {
        return Err(Error::with_message(
            ErrorCode::InvalidResourceName,
            "The specifed resource name contains invalid characters.",
        ));
    }
    if !(3..=63).contains(&b.len()) {
        return Err(Error::with_message(
            ErrorCode::OutOfRangeInput,
            "The specified resource name length is not within the permissible limits.",
        ));
    }
    Ok(())
}

/// PartitionKey / RowKey: at most 1 KiB, no `/ \ # ?` and no control characters.
pub fn key(value: &str, which: &str) -> Result<()> {
    if utf16_len(value) > MAX_KEY_UTF16_UNITS {
        return Err(Error::with_message(
            ErrorCode::KeyValueTooLarge,
            format!("The {which} exceeds the maximum allowed size (1KB)."),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|&c| matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
    {
        return Err(Error::invalid_input(format!(
            "The {which} contains an invalid character U+{:04X}.",
            c as u32
        )));
    }
    Ok(())
}

/// A custom property name: an identifier (letter or `_`, then letters, digits,
/// `_`) of at most 255 characters.
pub(crate) fn property_name(name: &str) -> Result<()> {
    if name.chars().count() > MAX_PROPERTY_NAME_CHARS {
        return Err(Error::new(ErrorCode::PropertyNameTooLong));
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_alphanumeric() || c == '_') {
        return Err(Error::with_message(
            ErrorCode::PropertyNameInvalid,
            format!("The property name '{name}' is invalid."),
        ));
    }
    Ok(())
}

pub fn value(v: &Value) -> Result<()> {
    match v {
        Value::String(s) if s.len() > MAX_STRING_UTF16_UNITS && utf16_len(s) > MAX_STRING_UTF16_UNITS => {
            Err(Error::new(ErrorCode::PropertyValueTooLarge))
        }
        Value::Binary(b) if b.len() > MAX_BINARY_BYTES => Err(Error::new(ErrorCode::PropertyValueTooLarge)),
        Value::DateTime(d) if !d.in_azure_range() => Err(Error::with_message(
            ErrorCode::OutOfRangeInput,
            "The DateTime value is outside the supported range 1601-01-01 to 9999-12-31.",
        )),
        _ => Ok(()),
    }
}

/// The most an entity may hold, in Azure's measure ([`azure_size`]): Table Storage's
/// 1 MiB, or Cosmos DB for Table's 2 MB (tafel-protocol's `cosmos` chooses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityLimit {
    pub bytes: usize,
    /// The limit as the refusal names it ("1MB").
    pub name: &'static str,
}

impl EntityLimit {
    pub const STORAGE: EntityLimit = EntityLimit {
        bytes: MAX_ENTITY_BYTES,
        name: "1MB",
    };
}

impl Default for EntityLimit {
    fn default() -> Self {
        EntityLimit::STORAGE
    }
}

/// Every rule for an entity about to be written, in Azure's order: an entity over
/// the size limit is `EntityTooLarge` even when its keys or some of its values are
/// also wrong (errors.md §3).
pub fn entity(e: &Entity, limit: EntityLimit) -> Result<()> {
    entity_size(e, limit)?;
    key(&e.partition_key, "PartitionKey")?;
    key(&e.row_key, "RowKey")?;
    for p in &e.properties {
        property_name(&p.name)?;
        value(&p.value)?;
    }
    property_count(e)
}

/// The whole-entity limits: property count and size.
pub(crate) fn entity_limits(e: &Entity, limit: EntityLimit) -> Result<()> {
    property_count(e)?;
    entity_size(e, limit)
}

fn property_count(e: &Entity) -> Result<()> {
    if e.properties.len() > MAX_CUSTOM_PROPERTIES {
        return Err(Error::new(ErrorCode::TooManyProperties));
    }
    Ok(())
}

fn entity_size(e: &Entity, limit: EntityLimit) -> Result<()> {
    if azure_size(e) > limit.bytes {
        return Err(Error::with_message(
            ErrorCode::EntityTooLarge,
            format!("The entity is larger than the maximum allowed size ({}).", limit.name),
        ));
    }
    Ok(())
}

/// Length of `s` in UTF-16 code units, which is how Azure measures keys and
/// strings: one per character, two for those outside the BMP (4-byte UTF-8).
/// Counted per byte without decoding, which the compiler vectorizes; every
/// written entity is measured.
pub(crate) fn utf16_len(s: &str) -> usize {
    // Nearly every string is ASCII, which `is_ascii` checks a word at a time.
    if s.is_ascii() {
        return s.len();
    }
    s.bytes()
        .map(|b| usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0))
        .sum()
}

/// Azure's entity-size formula (limits.md): 4 bytes plus, per property, 8 bytes,
/// the name as UTF-16 and the value; the system properties count too.
pub(crate) fn azure_size(e: &Entity) -> usize {
    let prop = |name_units: usize, value: usize| 8 + 2 * name_units + value;
    let key_size = |k: &str| 4 + 2 * utf16_len(k);
    4 + prop(12, key_size(&e.partition_key))
        + prop(6, key_size(&e.row_key))
        + prop(9, 8)
        + e.properties
            .iter()
            .map(|p| prop(utf16_len(&p.name), p.value.azure_size()))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DateTime;

    #[test]
    fn table_names() {
        assert!(table_name("abc").is_ok());
        assert!(table_name(&"a".repeat(63)).is_ok());
        assert_eq!(table_name("ab").map_err(|e| e.code), Err(ErrorCode::OutOfRangeInput));
        assert_eq!(
            table_name(&"a".repeat(64)).map_err(|e| e.code),
            Err(ErrorCode::OutOfRangeInput)
        );
        assert_eq!(
            table_name("1abc").map_err(|e| e.code),
            Err(ErrorCode::InvalidResourceName)
        );
        assert_eq!(
            table_name("ab-c").map_err(|e| e.code),
            Err(ErrorCode::InvalidResourceName)
        );
        assert_eq!(
            table_name("Tables").map_err(|e| e.code),
            Err(ErrorCode::InvalidResourceName)
        );
    }

    #[test]
    fn keys() {
        assert!(key("", "RowKey").is_ok());
        assert!(key(&"é".repeat(512), "RowKey").is_ok());
        assert_eq!(
            key(&"a".repeat(513), "RowKey").map_err(|e| e.code),
            Err(ErrorCode::KeyValueTooLarge)
        );
        for bad in ["a/b", "a\\b", "a#b", "a?b", "\u{0}", "\u{1f}", "\u{7f}", "\u{9f}"] {
            assert_eq!(
                key(bad, "RowKey").map_err(|e| e.code),
                Err(ErrorCode::InvalidInput),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn property_names() {
        assert!(property_name("_a1").is_ok());
        assert!(property_name("Ünïcode").is_ok());
        assert!(property_name(&"a".repeat(255)).is_ok());
        assert_eq!(
            property_name(&"a".repeat(256)).map_err(|e| e.code),
            Err(ErrorCode::PropertyNameTooLong)
        );
        for bad in ["", "1a", "a-b", "a b", "a.b", "a@b"] {
            assert_eq!(
                property_name(bad).map_err(|e| e.code),
                Err(ErrorCode::PropertyNameInvalid),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn value_sizes() {
        assert!(value(&Value::String("a".repeat(32_000))).is_ok());
        assert!(value(&Value::String("a".repeat(32_768))).is_err());
        assert!(value(&Value::Binary(vec![0; 64_000])).is_ok());
        assert!(value(&Value::Binary(vec![0; 65_536])).is_err());
        assert!(value(&Value::DateTime(DateTime(DateTime::MIN.0 - 1))).is_err());
    }

    #[test]
    fn utf16_len_matches_encode_utf16() {
        for s in [
            "",
            "abc",
            "ü",
            "日本語",
            "😀",
            "a😀b\u{10FFFF}",
            "\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}",
        ] {
            assert_eq!(utf16_len(s), s.encode_utf16().count(), "{s:?}");
        }
    }
}
