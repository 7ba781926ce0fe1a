//! The memory request heads may hold, over all connections together.
//!
//! hyper bounds one connection's buffered head (`MAX_HEAD`, answered 431), but
//! not the sum: thousands of connections each sending most of a head and then
//! nothing would hold all of theirs until the header timeout. Each connection's
//! stream is wrapped in a [`Metered`] that charges the bytes it reads while no
//! request of it is being served (that is, while a head is arriving) to one shared
//! budget, and gives them back when the head is complete (hyper hands over the
//! request) or the connection ends. A read that finds the budget spent ends its
//! connection, unless that connection's head is still a small one (a real
//! client's): the peers sending large heads are shed, ordinary requests keep
//! being served, and the memory held stays within the budget plus a small head
//! per connection.
//! Bodies are not charged here: their memory has a budget of its own (`body.rs`).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest request head (request line and headers) one connection may send.
/// Real clients send a few KiB; the largest real heads carry a bearer token
/// (~2–8 KiB) or a SAS and a `$filter` in the URL.
pub const MAX_HEAD: usize = 64 * 1024;

/// A head this small is read even when the budget is spent: what real clients send.
const SMALL_HEAD: usize = 8 * 1024;

/// Head bytes held over all connections at once.
#[derive(Debug)]
pub struct HeadBudget {
    limit: usize,
    held: AtomicUsize,
}

impl HeadBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(HeadBudget {
            limit: limit.max(MAX_HEAD),
            held: AtomicUsize::new(0),
        })
    }

    /// Bytes charged now, over all connections.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// One connection's account with the budget, shared by its stream and its service.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<HeadBudget>,
    charged: AtomicUsize,
    serving: AtomicBool,
}

impl Charge {
    pub fn new(budget: Arc<HeadBudget>) -> Arc<Self> {
        Arc::new(Charge {
            budget,
            charged: AtomicUsize::new(0),
            serving: AtomicBool::new(false),
        })
    }

    /// A request's head is complete: its bytes are no longer held as a head, and
    /// what is read until it is answered is its body.
    pub fn serving(&self) {
        self.serving.store(true, Ordering::Relaxed);
        self.release();
    }

    /// The request is answered: what is read next is the next head.
    pub fn answered(&self) {
        self.serving.store(false, Ordering::Relaxed);
    }

    fn release(&self) {
        let n = self.charged.swap(0, Ordering::Relaxed);
        self.budget.held.fetch_sub(n, Ordering::Relaxed);
    }

    /// Charges `n` bytes just read, unless a request is being served; false when
    /// the budget was already spent and this head is past a small one.
    fn charge(&self, n: usize) -> bool {
        if n == 0 || self.serving.load(Ordering::Relaxed) {
            return true;
        }
        let before = self.budget.held.fetch_add(n, Ordering::Relaxed);
        let mine = self.charged.fetch_add(n, Ordering::Relaxed) + n;
        before < self.budget.limit || mine <= SMALL_HEAD
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.release();
    }
}

/// A connection's stream, charging the head bytes it reads to its [`Charge`].
pub struct Metered<S> {
    inner: S,
    charge: Arc<Charge>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, charge: Arc<Charge>) -> Self {
        Metered { inner, charge }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                if this.charge.charge(read) {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Ready(Err(io::Error::other(
                        "the request heads of all connections hold the whole head budget",
                    )))
                }
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_charged_until_served_and_given_back() {
        let budget = HeadBudget::new(MAX_HEAD * 2);
        let (a, b) = (Charge::new(budget.clone()), Charge::new(budget.clone()));
        assert!(a.charge(MAX_HEAD));
        assert!(b.charge(MAX_HEAD));
        assert_eq!(budget.held(), 2 * MAX_HEAD);
        let c = Charge::new(budget.clone());
        assert!(c.charge(SMALL_HEAD), "a small head is read even so");
        assert!(!c.charge(1), "a large one is not: the budget is spent");
        assert!(!b.charge(1), "the budget is spent");
        drop(c);
        a.serving();
        assert!(a.charge(MAX_HEAD), "a body is not charged");
        assert_eq!(budget.held(), MAX_HEAD + 1);
        a.answered();
        drop(b);
        assert_eq!(budget.held(), 0, "a closed connection gives its head back");
        assert!(a.charge(10));
        drop(a);
        assert_eq!(budget.held(), 0);
    }
}
