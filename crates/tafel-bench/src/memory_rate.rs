//! `tafel-bench memory-rate`: how fast this machine reads memory it does not have
//! in cache, in bytes and in rows of a given size. A scan reads every row it
//! filters, so this is the physical limit of a scan of the same bytes (issue #46
//! measures a scan against it, in the same run).
//!
//! Each thread reads its own buffer, far larger than any CPU cache, from start to
//! end, again and again, summing it as 64-bit words (the compiler vectorises the
//! sum; the hardware prefetcher sees a sequential stream): the best case for the
//! memory system, which a B-tree's scattered leaves can only approach.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Bytes each thread reads at least: several times the last-level cache of any
/// machine this runs on, so the rate is memory's, not the cache's.
const MIN_BUFFER: usize = 256 << 20;

/// The outcome of a measurement.
pub struct MemoryRate {
    pub threads: usize,
    pub bytes_per_s: f64,
    pub row_bytes: u64,
}

impl MemoryRate {
    pub fn rows_per_s(&self) -> f64 {
        self.bytes_per_s / self.row_bytes.max(1) as f64
    }
}

/// Reads `rows` rows of `row_bytes` (at least [`MIN_BUFFER`] per thread) on
/// `threads` threads for about `duration`.
pub fn measure(row_bytes: u64, rows: u64, threads: usize, duration: Duration) -> MemoryRate {
    let per_thread = usize::try_from(row_bytes.saturating_mul(rows))
        .unwrap_or(usize::MAX)
        .max(MIN_BUFFER)
        / 8;
    let read: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|t| {
                s.spawn(move || {
                    // Touched before the clock starts: the first pass would count page faults.
                    let buf: Vec<u64> = (0..per_thread as u64).map(|i| i ^ t as u64).collect();
                    black_box(sum(&buf));
                    let start = Instant::now();
                    let mut bytes = 0u64;
                    while start.elapsed() < duration {
                        black_box(sum(black_box(&buf)));
                        bytes += (buf.len() * 8) as u64;
                    }
                    (bytes, start.elapsed())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().map_or(0.0, |(b, el)| b as f64 / el.as_secs_f64()) as u64)
            .sum()
    });
    MemoryRate {
        threads: threads.max(1),
        bytes_per_s: read as f64,
        row_bytes,
    }
}

fn sum(words: &[u64]) -> u64 {
    // Four lanes, so the adds do not wait on each other.
    let mut acc = [0u64; 4];
    for c in words.chunks_exact(4) {
        for i in 0..4 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    acc.iter().fold(0, |a, &b| a.wrapping_add(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_word() {
        let words: Vec<u64> = (1..=8).collect();
        assert_eq!(sum(&words), 36);
    }

    #[test]
    fn rows_per_second_is_bytes_over_row_size() {
        let r = MemoryRate {
            threads: 1,
            bytes_per_s: 1000.0,
            row_bytes: 10,
        };
        assert_eq!(r.rows_per_s(), 100.0);
    }
}
