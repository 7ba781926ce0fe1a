//! The HTTP/1.1 server: keep-alive connections served by a fixed set of
//! threads, graceful shutdown that lets in-flight requests finish.
//!
//! One acceptor hands each connection to the serving thread with the fewest open
//! connections, and that thread's single-threaded runtime serves it for its whole
//! life. Requests are short and connections are many, so a work-stealing
//! scheduler has little to balance; on 2 cores with many point reads in flight,
//! tokio's left part of the machine idle and served fewer reads
//! (BENCHMARKS.md, "Serving threads against a work-stealing runtime").
//!
//! Requests that run long (as the request's route, `tafel_protocol::route`, tells
//! from its head) are handed to work-stealing runtimes with a worker per core, so
//! they use every core however few serving threads there are, and never hold up
//! the short requests of the connections that share their serving thread.
//! That lets the default leave a core to the clients that so often share the
//! machine with an emulator: a preempted serving thread holds its connections'
//! requests until the kernel's next tick, which was the whole of the point reads'
//! p99. Queries and `$batch` get a runtime each: a query's scan runs on its
//! worker in 10 ms slices (the store's `SCAN_SLICE`), and a batch waiting for
//! its turn behind every runnable scan took far longer than one the kernel
//! schedules beside them (BENCHMARKS.md, "Long requests on runtimes of their own").

use std::future::Future;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;

use crate::head_budget::{Charge, Metered, MAX_HEAD};
use crate::pipeline::{busy, handle_routed, into_hyper, AppState, LostAnswer, Peer, Routed};
use crate::tls::{self, TlsAcceptor};
use tafel_protocol::{Lane, Response};

/// How long a TLS handshake may take once its first byte has come.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for open requests to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits, at most, for connections accepted before the listener
/// closed to send their first request: until they have, hyper's graceful shutdown
/// takes them for idle and closes them, and their clients see the connection cut
/// instead of an answer. (A fixed 250 ms after the last accept was too short for a
/// client starved of CPU on a loaded machine.)
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(2);

/// A connection handed to a serving thread: its socket, its peer, its place among
/// `--max-connections` (none for those accepted while stopping), and its count
/// among those whose first request has not come.
type Handed = (
    std::net::TcpStream,
    SocketAddr,
    Option<OwnedSemaphorePermit>,
    Arc<Fresh>,
);

/// Counts a connection among those yet to send their first request, until it does
/// or ends; shutdown waits for that count to fall to zero (bounded).
struct Fresh {
    count: Arc<AtomicUsize>,
    pending: AtomicBool,
}

impl Fresh {
    fn new(count: &Arc<AtomicUsize>) -> Arc<Self> {
        count.fetch_add(1, Ordering::Relaxed);
        Arc::new(Fresh {
            count: count.clone(),
            pending: AtomicBool::new(true),
        })
    }

    /// Its first request's head has come (or it ended).
    fn arrived(&self) {
        if self.pending.swap(false, Ordering::Relaxed) {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        self.arrived();
    }
}

/// One serving thread as the acceptor sees it.
struct Worker {
    conns: mpsc::UnboundedSender<Handed>,
    /// Connections the thread is serving now.
    open: Arc<AtomicUsize>,
}

/// How many threads serve.
#[derive(Debug, Clone, Copy)]
pub struct Threads {
    /// Serving threads: each runs the connections it is given.
    pub serving: usize,
    /// Workers of each of the two runtimes for long requests (queries; `$batch`).
    pub long: usize,
}

impl Threads {
    /// The defaults for `cores` CPUs: a core left to the clients (but at least
    /// one serving thread), and long requests on every core.
    pub fn for_cores(cores: usize) -> Self {
        Threads {
            serving: cores.saturating_sub(1).max(1),
            long: cores.max(1),
        }
    }
}

/// Serves until `shutdown` completes, then waits (bounded) for open requests.
/// With `tls`, every connection is HTTPS.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    tls: Option<TlsAcceptor>,
    threads: Threads,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let long_runtime = |name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.long.max(1))
            .thread_name(name)
            .enable_all()
            .build()
    };
    let (query_runtime, batch_runtime) = (long_runtime("tafel-query")?, long_runtime("tafel-batch")?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let long = LongRuntimes {
        query: query_runtime.handle().clone(),
        batch: batch_runtime.handle().clone(),
    };
    let (workers, handles) = spawn_serving(threads.serving, &state, &long, &tls, &stop_rx)?;
    tokio::pin!(shutdown);
    let fresh = Arc::new(AtomicUsize::new(0));
    // At the limit, no more connections are accepted: they wait in the backlog.
    let slots = Arc::new(Semaphore::new(state.limits.settings.max_connections.max(1)));
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
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
                match stream.into_std() {
                    Ok(stream) => hand_over(&workers, stream, peer, Some(slot), &fresh),
                    Err(e) => tracing::warn!(error = %e, "could not hand over a connection"),
                }
            }
            () = &mut shutdown => break,
        }
    }
    // Connections the kernel has completed are served, not reset by the close.
    for (stream, peer) in close_taking_backlog(listener) {
        hand_over(&workers, stream, peer, slots.clone().try_acquire_owned().ok(), &fresh);
    }
    let grace = tokio::time::Instant::now() + FIRST_REQUEST_GRACE;
    while fresh.load(Ordering::Relaxed) > 0 && tokio::time::Instant::now() < grace {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_tx.send(true);
    drop(workers);
    join_serving(handles).await;
    // Every request has finished: nothing runs there any more.
    query_runtime.shutdown_background();
    batch_runtime.shutdown_background();
    Ok(())
}

