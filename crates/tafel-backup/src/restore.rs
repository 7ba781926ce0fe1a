//! Checking a backup file, and restoring one into an empty store. A restore
//! reads the file twice: first to check all of it (a damaged or truncated file
//! is refused before anything is written), then to load it.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use tafel_store::{Decide, EntityKey, Mutation, Store, StoreError};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::format::{Counts, Info, Item, Reader};
use crate::BackupError;

/// Keys per store write: big enough to amortize a commit, small enough that a
/// PostgreSQL write holds its locks briefly.
const ROWS_PER_WRITE: usize = 1000;
/// Store writes in flight.
const IN_FLIGHT: usize = 8;

/// While a restore loads, the store holds a marker: service properties of this
/// name, which no account can have (account names are lowercase letters and
/// digits). A store whose restore did not finish is then never served as if it
/// were whole ([`unfinished_restore`]); a finished restore empties the marker.
pub const UNFINISHED_MARKER: &str = "$tafel-unfinished-restore";

/// What the unfinished restore of `store` was loading, if one did not finish.
pub async fn unfinished_restore(store: &dyn Store) -> Result<Option<String>, StoreError> {
    Ok(store
        .get_service_properties(UNFINISHED_MARKER)
        .await?
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// Whether service properties under `account` are Tafel's own record, not an account's.
pub(crate) fn is_marker(account: &str) -> bool {
    account == UNFINISHED_MARKER
}

/// Told how many rows were read (checking) or written (loading), as they go.
pub type RestoreProgress = Arc<dyn Fn(u64) + Send + Sync>;

fn open(path: &Path) -> Result<Reader<BufReader<File>>, BackupError> {
    let file = File::open(path)?;
    Reader::new(BufReader::with_capacity(1 << 20, file))
}

/// Reads all of a backup and checks it: header, every record, the end record's
/// counts and checksum, and zstd's checksum of the data. `progress` hears of
/// the rows read.
pub fn check(input: impl Read, progress: &dyn Fn(u64)) -> Result<(Info, Counts), BackupError> {
    read_through(Reader::new(input)?, progress)
}

/// [`check`] of the backup at `path`.
pub fn verify(path: &Path, progress: &dyn Fn(u64)) -> Result<(Info, Counts), BackupError> {
    read_through(open(path)?, progress)
}

fn read_through(mut reader: Reader<impl Read>, progress: &dyn Fn(u64)) -> Result<(Info, Counts), BackupError> {
    while let Some(item) = reader.next_item()? {
        if let Item::Rows(rows) = item {
            progress(rows.len() as u64);
        }
    }
    Ok((reader.info().clone(), reader.counts()))
}

/// What a store holds, if anything (a restore needs it empty).
async fn contents(store: &dyn Store) -> Result<Option<String>, BackupError> {
    let mut snapshot = store.snapshot().await?;
    let tables = snapshot.tables().await?;
    if let Some(t) = tables.first() {
        return Ok(Some(format!(
            "{} table(s), such as {}/{}",
            tables.len(),
            t.account,
            t.record.name
        )));
    }
    let props = snapshot.service_properties().await?;
    Ok(props
        .iter()
        .find(|(account, _)| !is_marker(account))
        .map(|(account, _)| format!("service properties of account {account}")))
}

/// Checks the backup at `path` ([`verify`]), then loads it into `store`, which
/// must be empty. `checked` hears of rows checked, `loaded` of rows written.
pub async fn restore(
    store: Arc<dyn Store>,
    path: &Path,
    checked: RestoreProgress,
    loaded: RestoreProgress,
) -> Result<(Info, Counts), BackupError> {
    if let Some(what) = contents(store.as_ref()).await? {
        return Err(BackupError::NotEmpty(what));
    }
    let file = path.to_owned();
    let (info, counts) = tokio::task::spawn_blocking(move || verify(&file, &*checked))
        .await
        .map_err(|e| BackupError::Io(std::io::Error::other(e)))??;
    let marker = format!("{} (backup of {}, taken {})", path.display(), info.source, info.created);
    store
        .set_service_properties(UNFINISHED_MARKER, marker.into_bytes())
        .await?;
    // The file was checked whole; reading it again on a thread of its own keeps
    // the writes going while it decompresses.
    let (tx, mut rx) = mpsc::channel::<Result<Item, BackupError>>(4);
    let file = path.to_owned();
    let reading = std::thread::spawn(move || {
        let mut reader = match open(&file) {
            Ok(r) => r,
            Err(e) => return drop(tx.blocking_send(Err(e))),
        };
        loop {
            match reader.next_item() {
                Ok(Some(item)) => {
                    if tx.blocking_send(Ok(item)).is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => return drop(tx.blocking_send(Err(e))),
            }
        }
    });
    let done = load(&store, &mut rx, &loaded).await;
    drop(rx);
    let _ = reading.join();
    done?;
    store.set_service_properties(UNFINISHED_MARKER, Vec::new()).await?;
    Ok((info, counts))
}

async fn load(
    shared: &Arc<dyn Store>,
    items: &mut mpsc::Receiver<Result<Item, BackupError>>,
    loaded: &RestoreProgress,
) -> Result<(), BackupError> {
    let store = shared.as_ref();
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut writes: JoinSet<Result<(), StoreError>> = JoinSet::new();
    let mut table: Option<(String, String)> = None;
    while let Some(item) = items.recv().await {
        // A write that failed stops the restore at once.
        while let Some(done) = writes.try_join_next() {
            joined(done)?;
        }
        match item? {
            Item::Properties { account, value } => store.set_service_properties(&account, value).await?,
            Item::Table { account, record } => {
                if !store.create_table(&account, &record.name).await? {
                    return Err(BackupError::NotEmpty(format!("table {account}/{} exists", record.name)));
                }
                if !record.acl.is_empty() {
                    store.set_table_acl(&account, &record.name, record.acl).await?;
                }
                table = Some((account, record.name));
            }
            // Declared on the empty table, so each row's write makes its entries.
            Item::Index(property) => {
                let Some((account, name)) = &table else {
                    return Err(BackupError::Corrupt("an index before any table".into()));
                };
                store
                    .create_index(account, name, &property)
                    .await
                    .map_err(|e| BackupError::Index(format!("{account}/{name} on {property}: {e}")))?;
            }
            Item::Rows(rows) => {
                let Some((account, name)) = &table else {
                    return Err(BackupError::Corrupt("rows before any table".into()));
                };
                let mut rows = rows.into_iter().peekable();
                while rows.peek().is_some() {
                    let (keys, values): (Vec<EntityKey>, Vec<Vec<u8>>) = rows.by_ref().take(ROWS_PER_WRITE).unzip();
                    let permit = slots
                        .clone()
                        .acquire_owned()
                        .await
                        .map_err(|e| BackupError::Io(std::io::Error::other(e)))?;
                    let (store, account, name, loaded) =
                        (shared.clone(), account.clone(), name.clone(), loaded.clone());
                    writes.spawn(async move {
                        let n = keys.len() as u64;
                        let values: Arc<[Vec<u8>]> = values.into();
                        let decide: Decide =
                            Box::new(move |_| values.iter().map(|v| Mutation::Put(v.clone())).collect());
                        store.write_entities(&account, &name, keys, decide).await?;
                        drop(permit);
                        loaded(n);
                        Ok(())
                    });
                }
            }
        }
    }
    while let Some(done) = writes.join_next().await {
        joined(done)?;
    }
    Ok(())
}

fn joined(done: Result<Result<(), StoreError>, tokio::task::JoinError>) -> Result<(), BackupError> {
    done.map_err(|e| BackupError::Io(std::io::Error::other(e)))?
        .map_err(BackupError::from)
}
