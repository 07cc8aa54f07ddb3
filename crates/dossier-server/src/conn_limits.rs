//! Connections: the accept loop, its caps and timeouts, and the drain on shutdown.
//!
//! The server drives each connection with hyper's HTTP/1 connection itself (not
//! `axum::serve`, which sets no timeout and no cap), so that no client can hold a
//! descriptor or memory for free:
//!
//! - **Idle keep-alive timeout** ([`ConnectionLimits::idle_timeout`], default 60 s): a
//!   connection on which no request is running and no byte has moved for this long is
//!   closed. This also covers a connection that never sends anything, and a client that
//!   stops reading a response (a write that cannot proceed for this long fails).
//! - **Header read timeout** ([`ConnectionLimits::header_read_timeout`], default 10 s):
//!   once the first byte of a request has arrived, its whole head must arrive within
//!   this time, or the connection is closed.
//! - **Body read timeout** ([`ConnectionLimits::body_read_timeout`], default 30 s): a
//!   request's body must arrive whole within this time from when the handler started;
//!   past it the request is answered `408 request_timeout` with `Connection: close`.
//! - **Caps**: at most [`ConnectionLimits::max_connections_per_address`] (default 256;
//!   0: no cap) open connections per client IP address, and at most
//!   [`ConnectionLimits::max_connections`] (default 10,000) in total, the latter lowered
//!   at start to the process's descriptor limit (`RLIMIT_NOFILE`, read from
//!   `/proc/self/limits`) less a reserve of a tenth of it (at least 128) for the store,
//!   the blocking pool and logs. A connection over a cap is accepted (so it does not
//!   wait in the kernel's backlog), sent a `503 too_many_connections` if its send
//!   buffer takes it, and closed at once. A connection's count is held until its
//!   lingering close (`linger.rs`) has ended, so draining sockets count too.
//! - **Read buffer**: hyper's per-connection read buffer is capped at
//!   [`ConnectionLimits::max_buf_size`] (default 64 KiB; hyper's own default is about
//!   400 KiB), which also bounds a request head.
//!
//! On shutdown the loop stops accepting, accepts (and serves) whatever the kernel had
//! already queued, closes the listener, and tells every connection to finish: a request
//! in flight (from its head to the last byte of its response) is answered in full, with
//! `Connection: close` (hyper's graceful shutdown of a busy connection). A connection
//! with no request running is given [`SHUTDOWN_GRACE`] for a request the client may
//! already have sent (under load, the next request often sits unread in the socket
//! when the signal comes; closing then is what made clients see EOF without a
//! response), then closed between requests, never during one.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::error::ErrorBody;
use crate::linger::Lingering;
use crate::request_id::RequestId;
use crate::AppState;

/// The connection limits of a server (see the module documentation for each).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionLimits {
    /// From the first byte of a request to the end of its head (default 10 s).
    pub header_read_timeout: Duration,
    /// A connection with no request running and no byte moving (default 60 s).
    pub idle_timeout: Duration,
    /// From the start of a request's handling to the end of its body (default 30 s).
    pub body_read_timeout: Duration,
    /// Open connections in all (default 10,000), lowered to the descriptor limit less
    /// its reserve.
    pub max_connections: usize,
    /// Open connections from one IP address (default 256; 0: no per-address cap, for a
    /// server behind a proxy, where every client has the proxy's address).
    pub max_connections_per_address: usize,
    /// hyper's read buffer per connection (default 64 KiB, at least 8 KiB).
    pub max_buf_size: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_connections_per_address: 256,
            max_buf_size: 64 << 10,
        }
    }
}

/// The process's soft limit on open descriptors, if it can be read (Linux).
pub fn descriptor_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `configured`, lowered to `limit` less a reserve of a tenth of it (at least 128).
pub fn connection_cap(configured: usize, limit: Option<u64>) -> usize {
    match limit {
        Some(n) => {
            let reserve = (n / 10).max(128);
            let room = usize::try_from(n.saturating_sub(reserve)).unwrap_or(usize::MAX);
            configured.min(room).max(1)
        }
        None => configured.max(1),
    }
}

