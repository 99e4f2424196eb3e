//! Connections: the accept loop in front of the routes, with the limits that keep the server
//! up when sockets are opened and left idle or fed a byte at a time.
//!
//! Every connection is served by hyper's HTTP/1 connection (its header-read timeout on) and
//! watched: a connection that has not shown the token (or, without a token, passed the Host
//! check) is *untrusted* and is closed once it has been idle for the header timeout; a trusted
//! one once it has been idle, no request in flight, for the idle timeout. When the server holds
//! its maximum of connections, or a client address its maximum of untrusted ones, the oldest
//! idle untrusted connection is closed to make room (never a trusted one while an untrusted
//! one is open), so that sockets without the token cannot lock out the person who has it.
//!
//! Event streams (`/api/events`) are long-lived and look busy (a comment every few seconds), so
//! they have a budget of their own below the connection cap: at most
//! [`ConnectionLimits::max_streams_per_client`] a client address and
//! [`ConnectionLimits::max_streams`] in all, the oldest stream closed first to make room for a
//! new one (a page's `EventSource` opens its stream again). When the server is full anyway, an
//! idle connection is closed for a new one (untrusted first, then the oldest kept-alive one),
//! else the oldest stream: a person's page and API requests always find room, however many
//! streams or idle connections another process on the machine holds. A request's body has
//! [`ConnectionLimits::body_timeout`] to arrive whole, with or without the token; past it the
//! request is answered 408 and its connection closed.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tower::ServiceExt;

/// The connection limits of a server.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Untrusted connections (no token shown yet) one client address may hold.
    pub max_untrusted_per_client: usize,
    /// How long a connection may take to send a request's headers, and how long an
    /// untrusted connection may stay idle.
    pub header_timeout: Duration,
    /// How long a trusted connection may stay idle (no bytes either way, no request in flight).
    pub idle_timeout: Duration,
    /// Event streams open at once; below `max_connections`, so that the rest is kept for
    /// pages and API requests.
    pub max_streams: usize,
    /// Event streams one client address may hold.
    pub max_streams_per_client: usize,
    /// How long a request's body may take to arrive whole, from the end of its headers.
    pub body_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            max_untrusted_per_client: 32,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_streams: 128,
            max_streams_per_client: 16,
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// What the server knows of one open connection.
pub(crate) struct Conn {
    id: u64,
    peer: IpAddr,
    /// It showed the token (or passed the Host check when there is no token).
    trusted: AtomicBool,
    /// Requests being answered (their response not started yet).
    busy: AtomicUsize,
    /// Milliseconds since the registry's start at the last byte read or written, or request
    /// started or answered.
    last_activity: AtomicU64,
    /// Set to close the connection now.
    kill: Notify,
    /// While it carries an event stream: when the stream started (its rank among streams,
    /// from 1); 0 otherwise.
    stream: AtomicU64,
    /// The registry it is in, to open a stream.
    registry: std::sync::Weak<Registry>,
}

impl Conn {
    /// Marks the connection as the token holder's.
    pub(crate) fn trust(&self) {
        self.trusted.store(true, Ordering::Release);
    }

    /// Marks the connection as carrying an event stream until the returned guard is dropped,
    /// closing the oldest streams of the same client, or of all, when a stream budget is
    /// full (see the module docs).
    pub(crate) fn open_stream(self: &Arc<Self>) -> StreamGuard {
        if let Some(registry) = self.registry.upgrade() {
            registry.open_stream(self);
        }
        StreamGuard(Arc::clone(self))
    }

    fn is_stream(&self) -> bool {
        self.stream.load(Ordering::Acquire) != 0
    }
}

/// An event stream's hold on its connection: dropped with the stream.
pub(crate) struct StreamGuard(Arc<Conn>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.stream.store(0, Ordering::Release);
    }
}

/// The open connections.
struct Registry {
    limits: ConnectionLimits,
    start: Instant,
    next_id: AtomicU64,
    /// Streams opened so far (a stream's rank).
    next_stream: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Connections closed to make room for a stream, a connection, or at a body timeout.
    closed: Mutex<Closed>,
}

/// Why connections were closed to make room, for tests and the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Closed {
    /// Streams closed for a newer one (a stream budget was full).
    pub streams: usize,
    /// Connections closed for a new connection (the server was full).
    pub for_room: usize,
    /// Requests whose body did not arrive within the body timeout.
    pub body_timeouts: usize,
}

