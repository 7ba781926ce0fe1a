//! The stored form of an entity value (keys live in the store key, not here).
//!
//! Layout, little-endian: `version u8 = 1 | Timestamp ticks i64 | count u16 |`
//! then per property `type tag u8 | name length u16 | name | value`, where strings
//! and binaries are `length u32 | bytes` and the other types are fixed width
//! (Guid 16 bytes, Boolean 1). [`lookup`] reads one property without decoding the
//! others, which is what filter evaluation during scans needs; [`read`] walks all
//! of them borrowed, which is what responses need.

use super::{DateTime, EdmType, Entity, Guid, Property, Value};

const VERSION: u8 = 1;

/// A property value borrowed from stored bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    String(&'a str),
    Int32(i32),
    Int64(i64),
    Double(f64),
    Boolean(bool),
    DateTime(DateTime),
    Guid(Guid),
    Binary(&'a [u8]),
}

impl ValueRef<'_> {
    pub fn edm_type(self) -> EdmType {
        match self {
            ValueRef::String(_) => EdmType::String,
            ValueRef::Int32(_) => EdmType::Int32,
            ValueRef::Int64(_) => EdmType::Int64,
            ValueRef::Double(_) => EdmType::Double,
            ValueRef::Boolean(_) => EdmType::Boolean,
            ValueRef::DateTime(_) => EdmType::DateTime,
            ValueRef::Guid(_) => EdmType::Guid,
            ValueRef::Binary(_) => EdmType::Binary,
        }
    }

    pub(crate) fn to_value(self) -> Value {
        match self {
            ValueRef::String(s) => Value::String(s.to_owned()),
            ValueRef::Int32(v) => Value::Int32(v),
            ValueRef::Int64(v) => Value::Int64(v),
            ValueRef::Double(v) => Value::Double(v),
            ValueRef::Boolean(v) => Value::Boolean(v),
            ValueRef::DateTime(v) => Value::DateTime(v),
            ValueRef::Guid(v) => Value::Guid(v),
            ValueRef::Binary(v) => Value::Binary(v.to_vec()),
        }
    }
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::String(s) => ValueRef::String(s),
            Value::Int32(v) => ValueRef::Int32(*v),
            Value::Int64(v) => ValueRef::Int64(*v),
            Value::Double(v) => ValueRef::Double(*v),
            Value::Boolean(v) => ValueRef::Boolean(*v),
            Value::DateTime(v) => ValueRef::DateTime(*v),
            Value::Guid(v) => ValueRef::Guid(*v),
            Value::Binary(v) => ValueRef::Binary(v),
        }
    }
}

pub fn encode(timestamp: DateTime, properties: &[Property]) -> Vec<u8> {
    let size: usize = 11
        + properties
            .iter()
            .map(|p| 3 + p.name.len() + 16 + value_len(&p.value))
            .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.push(VERSION);
    out.extend_from_slice(&timestamp.0.to_le_bytes());
    out.extend_from_slice(&(properties.len() as u16).to_le_bytes());
    for p in properties {
        out.push(p.value.edm_type().tag());
        out.extend_from_slice(&(p.name.len() as u16).to_le_bytes());
        out.extend_from_slice(p.name.as_bytes());
        match &p.value {
            Value::String(s) => put_bytes(&mut out, s.as_bytes()),
            Value::Binary(b) => put_bytes(&mut out, b),
            Value::Int32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Int64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Double(v) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
            Value::Boolean(v) => out.push(u8::from(*v)),
            Value::DateTime(v) => out.extend_from_slice(&v.0.to_le_bytes()),
            Value::Guid(g) => out.extend_from_slice(&g.0),
        }
    }
    out
}

