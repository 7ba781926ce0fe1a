//! Reading a query's pages, by PartitionKey ranges in parallel.
//!
//! One reader per range follows the range's continuations, asking for its next page
//! as soon as a page's continuation is known and parsing the page meanwhile. With
//! `parallel` > 1, a reader left without work has a busy reader hand over the upper
//! part of what that one has left (work stealing): nothing is sampled or counted up
//! front, the split adapts to however the keys fall, and a remote source with slow
//! pages is read at `parallel` pages at a time. A split needs two partitions, so one
//! large partition is read by one reader.
//!
//! Ranges split only between pages, at a key above every PartitionKey their reader
//! has handed on, and each range asks with its own bounds in the `$filter`: every
//! entity is read exactly once, whatever the continuation tokens look like.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::client::Continuation;
use crate::{TableClient, TransferError};

pub struct Query<'a> {
    pub table: &'a str,
    pub filter: Option<&'a str>,
    pub select: Option<&'a str>,
}

/// A page as `parse` made it, how many entities it held and the PartitionKey of
/// the last one.
pub struct Parsed<T> {
    pub page: T,
    pub rows: usize,
    pub last_partition_key: Option<String>,
}

/// Hands every page of the query to `each`, turned into a `T` by `parse` (on another
/// thread). With one reader, pages come in key order; with more, each page is in key
/// order but pages of different ranges interleave. Returns how many ranges were read.
pub async fn pages<T: Send + 'static>(
    client: &Arc<TableClient>,
    q: &Query<'_>,
    parallel: usize,
    parse: impl Fn(Bytes) -> Result<Parsed<T>, TransferError> + Send + Sync + 'static,
    mut each: impl FnMut(T) -> Result<(), TransferError>,
) -> Result<u64, TransferError> {
    // Splits need every entity's PartitionKey; the keys are part of every export.
    let select = q.select.map(|s| {
        let mut names: Vec<&str> = s.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
        for key in ["RowKey", "PartitionKey"] {
            if !names.contains(&key) {
                names.insert(0, key);
            }
        }
        names.join(",")
    });
    let shared = Arc::new(Shared {
        client: client.clone(),
        table: q.table.to_owned(),
        filter: q.filter.map(str::to_owned),
        select,
        parse: Box::new(parse),
    });
    // Room for a few pages per reader: the readers wait when `each` falls behind.
    let (tx, mut rx) = mpsc::channel::<Event<T>>(2 * parallel.max(1));
    let mut readers = JoinSet::new();
    let mut active: Vec<Active> = Vec::new();
    let mut next_id = 0u64;
    let mut start = |range: Range, readers: &mut JoinSet<()>, active: &mut Vec<Active>| {
        let split = Arc::new(AtomicBool::new(false));
        active.push(Active {
            id: next_id,
            split: split.clone(),
            asked: false,
            unsplittable: false,
            pages_since: 0,
        });
        readers.spawn(read_range(shared.clone(), next_id, range, split, tx.clone()));
        next_id += 1;
    };
    start(Range::default(), &mut readers, &mut active);
    while !active.is_empty() {
        // Idle readers each get a range to steal from, oldest first.
        let idle = parallel.max(1).saturating_sub(active.len());
        let asked = active.iter().filter(|a| a.asked).count();
        for a in active
            .iter_mut()
            .filter(|a| !a.asked && !a.unsplittable)
            .take(idle.saturating_sub(asked))
        {
            a.asked = true;
            a.split.store(true, Ordering::Relaxed);
        }
        let Some(event) = rx.recv().await else { break };
        match event {
            Event::Page(id, page) => {
                // A range that could not split may have moved on to other partitions.
                if let Some(a) = active.iter_mut().find(|a| a.id == id && a.unsplittable) {
                    a.pages_since = a.pages_since.saturating_add(1);
                    if a.pages_since >= RETRY_SPLIT_AFTER {
                        (a.unsplittable, a.pages_since) = (false, 0);
                    }
                }
                each(page)?
            }
            Event::Split { from, upper } => {
                if let Some(a) = active.iter_mut().find(|a| a.id == from) {
                    a.asked = false;
                }
                start(upper, &mut readers, &mut active);
            }
            Event::Unsplittable(id) => {
                if let Some(a) = active.iter_mut().find(|a| a.id == id) {
                    (a.asked, a.unsplittable) = (false, true);
                }
            }
            Event::Done(id) => active.retain(|a| a.id != id),
            Event::Failed(e) => return Err(e),
        }
    }
    Ok(next_id)
}

type Parse<T> = dyn Fn(Bytes) -> Result<Parsed<T>, TransferError> + Send + Sync;

