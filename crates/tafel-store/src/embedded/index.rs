//! Secondary indexes in the embedded store (docs/design/indexes.md). A table's
//! index on a property is a META row `index/{table id}/{property}` (its state)
//! and one row of the `index` tree per entity with the property:
//! `table id ‖ property 0x00 ‖ encoded value ‖ entity key` → the entity key's
//! length (the encoding is the service's, opaque here). The writer changes the
//! entries in the entity's own commit, from its stored forms before and after.
//!
//! The index `*` ([`ALL_PROPERTIES`]) asks for every property's entries, each
//! under its property's own name: an entry is a fact about its entity, written
//! once whichever definitions ask for it, so a query on P reads the P entries
//! whether `*` or an index on P made them. Dropping `*` removes the entries of
//! the properties without a definition of their own; dropping one of those
//! while `*` stays keeps its entries.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::sync::Arc;

use super::apply::Writer;
use super::checksums::{seal, unseal};
use super::commit::ReadView;
use super::engine::entity_seal;
use super::engine::tree::{ReadTrees, Tree};
use super::index_build::{Build, State};
use super::schema::{row_key, to_store_error};
use crate::error::{FailureKind, StoreError};
use crate::key::{EntityKey, KeyRef};
use crate::paging::PageBuilder;
use crate::traits::{IndexEncoder, IndexInfo, IndexScanRequest, RowSink, ScanEnd, ALL_PROPERTIES};

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

/// An index row: its key and value (the entity key's length).
pub(super) type IndexRow = (Vec<u8>, [u8; 2]);

/// The index rows of entity `key` of table `id`, from its stored form.
pub(super) fn entity_entries(
    encoder: &IndexEncoder,
    id: u64,
    definitions: &[String],
    key: &[u8],
    value: &[u8],
) -> Result<Vec<IndexRow>, StoreError> {
    encoder
        .entries_or_fail(definitions, value)?
        .iter()
        .map(|(p, e)| entry(&entry_prefix(id, p), e, key))
        .collect()
}

