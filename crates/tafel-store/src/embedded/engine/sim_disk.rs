//! A simulated disk, for tests: files in memory, and a trace of every write,
//! length change and sync in the order the store made them, with the test's
//! own marks among them (a request sent, a request answered). From the trace,
//! [`SimDisk::power_loss`] builds the files as a power loss at any point of it
//! would leave them: what was synced stays; of the writes since a file's last
//! sync, none, all, some, or a prefix with the next one torn at a sector
//! boundary, its torn sector zero-filled or garbled.
//!
//! The model assumes what redb and the log assume of a real disk: a write
//! harms no byte outside its own range (SQLite's "powersafe overwrite"), and a
//! sync, once it returned, holds. A failed sync makes nothing durable. Faults
//! can also be set to happen live: a full disk, a failing sync.

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex, MutexGuard};

use redb::backends::InMemoryBackend;
use redb::StorageBackend;

use super::disk::{Disk, DiskFile};

/// What the test marks in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::embedded) enum Mark {
    /// Operation `n` was handed to the store.
    Sent(usize),
    /// The store answered operation `n` with success.
    Acked(usize),
}

#[derive(Clone)]
enum Event {
    Write { file: usize, offset: u64, data: Arc<[u8]> },
    SetLen { file: usize, len: u64 },
    Sync { file: usize },
    Mark(Mark),
}