/// Starts the serving threads, each with a runtime of its own; their
/// mailboxes and join handles.
fn spawn_serving(
    n: usize,
    state: &Arc<AppState>,
    long: &LongRuntimes,
    tls: &Option<TlsAcceptor>,
    stop: &watch::Receiver<bool>,
) -> std::io::Result<(Vec<Worker>, Vec<std::thread::JoinHandle<()>>)> {
    let mut workers = Vec::new();
    let mut handles = Vec::new();
    for i in 0..n.max(1) {
        let (tx, rx) = mpsc::unbounded_channel();
        let open = Arc::new(AtomicUsize::new(0));
        let (open2, stop) = (open.clone(), stop.clone());
        let conn = ConnState {
            state: state.clone(),
            long: long.clone(),
            tls: tls.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("tafel-http-{i}"))
                .spawn(move || runtime.block_on(serve_thread(rx, conn, open2, stop)))?,
        );
        workers.push(Worker { conns: tx, open });
    }
    Ok((workers, handles))
}

/// Waits for the serving threads, which drain for up to DRAIN_TIMEOUT.
async fn join_serving(handles: Vec<std::thread::JoinHandle<()>>) {
    for h in handles {
        // A join on this runtime's blocking pool.
        let joined = tokio::task::spawn_blocking(move || h.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            tracing::warn!("a serving thread panicked");
        }
    }
}

/// Closes the listener, first taking every connection the kernel has completed
/// on it (the close would reset them, with their requests sent). The socket
/// itself is asked, not tokio's readiness, which is only the reactor's last
/// look at it: a zero-timeout `accept` left what came after that to the close.
fn close_taking_backlog(listener: TcpListener) -> Vec<(std::net::TcpStream, SocketAddr)> {
    let mut taken = Vec::new();
    // `into_std` leaves the socket non-blocking: `accept` ends at an empty backlog.
    let listener = match listener.into_std() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "could not take the backlog at shutdown");
            return taken;
        }
    };
    loop {
        match listener.accept() {
            Ok(conn) => taken.push(conn),
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::ConnectionAborted) => {}
            Err(e) => {
                if e.kind() != ErrorKind::WouldBlock {
                    tracing::warn!(error = %e, "accept failed at shutdown");
                }
                return taken;
            }
        }
    }
}

/// Gives a connection to the serving thread with the fewest open ones. It moves
/// between runtimes as a std socket: a tokio one is tied to the reactor that
/// registered it.
fn hand_over(
    workers: &[Worker],
    stream: std::net::TcpStream,
    peer: SocketAddr,
    slot: Option<OwnedSemaphorePermit>,
    fresh: &Arc<AtomicUsize>,
) {
    let _ = stream.set_nodelay(true);
    let Some(worker) = workers.iter().min_by_key(|w| w.open.load(Ordering::Relaxed)) else {
        return;
    };
    worker.open.fetch_add(1, Ordering::Relaxed);
    if worker.conns.send((stream, peer, slot, Fresh::new(fresh))).is_err() {
        tracing::warn!("a serving thread has stopped");
    }
}

/// The handles of the runtimes for requests that may run long: entity queries
/// and `$batch`.
#[derive(Clone)]
struct LongRuntimes {
    query: Handle,
    batch: Handle,
}

/// Runs `req` on the serving thread, or on the runtime of its kind if it may run
/// long, as its route (classified once, here) says.
async fn respond(
    state: Arc<AppState>,
    long: LongRuntimes,
    req: hyper::Request<hyper::body::Incoming>,
    peer: Peer,
) -> Result<Response, LostAnswer> {
    let routed = Routed::of(&req, peer);
    let (runtime, cancellable) = match routed.route.lane() {
        Lane::Serving => return handle_routed(state, req, routed).await,
        Lane::Query => (long.query, true),
        Lane::Batch => (long.batch, false),
    };
    let task = runtime.spawn(handle_routed(state, req, routed));
    // hyper drops this future when the client goes away mid-request; a query
    // (only reads) then stops at its scan's next slice instead of running on
    // for nobody. A batch runs to its end: it may be committing.
    let _cancel = cancellable.then(|| AbortOnDrop(task.abort_handle()));
    match task.await {
        Ok(resp) => resp,
        // A panic stays the panic it was, on the connection's task.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(busy()),
    }
}

