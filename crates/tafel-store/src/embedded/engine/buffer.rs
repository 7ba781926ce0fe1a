//! The write buffer: the changes of the groups since redb's last commit, held in
//! ordered maps in memory instead of a redb commit per group (docs/design/write-buffer.md).
//!
//! A group's changes go into the writer's buffer as the group makes them; the
//! writer publishes a clone of it (a snapshot: the maps are persistent, so a
//! clone costs nothing and a change after it copies only the nodes it touches)
//! with the group, after the group's record is synced. Every read, a snapshot's
//! or a group's, is the buffer merged over redb's state as of its last commit
//! ([`Merge`]). The writer folds the buffer into redb at a checkpoint, in one
//! sorted commit (`writer.rs`).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdSet;

use super::group::Trees;
use super::log_op::{self, Op};
use super::tree::{Bytes, Tree};
use crate::error::{FailureKind, StoreError};

/// A key's change: its key and new value in one allocation, shared (not copied)
/// by the nodes a snapshot and the writer share. One reference count per entry:
/// a node copied (the first change a group makes under it) or dropped (by the
/// last snapshot that had it) touches each once.
#[derive(Clone)]
struct Entry {
    bytes: Arc<[u8]>,
    key_len: u32,
    /// The key was removed: no value.
    removed: bool,
}

impl Entry {
    fn new(key: &[u8], value: Option<&[u8]>) -> Result<Self, StoreError> {
        let key_len =
            u32::try_from(key.len()).map_err(|_| StoreError::failure(FailureKind::Internal, "a key past 4 GiB"))?;
        // Joined by `concat`, then moved: two copies by memcpy. Collecting the
        // chained bytes straight into the Arc wrote them one at a time, 3% of a
        // durable insert's CPU with the change feed on (benchmark-history §60).
        let bytes = Arc::from([key, value.unwrap_or_default()].concat());
        Ok(Entry {
            bytes,
            key_len,
            removed: value.is_none(),
        })
    }

    fn key(&self) -> &[u8] {
        self.bytes.get(..self.key_len as usize).unwrap_or_default()
    }

    fn value(&self) -> Option<&[u8]> {
        match self.removed {
            true => None,
            false => Some(self.bytes.get(self.key_len as usize..).unwrap_or_default()),
        }
    }
}

impl Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(other.key())
    }
}

/// Bytes an entry costs beyond its key and value: its allocation's counts and
/// its slot in a node.
const ENTRY_OVERHEAD: usize = 64;

/// One set per tree, indexed by the tree's log tag.
const TREES: usize = 6;

type Set = OrdSet<Entry>;

/// The changes not yet in redb, by tree and key.
#[derive(Clone, Default)]
pub(in crate::embedded) struct Buffer {
    trees: [Set; TREES],
    /// What the entries hold, about: bounded by `--write-buffer-mb`.
    bytes: usize,
}

impl Buffer {
    fn map(&self, tree: Tree) -> &Set {
        &self.trees[usize::from(tree.tag())]
    }

    pub(in crate::embedded) fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// What the buffer holds, in bytes (about).
    pub(in crate::embedded) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether no change to `tree` is buffered.
    pub(in crate::embedded) fn holds_none_of(&self, tree: Tree) -> bool {
        self.map(tree).is_empty()
    }

    /// Sets `key`'s change in `tree` (a tag, as the log names trees), and in
    /// `also` (the changes since a fold aside began) the same entry, shared.
    fn put(&mut self, also: Option<&mut Buffer>, tag: u8, key: &[u8], value: Option<&[u8]>) -> Result<(), StoreError> {
        let i = usize::from(Tree::from_tag(tag)?.tag());
        let entry = Entry::new(key, value)?;
        if let Some(also) = also {
            also.insert(i, entry.clone());
        }
        self.insert(i, entry);
        Ok(())
    }

    fn insert(&mut self, tree: usize, entry: Entry) {
        let size = entry.bytes.len();
        match self.trees[tree].insert(entry) {
            Some(old) => self.bytes = (self.bytes + size).saturating_sub(old.bytes.len()),
            None => self.bytes += size + ENTRY_OVERHEAD,
        }
    }

