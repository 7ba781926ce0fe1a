//! `tafel check`: verifies a whole store offline and says what is damaged,
//! without changing anything. It opens the store as the server does, on a
//! [`ScratchDisk`] that keeps every write in memory, has redb verify every
//! page's checksum, then reads every value and verifies its own (see
//! `checksums.rs`), naming the table and keys of each damaged one.

use std::collections::HashMap;
use std::fmt;
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use super::checksums::{checked, payload, printable};
use super::commit::ReadView;
use super::counts;
use super::disk::Disk;
use super::engine::entity_seal;
use super::engine::tree::{ReadTrees, Tree};
use super::opening::{open_db, recover, verify_pages};
use super::schema::{decode_table, parse_table, table_key, to_store_error, TableValue};
use super::scratch_disk::ScratchDisk;
use super::STORE_FILE;
use crate::error::{FailureKind, StoreError};
use crate::key::KeyRef;
use crate::traits::IndexEncoder;

/// What a check found.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub tables: u64,
    pub entities: u64,
    /// Bytes of entity values.
    pub bytes: u64,
    /// Log records replayed on top of the store file.
    pub replayed: usize,
    /// Whether the values carry checksums: a store last written by a Tafel
    /// from before them gets them when a server next opens it; until then
    /// only redb's page checksums are checked.
    pub checksums: bool,
    pub damage: Vec<Damage>,
    /// Secondary-index entries compared with their entities (with an encoder).
    pub index_entries: u64,
    /// What may be damage, or the trace of a power loss.
    pub warnings: Vec<Damage>,
    /// Whether the store file opened at all.
    opened: bool,
}

/// One damaged thing: where, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub place: String,
    pub problem: String,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.problem)
    }
}

impl CheckReport {
    fn damaged(&mut self, place: impl Into<String>, problem: impl Into<String>) {
        self.damage.push(Damage {
            place: place.into(),
            problem: problem.into(),
        });
    }
}

/// Checks the store in `dir`; `progress` is told the entities checked so far
/// now and then. An error means the check could not be made at all (no store
/// there, a server running on it); damage is in the report.
pub fn check(dir: &Path, progress: &mut dyn FnMut(u64)) -> Result<CheckReport, StoreError> {
    check_with(dir, None, progress)
}

/// [`check`], comparing every secondary index with the entries its table's
/// entities give through `encoder` (the service's, as the server uses).
pub fn check_with(
    dir: &Path,
    encoder: Option<&IndexEncoder>,
    progress: &mut dyn FnMut(u64),
) -> Result<CheckReport, StoreError> {
    if !dir.join(STORE_FILE).is_file() {
        return Err(StoreError::failure(
            FailureKind::Io,
            format!("no Tafel store in {} (no {STORE_FILE})", dir.display()),
        ));
    }
    let disk = ScratchDisk::new(dir).map_err(to_store_error)?;
    Ok(check_on_with(&disk, encoder, progress))
}

/// Checks the store on `disk`, which it may write to.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn check_on(disk: &dyn Disk, progress: &mut dyn FnMut(u64)) -> CheckReport {
    check_on_with(disk, None, progress)
}

/// [`check_on`], comparing every secondary index with its entities.
pub(super) fn check_on_with(
    disk: &dyn Disk,
    encoder: Option<&IndexEncoder>,
    progress: &mut dyn FnMut(u64),
) -> CheckReport {
    let mut report = CheckReport::default();
    // A damaged file may make a read panic: redb promises errors only from
    // its integrity check. Whatever panics is damage too.
    let walked = catch_unwind(AssertUnwindSafe(|| walk_store(disk, encoder, &mut report, progress)));
    if walked.is_err() {
        report.damaged("the store file", "reading it failed (a page holds garbage)");
    }
    // Then redb's own check of every page, on the store as replayed: a
    // failed one ends redb's use of the database, so it comes last, on a
    // database of its own.
    let verified = catch_unwind(AssertUnwindSafe(|| verify_pages(disk)));
    match verified {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => report.damaged(
            "the store file",
            "pages failed their checksums; redb could fall back to an earlier commit, \
             which may lack acknowledged writes",
        ),
        // Not opening is said already.
        Ok(Err(_)) if !report.opened => {}
        Ok(Err(e)) => report.damaged("the store file", format!("pages failed their checksums: {e}")),
        Err(_) => report.damaged("the store file", "checking its pages failed (a page holds garbage)"),
    }
    report
}