/// Open connections, in all and per address.
struct Tally {
    max_total: usize,
    max_per_address: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection's place in the tally, given back on drop.
struct Admitted {
    tally: Arc<Tally>,
    ip: IpAddr,
}

impl Tally {
    fn admit(self: &Arc<Tally>, ip: IpAddr) -> Option<Admitted> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.max_total {
            return None;
        }
        let here = open.1.entry(ip).or_insert(0);
        if self.max_per_address > 0 && *here >= self.max_per_address {
            return None;
        }
        *here += 1;
        open.0 += 1;
        Some(Admitted {
            tally: self.clone(),
            ip,
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.tally.open.lock().unwrap_or_else(|p| p.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.ip);
            }
        }
    }
}

/// What a connection's reads and its requests share: whether a request is running,
/// when a request head began arriving, and when a byte last moved (milliseconds since
/// the connection was accepted).
struct Watch {
    epoch: Instant,
    in_flight: AtomicUsize,
    head_started: AtomicU64,
    last_moved: AtomicU64,
    /// The read that waited while a request ran (with no deadline): woken when the
    /// request ends, so that the idle deadline is armed.
    reader: Mutex<Option<std::task::Waker>>,
}

const NONE: u64 = u64::MAX;

impl Watch {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn moved(&self) {
        self.last_moved.store(self.now(), Ordering::Relaxed);
    }
}

/// A request running on a connection, for as long as its handler runs.
struct Running(Arc<Watch>);

impl Running {
    fn begin(watch: &Arc<Watch>) -> Running {
        watch.in_flight.fetch_add(1, Ordering::Relaxed);
        watch.head_started.store(NONE, Ordering::Relaxed);
        watch.moved();
        Running(watch.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.moved();
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            let reader = self
                .0
                .reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(w) = reader {
                w.wake();
            }
        }
    }
}

/// A connection's stream with its idle and header deadlines: a read that waits past
/// the deadline fails, and hyper closes the connection.
struct Timed {
    io: Lingering,
    watch: Arc<Watch>,
    header: Duration,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Timed {
    /// Whether the wait has passed `deadline_ms` (after the epoch); arms the timer.
    fn past(&mut self, cx: &mut Context<'_>, deadline_ms: u64) -> bool {
        let deadline = self.watch.epoch + Duration::from_millis(deadline_ms);
        if Instant::now() >= deadline {
            return true;
        }
        let deadline = tokio::time::Instant::from_std(deadline);
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }

    fn read_deadline(&self) -> Option<u64> {
        let w = &self.watch;
        if w.in_flight.load(Ordering::Relaxed) > 0 {
            // A request is running: its body has its own timeout, and its handler
            // may take as long as its deadline allows.
            return None;
        }
        let ms = |d: Duration| d.as_millis() as u64;
        Some(match w.head_started.load(Ordering::Relaxed) {
            NONE => w
                .last_moved
                .load(Ordering::Relaxed)
                .saturating_add(ms(self.idle)),
            t => t.saturating_add(ms(self.header)),
        })
    }

    fn timed_out(what: &str) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out"))
    }
}

impl AsyncRead for Timed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let w = &this.watch;
                    let now = w.now();
                    w.last_moved.store(now, Ordering::Relaxed);
                    if w.in_flight.load(Ordering::Relaxed) == 0
                        && w.head_started.load(Ordering::Relaxed) == NONE
                    {
                        w.head_started.store(now, Ordering::Relaxed);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.read_deadline() {
                Some(d) if this.past(cx, d) => Poll::Ready(Err(Timed::timed_out("read"))),
                Some(_) => Poll::Pending,
                None => {
                    *this.watch.reader.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(cx.waker().clone());
                    // The request may have ended meanwhile: then look again.
                    if this.watch.in_flight.load(Ordering::Relaxed) == 0 {
                        cx.waker().wake_by_ref();
                    }
                    Poll::Pending
                }
            },
            other => other,
        }
    }
}

