//! Expiry (TTL): tables' policies as the admin API sets them, the lookup every
//! read and write makes (cached, `ttl.rs`), the test clock, and the sweep that
//! removes expired entities in the background (docs/lifecycle.md).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tafel_store::{write_with, EntityKey, Expect, KeyRange, KeyRef, Mutation, RowFilter, ScanRequest};

use super::Service;
use crate::error::{Error, ErrorCode, Result};
use crate::model::DateTime;
use crate::ttl::{self, Expiry, TtlPolicy};

/// How often the sweep looks for expired entities in tables with a policy.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How often the sweep reads every table's record to find policies set on
/// another node (PostgreSQL) or before a restart.
pub const DISCOVER_EVERY: Duration = Duration::from_secs(10);
/// Entities one sweep transaction removes at most.
const SWEEP_BATCH: usize = 100;
/// A table is swept again no sooner than this many times one pass's length
/// after it: a pass reads the whole table, so a large one is read at most 1/20
/// of the time (its expired entities are invisible meanwhile; benchmark §33).
const PASS_SPACING: u32 = 20;
/// Longest a table goes unswept when nothing in it is due before: rows brought
/// back by a snapshot or backup restore are not announced to the sweep.
const RECHECK_EVERY: Duration = Duration::from_secs(60);

impl Service {
    /// A table's TTL policy; `TableNotFound` when there is no such table.
    pub async fn table_ttl(&self, account: &str, table: &str) -> Result<Option<TtlPolicy>> {
        let record = self.store.get_table(account, table).await?;
        let record = record.ok_or_else(|| Error::new(ErrorCode::TableNotFound))?;
        let policy = ttl::decode(crate::acl::decode_parts(&record.acl)?.1)?;
        self.policies.forget(account, table);
        self.policies.put(account, table, policy.clone().map(Arc::new));
        Ok(policy)
    }

    /// Sets a table's TTL policy (validated first), or clears it with `None`.
    /// Kept after the table's ACL in its record: a Set Table ACL at the same
    /// instant may undo it (both read, then write, the record).
    pub async fn set_table_ttl(&self, account: &str, table: &str, policy: Option<TtlPolicy>) -> Result<()> {
        let policy = policy.map(TtlPolicy::validate).transpose()?;
        let record = self.store.get_table(account, table).await?;
        let record = record.ok_or_else(|| Error::new(ErrorCode::TableNotFound))?;
        let (ids, _) = crate::acl::decode_parts(&record.acl)?;
        let mut blob = crate::acl::encode(&ids);
        if let Some(p) = &policy {
            blob.extend_from_slice(&ttl::encode(p));
        }
        if !self.store.set_table_acl(account, table, blob).await? {
            return Err(Error::new(ErrorCode::TableNotFound));
        }
        self.policies.forget(account, table);
        self.policies.put(account, table, policy.map(Arc::new));
        Ok(())
    }

    /// The table's policy as of now, for a read or write to decide with; `None`
    /// (the common case) costs a cache lookup.
    pub(crate) async fn expiry(&self, account: &str, table: &str) -> Result<Option<Expiry>> {
        let policy = match self.policies.fresh(account, table) {
            Some(p) => p,
            None => match self.store.get_table(account, table).await? {
                Some(record) => {
                    let p = ttl::decode(crate::acl::decode_parts(&record.acl)?.1)?.map(Arc::new);
                    self.policies.put(account, table, p.clone());
                    p
                }
                // No table: the operation itself answers that. Nothing is
                // cached for it, so names of missing tables cannot grow the cache.
                None => {
                    self.policies.forget_spelling(account, table);
                    None
                }
            },
        };
        Ok(policy.map(|policy| Expiry {
            policy,
            now: self.clock.now(),
        }))
    }

    /// Forgets a table's cached policy (the table was deleted).
    pub(crate) fn forget_ttl(&self, account: &str, table: &str) {
        self.policies.forget(account, table);
    }

