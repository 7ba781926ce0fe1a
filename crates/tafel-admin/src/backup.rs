//! `GET /backup` on the admin listener: a backup of the whole store
//! (`tafel-backup`'s file), streamed as it is taken from one store snapshot
//! while the server goes on serving. `tafel backup --from` is its client.
//!
//! It hands out every account's data, so it needs the admin token, on any
//! address: a server started without `--admin-token` serves no backups (stop
//! it and use `tafel backup --data-dir`, or read a PostgreSQL database directly).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use hyper::body::{Body, Frame};
use tafel_backup::{BackupError, ChunkError};
use tokio::sync::mpsc;

use crate::listener::{text, unauthorized, AdminState, Resp};

/// Compressed chunks in flight between the backup thread and the connection.
const CHUNKS_IN_FLIGHT: usize = 8;

/// The response body: the chunks the backup thread sends. A backup that fails
/// midway ends the body with an error, so the connection is cut and the client
/// never takes what it got for a whole backup (nor could it: no end record).
pub struct BackupBody {
    rx: mpsc::Receiver<Result<Bytes, ChunkError>>,
}

impl Body for BackupBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| c.map(Frame::data).map_err(std::io::Error::other)))
    }
}

pub(crate) async fn backup(
    state: &AdminState,
    req: &hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<BackupBody>, Resp> {
    if state.token.is_none() {
        return Err(text(
            StatusCode::FORBIDDEN,
            "online backups need the server started with --admin-token (TAFEL_ADMIN_TOKEN)\n",
        ));
    }
    if !state.authorized(req) {
        return Err(unauthorized());
    }
    let mut snapshot = match state.store.snapshot().await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "could not take a snapshot for a backup");
            return Err(text(StatusCode::SERVICE_UNAVAILABLE, format!("no snapshot: {e}\n")));
        }
    };
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let source = state.backend;
    // Compression is CPU work: a thread of its own keeps it off the runtime that
    // accepts connections (and drives the database's).
    let spawned = std::thread::Builder::new().name("tafel-backup".into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => return drop(tx.blocking_send(Err(BackupError::Io(e).into()))),
        };
        runtime.block_on(async move {
            let started = std::time::Instant::now();
            match tafel_backup::take(snapshot.as_mut(), source, &tx).await {
                Ok(c) => tracing::info!(
                    tables = c.tables,
                    entities = c.rows,
                    seconds = started.elapsed().as_secs_f64(),
                    "backup taken"
                ),
                Err(e) => tracing::warn!(error = %e, "backup failed"),
            }
        });
    });
    if let Err(e) = spawned {
        return Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("could not start the backup: {e}\n"),
        ));
    }
    let mut r = hyper::Response::new(BackupBody { rx });
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"tafel.backup\""),
    );
    Ok(r)
}
