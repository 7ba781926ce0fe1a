//! A [`Disk`] that reads the data directory and keeps every write in memory,
//! so `tafel check` can open a store the way the server does (mend a torn
//! header, replay the log) without changing a byte of it. Without a directory
//! it is `serve --in-memory`'s disk: files that start empty, live in memory
//! only (sparse: pages of zeros are not held) and go with the process; syncs
//! do nothing, and a write past the cap fails as a full disk does (ENOSPC).
//! There the log is a sink: its records are never read back (the store is
//! never recovered nor, its disk regaining no room, reopened), so none is kept.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use redb::backends::InMemoryBackend;
use redb::StorageBackend;

use super::disk::{Disk, DiskFile, LOCK_FILE};
use super::wal;

const PAGE: u64 = 4096;

pub(in crate::embedded) struct ScratchDisk {
    /// The directory read; none for a disk in memory only.
    dir: Option<PathBuf>,
    files: Mutex<HashMap<String, Arc<ScratchFile>>>,
    room: Arc<Room>,
    /// The log of a disk in memory only.
    log: Arc<Sink>,
    /// A shared lock on the server's lock file, when there is one: a running
    /// server holds it exclusively, and its files change under a reader.
    _lock: Option<File>,
}

impl ScratchDisk {
    pub(in crate::embedded) fn new(dir: &Path) -> io::Result<Self> {
        let lock = match File::open(dir.join(LOCK_FILE)) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Some(f) = &lock {
            match rustix::fs::flock(f, rustix::fs::FlockOperation::NonBlockingLockShared) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        format!(
                            "{} is in use by a running Tafel: stop it first, or check a copy",
                            dir.display()
                        ),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(ScratchDisk {
            dir: Some(dir.to_owned()),
            files: Mutex::default(),
            room: Arc::new(Room {
                held: AtomicU64::new(0),
                cap: u64::MAX,
            }),
            log: Arc::default(),
            _lock: lock,
        })
    }

    /// A disk in memory only, whose files may hold `cap` bytes together.
    pub(in crate::embedded) fn memory(cap: u64) -> Self {
        ScratchDisk {
            dir: None,
            files: Mutex::default(),
            room: Arc::new(Room {
                held: AtomicU64::new(0),
                cap,
            }),
            log: Arc::default(),
            _lock: None,
        }
    }
}

/// The bytes all files' pages hold, and how many they may.
struct Room {
    held: AtomicU64,
    cap: u64,
}

impl Room {
    /// Takes room for one more page, or says the disk is full.
    fn take(&self) -> io::Result<()> {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                (h + PAGE <= self.cap).then_some(h + PAGE)
            })
            .map(|_| ())
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOSPC))
    }

    fn give_back(&self, pages: u64) {
        self.held.fetch_sub(pages * PAGE, Ordering::Relaxed);
    }
}

impl Disk for ScratchDisk {
    fn open(&self, name: &str) -> io::Result<Arc<dyn DiskFile>> {
        if self.dir.is_none() && name == wal::FILE_NAME {
            return Ok(self.log.clone());
        }
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = files.get(name) {
            return Ok(f.clone());
        }
        let base = match self.dir.as_ref().map(|d| File::open(d.join(name))) {
            None => None,
            Some(Ok(f)) => Some(f),
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => None,
            Some(Err(e)) => return Err(e),
        };
        let len = match &base {
            Some(f) => f.metadata()?.len(),
            None => 0,
        };
        let file = Arc::new(ScratchFile {
            base,
            // The log is as large as it was made (LOG_SIZE) on any disk: the
            // cap is on the store file, which grows with the data, so that
            // a full store fails as a full disk does (on the store file).
            // (In memory, the log is the sink, not a file of these.)
            room: (name != wal::FILE_NAME).then(|| self.room.clone()),
            state: Mutex::new(State {
                len,
                base_visible: len,
                pages: HashMap::new(),
            }),
        });
        files.insert(name.to_owned(), file.clone());
        Ok(file)
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }

    fn free_bytes(&self) -> io::Result<u64> {
        Ok(self.room.cap.saturating_sub(self.room.held.load(Ordering::Relaxed)))
    }

    fn locks(&self, _: &str) -> io::Result<Box<dyn StorageBackend>> {
        // One reader in this process: no redb locks to take (see `sim_disk.rs`).
        Ok(Box::new(InMemoryBackend::new()))
    }

    fn files_in_memory(&self) -> bool {
        self.dir.is_none()
    }
}

/// The in-memory store's log: as long as it was made, reading as zeros (no
/// record), every write dropped.
#[derive(Default)]
struct Sink {
    len: AtomicU64,
}

impl DiskFile for Sink {
    fn len(&self) -> io::Result<u64> {
        Ok(self.len.load(Ordering::Relaxed))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.len.store(len, Ordering::Relaxed);
        Ok(())
    }

    fn pread(&self, out: &mut [u8], offset: u64) -> io::Result<()> {
        if offset + out.len() as u64 > self.len.load(Ordering::Relaxed) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        out.fill(0);
        Ok(())
    }

    fn pwritev(&self, bufs: &mut [IoSlice<'_>], offset: u64) -> io::Result<()> {
        let end = offset + bufs.iter().map(|b| b.len() as u64).sum::<u64>();
        self.len.fetch_max(end, Ordering::Relaxed);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

/// A file as read, with the pages written since laid over it.
struct ScratchFile {
    base: Option<File>,
    /// The room it takes from; none for the log.
    room: Option<Arc<Room>>,
    state: Mutex<State>,
}

struct State {
    len: u64,
    /// The file's bytes below this are the base file's unless written over;
    /// above it they are zeros (the file was cut shorter, then grew again).
    base_visible: u64,
    pages: HashMap<u64, Box<[u8]>>,
}

impl ScratchFile {
    fn take(&self) -> io::Result<()> {
        self.room.as_ref().map_or(Ok(()), |r| r.take())
    }

    fn give_back(&self, pages: u64) {
        if let Some(r) = &self.room {
            r.give_back(pages);
        }
    }

    /// Page `n` as the file holds it now.
    fn page(&self, state: &State, n: u64) -> io::Result<Box<[u8]>> {
        if let Some(p) = state.pages.get(&n) {
            return Ok(p.clone());
        }
        let mut page = vec![0u8; PAGE as usize].into_boxed_slice();
        let start = n * PAGE;
        let end = state.base_visible.min(start + PAGE);
        if let (Some(base), true) = (&self.base, end > start) {
            base.read_exact_at(&mut page[..(end - start) as usize], start)?;
        }
        Ok(page)
    }
}

impl DiskFile for ScratchFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().unwrap_or_else(PoisonError::into_inner).len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if len < state.len {
            // Bytes past the new end read as zeros should the file grow again.
            let last = len / PAGE;
            let cut = (len % PAGE) as usize;
            if cut > 0 {
                let mut page = self.page(&state, last)?;
                page[cut..].fill(0);
                if !state.pages.contains_key(&last) {
                    self.take()?;
                }
                state.pages.insert(last, page);
            }
            let before = state.pages.len();
            state.pages.retain(|&n, _| n * PAGE < len);
            self.give_back((before - state.pages.len()) as u64);
            state.base_visible = state.base_visible.min(len);
        }
        state.len = len;
        Ok(())
    }

    fn pread(&self, out: &mut [u8], offset: u64) -> io::Result<()> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if offset + out.len() as u64 > state.len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let within = (at % PAGE) as usize;
            let n = (PAGE as usize - within).min(out.len() - done);
            match state.pages.get(&(at / PAGE)) {
                Some(p) => out[done..done + n].copy_from_slice(&p[within..within + n]),
                None => {
                    let page = self.page(&state, at / PAGE)?;
                    out[done..done + n].copy_from_slice(&page[within..within + n]);
                }
            }
            done += n;
        }
        Ok(())
    }

    fn pwritev(&self, bufs: &mut [IoSlice<'_>], offset: u64) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut at = offset;
        for buf in bufs.iter() {
            let mut data: &[u8] = buf;
            while !data.is_empty() {
                let n = at / PAGE;
                let within = (at % PAGE) as usize;
                let take = (PAGE as usize - within).min(data.len());
                // A zero page past the base file reads as zeros unstored: a
                // new log, written with zeros up front, takes no memory.
                let past_base = n * PAGE >= state.base_visible;
                let unstored = |page: &[u8]| past_base && page.iter().all(|&b| b == 0);
                if let Some(page) = state.pages.get_mut(&n) {
                    // A held page is written in place (redb rewrites pages whole).
                    page[within..within + take].copy_from_slice(&data[..take]);
                    if unstored(page) {
                        state.pages.remove(&n);
                        self.give_back(1);
                    }
                } else {
                    let mut page = self.page(&state, n)?;
                    page[within..within + take].copy_from_slice(&data[..take]);
                    if !unstored(&page) {
                        self.take()?;
                        state.pages.insert(n, page);
                    }
                }
                data = &data[take..];
                at += take as u64;
            }
        }
        state.len = state.len.max(at);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stay_in_memory_and_read_back_over_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("f"), vec![7u8; 10_000]).expect("write");
        let disk = ScratchDisk::new(dir.path()).expect("disk");
        let f = disk.open("f").expect("open");
        f.pwrite(&[1; 5000], 3000).expect("pwrite");
        let mut all = vec![0u8; 10_000];
        f.pread(&mut all, 0).expect("pread");
        assert!(all[..3000].iter().all(|&b| b == 7));
        assert!(all[3000..8000].iter().all(|&b| b == 1));
        assert!(all[8000..].iter().all(|&b| b == 7));
        // Shorter, then longer: the cut-off bytes come back as zeros.
        f.set_len(5000).expect("shrink");
        f.set_len(12_000).expect("grow");
        f.pread(&mut all, 2000).expect("pread");
        assert!(all[..1000].iter().all(|&b| b == 7));
        assert!(all[1000..3000].iter().all(|&b| b == 1));
        assert!(all[3000..].iter().all(|&b| b == 0));
        assert_eq!(f.len().expect("len"), 12_000);
        assert!(f.pread(&mut [0u8; 2], 11_999).is_err());
        // A new file of zeros takes no pages.
        let log = disk.open("new").expect("open new");
        log.pwrite(&vec![0u8; 1 << 20], 0).expect("zeros");
        assert_eq!(log.len().expect("len"), 1 << 20);
        // Nothing reached the directory.
        assert_eq!(std::fs::read(dir.path().join("f")).expect("read"), vec![7u8; 10_000]);
        assert!(!dir.path().join("new").exists());
    }

    #[test]
    fn a_memory_disk_fills_up_like_a_disk_and_frees_room() {
        let disk = ScratchDisk::memory(3 * PAGE);
        let f = disk.open("f").expect("open");
        f.pwrite(&[1; 8192], 0).expect("two pages fit");
        assert_eq!(disk.free_bytes().expect("free"), PAGE);
        let full = f.pwrite(&[2; 8192], 8192).expect_err("a fourth page does not fit");
        assert_eq!(full.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(full.kind(), io::ErrorKind::StorageFull);
        // Zeros and a shorter file give room back.
        f.pwrite(&[0; 4096], 0).expect("zeros");
        f.set_len(4096).expect("shrink");
        assert_eq!(disk.free_bytes().expect("free"), 3 * PAGE);
        f.pwrite(&[3; 4096], 4096).expect("room again");
        // The log takes none of it, and keeps nothing.
        let log = disk.open(wal::FILE_NAME).expect("log");
        log.pwrite(&[4; 8 * 4096], 0).expect("the log is not capped");
        let mut back = [9u8; 4096];
        log.pread(&mut back, 4096).expect("read");
        assert_eq!(back, [0u8; 4096]);
        assert_eq!(log.len().expect("len"), 8 * 4096);
        assert!(disk.files_in_memory());
    }
}