fn value_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Binary(b) => b.len(),
        _ => 0,
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A cursor over stored bytes; every read is bounds-checked so corrupt data is an
/// error, never a panic.
#[derive(Clone)]
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }

    fn header(&mut self) -> Option<(DateTime, u16)> {
        if self.take(1)? != [VERSION] {
            return None;
        }
        Some((DateTime(self.i64()?), self.u16()?))
    }

    /// Next property: its name and value.
    fn property(&mut self) -> Option<(&'a str, ValueRef<'a>)> {
        let ty = EdmType::from_tag(self.take(1)?[0])?;
        let len = self.u16()? as usize;
        let name = std::str::from_utf8(self.take(len)?).ok()?;
        Some((name, self.value(ty)?))
    }

    fn value(&mut self, ty: EdmType) -> Option<ValueRef<'a>> {
        Some(match ty {
            EdmType::String => {
                let n = self.u32()? as usize;
                ValueRef::String(std::str::from_utf8(self.take(n)?).ok()?)
            }
            EdmType::Binary => {
                let n = self.u32()? as usize;
                ValueRef::Binary(self.take(n)?)
            }
            EdmType::Int32 => ValueRef::Int32(i32::from_le_bytes(self.array()?)),
            EdmType::Int64 => ValueRef::Int64(self.i64()?),
            EdmType::Double => ValueRef::Double(f64::from_bits(u64::from_le_bytes(self.array()?))),
            EdmType::Boolean => ValueRef::Boolean(self.take(1)?[0] != 0),
            EdmType::DateTime => ValueRef::DateTime(DateTime(self.i64()?)),
            EdmType::Guid => ValueRef::Guid(Guid(self.array()?)),
        })
    }

    fn skip(&mut self, ty: EdmType) -> Option<()> {
        let n = match ty {
            EdmType::String | EdmType::Binary => self.u32()? as usize,
            EdmType::Int32 => 4,
            EdmType::Int64 | EdmType::Double | EdmType::DateTime => 8,
            EdmType::Boolean => 1,
            EdmType::Guid => 16,
        };
        self.take(n).map(|_| ())
    }
}

/// Overwrites the Timestamp of encoded bytes (encoded first with a placeholder so
/// the expensive part happens outside the store's write transaction).
pub(crate) fn set_timestamp(bytes: &mut [u8], ts: DateTime) {
    if let Some(slot) = bytes.get_mut(1..9) {
        slot.copy_from_slice(&ts.0.to_le_bytes());
    }
}

/// The stored Timestamp, or `None` for corrupt bytes.
pub fn timestamp(bytes: &[u8]) -> Option<DateTime> {
    Reader { b: bytes, at: 0 }.header().map(|h| h.0)
}

/// A reader at the value of property `name`, and its type. Scans call this for
/// every row: it compares raw name bytes, and decodes nothing it passes.
fn find<'a>(bytes: &'a [u8], name: &str) -> Option<(EdmType, Reader<'a>)> {
    let mut r = Reader { b: bytes, at: 0 };
    let (_, count) = r.header()?;
    let want = name.as_bytes();
    for _ in 0..count {
        let ty = EdmType::from_tag(r.take(1)?[0])?;
        let len = r.u16()? as usize;
        if r.take(len)? == want {
            return Some((ty, r));
        }
        r.skip(ty)?;
    }
    None
}

/// One property's value, read without decoding the others. `None` when the entity
/// lacks it (or the bytes are corrupt).
pub fn lookup<'a>(bytes: &'a [u8], name: &str) -> Option<ValueRef<'a>> {
    let (ty, mut r) = find(bytes, name)?;
    r.value(ty)
}

/// A String property's UTF-8 bytes, unchecked, read without decoding the others:
/// what a filter comparing it with a string literal needs (a scan's hot path,
/// where checking the UTF-8 of every row's value cost 6% of a scan). `None` when
/// the entity lacks it or it is of another type.
pub fn lookup_string<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    match find(bytes, name)? {
        (EdmType::String, mut r) => {
            let n = r.u32()? as usize;
            r.take(n)
        }
        _ => None,
    }
}

/// Stored bytes that do not parse: cut short, an unknown version or type tag, or
/// invalid UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// The properties of stored bytes in stored order, borrowed from them. On corrupt
/// bytes it yields one `Err(Corrupt)` and then ends.
#[derive(Clone)]
pub struct Properties<'a> {
    r: Reader<'a>,
    left: u16,
}

