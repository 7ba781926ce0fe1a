//! What the store asks of its writer thread: one job each, answered on its
//! reply channel once durable (`engine/writer.rs` groups and runs them).

use tokio::sync::oneshot;

use super::savepoints;
use crate::error::StoreError;
use crate::key::EntityKey;
use crate::traits::Decide;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(super) enum Job {
    CreateTable {
        account: String,
        name: String,
        reply: Reply<bool>,
    },
    /// `feed_from`: the change feed's changes from this position on may still
    /// hold the table's entities' current values; those before it were
    /// given theirs by [`Job::Materialize`] steps (0: any may).
    DeleteTable {
        account: String,
        name: String,
        feed_from: u64,
        reply: Reply<bool>,
    },
    SetAcl {
        account: String,
        name: String,
        acl: Vec<u8>,
        reply: Reply<bool>,
    },
    SetProps {
        account: String,
        value: Vec<u8>,
        reply: Reply<()>,
    },
    /// Empties a table at once (`apply.rs`).
    /// `feed_from` as [`Job::DeleteTable`]'s.
    Truncate {
        account: String,
        table: String,
        feed_from: u64,
        reply: Reply<Option<u64>>,
    },
    /// Writes (or with `None` removes) an operator record (`records.rs`).
    SetRecord {
        key: String,
        value: Option<Vec<u8>>,
        reply: Reply<()>,
    },
    Write {
        account: String,
        table: String,
        keys: Vec<EntityKey>,
        decide: Decide,
        reply: Reply<()>,
    },
    /// Declares an index, building or ready (`index.rs`).
    CreateIndex {
        account: String,
        table: String,
        property: String,
        reply: Reply<bool>,
    },
    DropIndex {
        account: String,
        table: String,
        property: String,
        reply: Reply<bool>,
    },
    /// One step of an online index build; the writer makes these itself
    /// (`index_build.rs`). `time`: how long the step may read (`None`: up to
    /// its rows, whatever it takes).
    BuildIndex {
        time: Option<std::time::Duration>,
        reply: Reply<()>,
    },
    /// Drops changes past their retention (`feed.rs`).
    TrimChanges { now_ns: u64, reply: Reply<()> },
    /// Restores a kept deleted table (`deleted.rs`); answers the name it took.
    RestoreTable {
        account: String,
        id: u64,
        name: Option<String>,
        reply: Reply<Result<String, crate::undelete::UndeleteError>>,
    },
    /// Removes a kept deleted table past its time (`deleted.rs`).
    SweepDeleted { now_ns: u64, reply: Reply<()> },
    /// Removes an account's tables and properties; answers how many tables it had.
    ClearAccount { account: String, reply: Reply<u64> },
    /// One bounded step giving the changes of `account`'s feed from position
    /// `from` on that hold the current value of an entity of `table` (any
    /// table: `None`) their values (`feed.rs`), ahead of a job that drops
    /// those rows; answers where the next step starts (`None`: done).
    Materialize {
        account: String,
        table: Option<String>,
        from: u64,
        reply: Reply<Option<u64>>,
    },
    /// Saves, restores or deletes a named savepoint: a durable commit of its
    /// own, never in a group (`savepoints.rs`).
    Savepoint {
        op: savepoints::Op,
        reply: Reply<savepoints::Outcome>,
    },
}
