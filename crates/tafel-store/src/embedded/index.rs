//! Secondary indexes in the embedded store (docs/design/indexes.md). A table's
//! index on a property is a META row `index/{table id}/{property}` (its state)
//! and one row of the `index` tree per entity with the property:
//! `table id ‖ property 0x00 ‖ encoded value ‖ entity key` → the entity key's
//! length (the encoding is the service's, opaque here). The writer changes the
//! entries in the entity's own commit, from its stored forms before and after.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::apply::Writer;
use super::checksums::{seal, unseal};
use super::commit::ReadView;
use super::engine::tree::{ReadTrees, Tree};
use super::index_build::{Build, State};
use super::schema::{row_key, to_store_error};
use crate::error::{FailureKind, StoreError};
use crate::key::{EntityKey, KeyRef};
use crate::paging::PageBuilder;
use crate::traits::{IndexEncoder, IndexInfo, IndexScanRequest, RowSink, ScanEnd};

/// META keys of table `id`'s index definitions start with this.
pub(super) fn def_prefix(id: u64) -> String {
    format!("index/{id:020}/")
}

/// The first META key after every definition of table `id` (`'0'` follows `'/'`).
fn def_end(id: u64) -> String {
    format!("index/{id:020}0")
}

pub(super) fn def_key(id: u64, property: &str) -> String {
    format!("{}{property}", def_prefix(id))
}

/// Every entry of `property`'s index on table `id` starts with this.
pub(super) fn entry_prefix(id: u64, property: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + property.len());
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(property.as_bytes());
    k.push(0);
    k
}

/// The first key after every entry that starts with `prefix` (an [`entry_prefix`]).
fn entries_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = 1;
    }
    end
}

pub(super) fn entry(prefix: &[u8], encoded: &[u8], key: &[u8]) -> Result<(Vec<u8>, [u8; 2]), StoreError> {
    let len = u16::try_from(key.len())
        .map_err(|_| StoreError::failure(FailureKind::Internal, "an entity key too long for an index entry"))?;
    let mut k = Vec::with_capacity(prefix.len() + encoded.len() + key.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(encoded);
    k.extend_from_slice(key);
    Ok((k, len.to_be_bytes()))
}

/// The entity key at the end of an index entry's key.
pub(super) fn entity_key_of<'a>(entry: &'a [u8], value: &[u8]) -> Result<&'a [u8], StoreError> {
    let corrupt = || StoreError::failure(FailureKind::Corrupt, "corrupt index entry");
    let len: [u8; 2] = value.try_into().map_err(|_| corrupt())?;
    let len = u16::from_be_bytes(len) as usize;
    entry
        .get(entry.len().checked_sub(len).ok_or_else(corrupt)?..)
        .ok_or_else(corrupt)
}

/// The service's encoding of `property` in `value`; a panic in it fails the write.
pub(super) fn encode(encoder: &IndexEncoder, value: &[u8], property: &str) -> Result<Option<Vec<u8>>, StoreError> {
    catch_unwind(AssertUnwindSafe(|| encoder(value, property)))
        .map_err(|_| StoreError::failure(FailureKind::Internal, "the index encoder panicked"))
}

/// A table with indexes is written only with the service's encoder at hand:
/// without it, its entries would go stale.
fn at_hand(encoder: Option<&IndexEncoder>) -> Result<&IndexEncoder, StoreError> {
    encoder.ok_or_else(|| {
        StoreError::failure(
            FailureKind::Internal,
            "a table with secondary indexes written before the service gave the store its index encoder",
        )
    })
}

/// The properties with an index on table `id`, with their states.
pub(super) fn definitions(trees: &impl ReadTrees, id: u64) -> Result<Vec<(String, State)>, StoreError> {
    let (lo, hi) = (def_prefix(id), def_end(id));
    let mut out = Vec::new();
    for item in trees.range_of(Tree::Meta, lo.as_bytes(), hi.as_bytes())? {
        let (k, v) = item?;
        let state = State::decode(unseal(k.bytes(), v.bytes())?);
        let name = k.bytes().get(lo.len()..).unwrap_or_default();
        out.push((String::from_utf8(name.to_vec()).map_err(to_store_error)?, state));
    }
    Ok(out)
}

/// Tables' indexed properties as the writer last read them, so a write learns
/// them without a META range read (issue #59: it cost every insert about a
/// microsecond). Building indexes are listed as ready ones are: writes keep
/// their entries from the definition's commit on. Kept on the writer thread
/// across groups: every change of a definition forgets its table's entry, a
/// savepoint job forgets all, and a group that does not commit drops the whole
/// cache (`writer.rs`), since what it read may have been its own uncommitted
/// change. With it, whether an online build has steps to run (`index_build.rs`).
#[derive(Default)]
pub(in crate::embedded) struct IndexDefs {
    tables: HashMap<u64, Arc<[String]>>,
    pub(in crate::embedded) build: Build,
}

