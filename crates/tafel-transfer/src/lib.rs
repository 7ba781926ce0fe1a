//! Moving table data between Table endpoints — Azure, Azurite, Cosmos DB's Table
//! API, another Tafel — over the Table REST API alone, so neither side needs to be
//! a Tafel server: `tafel export` ([`export`]), `tafel import` ([`import`]) and
//! `tafel copy` (the two joined without a file). [`client`] is the REST client,
//! [`endpoint`] reads connection strings and SAS URLs, [`read`] reads a query's
//! pages (by key ranges in parallel), [`format`] the JSONL and CSV files,
//! [`progress`] how a long run reports what it has done, [`shared_key`] the Shared Key signature
//! (tafel-bench's too). [`feed`] reads a Tafel's change feed, which [`follow`]
//! applies to a target to keep it in step (`tafel copy --follow`, `tafel watch`);
//! [`poll`] follows a source without a feed by its Timestamps.

pub mod client;
pub mod endpoint;
pub mod export;
pub mod feed;
pub mod follow;
pub mod format;
pub mod import;
pub mod poll;
pub mod progress;
pub mod read;
pub mod shared_key;

pub use client::TableClient;
pub use endpoint::Endpoint;

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The command line or a connection string is wrong.
    #[error("{0}")]
    Usage(String),
    /// The service refused a request; `index` names a batch's failing operation.
    #[error("{status} {code}: {message}")]
    Service {
        status: u16,
        code: String,
        message: String,
        index: Option<usize>,
    },
    /// A timeout, a lost connection, 503 or 500: worth retrying.
    #[error("{0}")]
    Transient(String),
    /// The service answered something that is not the Table protocol.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The source keeps no change feed (not a Tafel, or one without --change-retention).
    #[error("{0}")]
    NoFeed(String),
    /// Ctrl-C: stopped cleanly; the checkpoint says where to resume.
    #[error("interrupted")]
    Interrupted,
}

/// Opens `path` for reading (`-`: standard input), through zstd for a `.zst` name.
pub fn open_input(path: &str) -> Result<Box<dyn std::io::BufRead + Send>, TransferError> {
    use std::io::BufReader;
    let raw: Box<dyn std::io::Read + Send> = match path {
        "-" => Box::new(std::io::stdin()),
        p => Box::new(std::fs::File::open(p).map_err(|e| TransferError::Usage(format!("opening {p}: {e}")))?),
    };
    if path.ends_with(".zst") {
        return Ok(Box::new(BufReader::with_capacity(1 << 20, zstd::Decoder::new(raw)?)));
    }
    Ok(Box::new(BufReader::with_capacity(1 << 20, raw)))
}

/// Opens `path` for writing (`-`: standard output), through zstd for a `.zst` name.
/// The caller must call `finish` on what it gets, which completes a zstd frame.
pub fn create_output(path: &str) -> Result<Output, TransferError> {
    let raw: Box<dyn std::io::Write + Send> = match path {
        "-" => Box::new(std::io::stdout()),
        p => Box::new(std::fs::File::create(p).map_err(|e| TransferError::Usage(format!("creating {p}: {e}")))?),
    };
    let raw = std::io::BufWriter::with_capacity(1 << 20, raw);
    Ok(if path.ends_with(".zst") {
        Output::Zstd(zstd::Encoder::new(raw, 3)?)
    } else {
        Output::Plain(raw)
    })
}

pub enum Output {
    Plain(std::io::BufWriter<Box<dyn std::io::Write + Send>>),
    Zstd(zstd::Encoder<'static, std::io::BufWriter<Box<dyn std::io::Write + Send>>>),
}

impl std::io::Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Plain(w) => w.write(buf),
            Output::Zstd(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.flush(),
            Output::Zstd(w) => w.flush(),
        }
    }
}

impl Output {
    /// Flushes everything out (and ends the zstd frame).
    pub fn finish(self) -> Result<(), TransferError> {
        use std::io::Write;
        match self {
            Output::Plain(mut w) => w.flush()?,
            Output::Zstd(w) => w.finish()?.flush()?,
        }
        Ok(())
    }
}
