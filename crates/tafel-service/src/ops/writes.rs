//! Every entity write, single or in a batch, goes through [`Service::write`]: the
//! store locks the keys, and one closure checks every condition against the
//! current rows and produces all mutations under a single Timestamp. A batch is
//! thus atomic, and a failed condition leaves nothing written.

use std::borrow::Cow;

use tafel_store::{write_with, EntityKey, Expect, Mutation};

use super::{Ctx, Service};
use crate::access::Action;
use crate::error::{Error, ErrorCode, Result};
use crate::model::{codec, etag_for, DateTime, Entity};
use crate::ttl::Expiry;
use crate::validate;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Insert,
    /// Update (with If-Match) or insert-or-replace (without).
    Replace,
    /// Merge (with If-Match) or insert-or-merge (without).
    Merge,
    Delete,
}

/// The `If-Match` of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// Absent: Replace and Merge become upserts.
    None,
    /// `*`: the entity must exist.
    Any,
    /// The entity must exist with this ETag, held without its `W/`.
    Etag(String),
}

impl IfMatch {
    /// Azure takes `*` or a weak ETag, `W/"…"` (a lowercase `w/` too, as .NET and the
    /// older emulator do); anything else, a strong ETag included, is malformed (400
    /// `InvalidInput`), not merely a mismatch (412). Kept as the quoted part.
    pub fn parse(header: Option<&str>) -> Result<IfMatch> {
        let weak = |e: &str| {
            let quoted = e.strip_prefix("W/").or_else(|| e.strip_prefix("w/"))?;
            (quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"')).then(|| quoted.to_owned())
        };
        match header.map(str::trim) {
            None => Ok(IfMatch::None),
            Some("*") => Ok(IfMatch::Any),
            Some(e) => weak(e).map(IfMatch::Etag).ok_or_else(|| {
                Error::with_message(
                    ErrorCode::InvalidInput,
                    "The If-Match header must be '*' or a weak ETag (W/\"...\").",
                )
            }),
        }
    }

    /// Compares the ETags' values, as Azure does: the datetime literal inside is
    /// percent-encoded on the wire (`%3A`), but the legacy Node.js SDK rebuilds the ETag
    /// of a no-metadata query's entity from its Timestamp with bare `:`. The same
    /// instant written with all seven fractional digits (as Tafel wrote ETags before it
    /// dropped trailing zeros as Azure does) matches too.
    fn matches(&self, current: DateTime) -> bool {
        match self {
            IfMatch::None | IfMatch::Any => true,
            IfMatch::Etag(quoted) => {
                let sent = percent_decoded(quoted);
                etag_for(current)
                    .strip_prefix("W/")
                    .is_some_and(|cur| percent_decoded(cur) == sent)
                    || etag_instant(&sent) == Some(current)
            }
        }
    }
}

/// The instant of a decoded `"datetime'…Z'"`.
fn etag_instant(quoted: &[u8]) -> Option<DateTime> {
    let literal = quoted.strip_prefix(b"\"datetime'")?.strip_suffix(b"Z'\"")?;
    let literal = std::str::from_utf8(literal).ok()?;
    DateTime::parse(&[literal, "Z"].concat())
}

/// `s` with its `%XX` escapes decoded; a `%` not followed by two hex digits stays.
fn percent_decoded(s: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(s).collect()
}

#[derive(Debug, Clone)]
pub struct WriteOp {
    pub kind: WriteKind,
    /// The entity to write; for deletes only its keys matter.
    pub entity: Entity,
    pub if_match: IfMatch,
    /// How large the written entity may be (merged, for a merge).
    pub limit: validate::EntityLimit,
}

/// Why a batch failed: the index of the failing operation and its error.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchFailure {
    pub index: usize,
    pub error: Error,
}

/// An operation ready to run inside the store's transaction.
struct Prepared {
    kind: WriteKind,
    if_match: IfMatch,
    /// Insert/Replace: the stored bytes with a placeholder Timestamp.
    bytes: Vec<u8>,
    /// Merge: the entity whose properties are laid over the current ones.
    merge: Entity,
    limit: validate::EntityLimit,
}