/// Entries kept at most; past it the cache starts over (a store with more
/// tables than this written in turn reads definitions again, as before).
const CACHED_TABLES: usize = 1 << 16;

impl IndexDefs {
    /// Forgets every table's definitions, and looks for builds again (a
    /// restored savepoint may hold one).
    pub(in crate::embedded) fn clear(&mut self) {
        *self = IndexDefs::default();
    }

    fn forget(&mut self, id: u64) {
        self.tables.remove(&id);
    }
}

impl Writer<'_, '_> {
    /// The indexed properties of table `id`, from the cache when it has them.
    pub(super) fn indexed(&mut self, id: u64) -> Result<Arc<[String]>, StoreError> {
        if let Some(found) = self.index_defs.tables.get(&id) {
            return Ok(found.clone());
        }
        let found: Arc<[String]> = definitions(&self.tx, id)?.into_iter().map(|(p, _)| p).collect();
        if self.index_defs.tables.len() >= CACHED_TABLES {
            self.index_defs.tables.clear();
        }
        self.index_defs.tables.insert(id, found.clone());
        Ok(found)
    }

    /// Moves one entity's entries from its stored form `old` to `new` (`None`: absent).
    pub(super) fn reindex(
        &mut self,
        id: u64,
        properties: &[String],
        key: &[u8],
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let encoder = at_hand(self.index_encoder)?;
        for property in properties {
            let before = old.map(|v| encode(encoder, v, property)).transpose()?.flatten();
            let after = new.map(|v| encode(encoder, v, property)).transpose()?.flatten();
            if before == after {
                continue;
            }
            let prefix = entry_prefix(id, property);
            if let Some(b) = before {
                self.tx.remove(Tree::Index, &entry(&prefix, &b, key)?.0)?;
            }
            if let Some(a) = after {
                let (k, v) = entry(&prefix, &a, key)?;
                self.tx.insert(Tree::Index, &k, &v)?;
            }
        }
        Ok(())
    }

    /// Declares the index, in state `building` with no cursor when the table
    /// has entities (the writer's build steps write their entries,
    /// `index_build.rs`), or ready at once when it has none; `Ok(false)` if it
    /// exists.
    pub(super) fn create_index(&mut self, account: &str, table: &str, property: &str) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, table)? else {
            return Err(StoreError::TableNotFound);
        };
        let def = def_key(t.id, property);
        if self.tx.get(Tree::Meta, def.as_bytes())?.is_some() {
            return Ok(false);
        }
        // From this commit on every write keeps the index's entries.
        at_hand(self.index_encoder)?;
        self.index_defs.forget(t.id);
        let empty = self
            .tx
            .range_of(Tree::Entities, &t.id.to_be_bytes(), &(t.id + 1).to_be_bytes())?
            .next()
            .is_none();
        let state = match empty {
            true => State::Ready,
            false => {
                self.index_defs.build = Build::Look;
                State::Building(None)
            }
        };
        self.tx
            .insert(Tree::Meta, def.as_bytes(), &seal(def.as_bytes(), &state.encode()))?;
        Ok(true)
    }

    /// Drops the index and its entries; `Ok(false)` if there was none.
    pub(super) fn drop_index(&mut self, account: &str, table: &str, property: &str) -> Result<bool, StoreError> {
        let Some(t) = self.table(account, table)? else {
            return Err(StoreError::TableNotFound);
        };
        let def = def_key(t.id, property);
        if self.tx.get(Tree::Meta, def.as_bytes())?.is_none() {
            return Ok(false);
        }
        self.index_defs.forget(t.id);
        self.tx.remove(Tree::Meta, def.as_bytes())?;
        let prefix = entry_prefix(t.id, property);
        self.tx.remove_range(Tree::Index, &prefix, &entries_end(&prefix))?;
        Ok(true)
    }

    /// Drops every index of table `id` with its entries (the table is being deleted).
    pub(super) fn drop_indexes(&mut self, id: u64) -> Result<(), StoreError> {
        self.index_defs.forget(id);
        let properties = definitions(&self.tx, id)?;
        if properties.is_empty() {
            return Ok(());
        }
        for (property, _) in &properties {
            self.tx.remove(Tree::Meta, def_key(id, property).as_bytes())?;
        }
        self.tx
            .remove_range(Tree::Index, &id.to_be_bytes(), &(id + 1).to_be_bytes())
    }
}

/// The properties of table `id` with a ready index.
pub(super) fn ready(view: &ReadView, id: u64) -> Result<Vec<String>, StoreError> {
    Ok(definitions(view, id)?
        .into_iter()
        .filter(|(_, state)| *state == State::Ready)
        .map(|(p, _)| p)
        .collect())
}