/// Opens the store as the server does and reads all of it.
fn walk_store(
    disk: &dyn Disk,
    encoder: Option<&IndexEncoder>,
    report: &mut CheckReport,
    progress: &mut dyn FnMut(u64),
) {
    let db = match open_db(disk, 64 << 20) {
        Ok((db, _)) => db,
        Err(e) => return report.damaged("the store file", format!("it does not open: {e}")),
    };
    report.opened = true;
    // Log size 0: a missing log is not made, an existing one read as it is.
    let recovered = match recover(&db, disk, 0) {
        Ok(r) => r,
        Err(e) => return report.damaged("the store", format!("it does not open: {e}")),
    };
    report.checksums = recovered.format.sealed();
    let v1 = recovered.format == super::checksums::Format::V1;
    report.replayed = recovered.replayed;
    if let Some(seq) = recovered.damaged_record {
        report.warnings.push(Damage {
            place: format!("write-ahead log record {seq}"),
            problem: "failed its checksum while the next record is intact: its writes and \
                      the later ones are not in the store; unless the power went while they \
                      were being written, they were acknowledged and are lost"
                .into(),
        });
    }
    if let Err(e) = ReadView::take(&db).and_then(|view| walk(&view, encoder, report, progress, v1)) {
        report.damaged("the store file", format!("reading it failed: {e}"));
    }
}

/// Table id → "account/table", for naming what a check finds.
type Names = HashMap<u64, String>;

/// Reads every table record, listing entry, setting and entity.
fn walk(
    view: &ReadView,
    encoder: Option<&IndexEncoder>,
    report: &mut CheckReport,
    progress: &mut dyn FnMut(u64),
    v1: bool,
) -> Result<(), StoreError> {
    let names = tables(view, report)?;
    listing(view, report)?;
    sealed_rows(view, Tree::Meta, "setting", report)?;
    let tallies = entities(view, &names, report, progress, v1)?;
    counters(view, &names, &tallies, report);
    // The change feed's rows (a store from before the feed has none).
    sealed_rows(view, Tree::Changes, "change feed row", report)?;
    if !v1 {
        for (account, position) in super::feed::unlinked(view)? {
            report.damaged(
                format!("change feed row {position} of account {account}"),
                "it holds its entity's current value, but the entity's row does not link to it",
            );
        }
    }
    if let Some(encoder) = encoder {
        indexes(view, &names, encoder, report)?;
    }
    progress(report.entities);
    Ok(())
}

/// A table record, checked if the store's values carry checksums.
fn record(report: &CheckReport, key: &[u8], stored: &[u8]) -> Result<TableValue, StoreError> {
    match report.checksums {
        true => decode_table(key, stored),
        false => parse_table(stored),
    }
}

/// Every table's record, live or kept deleted, by id.
fn tables(view: &ReadView, report: &mut CheckReport) -> Result<Names, StoreError> {
    let mut names = Names::new();
    for row in view.range(Tree::Tables, Bound::Unbounded, Bound::Unbounded)? {
        let (k, v) = row?;
        let (account, _) = split_at_zero(k.bytes());
        match record(report, k.bytes(), v.bytes()) {
            Ok(t) => {
                names.insert(t.id, format!("{account}/{}", t.record.name));
                report.tables += 1;
            }
            Err(_) => report.damaged(
                format!("table record {}", printable(k.bytes())),
                "failed its checksum: the table's name, id and access policies are unknown",
            ),
        }
    }
    // Deleted tables kept restorable (`deleted.rs`) keep their rows, counters
    // and indexes; a damaged record is reported with the settings.
    if let Ok(kept) = super::deleted::kept(view, None, report.checksums) {
        for k in kept {
            names.insert(k.table.id, format!("{}/{} (deleted)", k.account, k.table.record.name));
        }
    }
    Ok(names)
}

/// Every listing entry names a table whose record names it back.
fn listing(view: &ReadView, report: &mut CheckReport) -> Result<(), StoreError> {
    for row in view.range(Tree::TableOrder, Bound::Unbounded, Bound::Unbounded)? {
        let (k, _) = row?;
        let (account, name) = split_at_zero(k.bytes());
        let key = table_key(&account, &name);
        let listed = view.get(Tree::Tables, &key)?;
        if !matches!(listed.map(|v| record(report, &key, v.bytes())), Some(Ok(t)) if t.record.name == name) {
            report.damaged(
                format!("table listing entry {}", printable(k.bytes())),
                "names no table: the key is damaged, or the table's record is",
            );
        }
    }
    Ok(())
}

