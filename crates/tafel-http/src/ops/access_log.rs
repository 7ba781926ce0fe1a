//! The access log: one line per Table API request, written by a thread of its
//! own so a request never waits for the disk or a pipe. Lines go through a
//! bounded queue; when the writer falls that far behind, lines are dropped and
//! counted (`tafel_access_log_dropped_lines_total`) rather than slowing requests.
//!
//! A line holds who did what and how it went, never a secret: no key,
//! signature, SAS query string or token is ever put in it (the URL's query and
//! the `Authorization` header are not logged at all; only the kind of
//! credential is).

use std::fmt::Write as _;
use std::io::Write;
use std::net::SocketAddr;
use std::num::NonZeroU8;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use time::format_description::well_known::iso8601::{Config, EncodedConfig, TimePrecision};
use time::format_description::well_known::Iso8601;

/// Lines queued for the writer at most.
const QUEUE: usize = 64 << 10;
/// How often the writer takes what was queued. It polls rather than waits on
/// the queue: a waiting receiver must be woken by a system call on every line
/// (one per request), which cost a third of point-read throughput.
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    File(PathBuf),
}

/// The kind of credential a request presented (whether or not it verified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    SharedKey,
    SharedKeyLite,
    Sas,
    /// A bearer token (`--oauth`).
    Bearer,
    /// An `Authorization` scheme the Table API does not take.
    Other,
    Anonymous,
}

impl Credential {
    pub fn as_str(self) -> &'static str {
        match self {
            Credential::SharedKey => "SharedKey",
            Credential::SharedKeyLite => "SharedKeyLite",
            Credential::Sas => "SAS",
            Credential::Bearer => "Bearer",
            Credential::Other => "Other",
            Credential::Anonymous => "Anonymous",
        }
    }

    /// From the `Authorization` header's scheme, else a `sig` query parameter.
    pub fn of(authorization: Option<&[u8]>, query: Option<&str>) -> Self {
        match authorization {
            Some(a) if a.starts_with(b"SharedKeyLite ") => Credential::SharedKeyLite,
            Some(a) if a.starts_with(b"SharedKey ") => Credential::SharedKey,
            Some(a) if a.get(..7).is_some_and(|s| s.eq_ignore_ascii_case(b"Bearer ")) => Credential::Bearer,
            Some(_) => Credential::Other,
            None if query.is_some_and(|q| q.split('&').any(|p| p.starts_with("sig="))) => Credential::Sas,
            None => Credential::Anonymous,
        }
    }
}

/// One request as the access log tells it.
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    pub time: String,
    pub request_id: &'a str,
    pub account: &'a str,
    pub operation: &'static str,
    pub table: &'a str,
    pub status: u16,
    pub error_code: &'static str,
    pub latency_ms: f64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub client: String,
    pub user_agent: &'a str,
    pub credential: &'static str,
    /// The kind of fault a rule injected (docs/testing.md); left out when none.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub fault: &'static str,
    /// An entity query's plan and rows examined (docs/indexes.md); left out
    /// for other operations.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub plan: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_examined: Option<u64>,
}

enum Msg {
    Line(String),
    /// Answered once every line before it is written and flushed.
    Flush(mpsc::Sender<()>),
}

pub struct AccessLog {
    format: LogFormat,
    queue: mpsc::SyncSender<Msg>,
}

impl AccessLog {
    /// Opens the destination (a file is appended to) and starts the writer.
    pub fn open(destination: &Destination, format: LogFormat) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = match destination {
            Destination::Stdout => Box::new(std::io::stdout()),
            Destination::File(path) => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
        };
        let (queue, rx) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("tafel-access-log".into())
            .spawn(move || write_loop(rx, out))?;
        Ok(AccessLog { format, queue })
    }

    /// Queues the line of `entry`; `false` if the queue was full and it was dropped.
    pub fn log(&self, entry: &Entry<'_>) -> bool {
        let line = match self.format {
            LogFormat::Json => match serde_json::to_string(entry) {
                Ok(l) => l,
                Err(_) => return true,
            },
            LogFormat::Text => text_line(entry),
        };
        !matches!(self.queue.try_send(Msg::Line(line)), Err(mpsc::TrySendError::Full(_)))
    }

    /// Waits (bounded) until every line queued so far is written.
    pub fn flush(&self, timeout: Duration) {
        let (tx, rx) = mpsc::channel();
        if self.queue.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv_timeout(timeout);
        }
    }
}