    /// Buffers one change, and records it in `also` too: while the writer folds
    /// the buffer aside, `also` gathers what the groups change meanwhile, which
    /// is all the buffer keeps once the fold is in redb (`fold_aside.rs`). A
    /// range removal is the group's to spell out key by key
    /// (`GroupTx::remove_range`), since rows in it may be in redb only.
    pub(in crate::embedded) fn apply(&mut self, also: Option<&mut Buffer>, op: &Op<'_>) -> Result<(), StoreError> {
        match *op {
            Op::Insert { table, key, value } => self.put(also, table, key, Some(value)),
            Op::Remove { table, key } => self.put(also, table, key, None),
            Op::RemoveRange { table, .. } => Err(StoreError::failure(
                FailureKind::Internal,
                format!("a range removal from tree {table} handed to the buffer whole"),
            )),
            Op::InsertRepeat { .. } => Err(log_op::unresolved()),
        }
    }

    /// `key`'s change in `tree`: `Some(None)` where it was removed, `None`
    /// where the buffer holds nothing of it (redb's row stands).
    pub(in crate::embedded) fn get(&self, tree: Tree, key: &[u8]) -> Option<Option<&[u8]>> {
        self.map(tree).get(key).map(Entry::value)
    }

    /// The changes to `tree` with keys in `(lo, hi)`, in key order. A read of a
    /// range whose changes [peek](Changes::peek) empty reads redb alone (a scan of
    /// one table while others are written).
    pub(in crate::embedded) fn range<'a>(&'a self, tree: Tree, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Changes<'a> {
        // OrdSet's range panics on bounds out of order (a BTreeMap's would too);
        // a tree's reads may ask for an empty range, which holds nothing.
        let empty = match (lo, hi) {
            (Bound::Included(l), Bound::Included(h)) => l > h,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h))
            | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
            _ => false,
        };
        let set = self.map(tree);
        Changes(match empty || set.is_empty() {
            true => None,
            false => Some(set.range::<_, [u8]>((lo, hi)).peekable()),
        })
    }

    /// Writes every buffered change into redb's open transaction, tree by tree,
    /// in key order.
    pub(in crate::embedded) fn fold_into(&self, trees: &mut Trees<'_>) -> Result<(), StoreError> {
        self.fold_some_into(trees, FoldedTo::default(), || false).map(drop)
    }

    /// [`Buffer::fold_into`] from where an earlier call stopped (`from`), until
    /// `stop` says so (asked before each change): then where it stopped, to go
    /// on from in another transaction's hands or on another thread (`pace.rs`);
    /// `None` once everything is folded.
    pub(in crate::embedded) fn fold_some_into(
        &self,
        trees: &mut Trees<'_>,
        from: FoldedTo,
        stop: impl Fn() -> bool,
    ) -> Result<Option<FoldedTo>, StoreError> {
        for (i, set) in self.trees.iter().enumerate().skip(from.tree) {
            let tree = Tree::from_tag(i as u8)?;
            // A large tree's rows go in runs (`Trees::put_rows`), so rows written
            // in key order (a table loaded so, the change feed) fill their
            // leaves; removals one by one between them.
            let in_runs = matches!(tree, Tree::Changes | Tree::Index);
            let mut last = from.last.as_ref().filter(|_| i == from.tree);
            let entries = match last {
                Some(after) => set.range::<_, [u8]>((Bound::Excluded(after.key()), Bound::Unbounded)),
                None => set.range::<_, [u8]>((Bound::Unbounded, Bound::Unbounded)),
            };
            if tree == Tree::Entities {
                // Removals too, in the same sorted pass: each entity block the
                // changes fall in is rewritten once (`blocks.rs`).
                let mut changes: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
                for entry in entries {
                    if stop() {
                        trees.put_entities(&changes)?;
                        return Ok(Some(FoldedTo {
                            tree: i,
                            last: last.cloned(),
                        }));
                    }
                    changes.push((entry.key(), entry.value()));
                    last = Some(entry);
                }
                trees.put_entities(&changes)?;
                continue;
            }
            let mut run: Vec<(&[u8], &[u8])> = Vec::new();
            for entry in entries {
                if stop() {
                    trees.put_rows(tree, &run)?;
                    return Ok(Some(FoldedTo {
                        tree: i,
                        last: last.cloned(),
                    }));
                }
                let key = entry.key();
                match entry.value() {
                    Some(value) if in_runs => run.push((key, value)),
                    value => {
                        trees.put_rows(tree, &run)?;
                        run.clear();
                        let op = match value {
                            Some(value) => Op::Insert {
                                table: tree.tag(),
                                key,
                                value,
                            },
                            None => Op::Remove { table: tree.tag(), key },
                        };
                        trees.apply(&op)?;
                    }
                }
                last = Some(entry);
            }
            trees.put_rows(tree, &run)?;
        }
        Ok(None)
    }
}

