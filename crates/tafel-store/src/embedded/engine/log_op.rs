//! The ops a log record's payload holds (`wal.rs`): each a change to one of
//! the store's redb tables, its fields `len u32 | bytes`. An
//! [`Op::InsertRepeat`] names bytes of an earlier op in the same payload
//! rather than carry them again.

use crate::error::{FailureKind, StoreError};

/// A physical change to one of the store's redb tables, as logged.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::embedded) enum Op<'a> {
    Insert {
        table: u8,
        key: &'a [u8],
        value: &'a [u8],
    },
    Remove {
        table: u8,
        key: &'a [u8],
    },
    /// Removes every key in `lo..hi`.
    RemoveRange {
        table: u8,
        lo: &'a [u8],
        hi: &'a [u8],
    },
    /// Inserts `head`, then `len` bytes of the record's payload from `from`
    /// (an earlier op's), then `tail` ([`LogBuf::push_repeat`](super::wal::LogBuf::push_repeat)). Only in the
    /// log: [`decode_ops`] hands it out as the [`Op::Insert`] it stands for.
    InsertRepeat {
        table: u8,
        key: &'a [u8],
        head: &'a [u8],
        from: u32,
        len: u32,
        tail: &'a [u8],
    },
}

const INSERT: u8 = 1;
const REMOVE: u8 = 2;
const REMOVE_RANGE: u8 = 3;
const INSERT_REPEAT: u8 = 4;

impl Op<'_> {
    pub(in crate::embedded) fn encode(&self, out: &mut Vec<u8>) {
        let mut put = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        };
        match *self {
            Op::Insert { table, key, value } => {
                put(&[INSERT, table]);
                put(key);
                put(value);
            }
            Op::Remove { table, key } => {
                put(&[REMOVE, table]);
                put(key);
            }
            Op::RemoveRange { table, lo, hi } => {
                put(&[REMOVE_RANGE, table]);
                put(lo);
                put(hi);
            }
            Op::InsertRepeat {
                table,
                key,
                head,
                from,
                len,
                tail,
            } => {
                put(&[INSERT_REPEAT, table]);
                put(key);
                put(head);
                put(&from.to_le_bytes());
                put(&len.to_le_bytes());
                put(tail);
            }
        }
    }
}

/// The error of an [`Op::InsertRepeat`] handed to a tree: only the log holds
/// one, and [`decode_ops`] resolves it.
pub(in crate::embedded) fn unresolved() -> StoreError {
    StoreError::failure(
        FailureKind::Internal,
        "a log op repeating another's bytes applied unresolved",
    )
}

/// A logged op as [`decode_ops`] hands it out: an [`Op::InsertRepeat`] is
/// the insert it stands for, its value put together.
#[derive(Debug, PartialEq)]
pub(in crate::embedded) enum Decoded<'a> {
    Op(Op<'a>),
    Insert { table: u8, key: &'a [u8], value: Vec<u8> },
}

impl Decoded<'_> {
    pub(in crate::embedded) fn op(&self) -> Op<'_> {
        match self {
            Decoded::Op(op) => op.clone(),
            Decoded::Insert { table, key, value } => Op::Insert {
                table: *table,
                key,
                value,
            },
        }
    }
}

/// Decodes the ops of a payload; `None` if it is malformed (an
/// [`Op::InsertRepeat`] too, if it repeats bytes not before it).
pub(in crate::embedded) fn decode_ops(payload: &[u8]) -> Option<Vec<Decoded<'_>>> {
    fn field<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let v = b.get(4..4 + len)?;
        *b = &b[4 + len..];
        Some(v)
    }
    fn number(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(field(b)?.try_into().ok()?) as usize)
    }
    let mut ops = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let start = payload.len() - rest.len();
        let tag = field(&mut rest)?;
        let (&kind, &table) = (tag.first()?, tag.get(1)?);
        ops.push(match kind {
            INSERT => Decoded::Op(Op::Insert {
                table,
                key: field(&mut rest)?,
                value: field(&mut rest)?,
            }),
            REMOVE => Decoded::Op(Op::Remove {
                table,
                key: field(&mut rest)?,
            }),
            REMOVE_RANGE => Decoded::Op(Op::RemoveRange {
                table,
                lo: field(&mut rest)?,
                hi: field(&mut rest)?,
            }),
            INSERT_REPEAT => {
                let key = field(&mut rest)?;
                let head = field(&mut rest)?;
                let (from, len) = (number(&mut rest)?, number(&mut rest)?);
                let tail = field(&mut rest)?;
                // Bytes of an earlier op only.
                let repeated = payload.get(..start)?.get(from..from.checked_add(len)?)?;
                Decoded::Insert {
                    table,
                    key,
                    value: [head, repeated, tail].concat(),
                }
            }
            _ => return None,
        });
    }
    Some(ops)
}
