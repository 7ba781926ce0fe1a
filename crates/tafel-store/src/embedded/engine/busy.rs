//! Whether the machine is busy, for the paced fold (`pace.rs`): whether a fold
//! handed to the fold thread, at nice 10, would be starved.
//!
//! A fold that lags behind the log is hurried, and the hurried thread folds
//! the rest; but a starved fold thread asked to stop only stops once the
//! scheduler runs it, up to ~100 ms later beside CPU-bound processes
//! (benchmark-history §49). So once a fold lagged with its thread starved, a
//! busy spell begins, in which the writer thread folds at the writes' priority.
//! Folding so beside the writes costs them, though (merges' p99 ~2.1 → ~3.4 ms
//! on the strings shape, §50), so a spell ends as soon as the machine is quiet
//! again. Both are told by a thread's share of a core, from its CPU clock.

use std::time::{Duration, Instant};

/// How long a busy spell lasts at most: each spell ended too soon costs one
/// wait for a starved thread.
const BUSY_FOR: Duration = Duration::from_secs(30);

/// How long a busy spell lasts at least: it ends then, or later, once the
/// writer thread's last fold found the machine quiet (a burst of batches that
/// starved the fold has passed, say). Doubled by each spell that follows
/// another without the fold thread keeping up in between, so a machine that
/// only looks quiet to the writer thread costs one wait per doubling.
const BUSY_AT_LEAST: Duration = Duration::from_secs(1);

/// Below this share of a core since it was handed the fold, a fold thread
/// whose fold lags was starved. At or above it, hurried, it stops within
/// milliseconds, and the hurried thread folds the rest: the machine is not
/// busy. Measured beside 32 merges in flight: 0.28–0.5 on a quiet machine,
/// 0.08 beside two CPU-bound processes (§50).
const STARVED_BELOW: f64 = 0.2;

/// From this share of a core on, a fold on the writer thread had the core to
/// itself: the machine is quiet again. Measured beside 32 merges in flight:
/// 0.83–1.0 on a quiet machine, 0.35–0.57 beside two CPU-bound processes (§50).
const QUIET_FROM: f64 = 0.75;

/// The busy spells of one store's folds.
#[derive(Default)]
pub(super) struct Spells {
    spell: Option<Spell>,
    /// How long the next spell lasts at least.
    at_least: Duration,
}

#[derive(Clone, Copy)]
struct Spell {
    since: Instant,
    at_least: Duration,
    /// The writer thread's last fold had the core to itself.
    quiet: bool,
}

impl Spells {
    /// A fold lagged behind the log, its thread having had `share` of a core
    /// since it was handed the fold (none: unknown, taken as starved).
    pub(super) fn lagged(&mut self, share: Option<f64>, now: Instant) {
        let share = share.unwrap_or(0.0);
        if share >= STARVED_BELOW {
            return;
        }
        let at_least = self.at_least.max(BUSY_AT_LEAST);
        tracing::debug!(share, ?at_least, "a fold starved: the writer thread folds");
        self.spell = Some(Spell {
            since: now,
            at_least,
            quiet: false,
        });
        self.at_least = (at_least * 2).min(BUSY_FOR);
    }

    /// Whether a spell goes on at `now`: the next fold is the writer thread's.
    pub(super) fn busy(&mut self, now: Instant) -> bool {
        let Some(spell) = self.spell else {
            return false;
        };
        let lasted = now.saturating_duration_since(spell.since);
        if lasted < BUSY_FOR && (lasted < spell.at_least || !spell.quiet) {
            return true;
        }
        tracing::debug!(?lasted, "the fold thread folds again");
        self.spell = None;
        false
    }

    /// The writer thread folded with `share` of a core.
    pub(super) fn writer_folded(&mut self, share: f64) {
        if let Some(spell) = self.spell.as_mut() {
            spell.quiet = share >= QUIET_FROM;
        }
    }

    /// A fold on the fold thread ended unhurried: the next spell is the
    /// shortest again.
    pub(super) fn kept_up(&mut self) {
        self.at_least = BUSY_AT_LEAST;
    }
}