    /// The test clock's offset (`PUT /clock` on the admin listener).
    pub fn clock_offset_seconds(&self) -> i64 {
        self.clock.offset_seconds()
    }

    pub fn set_clock_offset_seconds(&self, seconds: i64) {
        self.clock.set_offset_seconds(seconds);
        // What the sweep worked out as due was on the old clock.
        self.policies.all_due();
    }

    /// Entities the background sweep has removed since the start.
    pub fn expired_total(&self) -> u64 {
        self.policies.expired.load(Ordering::Relaxed)
    }

    /// One round of the background sweep (the binary runs one every
    /// [`SWEEP_EVERY`]): each table with a policy loses its expired entities;
    /// with `discover`, every table's policy is read first (policies set on
    /// another node, or before a restart). Failures are logged, not returned.
    pub async fn expiry_round(&self, discover: bool) {
        if discover {
            if let Err(e) = self.discover().await {
                tracing::warn!(error = %e.message, "expiry: reading tables' policies failed");
            }
        }
        for (account, table, policy) in self.policies.with_policy() {
            let now = self.clock.now();
            if self.policies.not_due(&account, &table, &policy, now) {
                continue;
            }
            let started = std::time::Instant::now();
            match self.sweep_pass(&account, &table).await {
                Ok((_, earliest)) => {
                    let at = next_due(&policy, now, started.elapsed(), earliest);
                    self.policies.set_due(account, table, policy, at);
                }
                Err(e) => tracing::warn!(account, table, error = %e.message, "expiry: sweeping a table failed"),
            }
        }
    }

    /// Reads every table's policy into the cache (the sweep's list).
    async fn discover(&self) -> Result<()> {
        for t in self.store.table_sizes().await? {
            if self.policies.fresh(&t.account, &t.table).is_none() {
                self.expiry(&t.account, &t.table).await?;
            }
        }
        Ok(())
    }

    /// Removes a table's expired entities, [`SWEEP_BATCH`] per transaction; each
    /// removal is a change `"reason":"expired"` in the feed. Returns how many.
    pub async fn sweep(&self, account: &str, table: &str) -> Result<u64> {
        Ok(self.sweep_pass(account, table).await?.0)
    }

    /// [`Service::sweep`], and when the first entity it left expires.
    async fn sweep_pass(&self, account: &str, table: &str) -> Result<(u64, Option<DateTime>)> {
        let Some(expiry) = self.expiry(account, table).await? else {
            return Ok((0, None));
        };
        let earliest = Arc::new(AtomicI64::new(i64::MAX));
        let filter: RowFilter = {
            let (expiry, earliest) = (expiry.clone(), earliest.clone());
            Arc::new(move |_: KeyRef<'_>, v: &[u8]| match expiry.expires_at(v) {
                Some(at) if at <= expiry.now => true,
                Some(at) => {
                    earliest.fetch_min(at.0, Ordering::Relaxed);
                    false
                }
                None => false,
            })
        };
        let mut ranges = vec![KeyRange::all()];
        let mut removed = 0;
        loop {
            let mut rows: Vec<(EntityKey, Vec<u8>)> = Vec::new();
            let request = ScanRequest {
                ranges: ranges.clone(),
                limit: SWEEP_BATCH,
                filter: Some(filter.clone()),
                deadline: None,
            };
            let end = self.store.scan_into(account, table, request, &mut rows).await?;
            if !rows.is_empty() {
                let keys: Vec<EntityKey> = rows.into_iter().map(|(k, _)| k).collect();
                let n = self.remove_expired(account, table, keys, &expiry).await?;
                removed += n;
                self.policies.expired.fetch_add(n, Ordering::Relaxed);
            }
            match end.next {
                Some(next) => ranges = KeyRange::resume(ranges, next.as_bytes()),
                None => {
                    let earliest = earliest.load(Ordering::Relaxed);
                    return Ok((removed, (earliest != i64::MAX).then_some(DateTime(earliest))));
                }
            }
        }
    }

    /// Removes those of `keys` still expired in the transaction: a write since
    /// the scan may have renewed one.
    async fn remove_expired(&self, account: &str, table: &str, keys: Vec<EntityKey>, expiry: &Expiry) -> Result<u64> {
        let expiry = expiry.clone();
        Ok(
            write_with(&*self.store, account, table, keys, Expect::Any, move |current| {
                let mutations: Vec<Mutation> = current
                    .iter()
                    .map(|c| match c {
                        Some(v) if expiry.expired(v) => Mutation::Expire,
                        _ => Mutation::Keep,
                    })
                    .collect();
                let n = mutations.iter().filter(|m| **m == Mutation::Expire).count() as u64;
                (mutations, n)
            })
            .await?,
        )
    }
}

