//! Request bodies to entities, with Azure's typing rules (json-format.md §1):
//! `@odata.type` annotations may come before or after their value; unannotated
//! strings are Edm.String, integers Edm.Int32, other numbers Edm.Double; nulls are
//! dropped; nested objects and arrays are refused.

use std::collections::HashMap;
use std::fmt;

use base64::Engine;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value as Json;
use tafel_service::model::{DateTime, EdmType, Entity, Guid, Property, Value};
use tafel_service::{Error, ErrorCode, Result};

/// The members of a JSON object in order, duplicates kept (serde_json's maps
/// would silently drop them, and Azure reports them).
struct Members(Vec<(String, Json)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Members, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some((k, v)) = map.next_entry::<String, Json>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn parse_members(body: &[u8]) -> Result<Vec<(String, Json)>> {
    serde_json::from_slice::<Members>(body)
        .map(|m| m.0)
        .map_err(|e| Error::invalid_input(format!("The request body is not a valid JSON entity: {e}")))
}

const ANNOTATION: &str = "@odata.type";

/// Decodes an entity body. `url_keys` are the keys from the request URL (update,
/// merge, upsert), which win over the body's.
pub fn decode_entity(body: &[u8], url_keys: Option<(&str, &str)>) -> Result<Entity> {
    let members = parse_members(body)?;
    let mut types: HashMap<&str, &Json> = HashMap::new();
    let mut seen: HashMap<&str, ()> = HashMap::with_capacity(members.len());
    for (k, v) in &members {
        if seen.insert(k.as_str(), ()).is_some() {
            return Err(Error::with_message(
                ErrorCode::DuplicatePropertiesSpecified,
                format!("The property '{k}' is specified more than one time."),
            ));
        }
        if let Some(name) = k.strip_suffix(ANNOTATION) {
            types.insert(name, v);
        }
    }
    let mut pk = None;
    let mut rk = None;
    let mut properties = Vec::with_capacity(members.len());
    for (name, json) in &members {
        if name.ends_with(ANNOTATION) || name.starts_with("odata.") || name == "Timestamp" {
            continue;
        }
        let declared = match types.get(name.as_str()) {
            Some(Json::String(t)) => Some(EdmType::from_name(t).ok_or_else(|| {
                Error::invalid_input(format!("The type '{t}' of property '{name}' is not an Edm type."))
            })?),
            Some(_) => {
                return Err(Error::invalid_input(format!(
                    "The type annotation of '{name}' is not a string."
                )))
            }
            None => None,
        };
        match name.as_str() {
            "PartitionKey" | "RowKey" => {
                let s = match (json, declared) {
                    (Json::String(s), None | Some(EdmType::String)) => s.clone(),
                    (Json::Null, _) => {
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
                if let Some(value) = typed_value(name, json, declared)? {
                    properties.push(Property {
                        name: name.clone(),
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
    Ok(Entity {
        partition_key,
        row_key,
        timestamp: None,
        properties,
    })
}

fn bad_value(name: &str, ty: EdmType) -> Error {
    Error::invalid_input(format!("The value of property '{name}' is not a valid {}.", ty.name()))
}

/// One property's value under its declared type (or the JSON-native one).
fn typed_value(name: &str, json: &Json, declared: Option<EdmType>) -> Result<Option<Value>> {
    if json.is_null() {
        return Ok(None);
    }
    let ty = match declared {
        Some(t) => t,
        None => match json {
            Json::String(_) => EdmType::String,
            Json::Bool(_) => EdmType::Boolean,
            Json::Number(n) if n.is_i64() || n.is_u64() => EdmType::Int32,
            Json::Number(_) => EdmType::Double,
            _ => {
                return Err(Error::invalid_input(format!(
                    "The property '{name}' holds an object or array, which is not supported."
                )))
            }
        },
    };
    let bad = || bad_value(name, ty);
    let value = match (ty, json) {
        (EdmType::String, Json::String(s)) => Value::String(s.clone()),
        (EdmType::Boolean, Json::Bool(b)) => Value::Boolean(*b),
        (EdmType::Boolean, Json::String(s)) => match s.as_str() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return Err(bad()),
        },
        (EdmType::Int32, Json::Number(n)) => {
            let v = n.as_i64().ok_or_else(bad)?;
            Value::Int32(i32::try_from(v).map_err(|_| {
                Error::with_message(
                    ErrorCode::InvalidInput,
                    format!("The value of property '{name}' is outside the Edm.Int32 range."),
                )
            })?)
        }
        (EdmType::Int32, Json::String(s)) => Value::Int32(s.trim().parse().map_err(|_| bad())?),
        (EdmType::Int64, Json::String(s)) => Value::Int64(s.trim().parse().map_err(|_| bad())?),
        (EdmType::Int64, Json::Number(n)) => Value::Int64(n.as_i64().ok_or_else(bad)?),
        (EdmType::Double, Json::Number(n)) => Value::Double(n.as_f64().ok_or_else(bad)?),
        (EdmType::Double, Json::String(s)) => Value::Double(match s.as_str() {
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
        (EdmType::DateTime, Json::String(s)) => Value::DateTime(DateTime::parse(s).ok_or_else(bad)?),
        (EdmType::Guid, Json::String(s)) => Value::Guid(Guid::parse(s).ok_or_else(bad)?),
        (EdmType::Binary, Json::String(s)) => Value::Binary(
            base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(|_| bad())?,
        ),
        _ => return Err(bad()),
    };
    Ok(Some(value))
}

/// The `TableName` of a Create Table body.
pub fn decode_table_name(body: &[u8]) -> Result<String> {
    let members = parse_members(body)?;
    match members.iter().find(|(k, _)| k == "TableName").map(|(_, v)| v) {
        Some(Json::String(s)) => Ok(s.clone()),
        Some(Json::Null) | None => Err(Error::with_message(
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
    fn url_keys_win() {
        let e = decode_entity(br#"{"PartitionKey":"x","RowKey":"y","A":1}"#, Some(("p", "r"))).expect("valid");
        assert_eq!((e.partition_key.as_str(), e.row_key.as_str()), ("p", "r"));
        let e = decode_entity(br#"{"A":1}"#, Some(("p", "r"))).expect("keys may be omitted");
        assert_eq!(e.properties.len(), 1);
    }
}
