//! What a long run shows: a bar on a terminal (rows, rows/s, bytes, ETA when the
//! total is known), a plain line every few seconds otherwise, a summary at the end.
//! The display is the binary's; tafel-transfer only reports through its
//! [`Progress`](tafel_transfer::progress::Progress) trait, which this implements.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    what: String,
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: std::sync::Mutex<Instant>,
    rows: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    /// What a long-running command adds to the line (a follow's lag).
    status: std::sync::Mutex<String>,
}

impl Progress {
    /// `total`: rows expected, when known (an import reads its file's size instead).
    pub fn new(what: impl Into<String>, total: Option<u64>, quiet: bool) -> Self {
        let what = what.into();
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let (bar, template) = match total {
                Some(n) => (
                    ProgressBar::new(n),
                    "{msg} [{bar:30}] {pos}/{len} rows, {per_sec}, ETA {eta}",
                ),
                None => (
                    ProgressBar::new_spinner(),
                    "{spinner} {msg} {pos} rows, {per_sec} {prefix}",
                ),
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(what.clone());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            what,
            bar,
            started: Instant::now(),
            last_line: std::sync::Mutex::new(Instant::now()),
            rows: 0.into(),
            bytes: 0.into(),
            status: std::sync::Mutex::new(String::new()),
        }
    }

    /// Shows `status` after the counts from now on (on the bar, and on each plain line).
    pub fn status(&self, status: &str) {
        if let Ok(mut s) = self.status.lock() {
            status.clone_into(&mut s);
        }
        match &self.bar {
            Some(bar) => bar.set_message(format!("{} ({status})", self.what)),
            None => self.add(0, 0),
        }
    }

    pub fn add(&self, rows: u64, bytes: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let total = self.rows.fetch_add(rows, Relaxed) + rows;
        let b = self.bytes.fetch_add(bytes, Relaxed) + bytes;
        match &self.bar {
            Some(bar) => {
                bar.set_position(total);
                bar.set_prefix(HumanBytes(b).to_string());
            }
            None => {
                let Ok(mut last) = self.last_line.lock() else { return };
                if last.elapsed() >= PLAIN_EVERY {
                    *last = Instant::now();
                    let status = self.status.lock().map(|s| s.clone()).unwrap_or_default();
                    let status = if status.is_empty() {
                        status
                    } else {
                        format!(", {status}")
                    };
                    eprintln!(
                        "{}: {total} rows, {}/s, {}{status}",
                        self.what,
                        self.rate(total),
                        HumanBytes(b)
                    );
                }
            }
        }
    }

    fn rate(&self, rows: u64) -> u64 {
        (rows as f64 / self.started.elapsed().as_secs_f64().max(1e-3)) as u64
    }

    /// Sets the rows expected (a table written meanwhile moves an index build's).
    pub fn set_total(&self, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Ends the bar and prints the summary line.
    pub fn finish(&self, summary: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        let rows = self.rows();
        eprintln!(
            "{}: {rows} rows in {:.1} s ({}/s){summary}",
            self.what,
            self.started.elapsed().as_secs_f64(),
            self.rate(rows)
        );
    }
}

impl tafel_transfer::progress::Progress for Progress {
    fn add(&self, rows: u64, bytes: u64) {
        Progress::add(self, rows, bytes);
    }

    fn status(&self, status: &str) {
        Progress::status(self, status);
    }
}
