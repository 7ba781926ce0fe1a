//! The backup file, version 2 (version 1 is the same without 'I' records; both
//! are read):
//!
//! ```text
//! "TAFELBAK"  u32 version  u32 info length  info (JSON)       ← plain, so `head` shows it
//! zstd stream (with its content checksum) of records:
//!   u8 tag  u32 length  payload
//!   'P' service properties   str account, bytes value
//!   'T' table                str account, str name, bytes acl
//!   'I' index of the last 'T' str property (before the table's rows)
//!   'R' rows of the last 'T' u32 count, then count × (bytes key, bytes value)
//!   'E' end                  u64 properties, u64 tables, u64 rows, u32 CRC-32 of
//!                            every byte before this record, header included
//! ```
//!
//! `str`/`bytes` are a u32 length and the bytes; integers are little-endian. The
//! end record makes a truncated file detectable, the CRC a record damaged in a
//! way zstd's own checksum would not catch (or a file spliced from two). Entity
//! keys and values are the store's own bytes: Timestamps and ETags come back as
//! they were, and both backends store the same bytes.

use std::io::{self, Read, Write};
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use tafel_store::{EntityKey, KeyRef, RowSink, TableRecord};

use crate::BackupError;

pub const MAGIC: &[u8; 8] = b"TAFELBAK";
pub const VERSION: u32 = 2;
/// The oldest version read (it has no index records).
const OLDEST: u32 = 1;
/// Rows gather into one record until it holds this many bytes.
const ROWS_RECORD: usize = 1 << 20;
/// A record longer than this is damage, not data (an entity is at most ~1 MiB).
const MAX_RECORD: u32 = 64 << 20;
/// zstd's first fast level: on tafel-bench's random ~1 KiB entities it compresses
/// at ~1 GB/s against level 1's ~450 MB/s (a backup runs while the server serves),
/// for a file 12% larger (docs/benchmark-history.md §11).
const ZSTD_LEVEL: i32 = -1;

const P: u8 = b'P';
const T: u8 = b'T';
const I: u8 = b'I';
const R: u8 = b'R';
const E: u8 = b'E';

/// What the header says about the backup.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Info {
    /// RFC 3339, UTC.
    pub created: String,
    /// The Tafel version that took it.
    pub tafel: String,
    /// The backend it was taken from.
    pub source: String,
}

/// What a backup holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub properties: u64,
    pub tables: u64,
    pub rows: u64,
}