impl AsyncWrite for Timed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                this.watch.moved();
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                // A client that stops reading holds the response: it gets the idle
                // timeout from the last byte it took.
                let d = this
                    .watch
                    .last_moved
                    .load(Ordering::Relaxed)
                    .saturating_add(this.idle.as_millis() as u64);
                if this.past(cx, d) {
                    Poll::Ready(Err(Timed::timed_out("write")))
                } else {
                    Poll::Pending
                }
            }
            other => other,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains (see the module
/// documentation). Returns once every connection has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limit = descriptor_limit();
    let max_total = connection_cap(limits.max_connections, limit);
    if max_total < limits.max_connections {
        eprintln!(
            "dossier-server: at most {max_total} connections (descriptor limit {})",
            limit.unwrap_or(0)
        );
    }
    let tally = Arc::new(Tally {
        max_total,
        max_per_address: limits.max_connections_per_address,
        open: Mutex::new((0, HashMap::new())),
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(limits.max_buf_size.max(8192))
        .keep_alive(true);
    let (stop, _) = tokio::sync::watch::channel(false);
    let (closed, open) = tokio::sync::watch::channel(());
    let server = Server {
        app,
        limits,
        tally,
        http,
        stop,
        open,
    };
    tokio::pin!(shutdown);
    let mut last_error: Option<Instant> = None;
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => server.take(stream, peer),
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    // Out of descriptors (EMFILE) or memory: the pending connection
                    // stays queued; wait a little rather than spin.
                    if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                        eprintln!("dossier-server: accept failed: {e}");
                        last_error = Some(Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    // Connections the kernel completed before the signal are served (one request each,
    // answered with `Connection: close`) rather than reset with the listener.
    for _ in 0..max_total {
        match tokio::time::timeout(Duration::ZERO, listener.accept()).await {
            Ok(Ok((stream, peer))) => server.take(stream, peer),
            Ok(Err(e)) if is_connection_error(&e) => {}
            _ => break,
        }
    }
    drop(listener);
    let _ = server.stop.send(true);
    drop(server);
    // Every connection task holds a receiver; all are gone once every one has ended.
    closed.closed().await;
    Ok(())
}

/// After the shutdown signal, how long a connection with no request running is kept
/// open for a request already on its way.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

struct Server {
    app: Router,
    limits: ConnectionLimits,
    tally: Arc<Tally>,
    http: hyper::server::conn::http1::Builder,
    /// Set once shutdown begins.
    stop: tokio::sync::watch::Sender<bool>,
    /// Held by every connection task while it runs.
    open: tokio::sync::watch::Receiver<()>,
}

impl Server {
    fn take(&self, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let Some(admitted) = self.tally.admit(peer.ip()) else {
            refuse(stream);
            return;
        };
        let watch = Arc::new(Watch {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            head_started: AtomicU64::new(NONE),
            last_moved: AtomicU64::new(0),
            reader: Mutex::new(None),
        });
        let io = Timed {
            io: Lingering::holding(stream, Box::new(admitted)),
            watch: watch.clone(),
            header: self.limits.header_read_timeout,
            idle: self.limits.idle_timeout,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        };
        let app = self.app.clone();
        let on_conn = watch.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
            let running = Running::begin(&on_conn);
            let call = tower::ServiceExt::oneshot(app.clone(), req);
            async move {
                // The request runs until its response body has been sent or dropped.
                let resp: Result<Response, std::convert::Infallible> = call.await;
                resp.map(|r| {
                    r.map(|inner| {
                        Body::new(Tracked {
                            inner,
                            _running: running,
                        })
                    })
                })
            }
        });
        let conn = self.http.serve_connection(TokioIo::new(io), service);
        let (mut stop, open) = (self.stop.subscribe(), self.open.clone());
        tokio::spawn(async move {
            let _open = open;
            let mut conn = std::pin::pin!(conn);
            // Errors here are the client's (reset, timed out, bad request head).
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => {}
            }
            let grace = tokio::time::sleep(SHUTDOWN_GRACE);
            tokio::pin!(grace);
            loop {
                if watch.in_flight.load(Ordering::Relaxed) > 0 {
                    // Busy: the response in flight is finished with `Connection: close`.
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                    return;
                }
                let head = watch.head_started.load(Ordering::Relaxed) != NONE;
                tokio::select! {
                    _ = conn.as_mut() => return,
                    // A head being read has the header timeout; otherwise the grace.
                    _ = &mut grace, if !head => return,
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
        });
    }
}

/// The answer to a connection over a cap: written if the socket takes it at once, then
/// the connection is closed.
fn refuse(stream: TcpStream) {
    let body = serde_json::to_string(&ErrorBody {
        message: "too many connections; retry later".into(),
        code: "too_many_connections".into(),
        kind: "rate_limit_error".into(),
        request_id: RequestId::generate().0,
    })
    .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.try_write(format!("{head}{body}").as_bytes());
    if let Ok(s) = stream.into_std() {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A response body holding its request's place as running until it is dropped.
struct Tracked {
    inner: Body,
    _running: Running,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that fails once its time is up, noting so in `expired`.
struct TimedBody {
    inner: Body,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.expired.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(axum::Error::new("request body timed out"))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending if this.timer.as_mut().poll(cx).is_ready() => {
                this.expired.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(axum::Error::new("request body timed out"))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Middleware: a request whose body has not arrived whole within the body read timeout
/// is answered `408 request_timeout` with `Connection: close`, whatever its handler
/// made of the failed read.
pub(crate) async fn limit_body_time(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let limit = state.config.connections.body_read_timeout;
    let expired = Arc::new(AtomicBool::new(false));
    let rid = req.extensions().get::<RequestId>().cloned();
    let (parts, body) = req.into_parts();
    let body = Body::new(TimedBody {
        inner: body,
        timer: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
    });
    let resp = next.run(Request::from_parts(parts, body)).await;
    if !expired.load(Ordering::Relaxed) {
        return resp;
    }
    let body = ErrorBody {
        message: format!(
            "the request body did not arrive within {} s",
            limit.as_secs_f64()
        ),
        code: "request_timeout".into(),
        kind: "invalid_request_error".into(),
        request_id: rid.map(|r| r.0).unwrap_or_default(),
    };
    let mut resp = (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_keeps_a_reserve_below_the_descriptor_limit() {
        assert_eq!(connection_cap(10_000, Some(20_000)), 10_000);
        assert_eq!(connection_cap(30_000, Some(20_000)), 18_000);
        assert_eq!(connection_cap(10_000, Some(1024)), 896);
        assert_eq!(connection_cap(10_000, Some(100)), 1);
        assert_eq!(connection_cap(10_000, None), 10_000);
    }

    #[test]
    fn the_descriptor_limit_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(descriptor_limit().is_some_and(|n| n > 0));
        }
    }

    #[test]
    fn the_tally_counts_per_address_and_in_all() {
        let tally = Arc::new(Tally {
            max_total: 3,
            max_per_address: 2,
            open: Mutex::new((0, HashMap::new())),
        });
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = tally.admit(a).unwrap();
        let _a2 = tally.admit(a).unwrap();
        assert!(tally.admit(a).is_none());
        let _b1 = tally.admit(b).unwrap();
        assert!(tally.admit(b).is_none(), "the total is reached");
        drop(a1);
        assert!(tally.admit(a).is_some());
        assert!(tally.open.lock().unwrap().1.len() <= 2);
    }
}
