//! Reading a request body under the service's size limit.
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

/// Largest body accepted (the `$batch` limit); single entities are far smaller
/// and are checked against the entity-size rules by the service.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;
/// Bytes of an oversized body read and dropped before answering, at most.
const DRAIN_MAX: usize = 64 * 1024 * 1024;
/// Time spent draining an oversized body, at most.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// The whole body, or `RequestBodyTooLarge` once it is known to exceed
/// [`MAX_BODY`]: from `declared` (Content-Length) or from what arrived.
pub async fn read<B>(mut body: B, declared: Option<usize>) -> Result<Bytes, Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large(body).await);
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| unreadable())?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > MAX_BODY {
                return Err(too_large(body).await);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

async fn too_large<B>(body: B) -> Error
where
    B: Body<Data = Bytes> + Unpin,
{
    // Whatever stops the draining (the cap, the clock, an error), the answer is the same.
    let _ = tokio::time::timeout(DRAIN_TIME, drain(body)).await;
    Error::new(ErrorCode::RequestBodyTooLarge)
}

async fn drain<B>(mut body: B)
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > DRAIN_MAX {
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

    fn code(r: Result<Bytes, Error>) -> Option<ErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn bodies_up_to_the_limit_are_read_whole() {
        let got = rt().block_on(read(Full::new(Bytes::from_static(b"abc")), Some(3)));
        assert_eq!(got.ok().as_deref(), Some(&b"abc"[..]));
        let got = rt().block_on(read(Chunks { left: 4, size: MIB }, None));
        assert_eq!(got.map(|b| b.len()).ok(), Some(MAX_BODY));
    }

    #[test]
    fn a_body_over_the_limit_is_refused_whether_declared_or_not() {
        let over = || Chunks { left: 5, size: MIB };
        assert_eq!(
            code(rt().block_on(read(over(), None))),
            Some(ErrorCode::RequestBodyTooLarge)
        );
        assert_eq!(
            code(rt().block_on(read(over(), Some(5 * MIB)))),
            Some(ErrorCode::RequestBodyTooLarge)
        );
    }

    #[test]
    fn draining_stops_at_its_cap() {
        let mut body = Chunks { left: 1000, size: MIB };
        rt().block_on(drain(&mut body));
        assert_eq!(
            body.left,
            1000 - DRAIN_MAX / MIB - 1,
            "read just past the cap, then stopped"
        );
    }
}