impl Service {
    /// Runs one write; returns the new Timestamp (unused for deletes).
    pub async fn write_entity(&self, ctx: &Ctx, table: &str, op: WriteOp) -> Result<DateTime> {
        self.write(ctx, table, vec![op]).await.map_err(|f| f.error)
    }

    /// Runs writes on distinct entities of one table atomically: all or none.
    /// Every written entity gets the same returned Timestamp.
    pub async fn write(
        &self,
        ctx: &Ctx,
        table: &str,
        ops: Vec<WriteOp>,
    ) -> std::result::Result<DateTime, BatchFailure> {
        let fail = |index| move |error| BatchFailure { index, error };
        let mut keys = Vec::with_capacity(ops.len());
        let mut prepared = Vec::with_capacity(ops.len());
        for (i, op) in ops.into_iter().enumerate() {
            let e = &op.entity;
            let action = match (op.kind, &op.if_match) {
                (WriteKind::Insert, _) => Action::InsertEntity,
                (WriteKind::Delete, _) => Action::DeleteEntity,
                (_, IfMatch::None) => Action::UpsertEntity,
                _ => Action::UpdateEntity,
            };
            ctx.access
                .check(action, Some(table), Some((&e.partition_key, &e.row_key)))
                .map_err(fail(i))?;
            if op.kind == WriteKind::Delete {
                validate::key(&e.partition_key, "PartitionKey").map_err(fail(i))?;
                validate::key(&e.row_key, "RowKey").map_err(fail(i))?;
            } else {
                validate::entity(e, op.limit).map_err(fail(i))?;
            }
            keys.push(EntityKey::new(&e.partition_key, &e.row_key));
            let (bytes, merge) = match op.kind {
                WriteKind::Insert | WriteKind::Replace => {
                    (codec::encode(DateTime(0), &e.properties), Entity::default())
                }
                WriteKind::Merge => (Vec::new(), op.entity),
                WriteKind::Delete => (Vec::new(), Entity::default()),
            };
            prepared.push(Prepared {
                kind: op.kind,
                if_match: op.if_match,
                bytes,
                merge,
                limit: op.limit,
            });
        }
        let clock = self.clock.clone();
        let expiry = self
            .expiry(&ctx.account, table)
            .await
            .map_err(|error| BatchFailure { index: 0, error })?;
        // Inserts only (a single insert, a batch of them): the backend may write
        // without reading first.
        let expect = if prepared.iter().all(|p| p.kind == WriteKind::Insert) {
            Expect::Absent
        } else {
            Expect::Any
        };
        // A retrying backend may call this more than once, so it borrows `prepared`;
        // a refusal writes nothing and comes back as the write's value.
        write_with(
            &*self.store,
            &ctx.account,
            table,
            keys,
            expect,
            move |current| match decide(&clock, &prepared, &live_rows(current, &expiry)) {
                Ok((ts, mutations)) => (mutations, Ok(ts)),
                Err(f) => (Vec::new(), Err(f)),
            },
        )
        .await
        .map_err(|e| BatchFailure {
            index: 0,
            error: e.into(),
        })?
    }
}

/// The current rows as a write sees them: an expired entity is absent (an
/// insert over it succeeds, an update or delete of it is `ResourceNotFound`).
fn live_rows<'c, 'a>(current: &'c [Option<&'a [u8]>], expiry: &Option<Expiry>) -> Cow<'c, [Option<&'a [u8]>]> {
    match expiry {
        None => Cow::Borrowed(current),
        Some(e) => Cow::Owned(current.iter().map(|c| c.filter(|v| !e.expired(v))).collect()),
    }
}

