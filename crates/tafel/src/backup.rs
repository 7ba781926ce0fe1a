//! `tafel backup` and `tafel restore`: the command lines of the `tafel-backup`
//! crate. A backup comes from a running server's admin listener (`--from`) or
//! straight from a store no server has open; either way the file is checked
//! while it is written (every record, the end record, the checksums) and only
//! then renamed into place.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::progress::Progress;
use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use tafel_backup::{ChunkError, Counts, Info};
use tokio::sync::mpsc;

use crate::serve_args::{open_store, StoreArgs};
use crate::transfer::runtime;

#[derive(clap::Args)]
pub struct BackupArgs {
    /// A running server's admin listener (`http://127.0.0.1:10012`), to back up while
    /// it serves; it must run with --admin-token. Without --from, the store named by
    /// --backend, --data-dir and --postgres-url is read directly (an embedded store
    /// only while no server has it open).
    #[arg(long, env = "TAFEL_BACKUP_FROM")]
    from: Option<String>,
    /// The admin token of the server at --from.
    #[arg(long, env = "TAFEL_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// The backup file to write (`-`: standard output).
    #[arg(long)]
    out: PathBuf,
    /// No progress bar or summary.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The backup file.
    file: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
    /// Only check the file (every record and checksum) and say what it holds.
    #[arg(long)]
    check: bool,
    /// No progress bar or summary.
    #[arg(long, short)]
    quiet: bool,
}

type Chunks = mpsc::Receiver<Result<Bytes, ChunkError>>;

pub fn backup(a: BackupArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let progress = Arc::new(Progress::new("backup", None, a.quiet));
        let chunks = match &a.from {
            Some(url) => download(url, a.admin_token.as_deref()).await?,
            None => local(&a.store).await?,
        };
        let (info, counts) = save(chunks, &a.out, progress.clone()).await?;
        let to = if a.out.as_os_str() == "-" {
            "standard output".into()
        } else {
            a.out.display().to_string()
        };
        progress.finish(&format!(
            "; {} tables, {} accounts' service properties, from {} → {to}",
            counts.tables, counts.properties, info.source
        ));
        Ok(())
    })
}

/// The backup as the admin listener at `url` streams it.
async fn download(url: &str, token: Option<&str>) -> anyhow::Result<Chunks> {
    let uri: http::Uri = format!("{}/backup", url.trim_end_matches('/'))
        .parse()
        .with_context(|| format!("bad --from {url}"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--from must be the admin listener's http:// URL, such as http://127.0.0.1:10012");
    }
    let client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = http::Request::get(uri).body(Empty::new())?;
    if let Some(token) = token {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
    }
    let resp = client
        .request(req)
        .await
        .with_context(|| format!("reaching the admin listener at {url}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        bail!(
            "{url} refused the backup: {status}: {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    let (tx, rx) = mpsc::channel(8);
    let mut body = resp.into_body();
    tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            let chunk = match frame {
                Ok(f) => match f.into_data() {
                    Ok(data) => Ok(data),
                    Err(_) => continue,
                },
                Err(e) => Err(ChunkError::Connection(Arc::new(e))),
            };
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    Ok(rx)
}

/// The backup of a store opened here.
async fn local(args: &StoreArgs) -> anyhow::Result<Chunks> {
    // Opening a directory with no store in it would make an empty one, and back that up.
    if args.backend == crate::serve_args::Backend::Embedded && !args.data_dir.join("tafel.redb").exists() {
        bail!(
            "no Tafel store in {} (--data-dir); to back up a running server, use --from its admin listener",
            args.data_dir.display()
        );
    }
    let store = open_store(args).await?;
    let mut snapshot = store.snapshot().await.context("taking a snapshot of the store")?;
    let source = args.backend.name();
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        // Failures reach the receiver as the last chunk.
        let _ = tafel_backup::take(snapshot.as_mut(), source, &tx).await;
        drop(snapshot);
        if let Err(e) = store.shutdown().await {
            tracing::warn!(error = %e, "closing the store");
        }
    });
    Ok(rx)
}

/// A `Read` over the chunks the checking thread is handed.
struct ChunkReader {
    rx: std::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.recv() {
                Ok(next) => self.current = next,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// Writes the chunks to `out` (via `<out>.partial`, renamed once whole and
/// checked) while a thread checks them.
async fn save(mut chunks: Chunks, out: &Path, progress: Arc<Progress>) -> anyhow::Result<(Info, Counts)> {
    let stdout = out.as_os_str() == "-";
    let partial = PathBuf::from(format!("{}.partial", out.display()));
    let mut file: Box<dyn Write + Send> = if stdout {
        Box::new(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout()))
    } else {
        Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?,
        ))
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    let checking = {
        let progress = progress.clone();
        // Reads the backup through as it arrives, counting rows for the progress bar.
        std::thread::spawn(move || {
            let chunks = ChunkReader {
                rx,
                current: Bytes::new(),
            };
            tafel_backup::check(chunks, &|n| progress.add(n, 0))
        })
    };
    let written = async {
        while let Some(chunk) = chunks.recv().await {
            let chunk = chunk.map_err(|e| anyhow::anyhow!("the backup failed: {e}"))?;
            file.write_all(&chunk).context("writing the backup")?;
            progress.add(0, chunk.len() as u64);
            // The checker stops at the first fault; its verdict comes from join.
            let _ = tx.send(chunk);
        }
        file.flush().context("writing the backup")?;
        anyhow::Ok(())
    }
    .await;
    drop(tx);
    let checked = checking
        .join()
        .map_err(|_| anyhow::anyhow!("the backup check panicked"))?;
    let result = written.and_then(|()| checked.map_err(anyhow::Error::from));
    match result {
        Ok(summary) if stdout => Ok(summary),
        Ok(summary) => {
            drop(file);
            std::fs::File::open(&partial)
                .and_then(|f| f.sync_all())
                .and_then(|()| std::fs::rename(&partial, out))
                .with_context(|| format!("moving {} to {}", partial.display(), out.display()))?;
            Ok(summary)
        }
        Err(e) => {
            drop(file);
            if !stdout {
                let _ = std::fs::remove_file(&partial);
            }
            Err(e.context("no backup was written"))
        }
    }
}

pub fn restore(a: RestoreArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let checking = Arc::new(Progress::new(format!("check {}", a.file.display()), None, a.quiet));
        if a.check {
            let (info, counts) = tafel_backup::verify(&a.file, &|n| checking.add(n, 0))
                .with_context(|| format!("checking {}", a.file.display()))?;
            checking.finish(&format!(
                "; intact: taken {} from {} by Tafel {}, {} tables, {} accounts' service properties",
                info.created, info.source, info.tafel, counts.tables, counts.properties
            ));
            return Ok(());
        }
        let store = open_store(&a.store).await?;
        let loading = Arc::new(Progress::new("restore", None, a.quiet));
        let (p, l) = (checking.clone(), loading.clone());
        let restored = tafel_backup::restore(
            store.clone(),
            &a.file,
            Arc::new(move |n| p.add(n, 0)),
            Arc::new(move |n| l.add(n, 0)),
        )
        .await;
        let closed = store.shutdown().await;
        let (info, counts) = restored.with_context(|| format!("restoring {}", a.file.display()))?;
        closed.context("closing the store")?;
        loading.finish(&format!(
            "; {} tables, {} accounts' service properties, taken {} from {} → {}",
            counts.tables,
            counts.properties,
            info.created,
            info.source,
            a.store.backend.name()
        ));
        Ok(())
    })
}