struct Shared<T> {
    client: Arc<TableClient>,
    table: String,
    filter: Option<String>,
    select: Option<String>,
    parse: Box<Parse<T>>,
}

struct Active {
    id: u64,
    split: Arc<AtomicBool>,
    /// Asked to split and not yet answered.
    asked: bool,
    /// What it had left was one partition (or keys no split string fits between)
    /// `pages_since` pages ago.
    unsplittable: bool,
    pages_since: u32,
}

/// Pages after which a range that could not split is asked again.
const RETRY_SPLIT_AFTER: u32 = 8;

enum Event<T> {
    Page(u64, T),
    Split { from: u64, upper: Range },
    Unsplittable(u64),
    Done(u64),
    Failed(TransferError),
}

/// PartitionKeys from `low` (inclusive) to `high` (exclusive); `None`: unbounded.
#[derive(Default, Clone, Debug)]
struct Range {
    low: Option<String>,
    high: Option<String>,
}

impl Range {
    /// The query's own filter and these bounds, as one `$filter`.
    fn filter(&self, base: Option<&str>) -> Option<String> {
        let mut parts: Vec<String> = base.map(|f| format!("({f})")).into_iter().collect();
        if let Some(low) = &self.low {
            parts.push(format!("PartitionKey ge '{}'", low.replace('\'', "''")));
        }
        if let Some(high) = &self.high {
            parts.push(format!("PartitionKey lt '{}'", high.replace('\'', "''")));
        }
        (!parts.is_empty()).then(|| parts.join(" and "))
    }
}

async fn read_range<T: Send + 'static>(
    shared: Arc<Shared<T>>,
    id: u64,
    mut range: Range,
    split: Arc<AtomicBool>,
    tx: mpsc::Sender<Event<T>>,
) {
    let failed = tx.clone();
    if let Err(e) = read_range_inner(&shared, id, &mut range, &split, &tx).await {
        let _ = failed.send(Event::Failed(e)).await;
    }
}

async fn read_range_inner<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    id: u64,
    range: &mut Range,
    split: &AtomicBool,
    tx: &mpsc::Sender<Event<T>>,
) -> Result<(), TransferError> {
    let stopped = |e: tokio::task::JoinError| TransferError::Protocol(format!("a page reader stopped: {e}"));
    // Every PartitionKey handed on so far is at most `seen` (the range's low bound
    // before the first entity).
    let mut seen = Seen {
        key: range.low.clone(),
        blind: false,
    };
    let mut pending = Some(fetch(shared, range.filter(shared.filter.as_deref()), None));
    while let Some(page) = pending.take() {
        let (body, next) = page.await.map_err(stopped)??;
        let parse_here = |body: Bytes| {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || (shared.parse)(body))
        };
        let parsed = match next {
            // Asked to split: the split must lie above this page's keys, so the page
            // is parsed first and the next one asked for with the new bound.
            Some(next) if split.swap(false, Ordering::Relaxed) => {
                let parsed = parse_here(body).await.map_err(stopped)??;
                seen.note(&parsed);
                match seen.split_point(range.high.as_deref()) {
                    Some(mid) => {
                        let upper = Range {
                            low: Some(mid.clone()),
                            high: range.high.replace(mid),
                        };
                        send(tx, Event::Split { from: id, upper }).await?;
                    }
                    None => send(tx, Event::Unsplittable(id)).await?,
                }
                pending = Some(fetch(shared, range.filter(shared.filter.as_deref()), Some(next)));
                parsed
            }
            next => {
                pending = next.map(|n| fetch(shared, range.filter(shared.filter.as_deref()), Some(n)));
                let parsed = parse_here(body).await.map_err(stopped)??;
                seen.note(&parsed);
                parsed
            }
        };
        send(tx, Event::Page(id, parsed.page)).await?;
    }
    send(tx, Event::Done(id)).await
}

/// The highest PartitionKey a reader has handed on.
struct Seen {
    key: Option<String>,
    /// A page's entities came without keys: `key` no longer holds, never split.
    blind: bool,
}

impl Seen {
    fn note<T>(&mut self, parsed: &Parsed<T>) {
        if parsed.last_partition_key.is_some() {
            self.key = parsed.last_partition_key.clone();
        } else if parsed.rows > 0 {
            self.blind = true;
        }
    }

    fn split_point(&self, high: Option<&str>) -> Option<String> {
        match self.blind {
            true => None,
            false => between(self.key.as_deref().unwrap_or(""), high),
        }
    }
}

async fn send<T>(tx: &mpsc::Sender<Event<T>>, e: Event<T>) -> Result<(), TransferError> {
    // A closed channel: the reading stopped (an error elsewhere, or Ctrl-C).
    tx.send(e).await.map_err(|_| TransferError::Interrupted)
}