impl<'a> Iterator for Properties<'a> {
    type Item = Result<(&'a str, ValueRef<'a>), Corrupt>;

    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let item = self.r.property().ok_or(Corrupt);
        if item.is_err() {
            self.left = 0;
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// The Timestamp and properties of stored bytes, read without copying anything.
pub fn read(bytes: &[u8]) -> Result<(DateTime, Properties<'_>), Corrupt> {
    let mut r = Reader { b: bytes, at: 0 };
    let (ts, left) = r.header().ok_or(Corrupt)?;
    Ok((ts, Properties { r, left }))
}

/// Decodes a stored entity. `None` only for corrupt bytes.
pub fn decode(partition_key: String, row_key: String, bytes: &[u8]) -> Option<Entity> {
    let (ts, props) = read(bytes).ok()?;
    let mut properties = Vec::with_capacity(props.left as usize);
    for p in props {
        let (name, value) = p.ok()?;
        properties.push(Property {
            name: name.to_owned(),
            value: value.to_value(),
        });
    }
    Some(Entity {
        partition_key,
        row_key,
        timestamp: Some(ts),
        properties,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Property> {
        let p = |n: &str, value| Property { name: n.into(), value };
        vec![
            p("S", Value::String("héllo".into())),
            p("I", Value::Int32(-7)),
            p("L", Value::Int64(9_007_199_254_740_993)),
            p("D", Value::Double(f64::NAN)),
            p("B", Value::Boolean(true)),
            p("T", Value::DateTime(DateTime::MIN)),
            p("G", Value::Guid(Guid([7; 16]))),
            p("X", Value::Binary(vec![0, 1, 2])),
        ]
    }

    #[test]
    fn round_trips_every_type() {
        let props = sample();
        let bytes = encode(DateTime(42), &props);
        let e = decode("p".into(), "r".into(), &bytes).expect("decodes");
        assert_eq!(e.timestamp, Some(DateTime(42)));
        assert_eq!(e.properties.len(), props.len());
        for (a, b) in e.properties.iter().zip(&props) {
            assert_eq!(a.name, b.name);
            match (&a.value, &b.value) {
                (Value::Double(x), Value::Double(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                (x, y) => assert_eq!(x, y),
            }
        }
    }

    #[test]
    fn lookup_finds_one_property() {
        let bytes = encode(DateTime(1), &sample());
        assert_eq!(lookup(&bytes, "I"), Some(ValueRef::Int32(-7)));
        assert_eq!(lookup(&bytes, "X"), Some(ValueRef::Binary(&[0, 1, 2])));
        assert_eq!(lookup(&bytes, "missing"), None);
    }

    #[test]
    fn corrupt_bytes_are_rejected_not_panicking() {
        let bytes = encode(DateTime(1), &sample());
        for cut in 0..bytes.len() {
            let _ = decode(String::new(), String::new(), &bytes[..cut]);
            let _ = lookup(&bytes[..cut], "X");
        }
        assert!(decode(String::new(), String::new(), &bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn read_walks_every_property_borrowed() {
        let props = sample();
        let bytes = encode(DateTime(42), &props);
        let (ts, walked) = read(&bytes).expect("valid header");
        assert_eq!(ts, DateTime(42));
        let walked: Vec<_> = walked.collect::<Result<_, _>>().expect("valid properties");
        assert_eq!(walked.len(), props.len());
        for ((name, v), p) in walked.iter().zip(&props) {
            assert_eq!(*name, p.name);
            assert_eq!(v.edm_type(), p.value.edm_type());
            match (v, &p.value) {
                (ValueRef::Double(x), Value::Double(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                (v, p) => assert_eq!(*v, ValueRef::from(p)),
            }
        }
    }

    #[test]
    fn read_reports_corruption_once_then_ends() {
        let bytes = encode(DateTime(1), &sample());
        for cut in 0..bytes.len() {
            let Ok((_, props)) = read(&bytes[..cut]) else { continue };
            let items: Vec<_> = props.collect();
            assert_eq!(items.iter().filter(|i| i.is_err()).count(), 1, "cut at {cut}");
            assert!(items.last().is_some_and(|i| i.is_err()), "cut at {cut}");
        }
        let mut bad_tag = bytes.clone();
        bad_tag[11] = 0xFF;
        let (_, mut props) = read(&bad_tag).expect("header intact");
        assert_eq!(props.next().map(|p| p.err()), Some(Some(Corrupt)));
        assert!(props.next().is_none());
        assert_eq!(read(&[2, 0, 0]).err(), Some(Corrupt));
    }
}