/// Table `id`'s indexes, with their entries counted.
pub(super) fn list(view: &ReadView, id: u64) -> Result<Vec<IndexInfo>, StoreError> {
    let mut out = Vec::new();
    for (property, state) in definitions(view, id)? {
        let prefix = entry_prefix(id, &property);
        let mut entries = 0u64;
        for item in view.range_of(Tree::Index, &prefix, &entries_end(&prefix))? {
            item?;
            entries += 1;
        }
        let progress = match &state {
            State::Ready => None,
            State::Building(cursor) => Some(super::index_build::progress(view, id, cursor.as_deref())?),
        };
        out.push(IndexInfo {
            property,
            ready: state == State::Ready,
            entries,
            progress,
        });
    }
    Ok(out)
}

/// One page of a query from table `id`'s indexes (`Store::index_scan_into`).
pub(super) fn scan(
    view: &ReadView,
    id: u64,
    request: &IndexScanRequest,
    sink: &mut (dyn RowSink + '_),
) -> Result<Option<ScanEnd>, StoreError> {
    let ready = ready(view, id)?;
    if request.ranges.iter().any(|(property, _)| !ready.contains(property)) {
        return Ok(None);
    }
    if let Some(streams) = super::index_stream::single_values(view, id, request)? {
        return super::index_stream::page(view, id, request, streams, sink).map(Some);
    }
    let from = request.from.as_ref().map(EntityKey::as_bytes);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for (property, ranges) in &request.ranges {
        let prefix = entry_prefix(id, property);
        for (start, end) in ranges {
            if start >= end {
                continue;
            }
            let lo = [prefix.as_slice(), start].concat();
            let hi = [prefix.as_slice(), end].concat();
            for item in view.range_of(Tree::Index, &lo, &hi)? {
                let (k, v) = item?;
                let key = entity_key_of(k.bytes(), v.bytes())?;
                if from.is_some_and(|f| key < f) {
                    continue;
                }
                if keys.len() == request.max_candidates {
                    return Ok(None);
                }
                keys.push(key.to_vec());
            }
        }
    }
    let paging = request.candidates_in_key_order(&mut keys);
    let mut page = PageBuilder::new(&paging, sink);
    for key in keys {
        let row = row_key(id, &key);
        let Some(stored) = view.get(Tree::Entities, &row)? else {
            return Err(StoreError::failure(
                FailureKind::Corrupt,
                "an index entry whose entity is missing",
            ));
        };
        if let Some(end) = page.offer(KeyRef::new(&key), unseal(&row, stored.bytes())?) {
            return Ok(Some(end));
        }
    }
    Ok(Some(page.finish()))
}

/// One way an index differs from its table (`tafel check`).
pub(super) struct Mismatch {
    pub(super) property: String,
    /// The entity key the entry names, or should.
    pub(super) key: Vec<u8>,
    pub(super) problem: &'static str,
}

/// Compares each index of table `id` with the entries its entities give
/// (`encoder`, the service's); returns the entries read and what differs. A
/// building index is whole only up to its cursor: past it, an entry a write
/// made must be right, but a missing one is the build's to write.
pub(super) fn verify(view: &ReadView, id: u64, encoder: &IndexEncoder) -> Result<(u64, Vec<Mismatch>), StoreError> {
    let (mut entries, mut found) = (0u64, Vec::new());
    for (property, state) in definitions(view, id)? {
        let prefix = entry_prefix(id, &property);
        let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for item in view.range_of(Tree::Entities, &id.to_be_bytes(), &(id + 1).to_be_bytes())? {
            let (k, v) = item?;
            let k = k.bytes();
            // A damaged value is reported as such by the check's own walk.
            let Ok(value) = unseal(k, v.bytes()) else { continue };
            let key = k.get(8..).unwrap_or_default();
            if let Some(encoded) = encode(encoder, value, &property)? {
                want.insert(entry(&prefix, &encoded, key)?.0, key.to_vec());
            }
        }
        for item in view.range_of(Tree::Index, &prefix, &entries_end(&prefix))? {
            let (k, v) = item?;
            entries += 1;
            if want.remove(k.bytes()).is_none() {
                found.push(Mismatch {
                    property: property.clone(),
                    key: entity_key_of(k.bytes(), v.bytes()).unwrap_or(k.bytes()).to_vec(),
                    problem: "has an index entry its entity does not give (stale or damaged)",
                });
            }
        }
        let built = |key: &[u8]| match &state {
            State::Ready => true,
            State::Building(cursor) => cursor.as_deref().is_some_and(|c| key <= c),
        };
        found.extend(want.into_values().filter(|key| built(key)).map(|key| Mismatch {
            property: property.clone(),
            key,
            problem: "has no index entry though the entity has the property",
        }));
    }
    Ok((entries, found))
}
