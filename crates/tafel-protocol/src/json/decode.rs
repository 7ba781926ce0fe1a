//! Request bodies to entities, with Azure's typing rules (json-format.md §1):
//! `@odata.type` annotations may come before or after their value; unannotated
//! strings are Edm.String, integers Edm.Int32, other numbers Edm.Double; nulls are
//! dropped; nested objects and arrays are refused.
//!
//! Every entity of every write passes through here, so member names and string
//! values are borrowed from the body unless they contain escapes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use base64::Engine;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tafel_service::model::{DateTime, EdmType, Entity, Guid, Property, Value};
use tafel_service::{Error, ErrorCode, Result};

/// A member's value as far as entities care.
#[derive(Debug)]
enum Raw<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Cow<'a, str>),
    /// An object or array (skipped, then refused).
    Nested,
}

impl<'de> serde::Deserialize<'de> for Raw<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Raw<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Null)
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::UInt(v))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Float(v))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Owned(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Raw<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Raw::Nested)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Raw<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Raw::Nested)
            }
        }
        d.deserialize_any(V)
    }
}

/// A member name, borrowed unless it holds escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The members of a JSON object in order, duplicates kept (serde_json's maps
/// would silently drop them, and Azure reports them).
struct Members<'a>(Vec<(Cow<'a, str>, Raw<'a>)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Members<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some((k, v)) = map.next_entry::<Key<'de>, Raw<'de>>()? {
                    out.push((k.0, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn parse_members(body: &[u8]) -> Result<Vec<(Cow<'_, str>, Raw<'_>)>> {
    // One UTF-8 check of the whole body, then serde_json's `str` reader, which
    // skips the check its slice reader makes on every string (a dozen or more
    // per entity). A body that is not UTF-8 goes to the slice reader, so its
    // error (and where it says the fault is) stays exactly what it was.
    let members = match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str::<Members>(text),
        Err(_) => serde_json::from_slice::<Members>(body),
    };
    members
        .map(|m| m.0)
        .map_err(|e| Error::invalid_input(format!("The request body is not a valid JSON entity: {e}")))
}

const ANNOTATION: &str = "@odata.type";
/// Up to this many members, duplicate and annotation lookups scan the list (a
/// typical entity has a dozen); beyond, they hash, so no body is quadratic.
const LINEAR_MEMBERS: usize = 48;

/// Finds duplicates and annotations among the members.
enum Index<'m, 'a> {
    /// Annotated names and their annotations, in a list: an entity has a few.
    Few(Vec<(&'m str, &'m Raw<'a>)>),
    Many(HashMap<&'m str, &'m Raw<'a>>),
}

impl<'m, 'a> Index<'m, 'a> {
    fn new(members: &'m [(Cow<'a, str>, Raw<'a>)]) -> Result<Self> {
        let duplicate = |k: &str| {
            Error::with_message(
                ErrorCode::DuplicatePropertiesSpecified,
                format!("The property '{k}' is specified more than one time."),
            )
        };
        if members.len() <= LINEAR_MEMBERS {
            let mut annotations = Vec::new();
            for (i, (k, v)) in members.iter().enumerate() {
                if members[..i].iter().any(|(other, _)| other == k) {
                    return Err(duplicate(k));
                }
                if let Some(name) = k.strip_suffix(ANNOTATION) {
                    annotations.push((name, v));
                }
            }
            return Ok(Index::Few(annotations));
        }
        let mut seen = HashMap::with_capacity(members.len());
        let mut annotations = HashMap::new();
        for (k, v) in members {
            if seen.insert(k.as_ref(), ()).is_some() {
                return Err(duplicate(k));
            }
            if let Some(name) = k.strip_suffix(ANNOTATION) {
                annotations.insert(name, v);
            }
        }
        Ok(Index::Many(annotations))
    }

    /// The value of `name@odata.type`, if present.
    fn annotation(&self, name: &str) -> Option<&'m Raw<'a>> {
        match self {
            Index::Few(list) => list.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            Index::Many(map) => map.get(name).copied(),
        }
    }
}

/// Decodes an entity body. `url_keys` are the keys from the request URL (update,
/// merge, upsert), which win over the body's.
#[cfg(test)]
pub(crate) fn decode_entity(body: &[u8], url_keys: Option<(&str, &str)>) -> Result<Entity> {
    decode_entity_write(body, url_keys).map(|d| d.entity)
}

/// An entity body as decoded, with what of it a dialect may refuse (`cosmos.rs`).
pub(crate) struct DecodedEntity {
    pub entity: Entity,
    /// The body gave a key of another type than Edm.String, beside the URL's keys.
    pub typed_keys: bool,
}

/// [`decode_entity`], telling also whether the body typed its keys.
pub(crate) fn decode_entity_write(body: &[u8], url_keys: Option<(&str, &str)>) -> Result<DecodedEntity> {
    let members = parse_members(body)?;
    let mut typed_keys = false;
    let index = Index::new(&members)?;
    let mut pk = None;
    let mut rk = None;
    let mut properties = Vec::with_capacity(members.len());
    for (name, raw) in &members {
        if name.ends_with(ANNOTATION) || name.starts_with("odata.") || name == "Timestamp" {
            continue;
        }
        let declared = match index.annotation(name) {
            Some(Raw::Str(t)) => Some(EdmType::from_name(t).ok_or_else(|| {
                Error::invalid_input(format!("The type '{t}' of property '{name}' is not an Edm type."))
            })?),
            Some(_) => {
                return Err(Error::invalid_input(format!(
                    "The type annotation of '{name}' is not a string."
                )))
            }
            None => None,
        };
        match name.as_ref() {
            // When the URL names the entity its keys decide, and the body's are only
            // checked as values of their declared type (Azure takes an Edm.Guid or
            // Edm.DateTime key there; an insert's keys must be strings).
            "PartitionKey" | "RowKey" if url_keys.is_some() && declared.is_some_and(|t| t != EdmType::String) => {
                typed_value(name, raw, declared)?;
                typed_keys = true;
            }
            "PartitionKey" | "RowKey" => {
                let s = match (raw, declared) {
                    (Raw::Str(s), None | Some(EdmType::String)) => s.clone().into_owned(),
                    (Raw::Null, _) => {
                        return Err(Error::with_message(
                            ErrorCode::PropertiesNeedValue,
                            format!("The {name} is null."),
                        ))
                    }
                    _ => return Err(Error::new(ErrorCode::PrimaryKeyPropertyIsInvalidType)),
                };
                if name == "PartitionKey" {
                    pk = Some(s)
                } else {
                    rk = Some(s)
                }
            }
            _ => {
                if let Some(value) = typed_value(name, raw, declared)? {
                    properties.push(Property {
                        name: name.clone().into_owned(),
                        value,
                    });
                }
            }
        }
    }
    let (partition_key, row_key) = match url_keys {
        Some((p, r)) => (p.to_owned(), r.to_owned()),
        None => match (pk, rk) {
            (Some(p), Some(r)) => (p, r),
            _ => return Err(Error::with_message(
                ErrorCode::PropertiesNeedValue,
                "The values are not specified for all properties in the entity: PartitionKey and RowKey are required.",
            )),
        },
    };
    Ok(DecodedEntity {
        entity: Entity {
            partition_key,
            row_key,
            timestamp: None,
            properties,
        },
        typed_keys,
    })
}

fn bad_value(name: &str, ty: EdmType) -> Error {
    Error::invalid_input(format!("The value of property '{name}' is not a valid {}.", ty.name()))
}

/// One property's value under its declared type (or the JSON-native one).
fn typed_value(name: &str, raw: &Raw<'_>, declared: Option<EdmType>) -> Result<Option<Value>> {
    let ty = match (declared, raw) {
        (_, Raw::Null) => return Ok(None),
        (Some(t), _) => t,
        (None, Raw::Str(_)) => EdmType::String,
        (None, Raw::Bool(_)) => EdmType::Boolean,
        (None, Raw::Int(_) | Raw::UInt(_)) => EdmType::Int32,
        (None, Raw::Float(_)) => EdmType::Double,
        (None, Raw::Nested) => {
            return Err(Error::invalid_input(format!(
                "The property '{name}' holds an object or array, which is not supported."
            )))
        }
    };
    let bad = || bad_value(name, ty);
    let int = || match *raw {
        Raw::Int(v) => Some(v),
        Raw::UInt(v) => i64::try_from(v).ok(),
        _ => None,
    };
    let value = match (ty, raw) {
        (EdmType::String, Raw::Str(s)) => Value::String(s.clone().into_owned()),
        (EdmType::Boolean, Raw::Bool(b)) => Value::Boolean(*b),
        // Azure parses a string as .NET's `bool.Parse` does: either word in any
        // case, surrounding white space ignored (`"False"`, `" TRUE "`).
        (EdmType::Boolean, Raw::Str(s)) => match s.trim_matches(|c: char| c.is_whitespace() || c == '\0') {
            t if t.eq_ignore_ascii_case("true") => Value::Boolean(true),
            t if t.eq_ignore_ascii_case("false") => Value::Boolean(false),
            _ => return Err(bad()),
        },
        (EdmType::Int32, Raw::Int(_) | Raw::UInt(_)) => {
            let v = int().ok_or_else(bad)?;
            Value::Int32(i32::try_from(v).map_err(|_| {
                Error::with_message(
                    ErrorCode::InvalidInput,
                    format!("The value of property '{name}' is outside the Edm.Int32 range."),
                )
            })?)
        }
        (EdmType::Int32, Raw::Str(s)) => Value::Int32(s.trim().parse().map_err(|_| bad())?),
        (EdmType::Int64, Raw::Str(s)) => Value::Int64(s.trim().parse().map_err(|_| bad())?),
        (EdmType::Int64, Raw::Int(_) | Raw::UInt(_)) => Value::Int64(int().ok_or_else(bad)?),
        (EdmType::Double, Raw::Int(v)) => Value::Double(*v as f64),
        (EdmType::Double, Raw::UInt(v)) => Value::Double(*v as f64),
        (EdmType::Double, Raw::Float(v)) => Value::Double(*v),
        (EdmType::Double, Raw::Str(s)) => Value::Double(match s.as_ref() {
            "NaN" => f64::NAN,
            "Infinity" | "INF" => f64::INFINITY,
            "-Infinity" | "-INF" => f64::NEG_INFINITY,
            other => {
                let v: f64 = other.trim().parse().map_err(|_| bad())?;
                if !v.is_finite() {
                    return Err(bad());
                }
                v
            }
        }),
        (EdmType::DateTime, Raw::Str(s)) => Value::DateTime(DateTime::parse(s).ok_or_else(bad)?),
        (EdmType::Guid, Raw::Str(s)) => Value::Guid(Guid::parse(s).ok_or_else(bad)?),
        (EdmType::Binary, Raw::Str(s)) => Value::Binary(
            base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|_| bad())?,
        ),
        _ => return Err(bad()),
    };
    Ok(Some(value))
}

/// The `TableName` of a Create Table body.
pub(crate) fn decode_table_name(body: &[u8]) -> Result<String> {
    let members = parse_members(body)?;
    match members.iter().find(|(k, _)| k == "TableName").map(|(_, v)| v) {
        Some(Raw::Str(s)) => Ok(s.clone().into_owned()),
        Some(Raw::Null) | None => Err(Error::with_message(
            ErrorCode::PropertiesNeedValue,
            "The TableName property is required.",
        )),
        Some(_) => Err(Error::invalid_input("The TableName property must be a string.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<Entity>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn decodes_the_python_sdk_example() {
        let body = br#"{"PartitionKey":"uk","RowKey":"0001","Name":"Ada","Age":36,"Active":true,"Score":97.5,
            "Balance":"9007199254740993","Balance@odata.type":"Edm.Int64",
            "Joined@odata.type":"Edm.DateTime","Joined":"2020-02-29T10:00:00.0000000Z",
            "Id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","Id@odata.type":"Edm.Guid",
            "Blob":"AAECAw==","Blob@odata.type":"Edm.Binary","Ratio":"NaN","Ratio@odata.type":"Edm.Double",
            "Gone":null,"Timestamp":"2000-01-01T00:00:00Z","odata.etag":"x"}"#;
        let e = decode_entity(body, None).expect("valid");
        assert_eq!((e.partition_key.as_str(), e.row_key.as_str()), ("uk", "0001"));
        assert_eq!(e.get("Age"), Some(&Value::Int32(36)));
        assert_eq!(e.get("Score"), Some(&Value::Double(97.5)));
        assert_eq!(e.get("Balance"), Some(&Value::Int64(9_007_199_254_740_993)));
        assert!(matches!(e.get("Ratio"), Some(Value::Double(d)) if d.is_nan()));
        assert_eq!(e.get("Blob"), Some(&Value::Binary(vec![0, 1, 2, 3])));
        assert_eq!(e.get("Gone"), None);
        assert_eq!(e.get("Timestamp"), None);
        // Nine values; the null "Gone", Timestamp and odata.* members are not properties.
        assert_eq!(e.properties.len(), 9);
    }

    #[test]
    fn rejects_bad_input_with_azure_codes() {
        assert_eq!(
            code(decode_entity(br#"{"PartitionKey":"a","RowKey":"b","X":1,"X":2}"#, None)),
            Some(ErrorCode::DuplicatePropertiesSpecified)
        );
        assert_eq!(
            code(decode_entity(br#"{"PartitionKey":"a"}"#, None)),
            Some(ErrorCode::PropertiesNeedValue)
        );
        assert_eq!(
            code(decode_entity(br#"{"PartitionKey":1,"RowKey":"b"}"#, None)),
            Some(ErrorCode::PrimaryKeyPropertyIsInvalidType)
        );
        assert_eq!(
            code(decode_entity(br#"{"PartitionKey":"a","RowKey":"b","X":{"y":1}}"#, None)),
            Some(ErrorCode::InvalidInput)
        );
        assert_eq!(
            code(decode_entity(br#"{"PartitionKey":"a","RowKey":"b","X":[1]}"#, None)),
            Some(ErrorCode::InvalidInput)
        );
        assert_eq!(
            code(decode_entity(
                br#"{"PartitionKey":"a","RowKey":"b","X":"1","X@odata.type":"Edm.Nope"}"#,
                None
            )),
            Some(ErrorCode::InvalidInput)
        );
        assert_eq!(
            code(decode_entity(
                br#"{"PartitionKey":"a","RowKey":"b","X":2147483648,"X@odata.type":"Edm.Int32"}"#,
                None
            )),
            Some(ErrorCode::InvalidInput)
        );
        assert_eq!(
            code(decode_entity(
                br#"{"PartitionKey":"a","RowKey":"b","X":"x","X@odata.type":"Edm.Guid"}"#,
                None
            )),
            Some(ErrorCode::InvalidInput)
        );
        assert_eq!(code(decode_entity(b"not json", None)), Some(ErrorCode::InvalidInput));
    }

    #[test]
    fn many_members_use_the_hashed_index_with_the_same_rules() {
        let mut body = String::from(r#"{"PartitionKey":"a","RowKey":"b""#);
        for i in 0..(LINEAR_MEMBERS + 10) {
            body.push_str(&format!(r#","P{i}":"{i}","P{i}@odata.type":"Edm.Int64""#));
        }
        let e = decode_entity(format!("{body}}}").as_bytes(), None).expect("valid");
        assert_eq!(e.properties.len(), LINEAR_MEMBERS + 10);
        assert_eq!(e.get("P7"), Some(&Value::Int64(7)));
        let dup = format!(r#"{body},"P3":"x"}}"#);
        assert_eq!(
            code(decode_entity(dup.as_bytes(), None)),
            Some(ErrorCode::DuplicatePropertiesSpecified)
        );
    }

    #[test]
    fn escaped_names_and_values_decode_like_plain_ones() {
        let body = br#"{"PartitionKey":"a\"b","RowKey":"\u00fc","N\u0061me":"x\ny","Name@odata.type":"Edm.String"}"#;
        let e = decode_entity(body, None).expect("valid");
        assert_eq!((e.partition_key.as_str(), e.row_key.as_str()), ("a\"b", "ü"));
        assert_eq!(e.get("Name"), Some(&Value::String("x\ny".into())));
        // An escaped duplicate is still a duplicate.
        let body = br#"{"PartitionKey":"a","RowKey":"b","X":1,"\u0058":2}"#;
        assert_eq!(
            code(decode_entity(body, None)),
            Some(ErrorCode::DuplicatePropertiesSpecified)
        );
    }

    #[test]
    fn booleans_as_strings_in_any_case() {
        for (text, want) in [("False", false), ("TRUE", true), (" true ", true), ("false", false)] {
            let body = format!(r#"{{"PartitionKey":"a","RowKey":"b","X":"{text}","X@odata.type":"Edm.Boolean"}}"#);
            let e = decode_entity(body.as_bytes(), None).expect("valid");
            assert_eq!(e.get("X"), Some(&Value::Boolean(want)), "{text}");
        }
        for text in ["1", "0", "yes", "", "truee"] {
            let body = format!(r#"{{"PartitionKey":"a","RowKey":"b","X":"{text}","X@odata.type":"Edm.Boolean"}}"#);
            assert_eq!(
                code(decode_entity(body.as_bytes(), None)),
                Some(ErrorCode::InvalidInput),
                "{text}"
            );
        }
    }

    #[test]
    fn typed_body_keys_yield_to_url_keys_but_not_on_insert() {
        let body = br#"{"PartitionKey":"2024-01-01T00:00:00Z","PartitionKey@odata.type":"Edm.DateTime",
            "RowKey":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","RowKey@odata.type":"Edm.Guid","A":1}"#;
        let e = decode_entity(body, Some(("p", "r"))).expect("the URL's keys decide");
        assert_eq!(
            (e.partition_key.as_str(), e.row_key.as_str(), e.properties.len()),
            ("p", "r", 1)
        );
        assert_eq!(
            code(decode_entity(body, None)),
            Some(ErrorCode::PrimaryKeyPropertyIsInvalidType)
        );
        // Still a value of its declared type.
        let bad = br#"{"PartitionKey":"x","PartitionKey@odata.type":"Edm.Guid"}"#;
        assert_eq!(
            code(decode_entity(bad, Some(("p", "r")))),
            Some(ErrorCode::InvalidInput)
        );
        // An untyped non-string key is refused as before.
        let untyped = br#"{"PartitionKey":1}"#;
        assert_eq!(
            code(decode_entity(untyped, Some(("p", "r")))),
            Some(ErrorCode::PrimaryKeyPropertyIsInvalidType)
        );
    }

    #[test]
    fn url_keys_win() {
        let e = decode_entity(br#"{"PartitionKey":"x","RowKey":"y","A":1}"#, Some(("p", "r"))).expect("valid");
        assert_eq!((e.partition_key.as_str(), e.row_key.as_str()), ("p", "r"));
        let e = decode_entity(br#"{"A":1}"#, Some(("p", "r"))).expect("keys may be omitted");
        assert_eq!(e.properties.len(), 1);
    }
}