/// Aborts a task when dropped (a no-op once it has finished).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One serving thread: serves the connections it is handed until told to stop,
/// then lets their open requests finish.
async fn serve_thread(
    mut conns: mpsc::UnboundedReceiver<Handed>,
    conn: ConnState,
    open: Arc<AtomicUsize>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    let header_timeout = conn.state.limits.settings.header_timeout;
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(MAX_HEAD);
    loop {
        tokio::select! {
            next = conns.recv() => {
                let Some((stream, peer, slot, fresh)) = next else { break };
                let open = open.clone();
                let stream = match stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream)) {
                    Ok(s) => s,
                    Err(e) => {
                        open.fetch_sub(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "could not register a connection");
                        continue;
                    }
                };
                let (conn, http, watcher) = (conn.clone(), http.clone(), graceful.watcher());
                tokio::spawn(async move {
                    let ops = conn.state.ops.clone();
                    ops.metrics.connection_opened();
                    let charge = Charge::new(conn.state.limits.heads.clone());
                    match conn.tls.clone() {
                        None => {
                            let io = TokioIo::new(Metered::new(stream, charge.clone()));
                            let accepted = Accepted { peer, https: false, charge, fresh };
                            conn.serve(io, &http, watcher, accepted).await;
                        }
                        Some(acceptor) => {
                            if let Some(tls) = handshake(&acceptor, stream, header_timeout).await {
                                let io = TokioIo::new(Metered::new(tls, charge.clone()));
                                let accepted = Accepted { peer, https: true, charge, fresh };
                                conn.serve(io, &http, watcher, accepted).await;
                            }
                        }
                    }
                    ops.metrics.connection_closed();
                    open.fetch_sub(1, Ordering::Relaxed);
                    drop(slot);
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

/// One connection's own: its peer, whether it is TLS, its accounts with the head
/// budget and with shutdown's wait for first requests.
struct Accepted {
    peer: SocketAddr,
    https: bool,
    charge: Arc<Charge>,
    fresh: Arc<Fresh>,
}

/// What every connection of the server shares.
#[derive(Clone)]
struct ConnState {
    state: Arc<AppState>,
    long: LongRuntimes,
    tls: Option<TlsAcceptor>,
}

impl ConnState {
    /// Serves HTTP/1.1 on one connection, plain or TLS, until it closes.
    async fn serve<I>(&self, io: I, http: &http1::Builder, watcher: Watcher, conn: Accepted)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (state, long) = (self.state.clone(), self.long.clone());
        let Accepted {
            peer,
            https,
            charge,
            fresh,
        } = conn;
        let peer = Peer { addr: peer, https };
        let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            // The head has arrived whole: it no longer counts against the head budget.
            charge.serving();
            fresh.arrived();
            let (state, long, charge) = (state.clone(), long.clone(), charge.clone());
            async move {
                if let Some(r) = state.root_page.as_ref().and_then(|page| page(&req, peer.addr)) {
                    charge.answered();
                    return Ok::<_, LostAnswer>(r);
                }
                // A lost answer (a fault rule) is an error: hyper closes the
                // connection without answering.
                // Boxed: the whole request's future is kilobytes, and hyper
                // moves the future it is handed; a box moves as a pointer.
                let resp = Box::pin(respond(state, long, req, peer)).await.map(into_hyper);
                charge.answered();
                resp
            }
        });
        if let Err(e) = watcher.watch(http.serve_connection(io, svc)).await {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    }
}

/// The TLS handshake of a connection to the TLS port, or `None` when there is
/// nothing to serve: the client spoke plain HTTP (it gets a 400 that says so,
/// not a hang), went away, or did not finish the handshake in time.
async fn handshake(
    acceptor: &TlsAcceptor,
    mut stream: TcpStream,
    first_byte: Duration,
) -> Option<TlsStream<TcpStream>> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(first_byte, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == tls::HANDSHAKE_RECORD => {}
        Ok(Ok(1)) => {
            let _ = stream.write_all(tls::PLAIN_HTTP_ANSWER).await;
            let _ = stream.shutdown().await;
            return None;
        }
        _ => return None,
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_the_listener_takes_every_connection_the_kernel_completed() {
        // Nothing has accepted yet and the reactor has not turned: the kernel's
        // backlog alone says they are there.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
            let addr = listener.local_addr().expect("address");
            let clients: Vec<_> = (0..3)
                .map(|_| std::net::TcpStream::connect(addr).expect("connects"))
                .collect();
            let taken = close_taking_backlog(listener);
            assert_eq!(taken.len(), clients.len());
            let mine: Vec<_> = clients.iter().map(|c| c.local_addr().expect("address")).collect();
            assert!(taken.iter().all(|(_, peer)| mine.contains(peer)));
            assert!(std::net::TcpStream::connect(addr).is_err(), "the listener is closed");
        });
    }
}