/// The property an entry of table `id` is under (`None`: not an entry's key).
fn property_of(entry: &[u8]) -> Option<&str> {
    let rest = entry.get(8..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Calls `each` with every property that has entries on table `id`, in order,
/// seeking past each property's entries rather than reading them.
fn properties_with_entries(
    trees: &impl ReadTrees,
    id: u64,
    mut each: impl FnMut(&str) -> Result<ControlFlow<()>, StoreError>,
) -> Result<(), StoreError> {
    let (mut lo, hi) = (id.to_be_bytes().to_vec(), (id + 1).to_be_bytes());
    loop {
        let first = match trees.range_of(Tree::Index, &lo, &hi)?.next() {
            Some(item) => item?.0.bytes().to_vec(),
            None => return Ok(()),
        };
        let property = property_of(&first)
            .ok_or_else(|| StoreError::failure(FailureKind::Corrupt, "corrupt index entry"))?
            .to_owned();
        if each(&property)?.is_break() {
            return Ok(());
        }
        lo = entries_end(&entry_prefix(id, &property));
    }
}

/// The entries under `property` on table `id`.
fn count_entries(trees: &impl ReadTrees, id: u64, property: &str) -> Result<u64, StoreError> {
    let prefix = entry_prefix(id, property);
    let mut n = 0u64;
    for item in trees.range_of(Tree::Index, &prefix, &entries_end(&prefix))? {
        item?;
        n += 1;
    }
    Ok(n)
}

/// The properties with entries on table `id` that no definition but `*` asks for.
fn only_all(trees: &impl ReadTrees, id: u64, defs: &[(String, State)]) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    properties_with_entries(trees, id, |p| {
        if !defs.iter().any(|(d, _)| d == p) {
            out.push(p.to_owned());
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(out)
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
        let moved = encoder.moved(properties, old, new)?;
        for (p, e) in &moved.gone {
            self.tx.remove(Tree::Index, &entry(&entry_prefix(id, p), e, key)?.0)?;
        }
        for (p, e) in &moved.came {
            let (k, v) = entry(&entry_prefix(id, p), e, key)?;
            self.tx.insert(Tree::Index, &k, &v)?;
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

    /// Drops the index and the entries no other definition asks for (see the
    /// top); `Ok(false)` if there was none.
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
        let rest = definitions(&self.tx, t.id)?;
        let gone = match property == ALL_PROPERTIES {
            true => only_all(&self.tx, t.id, &rest)?,
            false if rest.iter().any(|(p, _)| p == ALL_PROPERTIES) => Vec::new(),
            false => vec![property.to_owned()],
        };
        for p in gone {
            let prefix = entry_prefix(t.id, &p);
            self.tx.remove_range(Tree::Index, &prefix, &entries_end(&prefix))?;
        }
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

/// Table `id`'s indexes, with their entries counted (`*`'s: those of the
/// properties without a definition of their own).
pub(super) fn list(view: &ReadView, id: u64) -> Result<Vec<IndexInfo>, StoreError> {
    let mut out = Vec::new();
    let defs = definitions(view, id)?;
    for (property, state) in defs.iter().cloned() {
        let entries = match property == ALL_PROPERTIES {
            true => only_all(view, id, &defs)?
                .iter()
                .map(|p| count_entries(view, id, p))
                .sum::<Result<u64, _>>()?,
            false => count_entries(view, id, &property)?,
        };
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
    let every = ready.iter().any(|p| p == ALL_PROPERTIES);
    if !every && request.ranges.iter().any(|(property, _)| !ready.contains(property)) {
        return Ok(None);
    }
    if let Some(streams) = super::index_stream::single_values(view, id, request)? {
        return super::index_stream::page(view, id, request, streams, sink).map(Some);
    }
    let from = request.from.as_ref().map(EntityKey::as_bytes);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for (lo, hi) in entry_ranges(id, request) {
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
    let paging = request.candidates_in_key_order(&mut keys);
    let mut page = PageBuilder::new(&paging, sink);
    for key in keys {
        if let Some(end) = offer(view, id, &key, &mut page)? {
            return Ok(Some(end));
        }
    }
    Ok(Some(page.finish()))
}

/// The index-key ranges `[lo, hi)` of a request's value ranges on table `id`,
/// the empty ones left out.
pub(super) fn entry_ranges(id: u64, request: &IndexScanRequest) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
    request.ranges.iter().flat_map(move |(property, ranges)| {
        let prefix = entry_prefix(id, property);
        ranges
            .iter()
            .filter(|(start, end)| start < end)
            .map(move |(start, end)| ([prefix.as_slice(), start].concat(), [prefix.as_slice(), end].concat()))
    })
}

/// Reads candidate `key`'s entity and offers it to the page: how the page
/// ends, if it ends at it.
pub(super) fn offer<S: RowSink + ?Sized>(
    view: &ReadView,
    id: u64,
    key: &[u8],
    page: &mut PageBuilder<'_, S>,
) -> Result<Option<ScanEnd>, StoreError> {
    let row = row_key(id, key);
    let Some(stored) = view.get(Tree::Entities, &row)? else {
        return Err(StoreError::failure(
            FailureKind::Corrupt,
            "an index entry whose entity is missing",
        ));
    };
    Ok(page.offer(KeyRef::new(key), entity_seal::unseal(&row, stored.bytes())?))
}

/// One way an index differs from its table (`tafel check`).
pub(super) struct Mismatch {
    pub(super) property: String,
    /// The entity key the entry names, or should.
    pub(super) key: Vec<u8>,
    pub(super) problem: &'static str,
}

/// Compares the index entries of table `id` with those its entities give its
/// definitions (`encoder`, the service's); returns the entries read and what
/// differs. A building index is whole only up to its cursor: past it, an entry
/// a write made must be right, but a missing one is the build's to write.
pub(super) fn verify(view: &ReadView, id: u64, encoder: &IndexEncoder) -> Result<(u64, Vec<Mismatch>), StoreError> {
    let defs = definitions(view, id)?;
    // Each wanted entry → (its property, its entity key, whether a definition
    // that asks for it is built past the entity).
    let mut want: BTreeMap<Vec<u8>, (String, Vec<u8>, bool)> = BTreeMap::new();
    // Without definitions no entity wants an entry: its entities are not read.
    let entities_end = if defs.is_empty() { id } else { id + 1 };
    for item in view.range_of(Tree::Entities, &id.to_be_bytes(), &entities_end.to_be_bytes())? {
        let (k, v) = item?;
        let k = k.bytes();
        // A damaged value is reported as such by the check's own walk.
        let Ok(value) = entity_seal::unseal(k, v.bytes()) else {
            continue;
        };
        let key = k.get(8..).unwrap_or_default();
        for (property, state) in &defs {
            let built = match state {
                State::Ready => true,
                State::Building(cursor) => cursor.as_deref().is_some_and(|c| key <= c),
            };
            for (p, e) in encoder.entries_or_fail(std::slice::from_ref(property), value)? {
                let slot = want
                    .entry(entry(&entry_prefix(id, &p), &e, key)?.0)
                    .or_insert_with(|| (p, key.to_vec(), false));
                slot.2 |= built;
            }
        }
    }
    let (mut entries, mut found) = (0u64, Vec::new());
    for item in view.range_of(Tree::Index, &id.to_be_bytes(), &(id + 1).to_be_bytes())? {
        let (k, v) = item?;
        entries += 1;
        if want.remove(k.bytes()).is_none() {
            found.push(Mismatch {
                property: property_of(k.bytes()).unwrap_or("?").to_owned(),
                key: entity_key_of(k.bytes(), v.bytes()).unwrap_or(k.bytes()).to_vec(),
                problem: "has an index entry its entity does not give (stale or damaged)",
            });
        }
    }
    found.extend(want.into_values().filter(|w| w.2).map(|(property, key, _)| Mismatch {
        property,
        key,
        problem: "has no index entry though the entity has the property",
    }));
    Ok((entries, found))
}