/// A thread's CPU clock.
#[derive(Clone, Copy)]
pub(super) struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// This thread's, readable from any thread of the process.
    pub(super) fn of_this_thread() -> Option<CpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `id` is a live local the call writes a clock id into.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(CpuClock(id))
    }

    /// The clock of whichever thread reads it.
    pub(super) fn this_thread() -> CpuClock {
        CpuClock(libc::CLOCK_THREAD_CPUTIME_ID)
    }

    /// From now on: what share of a core its thread gets.
    pub(super) fn stint(self) -> Option<Stint> {
        Some(Stint {
            clock: self,
            at: Instant::now(),
            used: self.used()?,
        })
    }

    /// The CPU time its thread has used.
    fn used(self) -> Option<Duration> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a live local the call writes the time into.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u32::try_from(ts.tv_nsec).ok()?;
        (rc == 0).then(|| Duration::new(secs, nanos))
    }
}

/// A span of a thread's time.
#[derive(Clone, Copy)]
pub(super) struct Stint {
    clock: CpuClock,
    at: Instant,
    used: Duration,
}

impl Stint {
    /// The share of a core the thread has had since the stint began.
    pub(super) fn share(self) -> Option<f64> {
        let cpu = self.clock.used()?.saturating_sub(self.used);
        Some(cpu.as_secs_f64() / self.at.elapsed().as_secs_f64().max(1e-9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fold_that_lags_with_its_thread_running_starts_no_spell() {
        let (mut spells, now) = (Spells::default(), Instant::now());
        spells.lagged(Some(0.33), now);
        assert!(!spells.busy(now), "a third of a core is a fold outpaced, not starved");
        spells.lagged(Some(0.08), now);
        assert!(spells.busy(now));
        let mut unknown = Spells::default();
        unknown.lagged(None, now);
        assert!(
            unknown.busy(now),
            "a thread whose CPU time is unknown counts as starved"
        );
    }

    #[test]
    fn a_busy_spell_ends_once_the_writer_thread_folds_with_the_core_to_itself() {
        // Regression: a burst of batches (the bench's preload) starved the fold
        // once, and the writer thread folded for 30 s after it on a quiet machine.
        let (mut spells, now) = (Spells::default(), Instant::now());
        spells.lagged(Some(0.05), now);
        spells.writer_folded(0.95);
        assert!(spells.busy(now + BUSY_AT_LEAST / 2), "a spell lasts its least");
        assert!(!spells.busy(now + BUSY_AT_LEAST), "quiet again after its least");
        assert!(!spells.busy(now + BUSY_AT_LEAST * 2), "and it stays ended");
    }

    #[test]
    fn a_busy_spell_goes_on_while_the_writer_thread_shares_its_core() {
        let (mut spells, now) = (Spells::default(), Instant::now());
        spells.lagged(Some(0.05), now);
        spells.writer_folded(0.95);
        spells.writer_folded(0.4);
        assert!(
            spells.busy(now + Duration::from_secs(29)),
            "the last fold's share counts"
        );
        assert!(!spells.busy(now + BUSY_FOR), "never past BUSY_FOR");
    }

    #[test]
    fn spells_that_follow_each_other_last_longer_until_the_fold_thread_keeps_up() {
        let (mut spells, mut now) = (Spells::default(), Instant::now());
        let mut least = Vec::new();
        for _ in 0..7 {
            spells.lagged(Some(0.0), now);
            spells.writer_folded(1.0);
            let mut lasted = Duration::ZERO;
            while spells.busy(now + lasted) {
                lasted += Duration::from_millis(250);
            }
            least.push(lasted.as_secs());
            now += lasted;
        }
        assert_eq!(least, [1, 2, 4, 8, 16, 30, 30]);
        spells.kept_up();
        spells.lagged(Some(0.0), now);
        spells.writer_folded(1.0);
        assert!(!spells.busy(now + BUSY_AT_LEAST));
    }

    #[test]
    fn a_stint_measures_the_share_of_a_core_its_thread_had() {
        let clock = CpuClock::of_this_thread().expect("a thread has a CPU clock");
        let asleep = clock.stint().expect("the clock reads");
        std::thread::sleep(Duration::from_millis(50));
        let slept = asleep.share().expect("the clock reads");
        assert!(slept < 0.2, "asleep, a thread uses no core: {slept}");
        let busy = CpuClock::this_thread().stint().expect("the clock reads");
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            std::hint::black_box(0u64);
        }
        let spun = busy.share().expect("the clock reads");
        assert!(
            spun > slept,
            "spinning uses more of a core ({spun}) than sleeping ({slept})"
        );
    }
}
