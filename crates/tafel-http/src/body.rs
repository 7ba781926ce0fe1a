//! Reading a request body under the service's size limit, the memory budget
//! of all bodies together and the body timeout (`limits.rs`).
//!
//! A body over the limit is refused with 413, but only after the rest of it has
//! been read and dropped: a client still sending it (Node's http, .NET's
//! HttpClient) otherwise sees a reset connection, or a failed write, instead of
//! Azure's `RequestBodyTooLarge`. How much is drained is bounded in bytes and time,
//! so an endless body cannot hold a connection.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;
use tafel_service::{Error, ErrorCode};
use tokio::time::{timeout_at, Instant};

use crate::limits::{Limits, Room, Share};

/// Largest body accepted (the `$batch` limit); single entities are far smaller
/// and are checked against the entity-size rules by the service.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;
/// Bytes of an oversized body read and dropped before answering, at most.
const DRAIN_MAX: usize = 64 * 1024 * 1024;
/// Time spent draining an oversized body, at most.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Body memory taken at a time as a body arrives, at least.
const STEP: usize = 64 * 1024;

/// The whole body, with the body memory it holds (keep it while the body's bytes
/// live); or `RequestBodyTooLarge` once it is known to exceed [`MAX_BODY`] (from
/// `declared`, the Content-Length, or from what arrived), `OperationTimedOut` if
/// it did not arrive within the body timeout, `ServerBusy` if `share` had no room
/// for it within that time.
///
/// Room is taken as the bytes arrive, not for what the head declares: a client
/// that declares 4 MiB and sends nothing holds nothing but its connection.
pub async fn read<B>(
    mut body: B,
    declared: Option<usize>,
    limits: &Limits,
    share: &Share,
) -> Result<(Bytes, Room), Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large(body).await);
    }
    let mut room = Room::default();
    // No body (reads, deletes) takes no room, and never waits for it.
    let known = declared.or_else(|| body.size_hint().exact().and_then(|n| usize::try_from(n).ok()));
    if known == Some(0) {
        return Ok((Bytes::new(), room));
    }
    let deadline = Instant::now() + limits.settings.body_timeout;
    let mut buf = BytesMut::new();
    loop {
        let frame = match timeout_at(deadline, body.frame()).await {
            Ok(Some(frame)) => frame.map_err(|_| unreadable())?,
            Ok(None) => break,
            Err(_) => return Err(Error::new(ErrorCode::OperationTimedOut)),
        };
        let Ok(data) = frame.into_data() else { continue };
        let len = buf.len() + data.len();
        if len > MAX_BODY {
            return Err(too_large(body).await);
        }
        if len > room.bytes() {
            // A declared body takes room for all of it once its first bytes come: all
            // or nothing, so bodies that arrive together never each hold a part and
            // wait for the rest (which a share too small for all of them would never
            // give). A chunked body, whose length is not known, grows a step at a time.
            let want = match known {
                Some(k) => k.max(len) - room.bytes(),
                None => (len - room.bytes()).max(STEP),
            };
            timeout_at(deadline, share.room(want, &mut room))
                .await
                .map_err(|_| Error::new(ErrorCode::ServerBusy))?;
        }
        if buf.capacity() == 0 {
            // Allocated once the body arrives: the whole declared size, in one go.
            buf.reserve(known.unwrap_or(0).max(data.len()));
        }
        buf.extend_from_slice(&data);
    }
    Ok((buf.freeze(), room))
}

/// `RequestBodyTooLarge`, once the body has been drained (bounded in bytes and time).
pub(crate) async fn too_large<B>(body: B) -> Error
where
    B: Body<Data = Bytes> + Unpin,
{
    // Whatever stops the draining (the cap, the clock, an error), the answer is the same.
    let _ = tokio::time::timeout(DRAIN_TIME, drain(body, DRAIN_MAX)).await;
    Error::new(ErrorCode::RequestBodyTooLarge)
}

/// `e`, for a request refused before its body was read (its credential, its
/// permission or key range, its version, a body where none belongs): answered at
/// once, while the body is read and dropped behind the answer, at most
/// [`MAX_BODY`] within the body timeout and holding no body memory.
///
/// Dropping it unread instead lets hyper close the connection after an answer
/// that did not say so: a client that pooled the connection then sends its next
/// request into a closed socket, and one still sending the body sees a reset
/// instead of the answer. Waiting for the body before answering would let any
/// peer hold a refusal for the body timeout.
pub fn refuse<B>(body: B, limits: &Limits, e: Error) -> Error
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
{
    let within = limits.settings.body_timeout;
    tokio::spawn(async move {
        let _ = tokio::time::timeout(within, drain(body, MAX_BODY)).await;
    });
    e
}

async fn drain<B>(mut body: B, cap: usize)
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > cap {
                return;
            }
        }
    }
}