/// The check-then-mutate step, run atomically by the store.
fn decide(
    clock: &crate::clock::Clock,
    prepared: &[Prepared],
    current: &[Option<&[u8]>],
) -> std::result::Result<(DateTime, Vec<Mutation>), BatchFailure> {
    let mut newest: Option<DateTime> = None;
    for (i, (op, cur)) in prepared.iter().zip(current).enumerate() {
        let cur_ts = match cur {
            Some(bytes) => Some(codec::timestamp(bytes).ok_or_else(|| BatchFailure {
                index: i,
                error: Error::internal("corrupt stored entity"),
            })?),
            None => None,
        };
        let err = |code| {
            Err(BatchFailure {
                index: i,
                error: Error::new(code),
            })
        };
        match (op.kind, cur_ts) {
            (WriteKind::Insert, Some(_)) => return err(ErrorCode::EntityAlreadyExists),
            (WriteKind::Insert, None) => {}
            (_, None) if op.if_match != IfMatch::None || op.kind == WriteKind::Delete => {
                return err(ErrorCode::ResourceNotFound);
            }
            (_, Some(ts)) if !op.if_match.matches(ts) => return err(ErrorCode::UpdateConditionNotSatisfied),
            _ => {}
        }
        newest = newest.max(cur_ts);
    }
    let ts = clock.next_after(newest);
    let mut mutations = Vec::with_capacity(prepared.len());
    for (i, (op, cur)) in prepared.iter().zip(current).enumerate() {
        mutations.push(match op.kind {
            WriteKind::Delete => Mutation::Delete,
            WriteKind::Insert | WriteKind::Replace => {
                let mut bytes = op.bytes.clone();
                codec::set_timestamp(&mut bytes, ts);
                Mutation::Put(bytes)
            }
            WriteKind::Merge => {
                let mut merged = op.merge.clone();
                let overlay = std::mem::take(&mut merged.properties);
                if let Some(bytes) = cur {
                    // Damaged bytes are not "no properties": merging onto them would
                    // write the row over with the request's properties alone.
                    merged.properties = codec::decode(String::new(), String::new(), bytes)
                        .ok_or_else(|| BatchFailure {
                            index: i,
                            error: Error::internal("corrupt stored entity"),
                        })?
                        .properties;
                }
                for p in overlay {
                    match merged.properties.iter_mut().find(|q| q.name == p.name) {
                        Some(q) => q.value = p.value,
                        None => merged.properties.push(p),
                    }
                }
                // The limits hold for the merged entity, not only for the request's part.
                validate::entity_limits(&merged, op.limit).map_err(|error| BatchFailure { index: i, error })?;
                Mutation::Merge(codec::encode(ts, &merged.properties))
            }
        });
    }
    Ok((ts, mutations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_takes_the_padded_etag_of_the_same_timestamp() {
        let ts = DateTime::parse("2022-02-01T20:52:36.569405Z").unwrap_or(DateTime(0));
        let matches = |h: &str| IfMatch::parse(Some(h)).is_ok_and(|m| m.matches(ts));
        assert_eq!(etag_for(ts), "W/\"datetime'2022-02-01T20%3A52%3A36.569405Z'\"");
        assert!(matches("W/\"datetime'2022-02-01T20%3A52%3A36.5694050Z'\""));
        assert!(matches("W/\"datetime'2022-02-01T20:52:36.5694050Z'\""));
        assert!(!matches("W/\"datetime'2022-02-01T20%3A52%3A36.5694051Z'\""));
        assert!(!matches("W/\"datetime'2022-02-01T20%3A52%3A36.5694050'\""));
    }

    #[test]
    fn if_match_compares_the_decoded_etag() {
        let ts = DateTime(638_530_713_301_234_567);
        let sent = etag_for(ts);
        assert!(sent.contains("%3A"));
        let matches = |h: &str| IfMatch::parse(Some(h)).is_ok_and(|m| m.matches(ts));
        assert!(matches(&sent));
        assert!(matches(&sent.replace("%3A", ":")));
        assert!(matches(&sent.replace("%3A", "%3a")));
        assert!(!matches(&sent.replace("%3A", "%3B")));
        assert!(!matches(&etag_for(DateTime(ts.0 + 1)).replace("%3A", ":")));
        assert!(!matches("W/\"datetime'2024-06-04T08%3A15%3A30.1234567'\""));
        assert_eq!(percent_decoded("a%2"), b"a%2");
        assert_eq!(percent_decoded("%zz%41"), b"%zzA");
    }
}
