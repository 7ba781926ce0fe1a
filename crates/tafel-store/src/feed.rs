//! The change feed's types, shared by the backends: which accounts record one
//! and how long they keep it, one recorded change and its stored form, and
//! what a read of the feed asks and gets.
//!
//! A change is recorded inside the write's own transaction (so it is in the
//! feed iff its write committed), under a per-account position that only grows.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::key::EntityKey;

/// How long (and how much of) an account's feed is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub age: Duration,
    /// Bytes of recorded changes kept at most (the oldest go first).
    pub max_bytes: Option<u64>,
}

/// Which accounts record their changes. Off for every account by default.
#[derive(Debug, Clone, Default)]
pub struct FeedSettings {
    /// For every account.
    pub all: Option<Retention>,
    /// Per account, over `all`.
    pub accounts: HashMap<String, Retention>,
}

impl FeedSettings {
    pub fn for_account(&self, account: &str) -> Option<Retention> {
        // The common cases cost no hashing: off, or on for every account alike.
        if self.accounts.is_empty() {
            return self.all;
        }
        self.accounts.get(account).copied().or(self.all)
    }

    pub fn any(&self) -> bool {
        self.all.is_some() || !self.accounts.is_empty()
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    Insert = 0,
    Replace = 1,
    Merge = 2,
    Delete = 3,
    CreateTable = 4,
    DeleteTable = 5,
    /// A delete by expiry (TTL): `"op":"delete"` with `"reason":"expired"`.
    Expire = 6,
    /// Every entity of the table went at once (a whole-table purge): one
    /// change, no key, in place of a delete per entity.
    TruncateTable = 7,
}

impl ChangeOp {
    /// What the feed records for mutation `m` of a row that `existed`, and the
    /// row's new value; `None` when it changed nothing (a delete of an absent row).
    /// (The backends' writes use it: a build without them has none.)
    #[cfg(any(feature = "embedded", feature = "postgres"))]
    pub(crate) fn of(m: &crate::traits::Mutation, existed: bool) -> Option<(ChangeOp, Option<&[u8]>)> {
        use crate::traits::Mutation;
        Some(match m {
            Mutation::Put(v) if existed => (ChangeOp::Replace, Some(v.as_slice())),
            Mutation::Merge(v) if existed => (ChangeOp::Merge, Some(v.as_slice())),
            Mutation::Put(v) | Mutation::Merge(v) => (ChangeOp::Insert, Some(v.as_slice())),
            Mutation::Delete if existed => (ChangeOp::Delete, None),
            Mutation::Expire if existed => (ChangeOp::Expire, None),
            Mutation::Delete | Mutation::Expire | Mutation::Keep => return None,
        })
    }

    /// The op stored as `b` (its discriminant), by either backend.
    pub(crate) fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => ChangeOp::Insert,
            1 => ChangeOp::Replace,
            2 => ChangeOp::Merge,
            3 => ChangeOp::Delete,
            4 => ChangeOp::CreateTable,
            5 => ChangeOp::DeleteTable,
            6 => ChangeOp::Expire,
            7 => ChangeOp::TruncateTable,
            _ => return None,
        })
    }

    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            ChangeOp::Insert => "insert",
            ChangeOp::Replace => "replace",
            ChangeOp::Merge => "merge",
            ChangeOp::Delete | ChangeOp::Expire => "delete",
            ChangeOp::CreateTable => "createTable",
            ChangeOp::DeleteTable => "deleteTable",
            ChangeOp::TruncateTable => "truncateTable",
        }
    }
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub position: u64,
    /// The position of the first change of the same write.
    pub txn: u64,
    /// When it was recorded, in nanoseconds since the Unix epoch.
    pub time_ns: u64,
    pub op: ChangeOp,
    /// The table's name as created.
    pub table: String,
    /// None for table changes.
    pub key: Option<EntityKey>,
    /// The entity's stored value after the change; none for deletes.
    pub value: Option<Vec<u8>>,
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where a read of the feed starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangesFrom {
    /// From the oldest retained change.
    Oldest,
    /// Changes with a position past this one.
    After(u64),
    /// None of the existing changes: from the head.
    Latest,
    /// From the first change recorded at or after this time (ns since the epoch).
    Since(u64),
}

/// One read of an account's feed.
#[derive(Debug, Clone)]
pub struct ChangesRequest {
    pub from: ChangesFrom,
    pub limit: usize,
    /// Only this table's changes (its name compared ignoring ASCII case).
    pub table: Option<String>,
}

/// A page of changes.
#[derive(Debug, Clone, Default)]
pub struct ChangesPage {
    pub changes: Vec<Change>,
    /// Pass as `After` for the next page.
    pub next_after: u64,
    /// The newest recorded position.
    pub head: u64,
}

/// What a read of the feed gets.
#[derive(Debug, Clone)]
pub enum ChangesRead {
    Page(ChangesPage),
    /// The account records no changes.
    NotEnabled,
    /// The position asked from was dropped by retention; the oldest kept is this.
    Expired {
        oldest: u64,
    },
    /// The position asked from is past the head (a store restored from a
    /// backup starts an empty feed).
    Rewound {
        head: u64,
    },
    /// The position asked from was undone by a snapshot restore (embedded
    /// store): the store went back to `restored`, and the changes the reader
    /// read after it are gone. Their positions are never given out again.
    Undone {
        restored: u64,
    },
}

/// The per-account head record: the last position given out and the bytes the
/// retained changes take. Stored as two u64 LE.
pub fn encode_head(head: u64, bytes: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&head.to_le_bytes());
    v[8..].copy_from_slice(&bytes.to_le_bytes());
    v
}

pub fn decode_head(v: &[u8]) -> Option<(u64, u64)> {
    Some((
        u64::from_le_bytes(v.get(..8)?.try_into().ok()?),
        u64::from_le_bytes(v.get(8..16)?.try_into().ok()?),
    ))
}

/// Whether `from` (a position the reader has read up to) was dropped, given the
/// oldest retained position (`head + 1` when none is retained).
pub fn check_from(from: ChangesFrom, oldest: u64, head: u64) -> Option<ChangesRead> {
    match from {
        ChangesFrom::After(p) if p > head => Some(ChangesRead::Rewound { head }),
        ChangesFrom::After(p) if p.saturating_add(1) < oldest => Some(ChangesRead::Expired { oldest }),
        _ => None,
    }
}