type Page = Result<(Bytes, Option<Continuation>), TransferError>;

/// One page, retried with backoff on timeouts, lost connections and 503s.
fn fetch<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    filter: Option<String>,
    next: Option<Continuation>,
) -> tokio::task::JoinHandle<Page> {
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut attempt = 0;
        loop {
            match shared
                .client
                .query_page(
                    &shared.table,
                    filter.as_deref(),
                    shared.select.as_deref(),
                    next.as_ref(),
                )
                .await
            {
                Err(TransferError::Transient(why)) if attempt < crate::import::RETRIES => {
                    attempt += 1;
                    eprintln!("retrying a page (attempt {attempt}): {why}");
                    tokio::time::sleep(crate::import::backoff(attempt)).await;
                }
                other => return other,
            }
        }
    })
}

/// Characters a split string is made of stay below the surrogates, where UTF-16
/// order (Azure's) and code point order (a Rust `str`'s) agree, and above the
/// control characters, which keys cannot hold.
const LOWEST: u32 = 0x20;
const ABOVE_ASCII: u32 = 0x7f;
const CEILING: u32 = 0xd800;

/// A string strictly between `low` and `high` (`None`: above every key), short and
/// near the middle of the keys that could lie between, or `None` if there is none
/// worth splitting at. Prefers the printable ASCII range, where most keys live, so
/// an unbounded range finds its keys in a few splits.
fn between(low: &str, high: Option<&str>) -> Option<String> {
    let (low, high): (Vec<u32>, Vec<u32>) = (
        low.chars().map(u32::from).collect(),
        high.map_or_else(|| vec![CEILING], |h| h.chars().map(u32::from).collect()),
    );
    let mut out = String::new();
    let mut bounded = true; // `high` still limits this position (same prefix so far)
    for i in 0.. {
        let lo = low.get(i).copied();
        let hi = if bounded { high.get(i).copied()? } else { CEILING };
        let hi = hi.min(CEILING);
        // Candidates c: lo < c < hi (any c ≥ LOWEST if `low` has ended).
        let floor = lo.map_or(LOWEST, |l| l + 1).max(LOWEST);
        if floor < hi {
            let ascii_top = hi.min(ABOVE_ASCII);
            let c = if floor < ascii_top {
                floor + (ascii_top - floor) / 2
            } else {
                let floor = floor.max(0xa0); // past the C1 controls
                if floor >= hi {
                    return None;
                }
                floor + (hi - floor) / 2
            };
            out.push(char::from_u32(c)?);
            return Some(out);
        }
        // No room at this position: keep low's character and look one further.
        let l = lo?;
        if l >= CEILING {
            return None;
        }
        bounded = bounded && high.get(i) == Some(&l);
        out.push(char::from_u32(l)?);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(low: &str, high: Option<&str>) -> String {
        let m = between(low, high).unwrap_or_else(|| panic!("nothing between {low:?} and {high:?}"));
        assert!(m.as_str() > low, "{m:?} > {low:?}");
        if let Some(h) = high {
            assert!(m.as_str() < h, "{m:?} < {h:?}");
        }
        assert!(m.chars().all(|c| (c as u32) < CEILING), "{m:?}");
        m
    }

    #[test]
    fn a_split_lies_strictly_between_and_avoids_surrogates_and_controls() {
        assert_eq!(check("p0000009", None), "x", "the printable ASCII above 'p'");
        assert_eq!(check("p0000009", Some("q")), "pX");
        assert_eq!(check("a", Some("c")), "b");
        check("", None);
        check("", Some("!"));
        check("ab", Some("ab\u{7f}x"));
        check("z", Some("\u{10000}"));
        assert!(
            between("\u{e000}", None).is_none(),
            "no split string fits above the surrogates"
        );
        check("p0000009", Some("p0000010"));
        let m = check("aaa", Some("aab"));
        assert!(m.starts_with("aaa"));
        assert!(between("a", Some("a ")).is_none(), "nothing fits between a and a+space");
        check("\u{d7ff}", None);
    }

    #[test]
    fn repeated_splits_of_an_unbounded_range_reach_dense_keys() {
        // What a reader at "p0001234" does when asked again and again: the upper
        // part is empty, the split moves down towards the keys.
        let (low, mut high) = ("p0001234", None::<String>);
        for _ in 0..40 {
            match between(low, high.as_deref()) {
                Some(m) => high = Some(m),
                None => break,
            }
        }
        let high = high.unwrap_or_default();
        assert!(high.as_str() > low && high.starts_with("p000"), "{high:?}");
    }
}