fn unreadable() -> Error {
    Error::with_message(ErrorCode::InvalidInput, "The request body could not be read.")
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use http_body_util::Full;
    use hyper::body::Frame;

    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    }

    /// A body arriving as `left` chunks of `size` bytes.
    struct Chunks {
        left: usize,
        size: usize,
    }

    impl Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            self.left -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; self.size])))))
        }
    }

    const MIB: usize = 1024 * 1024;

    fn code<T>(r: Result<T, Error>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    fn key(limits: &Limits) -> Share {
        limits.body_share("acct", &crate::limits::Credential::Key)
    }

    #[test]
    fn bodies_up_to_the_limit_are_read_whole() {
        let limits = Limits::default();
        let got = rt().block_on(read(
            Full::new(Bytes::from_static(b"abc")),
            Some(3),
            &limits,
            &key(&limits),
        ));
        assert_eq!(got.ok().map(|(b, _)| b).as_deref(), Some(&b"abc"[..]));
        let got = rt().block_on(read(Chunks { left: 4, size: MIB }, None, &limits, &key(&limits)));
        let (body, held) = got.expect("read");
        assert_eq!(body.len(), MAX_BODY);
        assert!(held.bytes() >= MAX_BODY, "a chunked body holds room for all of it");
    }

    #[test]
    fn a_body_over_the_limit_is_refused_whether_declared_or_not() {
        let limits = Limits::default();
        let over = || Chunks { left: 5, size: MIB };
        assert_eq!(
            code(rt().block_on(read(over(), None, &limits, &key(&limits)))),
            Some(ErrorCode::RequestBodyTooLarge)
        );
        assert_eq!(
            code(rt().block_on(read(over(), Some(5 * MIB), &limits, &key(&limits)))),
            Some(ErrorCode::RequestBodyTooLarge)
        );
    }

    #[test]
    fn a_body_waits_for_room_in_the_budget_and_gives_up_busy() {
        let limits = Limits::new(crate::limits::Settings {
            body_memory: 4 * MIB,
            body_timeout: std::time::Duration::from_millis(200),
            ..Default::default()
        });
        rt().block_on(async {
            let share = key(&limits);
            let (_, first) = read(Chunks { left: 3, size: MIB }, Some(3 * MIB), &limits, &share)
                .await
                .expect("fits");
            assert_eq!(
                code(read(Chunks { left: 2, size: MIB }, Some(2 * MIB), &limits, &share).await),
                Some(ErrorCode::ServerBusy),
                "no room while the first body is held"
            );
            drop(first);
            read(Chunks { left: 2, size: MIB }, Some(2 * MIB), &limits, &share)
                .await
                .expect("room once it is let go");
        });
    }

    /// A body that never finishes arriving.
    struct Stalled;

    impl Body for Stalled {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Pending
        }
    }

    #[test]
    fn a_body_that_does_not_arrive_in_time_times_out() {
        let limits = Limits::new(crate::limits::Settings {
            body_timeout: std::time::Duration::from_millis(100),
            ..Default::default()
        });
        let got = rt().block_on(read(Stalled, Some(10), &limits, &key(&limits)));
        assert_eq!(code(got), Some(ErrorCode::OperationTimedOut));
    }

    #[test]
    fn a_declared_body_that_does_not_arrive_holds_no_room() {
        let limits = Limits::new(crate::limits::Settings {
            body_memory: 4 * MIB,
            body_timeout: std::time::Duration::from_millis(300),
            ..Default::default()
        });
        rt().block_on(async {
            let share = key(&limits);
            // Two silent 4 MiB declarations on a 4 MiB budget, then a real body: it fits.
            let a = read(Stalled, Some(4 * MIB), &limits, &share);
            let b = read(Stalled, Some(4 * MIB), &limits, &share);
            let real = read(Chunks { left: 4, size: MIB }, Some(4 * MIB), &limits, &share);
            let (a, b, real) = tokio::join!(a, b, real);
            assert_eq!(code(a), Some(ErrorCode::OperationTimedOut));
            assert_eq!(code(b), Some(ErrorCode::OperationTimedOut));
            assert_eq!(real.expect("room for the body that arrived").0.len(), 4 * MIB);
        });
    }

    /// A body arriving as `left` chunks of `size` bytes, each after a pause (the
    /// task yields between them), so that several bodies arrive interleaved.
    struct Trickle {
        left: usize,
        size: usize,
        paused: bool,
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            if !self.paused {
                self.paused = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.paused = false;
            self.left -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; self.size])))))
        }
    }

    #[test]
    fn declared_bodies_arriving_together_beyond_the_share_all_arrive() {
        // Eight 1 MiB bodies in 64 KiB pieces, interleaved, against a 4 MiB budget: had
        // each taken room piece by piece, all eight would hold half and wait for the rest.
        let limits = Limits::new(crate::limits::Settings {
            body_memory: 4 * MIB,
            body_timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        });
        rt().block_on(async {
            let share = key(&limits);
            let reads = (0..8).map(|_| {
                let body = Trickle {
                    left: 16,
                    size: 64 * 1024,
                    paused: false,
                };
                async {
                    let (body, room) = read(body, Some(MIB), &limits, &share).await?;
                    drop(room);
                    Ok::<_, Error>(body.len())
                }
            });
            for got in futures_util::future::join_all(reads).await {
                assert_eq!(got.map_err(|e| e.code).ok(), Some(MIB));
            }
        });
    }

    #[test]
    fn draining_stops_at_its_cap() {
        let mut body = Chunks { left: 1000, size: MIB };
        rt().block_on(drain(&mut body, DRAIN_MAX));
        assert_eq!(
            body.left,
            1000 - DRAIN_MAX / MIB - 1,
            "read just past the cap, then stopped"
        );
    }
}