/// Faults the disk shows while the store runs.
#[derive(Default, Clone)]
pub(in crate::embedded) struct Faults {
    /// A write past this many bytes of all files together fails: the disk is full.
    pub(in crate::embedded) capacity: Option<u64>,
    /// Every sync of the file of this name fails with EIO.
    pub(in crate::embedded) failing_sync: Option<&'static str>,
    /// Every write to the file of this name first takes this long (a slow
    /// disk, or a thread the scheduler left waiting).
    pub(in crate::embedded) slow_writes: Option<(&'static str, std::time::Duration)>,
}

#[derive(Default)]
struct Sim {
    names: Vec<String>,
    /// Each file's bytes as the store sees them, synced or not.
    files: Vec<Vec<u8>>,
    /// Per file, the end of the furthest write: the bytes that take room on
    /// the disk (a file grown by `set_len` is sparse until written).
    written: Vec<u64>,
    /// The files as the disk was made with them.
    base: Vec<Vec<u8>>,
    trace: Vec<Event>,
    faults: Faults,
}

/// The files a power loss left: name and bytes.
pub(in crate::embedded) type Image = BTreeMap<String, Vec<u8>>;

#[derive(Clone, Default)]
pub(in crate::embedded) struct SimDisk(Arc<Mutex<Sim>>);

impl SimDisk {
    /// A disk holding `image`'s files, all of them durable.
    pub(in crate::embedded) fn with(image: Image) -> Self {
        let (names, files): (Vec<String>, Vec<Vec<u8>>) = image.into_iter().unzip();
        SimDisk(Arc::new(Mutex::new(Sim {
            names,
            written: files.iter().map(|f| f.len() as u64).collect(),
            base: files.clone(),
            files,
            ..Sim::default()
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Sim> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(in crate::embedded) fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Bytes of all files together, as the store sees them.
    pub(in crate::embedded) fn bytes_used(&self) -> u64 {
        self.lock().written.iter().sum()
    }

    pub(in crate::embedded) fn mark(&self, mark: Mark) {
        self.lock().trace.push(Event::Mark(mark));
    }

    /// Points of the trace a power loss can strike: 0 (before anything) to its length.
    pub(in crate::embedded) fn trace_len(&self) -> usize {
        self.lock().trace.len()
    }

    /// The marks among the first `cut` events.
    pub(in crate::embedded) fn marks(&self, cut: usize) -> Vec<Mark> {
        let sim = self.lock();
        let events = sim.trace.get(..cut).unwrap_or(&sim.trace);
        events
            .iter()
            .filter_map(|e| match e {
                Event::Mark(m) => Some(*m),
                _ => None,
            })
            .collect()
    }

    /// Syncs of the file `name` among the first `cut` events.
    pub(in crate::embedded) fn syncs(&self, cut: usize, name: &str) -> usize {
        let sim = self.lock();
        let events = sim.trace.get(..cut).unwrap_or(&sim.trace);
        let id = sim.names.iter().position(|n| n == name);
        events
            .iter()
            .filter(|e| matches!(e, Event::Sync { file } if Some(*file) == id))
            .count()
    }

    /// The trace, one event a line, the power loss marked after event `cut`.
    pub(in crate::embedded) fn describe(&self, cut: usize) -> String {
        let sim = self.lock();
        let mut out = String::new();
        for (i, e) in sim.trace.iter().enumerate() {
            if i == cut {
                out.push_str("---- power loss ----\n");
            }
            let line = match e {
                Event::Write { file, offset, data } => {
                    let name = &sim.names[*file];
                    // A log write begins with a record: its number says which.
                    let record = data
                        .get(8..16)
                        .filter(|_| name == super::wal::FILE_NAME)
                        .and_then(|b| b.try_into().ok())
                        .map(u64::from_le_bytes)
                        .map_or(String::new(), |seq| format!(", record {seq}"));
                    format!("write {name} at {offset}, {} bytes{record}", data.len())
                }
                Event::SetLen { file, len } => format!("set_len {} {len}", sim.names[*file]),
                Event::Sync { file } => format!("sync {}", sim.names[*file]),
                Event::Mark(m) => format!("{m:?}"),
            };
            out.push_str(&format!("{i}: {line}\n"));
        }
        out
    }

    /// The index of the first write to the file `name`, if any.
    pub(in crate::embedded) fn first_write_to(&self, name: &str) -> Option<usize> {
        let sim = self.lock();
        let id = sim.names.iter().position(|n| n == name)?;
        sim.trace
            .iter()
            .position(|e| matches!(e, Event::Write { file, .. } if *file == id))
    }

    /// The files as a power loss right after the first `cut` events leaves
    /// them if it loses every write not yet synced.
    pub(in crate::embedded) fn synced(&self, cut: usize) -> Image {
        self.power_loss_with(cut, |_, _| {})
    }

    /// The files as a power loss right after the first `cut` events leaves
    /// them, the unsynced writes' fate drawn from `rng`.
    pub(in crate::embedded) fn power_loss(&self, cut: usize, rng: &mut fastrand::Rng) -> Image {
        self.power_loss_with(cut, |file, ops| lose(file, ops, rng))
    }

    /// The files after the first `cut` events, `fate` applying to each what
    /// of its writes since its last sync survives.
    fn power_loss_with(&self, cut: usize, mut fate: impl FnMut(&mut Vec<u8>, &[&Event])) -> Image {
        let sim = self.lock();
        let mut durable = sim.base.clone();
        durable.resize(sim.names.len(), Vec::new());
        let mut pending: Vec<Vec<&Event>> = vec![Vec::new(); sim.names.len()];
        for e in sim.trace.get(..cut).unwrap_or(&sim.trace) {
            match e {
                Event::Write { file, .. } | Event::SetLen { file, .. } => pending[*file].push(e),
                Event::Sync { file } => {
                    for p in pending[*file].drain(..) {
                        apply(&mut durable[*file], p);
                    }
                }
                Event::Mark(_) => {}
            }
        }
        for (file, ops) in pending.iter().enumerate() {
            fate(&mut durable[file], ops);
        }
        sim.names.iter().cloned().zip(durable).collect()
    }
}

fn apply(file: &mut Vec<u8>, event: &Event) {
    match event {
        Event::Write { offset, data, .. } => put(file, *offset, data),
        Event::SetLen { len, .. } => file.resize(*len as usize, 0),
        Event::Sync { .. } | Event::Mark(_) => {}
    }
}

fn put(file: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if file.len() < end {
        file.resize(end, 0);
    }
    file[offset as usize..end].copy_from_slice(data);
}

/// Applies what of `ops` (the writes since the last sync) survives a power loss.
fn lose(file: &mut Vec<u8>, ops: &[&Event], rng: &mut fastrand::Rng) {
    if ops.is_empty() {
        return;
    }
    let sector: u64 = if rng.bool() { 512 } else { 4096 };
    match rng.u8(0..4) {
        // All lost.
        0 => {}
        // All there: the kernel wrote them back before the power went.
        1 => ops.iter().for_each(|e| apply(file, e)),
        // A prefix, then one torn write.
        2 => {
            let torn = rng.usize(0..ops.len());
            ops[..torn].iter().for_each(|e| apply(file, e));
            if let Event::Write { offset, data, .. } = ops[torn] {
                tear(file, *offset, data, sector, rng);
            }
        }
        // Any subset, sector by sector, each write's sectors kept or not on their own.
        _ => {
            for e in ops {
                match e {
                    Event::Write { offset, data, .. } => {
                        for (at, piece) in sectors(*offset, data, sector) {
                            if rng.bool() {
                                put(file, at, piece);
                            }
                        }
                    }
                    other if rng.bool() => apply(file, other),
                    _ => {}
                }
            }
        }
    }
}

/// Writes `data`'s whole sectors up to a random one, which is torn: left as
/// it was, zero-filled or garbled (within the write's own bytes).
fn tear(file: &mut Vec<u8>, offset: u64, data: &[u8], sector: u64, rng: &mut fastrand::Rng) {
    let pieces = sectors(offset, data, sector);
    let kept = rng.usize(0..pieces.len());
    for &(at, piece) in &pieces[..kept] {
        put(file, at, piece);
    }
    let (at, piece) = pieces[kept];
    match rng.u8(0..3) {
        0 => {}
        1 => put(file, at, &vec![0; piece.len()]),
        _ => put(file, at, &(0..piece.len()).map(|_| rng.u8(..)).collect::<Vec<u8>>()),
    }
}

/// `data` written at `offset`, cut at the disk's sector boundaries.
fn sectors(offset: u64, data: &[u8], sector: u64) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = offset;
    let mut rest = data;
    while !rest.is_empty() {
        let n = ((sector - at % sector) as usize).min(rest.len());
        out.push((at, &rest[..n]));
        at += n as u64;
        rest = &rest[n..];
    }
    out
}

struct SimFile {
    disk: SimDisk,
    id: usize,
}

impl SimFile {
    fn write(&self, offset: u64, data: Vec<u8>) -> io::Result<()> {
        let slow = {
            let sim = self.disk.lock();
            sim.faults.slow_writes.filter(|(name, _)| sim.names[self.id] == *name)
        };
        if let Some((_, delay)) = slow {
            std::thread::sleep(delay);
        }
        let mut sim = self.disk.lock();
        let end = offset + data.len() as u64;
        let grows = end.saturating_sub(sim.written[self.id]);
        if let Some(capacity) = sim.faults.capacity {
            if grows > 0 && sim.written.iter().sum::<u64>() + grows > capacity {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        sim.written[self.id] += grows;
        put(&mut sim.files[self.id], offset, &data);
        let (file, data) = (self.id, Arc::from(data));
        sim.trace.push(Event::Write { file, offset, data });
        Ok(())
    }
}

impl DiskFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.lock().files[self.id].len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut sim = self.disk.lock();
        sim.files[self.id].resize(len as usize, 0);
        sim.trace.push(Event::SetLen { file: self.id, len });
        Ok(())
    }

    fn pread(&self, out: &mut [u8], offset: u64) -> io::Result<()> {
        let sim = self.disk.lock();
        let bytes = &sim.files[self.id];
        let end = offset as usize + out.len();
        let from = bytes.get(offset as usize..end).ok_or(io::ErrorKind::UnexpectedEof)?;
        out.copy_from_slice(from);
        Ok(())
    }

    fn pwritev(&self, bufs: &mut [IoSlice<'_>], offset: u64) -> io::Result<()> {
        self.write(offset, bufs.iter().flat_map(|b| b.iter().copied()).collect())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut sim = self.disk.lock();
        if sim.faults.failing_sync == Some(sim.names[self.id].as_str()) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        sim.trace.push(Event::Sync { file: self.id });
        Ok(())
    }
}

impl Disk for SimDisk {
    fn open(&self, name: &str) -> io::Result<Arc<dyn DiskFile>> {
        let mut sim = self.lock();
        let id = match sim.names.iter().position(|n| n == name) {
            Some(id) => id,
            None => {
                sim.names.push(name.to_owned());
                sim.files.push(Vec::new());
                sim.written.push(0);
                sim.names.len() - 1
            }
        };
        Ok(Arc::new(SimFile { disk: self.clone(), id }))
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }

    fn free_bytes(&self) -> io::Result<u64> {
        let sim = self.lock();
        let used = sim.written.iter().sum::<u64>();
        Ok(sim.faults.capacity.map_or(u64::MAX, |c| c.saturating_sub(used)))
    }

    fn locks(&self, _: &str) -> io::Result<Box<dyn StorageBackend>> {
        // One process: no locks to take. This backend's lock calls say
        // "unsupported", which redb takes as no locking.
        Ok(Box::new(InMemoryBackend::new()))
    }
}
