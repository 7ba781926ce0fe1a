//! The HTTP/1.1 server: keep-alive connections served by a fixed set of
//! threads, graceful shutdown that lets in-flight requests finish.
//!
//! One acceptor hands each connection to the serving thread with the fewest open
//! connections, and that thread's single-threaded runtime serves it for its whole
//! life. Requests are short and connections are many, so a work-stealing
//! scheduler has little to balance; on 2 cores with 32 point reads in flight,
//! tokio's left a quarter of the machine idle and served 15-20% fewer reads
//! (BENCHMARKS.md, session 4). Its price is the tail: a preempted serving thread
//! holds its connections' requests until it runs again.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::pipeline::{handle, into_hyper, AppState, PeerAddr};

/// How long shutdown waits for open requests to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// One serving thread as the acceptor sees it.
struct Worker {
    conns: mpsc::UnboundedSender<(std::net::TcpStream, SocketAddr)>,
    /// Connections the thread is serving now.
    open: Arc<AtomicUsize>,
}

/// Serves on `threads` serving threads until `shutdown` completes, then waits
/// (bounded) for open requests.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    threads: usize,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut workers = Vec::new();
    let mut handles = Vec::new();
    for i in 0..threads.max(1) {
        let (tx, rx) = mpsc::unbounded_channel();
        let open = Arc::new(AtomicUsize::new(0));
        let (state, open2, stop) = (state.clone(), open.clone(), stop_rx.clone());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("tafel-http-{i}"))
                .spawn(move || runtime.block_on(serve_thread(rx, state, open2, stop)))?,
        );
        workers.push(Worker { conns: tx, open });
    }
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Some(worker) = workers.iter().min_by_key(|w| w.open.load(Ordering::Relaxed)) else { break };
                // The stream moves between runtimes as a std socket: a tokio one is
                // tied to the reactor that registered it.
                match stream.into_std() {
                    Ok(std) => {
                        worker.open.fetch_add(1, Ordering::Relaxed);
                        if worker.conns.send((std, peer)).is_err() {
                            tracing::warn!("a serving thread has stopped");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not hand over a connection"),
                }
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(workers);
    for h in handles {
        // A join on this runtime's blocking pool: the threads drain for up to DRAIN_TIMEOUT.
        let joined = tokio::task::spawn_blocking(move || h.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            tracing::warn!("a serving thread panicked");
        }
    }
    Ok(())
}

/// One serving thread: serves the connections it is handed until told to stop,
/// then lets their open requests finish.
async fn serve_thread(
    mut conns: mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr)>,
    state: Arc<AppState>,
    open: Arc<AtomicUsize>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .max_buf_size(1 << 20);
    loop {
        tokio::select! {
            conn = conns.recv() => {
                let Some((stream, peer)) = conn else { break };
                let open = open.clone();
                let stream = match stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream)) {
                    Ok(s) => s,
                    Err(e) => {
                        open.fetch_sub(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "could not register a connection");
                        continue;
                    }
                };
                let state = state.clone();
                let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(PeerAddr(peer));
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(into_hyper(handle(state, req).await)) }
                });
                let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), svc));
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("timed out waiting for open connections"),
    }
}
