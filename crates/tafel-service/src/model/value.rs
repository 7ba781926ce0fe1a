//! The eight EDM types of the Table service and property values.

use super::{DateTime, Guid};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EdmType {
    String,
    Int32,
    Int64,
    Double,
    Boolean,
    DateTime,
    Guid,
    Binary,
}

impl EdmType {
    /// The `@odata.type` name.
    pub fn name(self) -> &'static str {
        match self {
            EdmType::String => "Edm.String",
            EdmType::Int32 => "Edm.Int32",
            EdmType::Int64 => "Edm.Int64",
            EdmType::Double => "Edm.Double",
            EdmType::Boolean => "Edm.Boolean",
            EdmType::DateTime => "Edm.DateTime",
            EdmType::Guid => "Edm.Guid",
            EdmType::Binary => "Edm.Binary",
        }
    }

    pub fn from_name(name: &str) -> Option<EdmType> {
        Some(match name {
            "Edm.String" => EdmType::String,
            "Edm.Int32" => EdmType::Int32,
            "Edm.Int64" => EdmType::Int64,
            "Edm.Double" => EdmType::Double,
            "Edm.Boolean" => EdmType::Boolean,
            "Edm.DateTime" => EdmType::DateTime,
            "Edm.Guid" => EdmType::Guid,
            "Edm.Binary" => EdmType::Binary,
            _ => return None,
        })
    }

    /// Stable tag used by the stored entity format. Never renumber.
    pub fn tag(self) -> u8 {
        match self {
            EdmType::String => 1,
            EdmType::Int32 => 2,
            EdmType::Int64 => 3,
            EdmType::Double => 4,
            EdmType::Boolean => 5,
            EdmType::DateTime => 6,
            EdmType::Guid => 7,
            EdmType::Binary => 8,
        }
    }

    pub(crate) fn from_tag(tag: u8) -> Option<EdmType> {
        Some(match tag {
            1 => EdmType::String,
            2 => EdmType::Int32,
            3 => EdmType::Int64,
            4 => EdmType::Double,
            5 => EdmType::Boolean,
            6 => EdmType::DateTime,
            7 => EdmType::Guid,
            8 => EdmType::Binary,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Int32(i32),
    Int64(i64),
    Double(f64),
    Boolean(bool),
    DateTime(DateTime),
    Guid(Guid),
    Binary(Vec<u8>),
}

impl Value {
    pub fn edm_type(&self) -> EdmType {
        super::codec::ValueRef::from(self).edm_type()
    }

    /// Size of the value under Azure's entity-size formula (limits.md).
    pub(crate) fn azure_size(&self) -> usize {
        match self {
            Value::String(s) => 4 + 2 * crate::validate::utf16_len(s),
            Value::Binary(b) => 4 + b.len(),
            Value::Int32(_) => 4,
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            Value::Boolean(_) => 1,
            Value::Guid(_) => 16,
        }
    }
}
