//! A property value as the bytes of a secondary index entry, and a comparison
//! as the byte ranges that hold exactly the values satisfying it.
//!
//! Invariant: for two values of one EDM type, the byte order of their encodings
//! is the filter evaluator's order (`query::eval`), and values it calls equal
//! encode equal. Each encoding starts with a tag byte per type, so a range never
//! crosses types: comparisons are type-strict (spec/query.md §4), an Int32 entry
//! never answers an Int64 literal. Encodings are prefix-free (fixed width, or
//! escaped and terminated), so an index key `value ‖ entity key` sorts by value
//! first and "the entries of value v" is the byte prefix `encode(v)`.

use crate::model::codec::ValueRef;
use crate::model::Value;
use crate::query::CompareOp;

const STRING: u8 = 0x10;
const INT32: u8 = 0x20;
const INT64: u8 = 0x30;
const DOUBLE: u8 = 0x40;
/// NaN is unordered: every comparison with it is false except `ne`, so it sits
/// apart from the ordered doubles, in a tag of its own.
const DOUBLE_NAN: u8 = 0x41;
const BOOLEAN: u8 = 0x50;
const DATETIME: u8 = 0x60;
const GUID: u8 = 0x70;
const BINARY: u8 = 0x80;

/// Appends the encoding of `v`.
pub fn encode_into(out: &mut Vec<u8>, v: ValueRef<'_>) {
    match v {
        ValueRef::String(s) => {
            out.push(STRING);
            let start = out.len();
            tafel_store::key::push_mapped(out, s);
            escape_from(out, start);
        }
        ValueRef::Binary(b) => {
            out.push(BINARY);
            let start = out.len();
            out.extend_from_slice(b);
            escape_from(out, start);
        }
        ValueRef::Int32(i) => {
            out.push(INT32);
            out.extend_from_slice(&((i as u32) ^ (1 << 31)).to_be_bytes());
        }
        ValueRef::Int64(i) => push_i64(out, INT64, i),
        ValueRef::DateTime(t) => push_i64(out, DATETIME, t.0),
        ValueRef::Double(d) if d.is_nan() => out.push(DOUBLE_NAN),
        ValueRef::Double(d) => {
            out.push(DOUBLE);
            // -0.0 == 0.0 in IEEE, so they must encode alike.
            let bits = if d == 0.0 { 0 } else { d.to_bits() };
            let sortable = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
            out.extend_from_slice(&sortable.to_be_bytes());
        }
        ValueRef::Boolean(b) => {
            out.push(BOOLEAN);
            out.push(u8::from(b));
        }
        ValueRef::Guid(g) => {
            out.push(GUID);
            out.extend_from_slice(&g.0);
        }
    }
}

pub fn encode(v: ValueRef<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_into(&mut out, v);
    out
}

fn push_i64(out: &mut Vec<u8>, tag: u8, i: i64) {
    out.push(tag);
    out.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
}

/// Makes `out[start..]` prefix-free and order-preserving: 0x00 becomes 0x00 0xFF
/// and the end is 0x00 0x01, which sorts before any continuation.
fn escape_from(out: &mut Vec<u8>, start: usize) {
    let zeros = out[start..].iter().filter(|&&b| b == 0).count();
    if zeros > 0 {
        let raw = out.split_off(start);
        out.reserve(raw.len() + zeros);
        for b in raw {
            out.push(b);
            if b == 0 {
                out.push(0xFF);
            }
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// The smallest byte string greater than every string that starts with `prefix`.
/// It exists for every encoding: each starts with a tag byte below 0xFF.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    // Only for a prefix of 0xFF bytes, which no encoding is: an empty end makes
    // an empty range, never one that holds too much.
    Vec::new()
}

/// A half-open range `[start, end)` of index keys (value encoding, then the rest).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

impl ByteRange {
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// The entries of every value of the literal's type (and only that type).
    fn whole_type(tag: u8) -> ByteRange {
        ByteRange {
            start: vec![tag],
            end: vec![tag + 1],
        }
    }
}

/// The ranges of index keys whose values satisfy `property op literal`: exactly
/// those, so an entity found in them matches that comparison and one that
/// matches it is found in them. Sorted and disjoint; empty when nothing can match.
pub fn comparison_ranges(op: CompareOp, literal: &Value) -> Vec<ByteRange> {
    let lit = encode(ValueRef::from(literal));
    let tag = lit[0];
    if tag == DOUBLE_NAN {
        // Unordered: only `ne` holds, and for every Double, NaN included.
        return match op {
            CompareOp::Ne => vec![ByteRange::whole_type(DOUBLE), ByteRange::whole_type(DOUBLE_NAN)],
            _ => Vec::new(),
        };
    }
    let all = ByteRange::whole_type(tag);
    let (below, at_or_above) = (all.start.clone(), all.end.clone());
    let after = prefix_end(&lit);
    let range = |start: &[u8], end: &[u8]| ByteRange {
        start: start.to_vec(),
        end: end.to_vec(),
    };
    let mut out = match op {
        CompareOp::Eq => vec![range(&lit, &after)],
        CompareOp::Ne => vec![range(&below, &lit), range(&after, &at_or_above)],
        CompareOp::Gt => vec![range(&after, &at_or_above)],
        CompareOp::Ge => vec![range(&lit, &at_or_above)],
        CompareOp::Lt => vec![range(&below, &lit)],
        CompareOp::Le => vec![range(&below, &after)],
    };
    if tag == DOUBLE && op == CompareOp::Ne {
        // NaN ne x holds (IEEE and .NET alike).
        out.push(ByteRange::whole_type(DOUBLE_NAN));
    }
    out.retain(|r| !r.is_empty());
    out
}

/// Union of sorted, disjoint range lists: sorted and disjoint again.
pub fn union(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    ranges.retain(|r| !r.is_empty());
    ranges.sort();
    let mut out: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => {
                if r.end > last.end {
                    last.end = r.end;
                }
            }
            _ => out.push(r),
        }
    }
    out
}

/// Intersection of two sorted, disjoint range lists.
pub fn intersect(a: &[ByteRange], b: &[ByteRange]) -> Vec<ByteRange> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let start = (&a[i].start).max(&b[j].start);
        let end = (&a[i].end).min(&b[j].end);
        if start < end {
            out.push(ByteRange {
                start: start.clone(),
                end: end.clone(),
            });
        }
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}
