//! A change of the feed as the embedded store keeps it (its position is its
//! key's): `op u8, txn u64 LE, time u64 LE, table len u16 LE, table, key len
//! u32 LE (u32::MAX: none), key`, then what it holds of the entity's value:
//! `0` (nothing: a delete, a table change), `1, value`, or `2, table id u64 LE,
//! length u32 LE`: the value is the entity's current one, which its row holds
//! (and links back to; docs/design/feed-values.md).

use crate::feed::{Change, ChangeOp};
use crate::key::EntityKey;

/// What a change holds of its entity's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeldValue<'a> {
    None,
    Value(&'a [u8]),
    /// The value of the entity row of this table id and the change's key, of this length.
    Current {
        table_id: u64,
        len: u32,
    },
}

const NONE: u8 = 0;
const VALUE: u8 = 1;
const CURRENT: u8 = 2;
/// Bytes of a current mark after its tag.
const MARK: usize = 12;

/// A change's stored form, with room for its checksum.
pub(super) fn encode(
    txn: u64,
    time_ns: u64,
    op: ChangeOp,
    table: &str,
    key: Option<&[u8]>,
    value: HeldValue<'_>,
) -> Vec<u8> {
    let held = match value {
        HeldValue::Value(v) => v.len(),
        _ => MARK,
    };
    // 32: the 24 bytes of fixed fields, and room for the checksum.
    let mut v = Vec::with_capacity(32 + table.len() + key.map_or(0, <[u8]>::len) + held);
    v.push(op as u8);
    v.extend_from_slice(&txn.to_le_bytes());
    v.extend_from_slice(&time_ns.to_le_bytes());
    v.extend_from_slice(&(table.len() as u16).to_le_bytes());
    v.extend_from_slice(table.as_bytes());
    match key {
        Some(k) => {
            v.extend_from_slice(&(k.len() as u32).to_le_bytes());
            v.extend_from_slice(k);
        }
        None => v.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
    push_value(&mut v, value);
    v
}

fn push_value(v: &mut Vec<u8>, value: HeldValue<'_>) {
    match value {
        HeldValue::None => v.push(NONE),
        HeldValue::Value(val) => {
            v.push(VALUE);
            v.extend_from_slice(val);
        }
        HeldValue::Current { table_id, len } => {
            v.push(CURRENT);
            v.extend_from_slice(&table_id.to_le_bytes());
            v.extend_from_slice(&len.to_le_bytes());
        }
    }
}

/// A stored change's fields before its value, and where the value's tag lies.
struct Fields<'a> {
    at: usize,
    op: ChangeOp,
    txn: u64,
    time_ns: u64,
    table: &'a [u8],
    key: Option<&'a [u8]>,
}

fn fields(v: &[u8]) -> Option<Fields<'_>> {
    let op = ChangeOp::from_u8(*v.first()?)?;
    let txn = u64::from_le_bytes(v.get(1..9)?.try_into().ok()?);
    let time_ns = u64::from_le_bytes(v.get(9..17)?.try_into().ok()?);
    let tlen = u16::from_le_bytes(v.get(17..19)?.try_into().ok()?) as usize;
    let table = v.get(19..19 + tlen)?;
    let mut at = 19 + tlen;
    let klen = u32::from_le_bytes(v.get(at..at + 4)?.try_into().ok()?);
    at += 4;
    let key = match klen {
        u32::MAX => None,
        n => {
            let k = v.get(at..at + n as usize)?;
            at += n as usize;
            Some(k)
        }
    };
    Some(Fields {
        at,
        op,
        txn,
        time_ns,
        table,
        key,
    })
}

/// What a stored change holds of its value; `None` if the bytes are not a change.
pub(super) fn held(v: &[u8]) -> Option<HeldValue<'_>> {
    let at = fields(v)?.at;
    match *v.get(at)? {
        NONE => Some(HeldValue::None),
        VALUE => Some(HeldValue::Value(v.get(at + 1..)?)),
        CURRENT => {
            let mark = v.get(at + 1..)?;
            (mark.len() == MARK).then_some(())?;
            Some(HeldValue::Current {
                table_id: u64::from_le_bytes(mark[..8].try_into().ok()?),
                len: u32::from_le_bytes(mark[8..].try_into().ok()?),
            })
        }
        _ => None,
    }
}

/// A stored change back, with `value` for what it holds (a current change's
/// is its entity row's, read by the caller); `None` if the bytes are not one.
pub(super) fn decode(position: u64, v: &[u8], value: Option<Vec<u8>>) -> Option<Change> {
    let f = fields(v)?;
    Some(Change {
        position,
        txn: f.txn,
        time_ns: f.time_ns,
        op: f.op,
        table: String::from_utf8(f.table.to_vec()).ok()?,
        key: f.key.map(|k| EntityKey::from_bytes(k.to_vec())),
        value,
    })
}

/// A current change holding `value` in full: its bytes up to the value's tag,
/// then the value. `None` if `v` is not a current change.
pub(super) fn materialized(v: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let at = fields(v)?.at;
    matches!(held(v)?, HeldValue::Current { .. }).then_some(())?;
    let mut out = Vec::with_capacity(at + 1 + value.len() + 4);
    out.extend_from_slice(&v[..at]);
    push_value(&mut out, HeldValue::Value(value));
    Some(out)
}

/// The bytes a stored change (`stored`, as sealed) counts for in the feed's
/// size: as if it held its value in full, so retention by size keeps the same
/// changes whichever way each holds it.
pub(super) fn counted_len(stored: &[u8]) -> u64 {
    match held(
        stored
            .get(..stored.len().saturating_sub(super::checksums::SEAL))
            .unwrap_or_default(),
    ) {
        Some(HeldValue::Current { len, .. }) => (stored.len() - MARK) as u64 + u64::from(len),
        _ => stored.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_round_trips_and_a_current_one_materializes() {
        let k = EntityKey::new("p", "r");
        let v = encode(
            7,
            99,
            ChangeOp::Merge,
            "Orders",
            Some(k.as_bytes()),
            HeldValue::Value(b"val"),
        );
        assert_eq!(held(&v), Some(HeldValue::Value(b"val")));
        let c = decode(9, &v, Some(b"val".to_vec())).expect("decodes");
        assert_eq!((c.position, c.txn, c.time_ns, c.op), (9, 7, 99, ChangeOp::Merge));
        assert_eq!((c.table.as_str(), c.key), ("Orders", Some(k.clone())));
        let t = encode(3, 1, ChangeOp::CreateTable, "t", None, HeldValue::None);
        assert_eq!(held(&t), Some(HeldValue::None));
        assert_eq!(decode(3, &t, None).expect("decodes").key, None);
        let current = HeldValue::Current { table_id: 5, len: 3 };
        let c = encode(7, 99, ChangeOp::Merge, "Orders", Some(k.as_bytes()), current);
        assert_eq!(held(&c), Some(current));
        assert_eq!(materialized(&c, b"val"), Some(v.clone()));
        assert_eq!(materialized(&v, b"val"), None, "only a current change materializes");
        let sealed = |mut x: Vec<u8>| {
            x.extend_from_slice(&[0; 4]);
            x
        };
        assert_eq!(counted_len(&sealed(c)), counted_len(&sealed(v)));
        assert_eq!(held(&[9]), None);
    }
}
