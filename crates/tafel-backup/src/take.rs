//! Taking a backup: the snapshot's contents, in order, through a [`Writer`],
//! handed on as compressed chunks while the snapshot is still being read.

use std::sync::Arc;

use bytes::Bytes;
use tafel_store::Snapshot;
use tokio::sync::mpsc;

use crate::format::{Counts, Info, Writer};
use crate::BackupError;

/// Rows read from the snapshot per call.
const ROWS_PER_READ: usize = 5000;
/// Compressed bytes gathered before they are handed on.
const CHUNK: usize = 256 << 10;

/// Where the compressed bytes go, in order. An `Err` is sent once, last, when
/// the backup failed midway: the receiver must not keep what it got as a backup.
pub type Chunks = mpsc::Sender<Result<Bytes, ChunkError>>;

/// Why a backup's chunks ended before the backup was whole. Cheap to clone:
/// [`take`] both sends its failure and returns it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChunkError {
    /// Taking the backup failed.
    #[error(transparent)]
    Backup(Arc<BackupError>),
    /// The chunks came over a connection (`tafel backup --from`) that broke off.
    #[error("the connection broke off: {0}")]
    Connection(Arc<dyn std::error::Error + Send + Sync>),
}

impl From<BackupError> for ChunkError {
    fn from(e: BackupError) -> Self {
        ChunkError::Backup(Arc::new(e))
    }
}

/// The header of a backup taken now from `source` (the backend's name).
pub fn info_now(source: &str) -> Info {
    let created = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    Info {
        created,
        tafel: env!("CARGO_PKG_VERSION").to_owned(),
        source: source.to_owned(),
    }
}

/// Writes everything in `snapshot` to `out`. Stops early (with `Ok`) if the
/// receiver went away. On failure the error is also sent to `out`.
pub async fn take(snapshot: &mut dyn Snapshot, source: &str, out: &Chunks) -> Result<Counts, Arc<BackupError>> {
    match write_all(snapshot, source, out).await {
        Ok(counts) => Ok(counts),
        Err(e) => {
            let e = Arc::new(e);
            // The receiver may be gone already; then nobody needs to know.
            let _ = out.send(Err(ChunkError::Backup(e.clone()))).await;
            Err(e)
        }
    }
}

async fn send(out: &Chunks, bytes: Vec<u8>) -> bool {
    bytes.is_empty() || out.send(Ok(Bytes::from(bytes))).await.is_ok()
}

async fn write_all(snapshot: &mut dyn Snapshot, source: &str, out: &Chunks) -> Result<Counts, BackupError> {
    let mut w = Writer::new(&info_now(source))?;
    for (account, value) in snapshot.service_properties().await? {
        if !crate::restore::is_marker(&account) {
            w.properties(&account, &value)?;
        }
    }
    for table in snapshot.tables().await? {
        w.table(&table.account, &table.record)?;
        for property in snapshot.indexes(&table).await? {
            w.index(&property)?;
        }
        let mut after = None;
        loop {
            let n = snapshot.rows(&table, after.as_ref(), ROWS_PER_READ, &mut w).await?;
            if w.pending() >= CHUNK && !send(out, w.take_output()?).await {
                return Ok(w.counts());
            }
            if n < ROWS_PER_READ {
                break;
            }
            after = Some(w.last_key());
        }
    }
    let counts = w.counts();
    send(out, w.finish()?).await;
    Ok(counts)
}
