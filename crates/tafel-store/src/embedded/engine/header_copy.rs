//! A copy of redb's file header as last synced, so that a header torn by a
//! power loss does not make the store unopenable.
//!
//! redb rewrites its header (magic number, commit slots) in place at every
//! commit and trusts the disk to write single bytes atomically: the magic
//! number, rewritten with the same bytes, survives. A disk whose sector is
//! torn, zero-filled or garbled mid-write breaks that, and redb then refuses
//! the file ("not a redb database"). So before the flusher writes a header,
//! the last synced one goes to `tafel.redb.header` and is synced there; on
//! open, a header without redb's magic number is put back from that copy,
//! which rolls the store back to the commit that copy names: the only one a
//! power loss mid-write can have left complete (redb writes no page a synced
//! commit uses until the next commit is synced).
//!
//! A store file without the magic number, with no copy and a log never
//! written to, is one whose creation never finished (redb writes the magic
//! last): nothing in the directory can hold an acknowledged write (that takes
//! a log record, or a checkpoint, whose header would have been copied before
//! the next), so it starts over empty.

use std::io;
use std::sync::Arc;

use super::disk::{Disk, DiskFile};

const COPY_FILE: &str = "tafel.redb.header";
/// redb's magic number, the first bytes of its file.
pub(in crate::embedded) const MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
/// Bytes of the file read at open as the synced header: redb's header fits.
const FIRST_PAGE: usize = 4096;

pub(in crate::embedded) struct HeaderCopy {
    copy: Arc<dyn DiskFile>,
    /// The header as of the last sync of the store file (the start of the file
    /// at open, until redb writes a header), and whether the copy holds it.
    synced: Vec<u8>,
    copied: bool,
    /// The last header written since that sync.
    written: Option<Vec<u8>>,
}

impl HeaderCopy {
    /// Repairs `file`'s header from the copy if a power loss tore it, and
    /// returns the header's state for the flusher.
    pub(in crate::embedded) fn open(disk: &dyn Disk, file: &dyn DiskFile) -> io::Result<Self> {
        let copy = disk.open(COPY_FILE)?;
        let saved = read_copy(&*copy)?;
        let len = file.len()?;
        let mut start = vec![0; FIRST_PAGE.min(len as usize)];
        file.pread(&mut start, 0)?;
        if len > 0 && !start.starts_with(&MAGIC) {
            match &saved {
                Some(header) if header.starts_with(&MAGIC) && header.len() <= start.len() => {
                    tracing::warn!("the store file's header was torn by a crash; putting back its last synced copy");
                    file.pwrite(header, 0)?;
                    start[..header.len()].copy_from_slice(header);
                }
                _ if super::wal::never_written(disk)? => {
                    tracing::warn!("the store file's creation never finished; starting it over, empty");
                    file.set_len(0)?;
                    start.clear();
                }
                // Not ours to mend: redb says what it is.
                _ => {}
            }
        }
        // What was read is the synced header only once it is on disk (after a
        // crash of the process alone it may still be in the page cache).
        file.sync_data()?;
        Ok(HeaderCopy {
            copy,
            synced: start,
            copied: false,
            written: None,
        })
    }

    /// Before a header of `len` bytes is written: the synced one goes to the copy.
    pub(in crate::embedded) fn before_writing(&mut self, len: usize) -> io::Result<()> {
        if self.copied || !self.synced.starts_with(&MAGIC) {
            return Ok(());
        }
        let header = &self.synced[..len.min(self.synced.len())];
        let mut record = Vec::with_capacity(8 + header.len());
        record.extend_from_slice(&(header.len() as u32).to_le_bytes());
        record.extend_from_slice(&crc32fast::hash(header).to_le_bytes());
        record.extend_from_slice(header);
        self.copy.pwrite(&record, 0)?;
        self.copy.sync_data()?;
        self.copied = true;
        Ok(())
    }

    /// A header was written (not yet synced).
    pub(in crate::embedded) fn wrote(&mut self, header: &[u8]) {
        self.written = Some(header.to_vec());
    }

    /// The store file was synced: the last header written is the synced one.
    pub(in crate::embedded) fn synced(&mut self) {
        if let Some(h) = self.written.take() {
            self.synced = h;
            self.copied = false;
        }
    }
}

/// The copy's header, if it holds an intact one.
fn read_copy(copy: &dyn DiskFile) -> io::Result<Option<Vec<u8>>> {
    let len = copy.len()?;
    if len < 8 {
        return Ok(None);
    }
    let mut head = [0u8; 8];
    copy.pread(&mut head, 0)?;
    let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
    if 8 + n > len || n > FIRST_PAGE as u64 {
        return Ok(None);
    }
    let mut header = vec![0; n as usize];
    copy.pread(&mut header, 8)?;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    Ok((crc32fast::hash(&header) == crc).then_some(header))
}