/// When a table swept at `now` (a pass of `took`, leaving its first entity to
/// expire at `earliest`) is next due: when that entity expires, but no sooner
/// than [`PASS_SPACING`] passes' length (and [`SWEEP_EVERY`]), and no later
/// than [`RECHECK_EVERY`]. An entity written after the pass may expire before
/// `earliest`: by `seconds` no sooner than `now + seconds`, which bounds the
/// wait too; by a property, at any time, so such a table waits only the spacing.
fn next_due(policy: &TtlPolicy, now: DateTime, took: Duration, earliest: Option<DateTime>) -> DateTime {
    let soonest = now.after(SWEEP_EVERY.max(took * PASS_SPACING));
    let latest = match (&policy.property, policy.seconds) {
        (Some(_), _) => soonest,
        (None, Some(s)) => now.after(RECHECK_EVERY.min(Duration::from_secs(s))),
        (None, None) => now.after(RECHECK_EVERY),
    };
    earliest.unwrap_or(latest).min(latest).max(soonest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: DateTime = DateTime(1_000_000_000_000);

    fn at(seconds: f64) -> DateTime {
        DateTime(NOW.0 + (seconds * 10_000_000.0) as i64)
    }

    fn policy(seconds: Option<u64>, property: Option<&str>) -> TtlPolicy {
        TtlPolicy {
            seconds,
            property: property.map(str::to_owned),
        }
    }

    #[test]
    fn a_table_is_next_swept_when_its_first_entity_expires() {
        let p = policy(Some(86_400), None);
        assert_eq!(next_due(&p, NOW, Duration::ZERO, Some(at(30.0))), at(30.0));
        // Not sooner than the sweep's own period.
        assert_eq!(next_due(&p, NOW, Duration::ZERO, Some(at(0.2))), at(1.0));
        // Nothing left to expire: looked at again after RECHECK_EVERY at most.
        assert_eq!(next_due(&p, NOW, Duration::ZERO, None), at(60.0));
        assert_eq!(next_due(&p, NOW, Duration::ZERO, Some(at(7200.0))), at(60.0));
    }

    #[test]
    fn an_entity_written_after_an_empty_pass_is_swept_when_it_expires_by_age() {
        // With seconds = 5, a write after the pass expires 5 s after it at the soonest.
        let p = policy(Some(5), None);
        assert_eq!(next_due(&p, NOW, Duration::ZERO, None), at(5.0));
    }

    #[test]
    fn a_table_expiring_by_a_property_waits_only_the_spacing() {
        let p = policy(None, Some("ExpiresAt"));
        assert_eq!(next_due(&p, NOW, Duration::ZERO, Some(at(3600.0))), at(1.0));
        assert_eq!(next_due(&p, NOW, Duration::from_millis(200), None), at(4.0));
    }

    #[test]
    fn a_long_pass_spaces_the_next_one() {
        let p = policy(Some(86_400), None);
        assert_eq!(next_due(&p, NOW, Duration::from_millis(300), Some(at(1.0))), at(6.0));
    }
}
