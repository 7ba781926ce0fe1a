//! Entity Timestamps: strictly increasing within this process, and always after
//! the Timestamp being replaced, so every write yields a new ETag even within one
//! 100-ns tick or after the wall clock steps back.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::DateTime;

#[derive(Debug, Default)]
pub(crate) struct Clock {
    last: AtomicI64,
}

impl Clock {
    /// A Timestamp later than every one handed out before and than `after`.
    pub(crate) fn next_after(&self, after: Option<DateTime>) -> DateTime {
        let floor = after.map_or(i64::MIN, |t| t.0);
        let now = DateTime::now().0;
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
}
