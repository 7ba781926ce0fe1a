//! Entity Timestamps: strictly increasing within this process, and always after
//! the Timestamp being replaced, so every write yields a new ETag even within one
//! 100-ns tick or after the wall clock steps back.
//!
//! A test may move the clock (the admin listener's `/clock`, docs/lifecycle.md):
//! the offset moves new Timestamps and what expiry sees. Off, it is one relaxed
//! load of zero.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::DateTime;

const TICKS_PER_SECOND: i64 = 10_000_000;

#[derive(Debug, Default)]
pub(crate) struct Clock {
    last: AtomicI64,
    /// Added to the wall clock, in ticks (a test's offset; 0 unless set).
    offset: AtomicI64,
}

impl Clock {
    /// The wall clock, moved by the test offset.
    pub(crate) fn now(&self) -> DateTime {
        DateTime(DateTime::now().0.saturating_add(self.offset.load(Ordering::Relaxed)))
    }

    pub(crate) fn offset_seconds(&self) -> i64 {
        self.offset.load(Ordering::Relaxed) / TICKS_PER_SECOND
    }

    pub(crate) fn set_offset_seconds(&self, seconds: i64) {
        self.offset
            .store(seconds.saturating_mul(TICKS_PER_SECOND), Ordering::Relaxed);
    }

    /// A Timestamp later than every one handed out before and than `after`.
    pub(crate) fn next_after(&self, after: Option<DateTime>) -> DateTime {
        let floor = after.map_or(i64::MIN, |t| t.0);
        let now = self.now().0;
        let mut prev = self.last.load(Ordering::Relaxed);
        loop {
            let next = now.max(prev + 1).max(floor.saturating_add(1));
            match self
                .last
                .compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return DateTime(next),
                Err(actual) => prev = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictly_increasing_and_after_floor() {
        let c = Clock::default();
        let a = c.next_after(None);
        let b = c.next_after(None);
        assert!(b > a);
        let future = DateTime(b.0 + 1_000_000_000);
        assert!(c.next_after(Some(future)) > future);
    }

    #[test]
    fn the_offset_moves_now_and_new_timestamps() {
        let c = Clock::default();
        c.set_offset_seconds(86_400);
        assert_eq!(c.offset_seconds(), 86_400);
        let day = 86_400 * TICKS_PER_SECOND;
        assert!(c.now().0 - DateTime::now().0 > day - 60 * TICKS_PER_SECOND);
        assert!(c.next_after(None).0 - DateTime::now().0 > day - 60 * TICKS_PER_SECOND);
    }
}