/// Every row of `tree` passes its checksum (when the store has them).
fn sealed_rows(view: &ReadView, tree: Tree, what: &str, report: &mut CheckReport) -> Result<(), StoreError> {
    if !report.checksums {
        return Ok(());
    }
    for row in view.range(tree, Bound::Unbounded, Bound::Unbounded)? {
        let (k, v) = row?;
        if checked(k.bytes(), v.bytes()).is_none() {
            report.damaged(format!("{what} {}", printable(k.bytes())), "failed its checksum");
        }
    }
    Ok(())
}

/// Every entity row belongs to a table and passes its checksum (`v1`: as
/// entity rows of store format 1 do); returns table id → (entities, bytes) as
/// counted, for its counters.
fn entities(
    view: &ReadView,
    names: &Names,
    report: &mut CheckReport,
    progress: &mut dyn FnMut(u64),
    v1: bool,
) -> Result<HashMap<u64, (u64, u64)>, StoreError> {
    let value_len = |v: &[u8]| match v1 {
        true => payload(v).len(),
        false => entity_seal::payload(v).len(),
    };
    let intact = |k: &[u8], v: &[u8]| match v1 {
        true => checked(k, v).is_some(),
        false => entity_seal::checked(k, v).is_some(),
    };
    let table_of = |k: &[u8]| {
        k.get(..8)
            .map(|id| u64::from_be_bytes(id.try_into().unwrap_or_default()))
    };
    let mut tallies: HashMap<u64, (u64, u64)> = HashMap::new();
    for row in view.entity_rows(Bound::Unbounded, Bound::Unbounded)? {
        let (k, v) = row?;
        let k = k.bytes();
        let id = table_of(k);
        if let Some(id) = id {
            let t = tallies.entry(id).or_default();
            t.0 += 1;
            t.1 += counts::row_bytes(k.len() - 8, value_len(v.bytes())) as u64;
        }
        report.entities += 1;
        report.bytes += v.bytes().len() as u64;
        if report.entities.is_multiple_of(65_536) {
            progress(report.entities);
        }
        let intact = !report.checksums || intact(k, v.bytes());
        match (id.and_then(|id| names.get(&id)), intact) {
            (Some(_), true) => {}
            (Some(table), false) => {
                let (pk, rk) = KeyRef::new(&k[8..]).keys();
                report.damaged(
                    format!("entity {table} PartitionKey {pk:?} RowKey {rk:?}"),
                    "its value failed its checksum",
                );
            }
            (None, _) => report.damaged(
                format!("entity row {}", printable(k)),
                "belongs to no table: its key is damaged",
            ),
        }
    }
    Ok(tallies)
}

/// Each table's stored counters agree with its rows as counted.
fn counters(view: &ReadView, names: &Names, tallies: &HashMap<u64, (u64, u64)>, report: &mut CheckReport) {
    for (id, table) in sorted(names) {
        let counted = tallies.get(&id).copied().unwrap_or_default();
        // A counter that fails its checksum is reported with the settings.
        match counts::read(view, id) {
            // A store from before the counters: not damage, counted at the next open.
            Ok(None) if counted.0 > 0 => report.warnings.push(Damage {
                place: format!("table {table}"),
                problem: counts::mismatch(None, counted).unwrap_or_default(),
            }),
            Ok(stored) => {
                if let Some(problem) = counts::mismatch(stored, counted) {
                    report.damaged(format!("table {table}"), problem);
                }
            }
            Err(_) => {}
        }
    }
}

/// Every index entry agrees with the entry its entity gives through `encoder`.
fn indexes(view: &ReadView, names: &Names, encoder: &IndexEncoder, report: &mut CheckReport) -> Result<(), StoreError> {
    for (id, table) in sorted(names) {
        let (entries, mismatches) = super::index::verify(view, id, encoder)?;
        report.index_entries += entries;
        for m in mismatches {
            let (pk, rk) = KeyRef::new(&m.key).keys();
            report.damaged(
                format!("index {table}.{} of PartitionKey {pk:?} RowKey {rk:?}", m.property),
                m.problem,
            );
        }
    }
    Ok(())
}

/// The tables by id, for a report in a stable order.
fn sorted(names: &Names) -> Vec<(u64, &str)> {
    let mut ids: Vec<_> = names.iter().map(|(id, n)| (*id, n.as_str())).collect();
    ids.sort();
    ids
}

/// `account 0x00 rest` as text.
fn split_at_zero(k: &[u8]) -> (String, String) {
    let at = k.iter().position(|&b| b == 0).unwrap_or(k.len());
    let rest = k.get(at + 1..).unwrap_or_default();
    (
        String::from_utf8_lossy(&k[..at]).into_owned(),
        String::from_utf8_lossy(rest).into_owned(),
    )
}
