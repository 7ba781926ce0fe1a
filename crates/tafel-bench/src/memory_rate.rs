//! `tafel-bench memory-rate`: how fast this machine reads memory it does not have
//! in cache, in bytes and in rows of a given size. A scan reads every row it
//! filters, so this is the physical limit of a scan of the same bytes (issue #46
//! measures a scan against it, in the same run).
//!
//! Each thread reads its own buffer, far larger than any CPU cache, from start to
//! end, again and again, summing it as 64-bit words (the compiler vectorises the
//! sum; the hardware prefetcher sees a sequential stream): the best case for the
//! memory system, which a B-tree's scattered leaves can only approach.
//!
//! `--checked` reads the rows as a verified scan of the on-disk store does: each
//! row's CRC-32 computed over all of its bytes (`crc32fast`, the store's own
//! checksum), so the rate is the most rows a scan that checks every row can read.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Bytes each thread reads at least: several times the last-level cache of any
/// machine this runs on, so the rate is memory's, not the cache's.
const MIN_BUFFER: usize = 256 << 20;

/// How each thread reads its buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Summed as 64-bit words: the memory system's best case.
    Summed,
    /// Row by row, each row's CRC-32 computed as a verified scan checks it.
    Checked,
}

/// The outcome of a measurement.
pub struct MemoryRate {
    pub threads: usize,
    pub bytes_per_s: f64,
    pub row_bytes: u64,
    pub read: Read,
}

impl MemoryRate {
    pub fn rows_per_s(&self) -> f64 {
        self.bytes_per_s / self.row_bytes.max(1) as f64
    }
}

/// Reads `rows` rows of `row_bytes` (at least [`MIN_BUFFER`] per thread) on
/// `threads` threads for about `duration`, as `read` says.
pub fn measure(row_bytes: u64, rows: u64, threads: usize, duration: Duration, read: Read) -> MemoryRate {
    let per_thread = usize::try_from(row_bytes.saturating_mul(rows))
        .unwrap_or(usize::MAX)
        .max(MIN_BUFFER)
        / 8;
    let total: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|t| {
                s.spawn(move || {
                    // Filled (touched) before the clock starts: the first pass would count page faults.
                    match read {
                        Read::Summed => {
                            let buf: Vec<u64> = (0..per_thread as u64).map(|i| i ^ t as u64).collect();
                            stream(duration, buf.len() * 8, || sum(black_box(&buf)))
                        }
                        Read::Checked => {
                            let buf: Vec<u8> = (0..per_thread * 8).map(|i| (i ^ t) as u8).collect();
                            stream(duration, buf.len(), || checked(black_box(&buf), row_bytes))
                        }
                    }
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
        bytes_per_s: total as f64,
        row_bytes,
        read,
    }
}

/// Runs `pass` (over `bytes`) once, then again and again for `duration`: the
/// bytes read and the time taken.
fn stream(duration: Duration, bytes: usize, mut pass: impl FnMut() -> u64) -> (u64, Duration) {
    black_box(pass());
    let start = Instant::now();
    let mut read = 0u64;
    while start.elapsed() < duration {
        black_box(pass());
        read += bytes as u64;
    }
    (read, start.elapsed())
}

/// The CRC-32s of `bytes` as rows of `row_bytes` (the last one maybe shorter),
/// folded together.
fn checked(bytes: &[u8], row_bytes: u64) -> u64 {
    let row = usize::try_from(row_bytes).unwrap_or(usize::MAX).max(1);
    bytes.chunks(row).fold(0, |acc, r| acc ^ u64::from(crc32fast::hash(r)))
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
    fn checks_each_row_as_the_store_does() {
        // 72 bytes as rows of 24, then of 50 (the last one 22 bytes).
        let bytes: Vec<u8> = (0..72u8).collect();
        let crc = |r: &[u8]| u64::from(crc32fast::hash(r));
        assert_eq!(
            checked(&bytes, 24),
            crc(&bytes[..24]) ^ crc(&bytes[24..48]) ^ crc(&bytes[48..])
        );
        assert_eq!(checked(&bytes, 50), crc(&bytes[..50]) ^ crc(&bytes[50..]));
        assert_ne!(checked(&bytes, 24), checked(&bytes, 50));
    }

    #[test]
    fn rows_per_second_is_bytes_over_row_size() {
        let r = MemoryRate {
            threads: 1,
            bytes_per_s: 1000.0,
            row_bytes: 10,
            read: Read::Summed,
        };
        assert_eq!(r.rows_per_s(), 100.0);
    }
}