impl Registry {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn count(&self, what: impl FnOnce(&mut Closed)) {
        what(&mut self.closed.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Makes `conn` a stream, first closing the oldest stream of its client when the client
    /// has its maximum, then the oldest of all when the server has.
    fn open_stream(&self, conn: &Arc<Conn>) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = |open: &HashMap<u64, Arc<Conn>>, peer: Option<IpAddr>| {
            open.values()
                .filter(|c| c.id != conn.id && c.is_stream())
                .filter(|c| peer.is_none_or(|p| c.peer == p))
                .min_by_key(|c| c.stream.load(Ordering::Acquire))
                .map(|c| c.id)
        };
        let streams = |open: &HashMap<u64, Arc<Conn>>, peer: Option<IpAddr>| {
            open.values()
                .filter(|c| c.id != conn.id && c.is_stream())
                .filter(|c| peer.is_none_or(|p| c.peer == p))
                .count()
        };
        let mut closed = 0;
        for (peer, cap) in [
            (Some(conn.peer), self.limits.max_streams_per_client),
            (None, self.limits.max_streams),
        ] {
            // Room for this one: at most `cap - 1` others.
            while streams(&open, peer) >= cap.max(1) {
                let Some(c) = oldest(&open, peer).and_then(|id| open.remove(&id)) else {
                    break;
                };
                c.kill.notify_one();
                closed += 1;
            }
        }
        let rank = self.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
        conn.stream.store(rank, Ordering::Release);
        drop(open);
        if closed > 0 {
            self.count(|c| c.streams += closed);
        }
    }

    fn touch(&self, conn: &Conn) {
        conn.last_activity.store(self.now_ms(), Ordering::Release);
    }

    /// Registers a new connection from `peer`, closing the oldest idle untrusted connection
    /// (of that client first) when a limit is reached. When the server is full and no
    /// untrusted connection is idle, the oldest idle trusted one is closed, else the oldest
    /// stream; `None` when every open connection has a request in flight.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Arc<Conn>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let evictable = |c: &&Arc<Conn>| {
            !c.trusted.load(Ordering::Acquire) && c.busy.load(Ordering::Acquire) == 0
        };
        let oldest = |open: &HashMap<u64, Arc<Conn>>, same_peer: bool| {
            open.values()
                .filter(evictable)
                .filter(|c| !same_peer || c.peer == peer)
                .min_by_key(|c| (c.last_activity.load(Ordering::Acquire), c.id))
                .map(|c| c.id)
        };
        let untrusted_here = open
            .values()
            .filter(|c| c.peer == peer && !c.trusted.load(Ordering::Acquire))
            .count();
        if untrusted_here >= self.limits.max_untrusted_per_client
            && let Some(id) = oldest(&open, true)
            && let Some(c) = open.remove(&id)
        {
            c.kill.notify_one();
        }
        if open.len() >= self.limits.max_connections {
            let idle_trusted = || {
                open.values()
                    .filter(|c| !c.is_stream() && c.busy.load(Ordering::Acquire) == 0)
                    .min_by_key(|c| (c.last_activity.load(Ordering::Acquire), c.id))
                    .map(|c| c.id)
            };
            let oldest_stream = || {
                open.values()
                    .filter(|c| c.is_stream())
                    .min_by_key(|c| c.stream.load(Ordering::Acquire))
                    .map(|c| c.id)
            };
            let id = oldest(&open, false)
                .or_else(idle_trusted)
                .or_else(oldest_stream)?;
            if let Some(c) = open.remove(&id) {
                c.kill.notify_one();
            }
            // Lock order: `open`, then `closed`.
            self.count(|c| c.for_room += 1);
        }
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            peer,
            trusted: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            last_activity: AtomicU64::new(self.now_ms()),
            kill: Notify::new(),
            stream: AtomicU64::new(0),
            registry: Arc::downgrade(self),
        });
        open.insert(conn.id, Arc::clone(&conn));
        Some(conn)
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// Whether `conn` has been idle past its limit.
    fn expired(&self, conn: &Conn) -> bool {
        if conn.busy.load(Ordering::Acquire) > 0 {
            return false;
        }
        let idle = self
            .now_ms()
            .saturating_sub(conn.last_activity.load(Ordering::Acquire));
        let limit = if conn.trusted.load(Ordering::Acquire) {
            self.limits.idle_timeout
        } else {
            self.limits.header_timeout
        };
        u128::from(idle) >= limit.as_millis()
    }
}

/// Counts of the open connections, for tests and the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Connections open now.
    pub open: usize,
    /// Of which trusted.
    pub trusted: usize,
    /// Of which carrying an event stream.
    pub streams: usize,
    /// Connections closed so far to make room, or at a body timeout.
    pub closed: Closed,
}