/// Where a fold in steps ([`Buffer::fold_some_into`]) stopped: the tree it was
/// in, and the last change of it folded.
#[derive(Default)]
pub(in crate::embedded) struct FoldedTo {
    tree: usize,
    last: Option<Entry>,
}

/// Buffered changes in a key range, in key order: `(key, new value or none)`.
pub(in crate::embedded) struct Changes<'a>(
    Option<Peekable<imbl::ordset::RangedIter<'a, Entry, imbl::shared_ptr::DefaultSharedPtr>>>,
);

impl<'a> Changes<'a> {
    /// The next change, left where it is.
    pub(in crate::embedded) fn peek(&mut self) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let entry: &'a Entry = self.0.as_mut()?.peek()?;
        Some((entry.key(), entry.value()))
    }
}

impl<'a> Iterator for Changes<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.0.as_mut()?.next()?;
        Some((entry.key(), entry.value()))
    }
}

/// A tree's rows as of redb's last commit (`base`) with the buffer's changes
/// over them: a buffered value stands in for redb's, a buffered removal hides it.
pub(in crate::embedded) struct Merge<'a, I: Iterator> {
    base: Peekable<I>,
    changes: Changes<'a>,
}

impl<'a, I> Merge<'a, I>
where
    I: Iterator<Item = Result<(Bytes<'a>, Bytes<'a>), StoreError>>,
{
    pub(in crate::embedded) fn new(base: I, changes: Changes<'a>) -> Self {
        Merge {
            base: base.peekable(),
            changes,
        }
    }
}