/// Writes a backup into memory, from which the caller takes the compressed
/// bytes as they accumulate ([`Writer::take_output`]). Rows are pushed into it
/// as a [`RowSink`] straight from a snapshot's scan.
pub struct Writer {
    enc: zstd::stream::write::Encoder<'static, Vec<u8>>,
    crc: crc32fast::Hasher,
    counts: Counts,
    rows: Vec<u8>,
    rows_in_record: u32,
    last_key: Vec<u8>,
    /// The first failure of a push (which cannot return one); reported next.
    failed: Option<io::Error>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Writer {
    pub fn new(info: &Info) -> Result<Self, BackupError> {
        let info = serde_json::to_vec(info).map_err(|e| BackupError::Io(io::Error::other(e)))?;
        let mut header = Vec::with_capacity(16 + info.len());
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        put_bytes(&mut header, &info);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        let mut enc = zstd::stream::write::Encoder::new(header, ZSTD_LEVEL)?;
        enc.include_checksum(true)?;
        // One worker: zstd compresses on a thread of its own while the caller goes on
        // reading the snapshot, a pipeline of two cores instead of one.
        enc.multithread(1)?;
        Ok(Writer {
            enc,
            crc,
            counts: Counts::default(),
            rows: Vec::with_capacity(ROWS_RECORD + 4096),
            rows_in_record: 0,
            last_key: Vec::new(),
            failed: None,
        })
    }

    fn record(&mut self, tag: u8, payload: &[u8]) -> io::Result<()> {
        let mut head = [0u8; 5];
        head[0] = tag;
        head[1..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        self.crc.update(&head);
        self.crc.update(payload);
        self.enc.write_all(&head)?;
        self.enc.write_all(payload)
    }

    fn flush_rows(&mut self) -> io::Result<()> {
        if self.rows_in_record == 0 {
            return Ok(());
        }
        let mut payload = std::mem::take(&mut self.rows);
        payload[..4].copy_from_slice(&self.rows_in_record.to_le_bytes());
        let written = self.record(R, &payload);
        payload.clear();
        self.rows = payload;
        self.rows_in_record = 0;
        written
    }

    fn check(&mut self) -> Result<(), BackupError> {
        match self.failed.take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    pub fn properties(&mut self, account: &str, value: &[u8]) -> Result<(), BackupError> {
        self.check()?;
        let mut p = Vec::with_capacity(8 + account.len() + value.len());
        put_bytes(&mut p, account.as_bytes());
        put_bytes(&mut p, value);
        self.record(P, &p)?;
        self.counts.properties += 1;
        Ok(())
    }

    /// Starts a table: the rows pushed next are its.
    pub fn table(&mut self, account: &str, table: &TableRecord) -> Result<(), BackupError> {
        self.check()?;
        self.flush_rows()?;
        let mut p = Vec::new();
        put_bytes(&mut p, account.as_bytes());
        put_bytes(&mut p, table.name.as_bytes());
        put_bytes(&mut p, &table.acl);
        self.record(T, &p)?;
        self.counts.tables += 1;
        Ok(())
    }

    /// A secondary index of the table started last; before its rows.
    pub fn index(&mut self, property: &str) -> Result<(), BackupError> {
        self.check()?;
        let mut p = Vec::new();
        put_bytes(&mut p, property.as_bytes());
        Ok(self.record(I, &p)?)
    }

    /// The key of the last row pushed.
    pub fn last_key(&self) -> EntityKey {
        EntityKey::from_bytes(self.last_key.clone())
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The compressed bytes written so far and not yet taken.
    pub fn take_output(&mut self) -> Result<Vec<u8>, BackupError> {
        self.check()?;
        let next = Vec::with_capacity(self.enc.get_ref().capacity());
        Ok(std::mem::replace(self.enc.get_mut(), next))
    }

    /// Bytes waiting in [`Writer::take_output`].
    pub fn pending(&self) -> usize {
        self.enc.get_ref().len()
    }

    /// Writes the end record and returns the last bytes.
    pub fn finish(mut self) -> Result<Vec<u8>, BackupError> {
        self.check()?;
        self.flush_rows()?;
        let mut p = Vec::with_capacity(28);
        p.extend_from_slice(&self.counts.properties.to_le_bytes());
        p.extend_from_slice(&self.counts.tables.to_le_bytes());
        p.extend_from_slice(&self.counts.rows.to_le_bytes());
        let mut head = [0u8; 5];
        head[0] = E;
        head[1..].copy_from_slice(&(p.len() as u32 + 4).to_le_bytes());
        self.crc.update(&head);
        self.crc.update(&p);
        p.extend_from_slice(&self.crc.clone().finalize().to_le_bytes());
        self.enc.write_all(&head)?;
        self.enc.write_all(&p)?;
        Ok(self.enc.finish()?)
    }
}

impl RowSink for Writer {
    fn push(&mut self, key: KeyRef<'_>, value: &[u8]) -> ControlFlow<()> {
        if self.rows_in_record == 0 {
            self.rows.extend_from_slice(&[0; 4]);
        }
        put_bytes(&mut self.rows, key.as_bytes());
        put_bytes(&mut self.rows, value);
        self.rows_in_record += 1;
        self.counts.rows += 1;
        self.last_key.clear();
        self.last_key.extend_from_slice(key.as_bytes());
        if self.rows.len() >= ROWS_RECORD {
            if let Err(e) = self.flush_rows() {
                self.failed.get_or_insert(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// One thing a backup holds, in file order.
#[derive(Debug)]
pub enum Item {
    Properties {
        account: String,
        value: Vec<u8>,
    },
    Table {
        account: String,
        record: TableRecord,
    },
    /// A secondary index of the last table (declared before its rows).
    Index(String),
    /// Rows of the last table, in key order.
    Rows(Vec<(EntityKey, Vec<u8>)>),
}

/// Reads a backup, checking it as it goes; [`Reader::next_item`] returns `None`
/// only after the end record checked out.
pub struct Reader<R: Read> {
    dec: zstd::stream::read::Decoder<'static, io::BufReader<R>>,
    info: Info,
    crc: crc32fast::Hasher,
    counts: Counts,
    in_table: bool,
    ended: bool,
}

fn corrupt(what: impl Into<String>) -> BackupError {
    BackupError::Corrupt(what.into())
}

/// Reading the compressed part: zstd says why it stopped in an `io::Error`.
fn damaged(e: io::Error) -> BackupError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => BackupError::Truncated,
        io::ErrorKind::Other | io::ErrorKind::InvalidData => corrupt(format!("the compressed data is damaged ({e})")),
        _ => BackupError::Io(e),
    }
}

/// A cursor over a record's payload.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BackupError> {
        if self.0.len() < n {
            return Err(corrupt("a record is shorter than its fields"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, BackupError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, BackupError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8], BackupError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Result<String, BackupError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| corrupt("a name is not UTF-8"))
    }
    fn done(&self) -> Result<(), BackupError> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(corrupt("a record is longer than its fields")),
        }
    }
}

impl<R: Read> Reader<R> {
    pub fn new(mut input: R) -> Result<Self, BackupError> {
        let mut head = [0u8; 16];
        input.read_exact(&mut head).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => BackupError::NotABackup,
            _ => BackupError::Io(e),
        })?;
        if &head[..8] != MAGIC {
            return Err(BackupError::NotABackup);
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !(OLDEST..=VERSION).contains(&version) {
            return Err(BackupError::Version(version));
        }
        let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if len > 1 << 20 {
            return Err(corrupt("the header is too long"));
        }
        let mut info = vec![0u8; len as usize];
        input.read_exact(&mut info).map_err(damaged)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(&info);
        let info: Info = serde_json::from_slice(&info).map_err(|e| corrupt(format!("the header is damaged ({e})")))?;
        let dec = zstd::stream::read::Decoder::new(input)?;
        Ok(Reader {
            dec,
            info,
            crc,
            counts: Counts::default(),
            in_table: false,
            ended: false,
        })
    }

    pub fn info(&self) -> &Info {
        &self.info
    }

    /// What was read so far (all of it, once `next_item` returned `None`).
    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn next_item(&mut self) -> Result<Option<Item>, BackupError> {
        if self.ended {
            return Ok(None);
        }
        let mut head = [0u8; 5];
        self.dec.read_exact(&mut head).map_err(damaged)?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        if len > MAX_RECORD {
            return Err(corrupt(format!("a record claims {len} bytes")));
        }
        let mut payload = vec![0u8; len as usize];
        self.dec.read_exact(&mut payload).map_err(damaged)?;
        let crc_before = self.crc.clone();
        self.crc.update(&head);
        self.crc.update(&payload);
        let mut f = Fields(&payload);
        let item = match head[0] {
            P => {
                let (account, value) = (f.str()?, f.bytes()?.to_vec());
                self.counts.properties += 1;
                Item::Properties { account, value }
            }
            T => {
                let (account, name, acl) = (f.str()?, f.str()?, f.bytes()?.to_vec());
                self.counts.tables += 1;
                self.in_table = true;
                Item::Table {
                    account,
                    record: TableRecord { name, acl },
                }
            }
            I if self.in_table => Item::Index(f.str()?),
            I => return Err(corrupt("an index before any table")),
            R if self.in_table => {
                let n = f.u32()? as usize;
                let mut rows = Vec::with_capacity(n.min(65_536));
                for _ in 0..n {
                    let key = EntityKey::from_bytes(f.bytes()?.to_vec());
                    rows.push((key, f.bytes()?.to_vec()));
                }
                self.counts.rows += n as u64;
                Item::Rows(rows)
            }
            R => return Err(corrupt("rows before any table")),
            E => {
                let want = Counts {
                    properties: f.u64()?,
                    tables: f.u64()?,
                    rows: f.u64()?,
                };
                // The CRC covers everything before its own four bytes.
                let mut crc = crc_before;
                crc.update(&head);
                crc.update(&payload[..payload.len().saturating_sub(4)]);
                let sum = f.u32()?;
                f.done()?;
                if sum != crc.finalize() {
                    return Err(corrupt("the checksum does not match"));
                }
                if want != self.counts {
                    return Err(corrupt(format!(
                        "the end record counts {want:?}, the file holds {:?}",
                        self.counts
                    )));
                }
                let mut rest = [0u8; 1];
                if self.dec.read(&mut rest).map_err(damaged)? != 0 {
                    return Err(corrupt("data follows the end record"));
                }
                self.ended = true;
                return Ok(None);
            }
            t => return Err(corrupt(format!("unknown record type {t}"))),
        };
        f.done()?;
        Ok(Some(item))
    }
}
