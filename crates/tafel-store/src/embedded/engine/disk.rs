//! The one seam through which all of the embedded store's file I/O passes: the
//! log (`wal.rs`) and the page file (`page_file.rs`) see a [`Disk`] holding
//! named [`DiskFile`]s. In production that is the data directory ([`OsDisk`]);
//! the simulation tests put a disk under it that records every write and sync
//! and can lose power, fill up or fail a sync (`sim_disk.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::StorageBackend;

/// One file of the store.
pub(in crate::embedded) trait DiskFile: Send + Sync {
    fn len(&self) -> io::Result<u64>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Fills `out` from `offset`; `UnexpectedEof` if the file ends first.
    fn pread(&self, out: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `bufs`, one after another, from `offset`.
    fn pwritev(&self, bufs: &mut [IoSlice<'_>], offset: u64) -> io::Result<()>;
    fn pwrite(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.pwritev(&mut [IoSlice::new(data)], offset)
    }
    /// Makes every write so far durable.
    fn sync_data(&self) -> io::Result<()>;
    /// Sends `offset..offset + len` to the disk and waits for it: pacing only
    /// (see `page_file::flusher::Writeback`); nothing is durable before [`Self::sync_data`].
    fn write_back(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

/// Where the store's files live.
pub(in crate::embedded) trait Disk: Send + Sync {
    /// Opens the file `name`, created empty if missing.
    fn open(&self, name: &str) -> io::Result<Arc<dyn DiskFile>>;
    /// Makes the creation of the files durable.
    fn sync_dir(&self) -> io::Result<()>;
    /// Bytes the files may still grow by before the disk is full.
    fn free_bytes(&self) -> io::Result<u64>;
    /// What takes redb's locks on the file `name`, so that no second process
    /// opens the store (the page file leaves every lock call to it).
    fn locks(&self, name: &str) -> io::Result<Box<dyn StorageBackend>>;
    /// Whether the files live in this process's memory only (`serve
    /// --in-memory`), gone with it. Then:
    /// - room never comes back once full (only writes could free it, and they
    ///   fail), so the store does not reopen itself after a full disk (`reopen.rs`);
    /// - the log's records are dropped, never read back, and never synced: a
    ///   write's own thread may run its group (`queue.rs`);
    /// - scans skip each row's checksum: checksums guard files, where a row can
    ///   be damaged, and these pages never leave the process;
    /// - redb's page writes go straight to the file on the writer's thread: a
    ///   write is one copy and a sync nothing, so the page flusher
    ///   (`page_file.rs`) would only copy each page twice more.
    fn files_in_memory(&self) -> bool {
        false
    }
}

/// The data directory, held by this process alone while the value lives.
pub(in crate::embedded) struct OsDisk {
    dir: PathBuf,
    _lock: File,
}

/// The file whose lock says a process has the data directory.
pub(in crate::embedded) const LOCK_FILE: &str = "tafel.lock";

impl OsDisk {
    pub(in crate::embedded) fn new(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        // Before anything is read or mended: a second process must not take a
        // store another is still creating for one whose creation was cut short.
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))?;
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!("{} is in use by another Tafel process", dir.display()),
                ))
            }
            Err(e) => return Err(e.into()),
        }
        Ok(OsDisk {
            dir: dir.to_owned(),
            _lock: lock,
        })
    }

    fn open_file(&self, name: &str) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(name))
    }
}

impl Disk for OsDisk {
    fn open(&self, name: &str) -> io::Result<Arc<dyn DiskFile>> {
        Ok(Arc::new(self.open_file(name)?))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn free_bytes(&self) -> io::Result<u64> {
        let stat = rustix::fs::statvfs(&self.dir)?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    fn locks(&self, name: &str) -> io::Result<Box<dyn StorageBackend>> {
        // redb's locks are open-file-description locks: this descriptor of its
        // own holds them whatever becomes of the one the I/O goes through.
        let backend = FileBackend::new(self.open_file(name)?).map_err(io::Error::other)?;
        Ok(Box::new(backend))
    }
}

impl DiskFile for File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn pread(&self, out: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at(out, offset)
    }

    fn pwritev(&self, mut bufs: &mut [IoSlice<'_>], mut offset: u64) -> io::Result<()> {
        while !bufs.is_empty() {
            let n = match rustix::io::pwritev(self, bufs, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            offset += n as u64;
            IoSlice::advance_slices(&mut bufs, n);
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    #[cfg(target_os = "linux")]
    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        let (offset, len) = (offset as libc::off64_t, len as libc::off64_t);
        loop {
            // SAFETY: a plain syscall on an open descriptor this `File` owns; it
            // reads no memory of ours.
            let rc = unsafe { libc::sync_file_range(self.as_raw_fd(), offset, len, flags) };
            if rc == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
