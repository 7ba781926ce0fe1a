//! What a worker counts, and the read-backs it leaves for after its workload.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::report::new_hist;

/// A read-back check to do after a workload.
pub(super) struct Sample {
    pub(super) insert_table: bool,
    pub(super) pk: String,
    pub(super) id: u64,
}

/// What one worker did.
pub(super) struct Tally {
    pub(super) hist: Histogram<u64>,
    /// Per full scan (scan-filter only).
    pub(super) scan_hist: Histogram<u64>,
    pub(super) ops: u64,
    pub(super) entities: u64,
    pub(super) matched: u64,
    pub(super) scans: u64,
    pub(super) errors: u64,
    pub(super) verified: u64,
    pub(super) mismatches: u64,
    pub(super) messages: Vec<String>,
    pub(super) samples: Vec<Sample>,
    pub(super) connects: u64,
    /// Operations slower than `slow_over` (µs): when each began, and its latency (µs).
    pub(super) slow: Vec<(Instant, u64)>,
    slow_over: u64,
}

impl Tally {
    pub(super) fn new() -> Self {
        Self {
            hist: new_hist(),
            scan_hist: new_hist(),
            ops: 0,
            entities: 0,
            matched: 0,
            scans: 0,
            errors: 0,
            verified: 0,
            mismatches: 0,
            messages: Vec::new(),
            samples: Vec::new(),
            connects: 0,
            slow: Vec::new(),
            slow_over: u64::MAX,
        }
    }

    /// A tally that also keeps the operations slower than `over`, if given.
    pub(super) fn watching(over: Option<Duration>) -> Self {
        let mut t = Self::new();
        if let Some(over) = over {
            t.slow_over = over.as_micros() as u64;
        }
        t
    }

    pub(super) fn error(&mut self, what: &str, msg: String) {
        self.errors += 1;
        if self.messages.len() < 3 {
            self.messages.push(format!("{what}: {msg}"));
        }
    }

    pub(super) fn check(&mut self, what: &str, result: Result<(), String>) {
        self.verified += 1;
        if let Err(e) = result {
            self.mismatches += 1;
            if self.messages.len() < 6 {
                self.messages.push(format!("MISMATCH {what}: {e}"));
            }
        }
    }

    pub(super) fn latency(&mut self, t0: Instant) {
        let us = t0.elapsed().as_micros().max(1) as u64;
        let _ = self.hist.record(us.min(self.hist.high()));
        if us > self.slow_over {
            self.slow.push((t0, us));
        }
    }

    pub(super) fn merge(&mut self, o: Tally) {
        let _ = self.hist.add(&o.hist);
        let _ = self.scan_hist.add(&o.scan_hist);
        self.ops += o.ops;
        self.entities += o.entities;
        self.matched += o.matched;
        self.scans += o.scans;
        self.errors += o.errors;
        self.verified += o.verified;
        self.mismatches += o.mismatches;
        self.connects += o.connects;
        for m in o.messages {
            if self.messages.len() < 8 {
                self.messages.push(m);
            }
        }
        self.samples.extend(o.samples);
        self.slow.extend(o.slow);
    }
}
