//! Expiry (TTL): tables' policies as the admin API sets them, the lookup every
//! read and write makes (cached, `ttl.rs`), the test clock, and the sweep that
//! removes expired entities in the background (docs/lifecycle.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tafel_store::{write_with, EntityKey, Expect, KeyRange, KeyRef, Mutation, RowFilter, ScanRequest};

use super::Service;
use crate::error::{Error, ErrorCode, Result};
use crate::ttl::{self, Expiry, TtlPolicy};

/// How often the sweep looks for expired entities in tables with a policy.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How often the sweep reads every table's record to find policies set on
/// another node (PostgreSQL) or before a restart.
pub const DISCOVER_EVERY: Duration = Duration::from_secs(10);
/// Entities one sweep transaction removes at most.
const SWEEP_BATCH: usize = 100;

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
        for (account, table) in self.policies.with_policy() {
            if let Err(e) = self.sweep(&account, &table).await {
                tracing::warn!(account, table, error = %e.message, "expiry: sweeping a table failed");
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
        let Some(expiry) = self.expiry(account, table).await? else {
            return Ok(0);
        };
        let filter: RowFilter = {
            let expiry = expiry.clone();
            Arc::new(move |_: KeyRef<'_>, v: &[u8]| expiry.expired(v))
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
                let expiry = expiry.clone();
                // Decided again in the transaction: a write since the scan may
                // have renewed an entity.
                let n = write_with(&*self.store, account, table, keys, Expect::Any, move |current| {
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
                .await?;
                removed += n;
                self.policies.expired.fetch_add(n, Ordering::Relaxed);
            }
            match end.next {
                Some(next) => ranges = KeyRange::resume(ranges, next.as_bytes()),
                None => return Ok(removed),
            }
        }
    }
}
