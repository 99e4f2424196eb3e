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

use std::collections::HashMap;
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
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            max_untrusted_per_client: 32,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
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
}

impl Conn {
    /// Marks the connection as the token holder's.
    pub(crate) fn trust(&self) {
        self.trusted.store(true, Ordering::Release);
    }
}

/// The open connections.
struct Registry {
    limits: ConnectionLimits,
    start: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Registry {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self, conn: &Conn) {
        conn.last_activity.store(self.now_ms(), Ordering::Release);
    }

    /// Registers a new connection from `peer`, closing the oldest idle untrusted connection
    /// (of that client first) when a limit is reached; `None` when every open connection is
    /// trusted or busy and the server is full.
    fn admit(&self, peer: IpAddr) -> Option<Arc<Conn>> {
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
            let id = oldest(&open, false)?;
            if let Some(c) = open.remove(&id) {
                c.kill.notify_one();
            }
        }
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            peer,
            trusted: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            last_activity: AtomicU64::new(self.now_ms()),
            kill: Notify::new(),
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
            open: Mutex::new(HashMap::new()),
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
            async move {
                let response = app.oneshot(request.map(Body::new)).await;
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