/// Writes what is queued every [`POLL`], flushing once the queue runs dry.
fn write_loop(rx: mpsc::Receiver<Msg>, out: Box<dyn Write + Send>) {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
    let mut failed = false;
    loop {
        let mut wrote = false;
        let open = loop {
            match rx.try_recv() {
                Ok(Msg::Line(mut line)) => {
                    line.push('\n');
                    if let Err(e) = out.write_all(line.as_bytes()) {
                        report(&mut failed, &e);
                    }
                    wrote = true;
                }
                Ok(Msg::Flush(done)) => {
                    if let Err(e) = out.flush() {
                        report(&mut failed, &e);
                    }
                    let _ = done.send(());
                }
                Err(mpsc::TryRecvError::Empty) => break true,
                Err(mpsc::TryRecvError::Disconnected) => break false,
            }
        };
        if wrote {
            if let Err(e) = out.flush() {
                report(&mut failed, &e);
            }
        }
        if !open {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// Says once that the access log cannot be written; requests go on regardless.
fn report(failed: &mut bool, e: &std::io::Error) {
    if !*failed {
        *failed = true;
        tracing::error!(error = %e, "writing the access log failed; lines are being lost");
    }
}

/// `key=value` pairs (logfmt); values with spaces, quotes or `=` are quoted.
fn text_line(e: &Entry<'_>) -> String {
    let mut s = String::with_capacity(256);
    let mut pair = |k: &str, v: &str| {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(k);
        s.push('=');
        if v.is_empty() || v.contains([' ', '"', '=', '\\']) || v.chars().any(char::is_control) {
            let _ = write!(s, "{v:?}");
        } else {
            s.push_str(v);
        }
    };
    pair("time", &e.time);
    pair("request_id", e.request_id);
    pair("account", e.account);
    pair("operation", e.operation);
    pair("table", e.table);
    pair("status", &e.status.to_string());
    pair("error_code", e.error_code);
    pair("latency_ms", &format!("{:.3}", e.latency_ms));
    pair("bytes_in", &e.bytes_in.to_string());
    pair("bytes_out", &e.bytes_out.to_string());
    pair("client", &e.client);
    pair("user_agent", e.user_agent);
    pair("credential", e.credential);
    if !e.fault.is_empty() {
        pair("fault", e.fault);
    }
    if !e.plan.is_empty() {
        pair("plan", e.plan);
    }
    if let Some(n) = e.rows_examined {
        pair("rows_examined", &n.to_string());
    }
    s
}

/// The client's address for a log line.
pub fn client(peer: Option<SocketAddr>) -> String {
    peer.map(|p| p.to_string()).unwrap_or_default()
}

/// RFC 3339 in UTC with exactly three decimals, truncated (`2024-05-01T12:00:00.123Z`):
/// `time`'s `Rfc3339` would drop trailing zeros, and the log's lines keep one width.
const MILLIS: EncodedConfig = Config::DEFAULT
    .set_time_precision(TimePrecision::Second {
        decimal_digits: NonZeroU8::new(3),
    })
    .encode();

/// `time` as RFC 3339 in UTC with milliseconds (`2024-05-01T12:00:00.123Z`).
pub fn rfc3339(time: SystemTime) -> String {
    // Formatting fails only for a year past 9999, which a SystemTime after the
    // epoch does not reach in practice; an empty time is still a log line.
    time::OffsetDateTime::from(time.max(UNIX_EPOCH))
        .format(&Iso8601::<MILLIS>)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789); // a leap day
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
        // Always three decimals, truncated: the trailing zeros stay.
        assert_eq!(rfc3339(t - Duration::from_millis(689)), "2024-02-29T12:34:56.100Z");
        assert_eq!(rfc3339(t + Duration::from_nanos(999_999)), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn credential_kinds() {
        assert_eq!(Credential::of(Some(b"SharedKey a:b"), None), Credential::SharedKey);
        assert_eq!(
            Credential::of(Some(b"SharedKeyLite a:b"), None),
            Credential::SharedKeyLite
        );
        assert_eq!(Credential::of(Some(b"Bearer x"), None), Credential::Bearer);
        assert_eq!(Credential::of(Some(b"Basic x"), None), Credential::Other);
        assert_eq!(Credential::of(None, Some("sv=1&sig=abc")), Credential::Sas);
        assert_eq!(Credential::of(None, Some("$top=1")), Credential::Anonymous);
    }

    #[test]
    fn text_lines_quote_what_needs_it() {
        let e = Entry {
            time: "t".into(),
            request_id: "r",
            account: "a",
            operation: "QueryEntity",
            table: "tbl",
            status: 200,
            error_code: "",
            latency_ms: 1.5,
            bytes_in: 0,
            bytes_out: 10,
            client: "127.0.0.1:5".into(),
            user_agent: "azsdk-python x=1",
            credential: "SharedKey",
            fault: "",
            plan: "index:Email",
            rows_examined: Some(3),
        };
        let line = text_line(&e);
        assert!(line.contains(r#"error_code="""#), "{line}");
        assert!(line.contains(r#"user_agent="azsdk-python x=1""#), "{line}");
        assert!(line.contains("latency_ms=1.500 "), "{line}");
        assert!(line.ends_with(" plan=index:Email rows_examined=3"), "{line}");
    }
}