impl<'a, I> Iterator for Merge<'a, I>
where
    I: Iterator<Item = Result<(Bytes<'a>, Bytes<'a>), StoreError>>,
{
    type Item = Result<(Bytes<'a>, Bytes<'a>), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.base.peek(), self.changes.peek()) {
                (None, None) => return None,
                (Some(_), None) | (Some(Err(_)), _) => return self.base.next(),
                (None, Some(_)) => Ordering::Greater,
                (Some(Ok((k, _))), Some((c, _))) => k.bytes().cmp(c),
            };
            match order {
                Ordering::Less => return self.base.next(),
                // The buffer's change is the newer: redb's row gives way to it.
                Ordering::Equal => drop(self.base.next()),
                Ordering::Greater => {}
            }
            match self.changes.next() {
                Some((k, Some(v))) => return Some(Ok((Bytes::Buf(k), Bytes::Buf(v)))),
                // A removal: nothing to show, here or in redb.
                Some((_, None)) | None => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(items: &[(&'static str, &'static str)]) -> Vec<Result<(Bytes<'static>, Bytes<'static>), StoreError>> {
        items
            .iter()
            .map(|(k, v)| Ok((Bytes::Buf(k.as_bytes()), Bytes::Buf(v.as_bytes()))))
            .collect()
    }

    fn merged(base: &[(&'static str, &'static str)], buffer: &Buffer) -> Vec<(String, String)> {
        let changes = buffer.range(Tree::Entities, Bound::Unbounded, Bound::Unbounded);
        Merge::new(rows(base).into_iter(), changes)
            .map(|r| {
                let (k, v) = r.expect("a row");
                (
                    String::from_utf8_lossy(k.bytes()).into_owned(),
                    String::from_utf8_lossy(v.bytes()).into_owned(),
                )
            })
            .collect()
    }

    fn put(buffer: &mut Buffer, key: &str, value: Option<&str>) {
        buffer
            .put(None, Tree::Entities.tag(), key.as_bytes(), value.map(str::as_bytes))
            .expect("a tree");
    }

    #[test]
    fn a_buffered_value_replaces_redbs_and_a_buffered_removal_hides_it() {
        let mut b = Buffer::default();
        put(&mut b, "b", Some("B2"));
        put(&mut b, "c", None);
        put(&mut b, "e", Some("E"));
        put(&mut b, "g", None);
        let base = [("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")];
        let got = merged(&base, &b);
        let want: Vec<(String, String)> = [("a", "A"), ("b", "B2"), ("d", "D"), ("e", "E")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_snapshot_keeps_what_it_saw_while_the_writer_changes_the_buffer() {
        let mut b = Buffer::default();
        put(&mut b, "a", Some("1"));
        let snapshot = b.clone();
        put(&mut b, "a", Some("2"));
        put(&mut b, "b", Some("3"));
        assert_eq!(snapshot.get(Tree::Entities, b"a"), Some(Some(&b"1"[..])));
        assert_eq!(snapshot.get(Tree::Entities, b"b"), None);
        assert_eq!(b.get(Tree::Entities, b"a"), Some(Some(&b"2"[..])));
        assert_eq!(merged(&[], &snapshot).len(), 1);
    }

    #[test]
    fn the_size_counts_a_replaced_value_once() {
        let mut b = Buffer::default();
        put(&mut b, "k", Some("12345"));
        let one = b.bytes();
        put(&mut b, "k", Some("123"));
        assert_eq!(b.bytes(), one - 2);
        put(&mut b, "k", None);
        assert_eq!(b.bytes(), one - 5);
        assert!(!b.is_empty());
    }

    /// A fold on the fold thread stops when someone must wait for it, who then
    /// goes on from there (`pace.rs`): stopped anywhere, it writes the same.
    #[test]
    fn a_fold_stopped_and_taken_up_again_writes_what_a_whole_fold_does() {
        use super::super::schema::{ENTITIES, TABLES};
        use redb::{backends::InMemoryBackend, Database, ReadableTable};
        let mut b = Buffer::default();
        // Entity keys begin with their table's id, 8 bytes.
        for i in 0..300u32 {
            put(&mut b, &format!("table01_k{i:03}"), (i % 7 != 0).then_some("new"));
        }
        b.put(None, Tree::Tables.tag(), b"t1", Some(b"x")).expect("a tree");
        let fold = |stop_after: usize| {
            let db = Database::builder()
                .create_with_backend(InMemoryBackend::new())
                .expect("db");
            let txn = db.begin_write().expect("txn");
            let mut trees = Trees::open(&txn).expect("trees");
            // Rows in redb first: some the buffer replaces, some it removes.
            for i in (0..300u32).step_by(3) {
                let key = format!("table01_k{i:03}");
                let op = Op::Insert {
                    table: Tree::Entities.tag(),
                    key: key.as_bytes(),
                    value: b"old",
                };
                trees.apply(&op).expect("insert");
            }
            let (mut from, mut steps) = (FoldedTo::default(), 0);
            loop {
                let asked = std::cell::Cell::new(0);
                let stop = || {
                    asked.set(asked.get() + 1);
                    stop_after > 0 && asked.get() > stop_after
                };
                match b.fold_some_into(&mut trees, from, stop).expect("fold") {
                    Some(at) => (from, steps) = (at, steps + 1),
                    None => break,
                }
            }
            assert!(stop_after == 0 || steps >= 300 / stop_after, "stopped {steps} times");
            drop(trees);
            let rows = |t: redb::TableDefinition<&[u8], &[u8]>| -> Vec<(Vec<u8>, Vec<u8>)> {
                let table = txn.open_table(t).expect("table");
                let rows = table.iter().expect("iter");
                rows.map(|r| r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec())).expect("row"))
                    .collect()
            };
            let entities = rows(ENTITIES)
                .iter()
                .flat_map(|(_, block)| {
                    let rows: Vec<_> = super::super::blocks::rows(block)
                        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("row"))
                        .collect();
                    rows
                })
                .collect::<Vec<_>>();
            (entities, rows(TABLES))
        };
        let whole = fold(0);
        assert_eq!(whole.0.len(), 300 - 300usize.div_ceil(7));
        assert!(whole.0.iter().all(|(_, v)| v == b"new"));
        assert_eq!(whole.1.len(), 1);
        assert_eq!(fold(1), whole);
        assert_eq!(fold(7), whole);
    }

    #[test]
    fn a_range_with_its_bounds_crossed_holds_nothing() {
        let mut b = Buffer::default();
        put(&mut b, "m", Some("M"));
        assert_eq!(
            b.range(Tree::Entities, Bound::Included(b"z"), Bound::Excluded(b"a"))
                .count(),
            0
        );
        assert_eq!(
            b.range(Tree::Entities, Bound::Excluded(b"m"), Bound::Included(b"m"))
                .count(),
            0
        );
        assert_eq!(
            b.range(Tree::Entities, Bound::Included(b"m"), Bound::Included(b"m"))
                .count(),
            1
        );
    }
}