/// A handle on the registry that outlives the accept loop.
#[derive(Clone)]
pub(crate) struct Connections(Arc<Registry>);

impl Connections {
    pub(crate) fn new(limits: ConnectionLimits) -> Connections {
        Connections(Arc::new(Registry {
            limits,
            start: Instant::now(),
            next_id: AtomicU64::new(0),
            next_stream: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            closed: Mutex::new(Closed::default()),
        }))
    }

    pub(crate) fn stats(&self) -> ConnectionStats {
        let open = self.0.open.lock().unwrap_or_else(|e| e.into_inner());
        ConnectionStats {
            open: open.len(),
            trusted: open
                .values()
                .filter(|c| c.trusted.load(Ordering::Acquire))
                .count(),
            streams: open.values().filter(|c| c.is_stream()).count(),
            closed: *self.0.closed.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Accepts and serves connections until `shutdown` fires.
    pub(crate) async fn serve(
        self,
        listener: TcpListener,
        app: Router,
        mut shutdown: oneshot::Receiver<()>,
    ) {
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was taken:
                    // wait a little instead of spinning.
                    log::warn!("smdebug serve: accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(conn) = self.0.admit(peer.ip()) else {
                // Full of trusted or busy connections: this one is refused (closed).
                drop(stream);
                continue;
            };
            tokio::spawn(serve_one(
                Arc::clone(&self.0),
                conn,
                stream,
                peer,
                app.clone(),
            ));
        }
        let open = self.0.open.lock().unwrap_or_else(|e| e.into_inner());
        for c in open.values() {
            c.kill.notify_one();
        }
    }
}

async fn serve_one(
    registry: Arc<Registry>,
    conn: Arc<Conn>,
    stream: TcpStream,
    _peer: SocketAddr,
    app: Router,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(Watched {
        inner: stream,
        conn: Arc::clone(&conn),
        registry: Arc::clone(&registry),
    });
    let service = {
        let conn = Arc::clone(&conn);
        let registry = Arc::clone(&registry);
        hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let conn = Arc::clone(&conn);
            let registry = Arc::clone(&registry);
            let app = app.clone();
            conn.busy.fetch_add(1, Ordering::AcqRel);
            registry.touch(&conn);
            request.extensions_mut().insert(Arc::clone(&conn));
            let timed_out = Arc::new(AtomicBool::new(false));
            let timeout = registry.limits.body_timeout;
            let request = request.map(|body| {
                Body::new(TimedBody {
                    inner: body,
                    deadline: Box::pin(tokio::time::sleep(timeout)),
                    timeout,
                    timed_out: Arc::clone(&timed_out),
                })
            });
            async move {
                let mut response = app.oneshot(request).await;
                if timed_out.load(Ordering::Acquire) {
                    // The handler saw its body fail; the client is told why, and the
                    // connection is closed after the answer.
                    registry.count(|c| c.body_timeouts += 1);
                    response = Ok(body_timeout_response(timeout));
                }
                conn.busy.fetch_sub(1, Ordering::AcqRel);
                registry.touch(&conn);
                response
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(registry.limits.header_timeout)
        .max_buf_size(64 * 1024);
    let served = builder.serve_connection(io, service);
    let watchdog = async {
        let step = registry
            .limits
            .header_timeout
            .min(registry.limits.idle_timeout)
            .div_f64(4.0)
            .max(Duration::from_millis(50));
        loop {
            tokio::time::sleep(step).await;
            if registry.expired(&conn) {
                break;
            }
        }
    };
    tokio::select! {
        result = served => {
            if let Err(e) = result {
                log::debug!("smdebug serve: connection: {e}");
            }
        }
        _ = conn.kill.notified() => {}
        _ = watchdog => {}
    }
    registry.remove(conn.id);
}

/// 408, and the connection closed.
fn body_timeout_response(timeout: Duration) -> axum::response::Response {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::IntoResponse;
    let body = crate::series::ApiError {
        error: format!(
            "the request's body did not arrive within {} s",
            timeout.as_secs_f64()
        ),
    };
    let mut response = (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request's body, which must arrive whole before its deadline: past it, reading it fails.
struct TimedBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    timed_out: Arc<AtomicBool>,
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::Release);
            let why = format!(
                "the request's body did not arrive within {} s",
                this.timeout.as_secs_f64()
            );
            return Poll::Ready(Some(Err(why.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A socket that records when bytes last went through it.
struct Watched {
    inner: TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.registry.touch(&self.conn);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.registry.touch(&self.conn);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
