//! Disk faults the store meets while it runs, injected through the simulated
//! disk: a failed sync stops every write until a restart (a sync that failed
//! cannot be retried: the kernel may have dropped the pages it could not
//! write), readiness says why, and a restart recovers what was acknowledged;
//! after a full disk, writes resume by themselves once there is room.

use std::sync::Arc;

use super::sim_disk::{Faults, SimDisk};
use super::{EmbeddedOptions, EmbeddedStore};
use crate::error::FailureKind;
use crate::key::EntityKey;
use crate::traits::{Mutation, Store};
use crate::StoreError;

const ACCOUNT: &str = "faults";

fn open(disk: &SimDisk) -> EmbeddedStore {
    let options = EmbeddedOptions {
        cache_size: 2 << 20,
        log_size: 256 << 10,
        ..EmbeddedOptions::default()
    };
    EmbeddedStore::open_on(Box::new(disk.clone()), options, None).expect("open")
}

async fn put(store: &EmbeddedStore, row: &str, value: &[u8]) -> Result<(), StoreError> {
    let value = value.to_vec();
    let keys = vec![EntityKey::new("p", row)];
    store
        .write_entities(
            ACCOUNT,
            "t",
            keys,
            Box::new(move |_| vec![Mutation::Put(value.clone())]),
        )
        .await
}

async fn get(store: &EmbeddedStore, row: &str) -> Option<Vec<u8>> {
    store
        .get_entity(ACCOUNT, "t", &EntityKey::new("p", row))
        .await
        .expect("read")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A store on a fresh simulated disk, with table "t" holding row "kept" = "1".
async fn with_kept_row() -> (SimDisk, Arc<EmbeddedStore>) {
    let disk = SimDisk::default();
    let store = Arc::new(open(&disk));
    store.create_table(ACCOUNT, "t").await.expect("create");
    put(&store, "kept", b"1").await.expect("write before the fault");
    (disk, store)
}

/// Writes rows of `size` bytes until one is refused: the rows acknowledged
/// before, and the refusal.
async fn write_until_refused(store: &EmbeddedStore, size: usize) -> (Vec<String>, StoreError) {
    let mut acked = Vec::new();
    for i in 0..5000 {
        let row = format!("r{i}");
        match put(store, &row, &vec![9; size]).await {
            Ok(()) => acked.push(row),
            Err(e) => return (acked, e),
        }
    }
    panic!("5000 writes of {size} bytes and none refused");
}

/// The power goes after the run; the disk holds only what was synced.
fn restart(disk: &SimDisk) -> SimDisk {
    let mut rng = fastrand::Rng::with_seed(7);
    SimDisk::with(disk.power_loss(disk.trace_len(), &mut rng))
}

#[test]
fn a_failed_log_sync_stops_every_write_until_a_restart() {
    runtime().block_on(async {
        let (disk, store) = with_kept_row().await;
        disk.set_faults(Faults {
            failing_sync: Some(super::wal::FILE_NAME),
            ..Faults::default()
        });
        let failed = put(&store, "lost", b"2").await.expect_err("a write whose sync failed");
        assert!(
            matches!(failed, StoreError::Backend(ref b) if b.kind == FailureKind::Io),
            "{failed}"
        );
        let why = store.ready().await.expect_err("not ready after a failed sync");
        assert!(why.to_string().contains("write-ahead log"), "{why}");
        // The disk is well again; the store still refuses: fail-stop.
        disk.set_faults(Faults::default());
        assert!(put(&store, "later", b"3").await.is_err(), "a write after a failed sync");
        assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]), "reads go on");
        let _ = store.shutdown().await;
        drop(store);

        let disk = restart(&disk);
        let store = open(&disk);
        store.ready().await.expect("ready after a restart");
        assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&store, "later").await, None);
        put(&store, "after", b"4").await.expect("a write after the restart");
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn a_failed_store_file_sync_stops_every_write_until_a_restart() {
    runtime().block_on(async {
        let (disk, store) = with_kept_row().await;
        disk.set_faults(Faults {
            failing_sync: Some(super::STORE_FILE),
            ..Faults::default()
        });
        // Writes go on until a checkpoint syncs the store file: enough of them
        // to fill the log's half forces one.
        let (_, refused) = write_until_refused(&store, 300).await;
        assert!(
            matches!(refused, StoreError::Backend(ref b) if b.kind == FailureKind::Io),
            "{refused}"
        );
        assert!(store.ready().await.is_err(), "not ready after a failed sync");
        disk.set_faults(Faults::default());
        assert!(put(&store, "later", b"3").await.is_err(), "a write after a failed sync");
        let _ = store.shutdown().await;
        drop(store);

        let store = open(&restart(&disk));
        assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]));
        put(&store, "after", b"4").await.expect("a write after the restart");
        store.shutdown().await.expect("shutdown");
    });
}

#[test]
fn after_a_full_disk_writes_resume_by_themselves_once_there_is_room() {
    runtime().block_on(async {
        let (disk, store) = with_kept_row().await;
        let used = disk.bytes_used();
        disk.set_faults(Faults {
            capacity: Some(used + (64 << 10)),
            ..Faults::default()
        });
        let (acked, refused) = write_until_refused(&store, 2000).await;
        assert!(
            matches!(refused, StoreError::Backend(ref b) if b.kind == FailureKind::DiskFull),
            "{refused}"
        );
        // Still full: writes keep failing, reads go on.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        assert!(put(&store, "still-full", b"x").await.is_err(), "a write on a full disk");
        assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]), "reads go on");
        assert!(store.ready().await.is_err(), "not ready while the disk is full");

        // Room again: with no restart, writes resume within moments.
        disk.set_faults(Faults::default());
        let started = std::time::Instant::now();
        loop {
            match put(&store, "after", b"4").await {
                Ok(()) => break,
                Err(_) if started.elapsed() < std::time::Duration::from_secs(20) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("writes did not resume after room was made: {e}"),
            }
        }
        store.ready().await.expect("ready again");
        assert_eq!(get(&store, "after").await.as_deref(), Some(&b"4"[..]));
        assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]));
        for row in &acked {
            assert!(
                get(&store, row).await.is_some(),
                "acknowledged {row} lost by the reopen"
            );
        }
        let _ = store.shutdown().await;
        drop(store);

        // And all of it survives a power loss after.
        let store = open(&restart(&disk));
        assert_eq!(get(&store, "after").await.as_deref(), Some(&b"4"[..]));
        for row in &acked {
            assert!(
                get(&store, row).await.is_some(),
                "acknowledged {row} lost after a restart"
            );
        }
        store.shutdown().await.expect("shutdown");
    });
}
