//! The HTTP server: routes, token and host checks, security headers, server-sent events, the
//! embedded page, and the follower threads.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use smdebug_io::StorageOptions;
use smdebug_io::stop::{StopRequest, request_stop};
use smdebug_profiler::RankSummary;
use smdebug_profiler::follow::DataArea;
use tokio::sync::{oneshot, watch};

use crate::api::{self, Window};
use crate::code::{self, CodeFile};
use crate::conn::{ConnectionLimits, ConnectionStats, Connections};
use crate::guard::{self, Guard};
use crate::pool;
use crate::run::Run;
use crate::system;

/// The page's Content-Security-Policy: nothing but this server's own scripts, styles and API.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const UPLOT_JS: &str = include_str!("../assets/vendor/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/vendor/uPlot.min.css");
const ICON_SVG: &str = include_str!("../assets/icon.svg");
const UPLOT_LICENSE: &str = include_str!("../assets/vendor/uPlot.LICENSE");

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// No run was given.
    #[error(
        "no run to serve: give one or more run locations (a folder, a folder of runs, or an object-store URL)"
    )]
    NoRuns,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The runtime could not be built.
    #[error("cannot start the server's runtime: {0}")]
    Runtime(std::io::Error),
    /// A `--trace` file could not be read.
    #[error("{0}")]
    Trace(String),
}

/// What to serve and how.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Run locations: run folders, folders of runs, object-store URLs.
    pub runs: Vec<String>,
    /// The address to listen on (default 127.0.0.1).
    pub host: IpAddr,
    /// The port (0: any free port; the CLI's default is 6006 + 1).
    pub port: u16,
    /// Kineto trace files for the Kineto panel.
    pub traces: Vec<PathBuf>,
    /// How often each run is looked at for new data (default 200 ms).
    pub poll: Duration,
    /// Never write into a run (stop requests disabled).
    pub read_only: bool,
    /// The token the API requires. `None`: none on a loopback address, a random one otherwise.
    pub token: Option<String>,
    /// How object stores are reached.
    pub storage: StorageOptions,
    /// Connection limits and timeouts.
    pub limits: ConnectionLimits,
    /// The allocation budget of one tensor value read for a view or the report, in bytes
    /// (default [`DEFAULT_MAX_TENSOR_BYTES`](smdebug_io::trial::DEFAULT_MAX_TENSOR_BYTES), the
    /// CLI's `--max-tensor-bytes`): a view of a larger value is refused with an error naming
    /// the tensor and its size, never decoded.
    pub max_tensor_bytes: u64,
}

impl ServeOptions {
    /// Serve `runs` on 127.0.0.1, any free port, polling every 200 ms.
    pub fn new(runs: Vec<String>) -> ServeOptions {
        ServeOptions {
            runs,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            traces: Vec::new(),
            poll: Duration::from_millis(200),
            read_only: false,
            token: None,
            storage: StorageOptions::default(),
            limits: ConnectionLimits::default(),
            max_tensor_bytes: smdebug_io::trial::DEFAULT_MAX_TENSOR_BYTES,
        }
    }
}

/// The entries at a run's root (any one of them makes a folder a run).
const RUN_ENTRIES: [&str; 7] = [
    "index",
    "events",
    "collections",
    "system",
    "framework",
    "rules",
    "training_job_end.ts",
];

/// Whether a local folder holds a run's own files (rather than runs in subfolders).
fn looks_like_run(dir: &Path) -> bool {
    RUN_ENTRIES.iter().any(|entry| dir.join(entry).exists())
}

/// Whether an object-store prefix holds a run's own files: its end marker, collections,
/// system or framework files (small listings; the index and event folders of a long run are
/// not listed for this).
fn store_looks_like_run(storage: &dyn smdebug_io::Storage) -> bool {
    matches!(storage.size("training_job_end.ts"), Ok(Some(_)))
        || ["collections", "system", "framework", "rules"]
            .iter()
            .any(|dir| storage.list(dir).is_ok_and(|l| !l.is_empty()))
}

/// The runs directly under an object-store prefix that is not itself a run: the first path
/// component of every key that continues with a run's entry (one listing of the prefix).
fn store_children(storage: &dyn smdebug_io::Storage) -> Vec<String> {
    let Ok(keys) = storage.list("") else {
        return Vec::new();
    };
    let mut children: Vec<String> = keys
        .iter()
        .filter_map(|key| {
            let (child, rest) = key.split_once('/')?;
            let entry = rest.split('/').next().unwrap_or(rest);
            RUN_ENTRIES.contains(&entry).then(|| child.to_owned())
        })
        .collect();
    children.dedup();
    children.sort();
    children.dedup();
    children
}

/// The runs behind the command's arguments, as `(name, location)`: a local folder, or an
/// object-store prefix (`s3://bucket/jobs/`), that is not itself a run but has subfolders that
/// are becomes one run per subfolder (sorted by name); anything else (a run, an empty or
/// missing folder or prefix) is one run. Names are the last path component, made unique.
/// Object stores are reached with the default options (the environment's credentials); see
/// [`expand_runs_with`].
pub fn expand_runs(args: &[String]) -> Vec<(String, String)> {
    expand_runs_with(args, &StorageOptions::default())
}

/// [`expand_runs`], object stores reached with `options`. A prefix that cannot be opened or
/// listed is kept as one run (its follower reports why it cannot be read).
pub fn expand_runs_with(args: &[String], options: &StorageOptions) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for arg in args {
        let path = Path::new(arg);
        let is_url = arg.contains("://");
        let mut children: Vec<PathBuf> = Vec::new();
        if is_url
            && !arg.starts_with("file://")
            && let Ok(storage) = smdebug_io::open_storage_with(arg, options)
            && !store_looks_like_run(storage.as_ref())
        {
            let found = store_children(storage.as_ref());
            if !found.is_empty() {
                let root = arg.trim_end_matches('/');
                for child in found {
                    out.push((child.clone(), format!("{root}/{child}")));
                }
                continue;
            }
        }
        if !is_url && path.is_dir() && !looks_like_run(path) {
            if let Ok(entries) = std::fs::read_dir(path) {
                children = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir() && looks_like_run(p))
                    .collect();
                children.sort();
            }
        }
        if children.is_empty() {
            let name = arg
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(arg)
                .to_owned();
            out.push((name, arg.clone()));
        } else {
            for child in children {
                let name = child
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push((name, child.to_string_lossy().into_owned()));
            }
        }
    }
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for entry in &mut out {
        let n = seen.entry(entry.0.clone()).or_default();
        *n += 1;
        if *n > 1 {
            entry.0 = format!("{} ({n})", entry.0);
        }
    }
    out
}

/// A random token: 128 bits from the OS (`/dev/urandom`), hex.
fn random_token() -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // No /dev/urandom: the hasher's random keys, twice.
        use std::hash::{BuildHasher, RandomState};
        let a = RandomState::new().hash_one(std::time::SystemTime::now());
        let b = RandomState::new().hash_one(std::process::id());
        buf[..8].copy_from_slice(&a.to_le_bytes());
        buf[8..].copy_from_slice(&b.to_le_bytes());
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

struct AppState {
    runs: Vec<Arc<Run>>,
    guard: Arc<Guard>,
    traces: Vec<RankSummary>,
    updates: watch::Receiver<u64>,
    /// Wakes the event streams up (a report's stage changed).
    notify: Arc<watch::Sender<u64>>,
    /// Report builds allowed at once.
    report_slots: tokio::sync::Semaphore,
}

type Shared = Arc<AppState>;

/// A running server. Stops (its listener and follower threads) on [`shutdown`](Self::shutdown)
/// or drop.
pub struct Server {
    addr: SocketAddr,
    url: String,
    token: Option<String>,
    runs: Vec<Arc<Run>>,
    connections: Connections,
    stop: Arc<AtomicBool>,
    followers: Vec<JoinHandle<()>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds the address, starts following every run and serves in background threads.
    pub fn start(options: ServeOptions) -> Result<Server, ServeError> {
        let runs = expand_runs_with(&options.runs, &options.storage);
        if runs.is_empty() {
            return Err(ServeError::NoRuns);
        }
        let traces = if options.traces.is_empty() {
            Vec::new()
        } else {
            smdebug_profiler::summarize_traces(&options.traces)
                .map_err(|e| ServeError::Trace(e.to_string()))?
                .ranks
        };
        let loopback = options.host.is_loopback();
        let token = options
            .token
            .clone()
            .or_else(|| (!loopback).then(random_token));
        let addr = SocketAddr::new(options.host, options.port);
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|source| ServeError::Bind { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;

        let runs: Vec<Arc<Run>> = runs
            .into_iter()
            .enumerate()
            .map(|(id, (name, location))| {
                let mut run = Run::new(id, name, location, !options.read_only);
                run.max_tensor_bytes = options.max_tensor_bytes;
                Arc::new(run)
            })
            .collect();
        let (tx, rx) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let stop = Arc::new(AtomicBool::new(false));
        let notify = Arc::clone(&tx);
        let followers = pool::spawn(
            &runs,
            options.storage.clone(),
            options.poll,
            Arc::clone(&stop),
            Arc::new(move || notify.send_modify(|v| *v += 1)),
        );

        let state_runs = runs.clone();
        let state = Arc::new(AppState {
            runs,
            guard: Arc::new(Guard::new(token.clone(), addr)),
            traces,
            updates: rx,
            notify: Arc::clone(&tx),
            report_slots: tokio::sync::Semaphore::new(1),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .enable_time()
            .thread_name("smdebug-serve")
            .build()
            .map_err(ServeError::Runtime)?;
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let app = router(state);
        let connections = Connections::new(options.limits);
        let serving = connections.clone();
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|source| ServeError::Bind { addr, source })?
        };
        let thread = std::thread::Builder::new()
            .name("smdebug-serve".into())
            .spawn(move || {
                runtime.block_on(serving.serve(listener, app, shutdown_rx));
                // Open event streams never end by themselves.
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .expect("spawn the server thread");
        let host = match addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let mut url = format!("http://{host}:{}/", addr.port());
        if let Some(t) = &token {
            url.push_str(&format!("?token={t}"));
        }
        Ok(Server {
            addr,
            url,
            token,
            runs: state_runs,
            connections,
            stop,
            followers,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL (with the token, when there is one).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The token the API requires, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Passes the followers made over the runs so far (all runs together).
    pub fn follower_passes(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| r.passes.load(Ordering::Relaxed))
            .sum()
    }

    /// The follower threads (a few, however many runs are served).
    pub fn follower_threads(&self) -> usize {
        self.followers.len()
    }

    /// The connections open now.
    pub fn connections(&self) -> ConnectionStats {
        self.connections.stats()
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Stops serving and following, and waits for the threads.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for f in self.followers.drain(..) {
            let _ = f.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn router(state: Shared) -> Router {
    let api = Router::new()
        .route("/runs", get(runs))
        .route("/events", get(events))
        .route("/kineto", get(kineto))
        .route("/runs/{id}/overview", get(overview))
        .route("/runs/{id}/system", get(system))
        .route("/runs/{id}/spans", get(spans))
        .route("/runs/{id}/steps", get(steps))
        .route("/runs/{id}/scalars", get(scalars))
        .route("/runs/{id}/tensor", get(tensor))
        .route("/runs/{id}/tensor2d", get(tensor2d))
        .route("/runs/{id}/report", get(report))
        .route("/runs/{id}/code", get(code_windows))
        .route(
            "/runs/{id}/code/{window}/flamegraph.svg",
            get(code_flamegraph),
        )
        .route("/runs/{id}/code/{window}/profile.pb.gz", get(code_pprof))
        .route("/runs/{id}/stop", post(stop))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            guard::require_token,
        ));
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css", APP_CSS) }),
        )
        .route(
            "/assets/icon.svg",
            get(|| async { asset("image/svg+xml", ICON_SVG) }),
        )
        .route(
            "/assets/uPlot.iife.min.js",
            get(|| async { asset("text/javascript", UPLOT_JS) }),
        )
        .route(
            "/assets/uPlot.min.css",
            get(|| async { asset("text/css", UPLOT_CSS) }),
        )
        .route(
            "/assets/uPlot.LICENSE",
            get(|| async { asset("text/plain; charset=utf-8", UPLOT_LICENSE) }),
        )
        .nest("/api", api)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            guard::check,
        ))
        .layer(middleware::from_fn(security_headers))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    // A response with a policy of its own (a flame graph's, stricter) keeps it.
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

fn find_run(state: &AppState, id: usize) -> Result<Arc<Run>, Box<Response>> {
    state
        .runs
        .get(id)
        .cloned()
        .ok_or_else(|| Box::new(error(StatusCode::NOT_FOUND, format!("no run {id}"))))
}

async fn runs(State(state): State<Shared>) -> Response {
    axum::Json(api::runs(&state.runs)).into_response()
}

async fn events(State(state): State<Shared>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = state.updates.clone();
    let stream = futures::stream::unfold((rx, true), move |(mut rx, first)| {
        let state = Arc::clone(&state);
        async move {
            if !first && rx.changed().await.is_err() {
                return None;
            }
            rx.borrow_and_update();
            let body = api::runs(&state.runs).to_string();
            Some((Ok(Event::default().event("runs").data(body)), (rx, false)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
}

async fn kineto(State(state): State<Shared>) -> Response {
    let ranks: Vec<Value> = state
        .traces
        .iter()
        .map(|r| {
            json!({
                "rank": r.rank, "file": r.file, "span_us": r.span_us,
                "gpu_busy_us": r.gpu_busy_us, "gpu_idle_us": r.gpu_idle_us,
                "gpu_kernels": r.gpu_kernels.iter().take(20).collect::<Vec<_>>(),
                "cpu_operators": r.cpu_operators.iter().take(20).collect::<Vec<_>>(),
                "gpu_kernel_total_us": r.gpu_kernel_total_us,
            })
        })
        .collect();
    axum::Json(json!({"ranks": ranks})).into_response()
}

async fn overview(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    match find_run(&state, id) {
        Ok(run) => axum::Json(api::overview(&run)).into_response(),
        Err(e) => *e,
    }
}

#[derive(Deserialize)]
struct SystemQuery {
    from: Option<f64>,
    to: Option<f64>,
    points: Option<usize>,
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn system(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<SystemQuery>,
) -> Response {
    let window = Window {
        from: q.from,
        to: q.to,
        points: q.points,
    };
    let page = crate::page::Page {
        offset: q.offset.unwrap_or(0),
        limit: q.limit,
    };
    match find_run(&state, id) {
        Ok(run) => axum::Json(system::system(&run, &window, page)).into_response(),
        Err(e) => *e,
    }
}

async fn spans(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(window): Query<Window>,
) -> Response {
    match find_run(&state, id) {
        Ok(run) => axum::Json(api::spans(&run, &window)).into_response(),
        Err(e) => *e,
    }
}

// Query structs list the window's fields themselves: serde's `flatten` hands the
// query-string deserializer strings where numbers are wanted.
#[derive(Deserialize)]
struct StepsQuery {
    from: Option<f64>,
    to: Option<f64>,
    points: Option<usize>,
    last: Option<usize>,
}

async fn steps(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<StepsQuery>,
) -> Response {
    match find_run(&state, id) {
        Ok(run) => {
            let window = Window {
                from: q.from,
                to: q.to,
                points: q.points,
            };
            axum::Json(api::steps(&run, &window, q.last.unwrap_or(30))).into_response()
        }
        Err(e) => *e,
    }
}

#[derive(Deserialize)]
struct ScalarQuery {
    from: Option<f64>,
    to: Option<f64>,
    points: Option<usize>,
    regex: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn scalars(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<ScalarQuery>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let window = Window {
        from: q.from,
        to: q.to,
        points: q.points,
    };
    let page = crate::page::Page {
        offset: q.offset.unwrap_or(0),
        limit: q.limit,
    };
    match api::scalars(&run, q.regex.as_deref(), &window, page) {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e),
    }
}

#[derive(Deserialize)]
struct TensorQuery {
    name: String,
    step: Option<u64>,
    steps: Option<usize>,
    side: Option<usize>,
}

/// Runs `f` over the run's trial on a blocking thread (tensor values are read from storage).
async fn with_trial(
    state: &AppState,
    id: usize,
    f: impl FnOnce(&smdebug_io::Trial) -> Result<Value, String> + Send + 'static,
) -> Response {
    let run = match find_run(state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    match tokio::task::spawn_blocking(move || f(&*run.open_trial()?)).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => error(StatusCode::NOT_FOUND, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn tensor(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<TensorQuery>,
) -> Response {
    let steps = q.steps.unwrap_or(100);
    if let Ok(run) = find_run(&state, id)
        && let Some(v) = api::scalar_over_steps(&run, &q.name, steps)
    {
        return axum::Json(v).into_response();
    }
    with_trial(&state, id, move |t| {
        api::tensor_over_steps(t, &q.name, steps)
    })
    .await
}

async fn tensor2d(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<TensorQuery>,
) -> Response {
    let side = q.side.unwrap_or(128);
    if let Ok(run) = find_run(&state, id)
        && let Some(v) = api::scalar_2d(&run, &q.name, q.step)
    {
        return axum::Json(v).into_response();
    }
    with_trial(&state, id, move |t| {
        api::tensor_2d(t, &q.name, q.step, side)
    })
    .await
}

async fn report(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    // One report at a time: each holds a copy of its run's data while it is drawn. Another
    // request meanwhile is refused, not queued (a queue would hold its memory too).
    let _permit = match state.report_slots.try_acquire() {
        Ok(permit) => permit,
        Err(tokio::sync::TryAcquireError::NoPermits) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "a report is being built (one at a time): try again when it is done",
            );
        }
        Err(tokio::sync::TryAcquireError::Closed) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
        }
    };
    let name = run.name.clone();
    let held = Arc::clone(&run);
    let state = Arc::clone(&state);
    let built = tokio::task::spawn_blocking(move || {
        // Each stage is shown by the page (the `report` field of the runs, sent on change).
        let progress = |stage: Option<&'static str>| {
            if let Ok(mut s) = run.report_stage.lock() {
                *s = stage;
            }
            state.notify.send_modify(|v| *v += 1);
        };
        crate::report::build(&run, &state.traces, &progress)
    })
    .await;
    match built {
        Ok(html) => {
            let file = smdebug_report::safe_file_stem(&name);
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            if let Ok(v) = HeaderValue::from_str(&format!(
                "attachment; filename=\"{file}-profiler-report.html\""
            )) {
                headers.insert(header::CONTENT_DISPOSITION, v);
            }
            (headers, html).into_response()
        }
        Err(e) => {
            if let Ok(mut s) = held.report_stage.lock() {
                *s = None;
            }
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

async fn code_windows(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let d = run.data.read().expect("run data lock");
    let warnings = d
        .problems
        .list()
        .iter()
        .filter(|p| p.area() == DataArea::CodeProfiles)
        .map(ToString::to_string)
        .collect();
    axum::Json(code::windows(&d.code_windows, warnings)).into_response()
}

async fn code_file(state: &AppState, id: usize, window: String, which: CodeFile) -> Response {
    let run = match find_run(state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let held: Vec<_> = run
        .data
        .read()
        .expect("run data lock")
        .code_windows
        .iter()
        .filter(|w| w.file.id() == window)
        .cloned()
        .collect();
    let read =
        tokio::task::spawn_blocking(move || code::file(run.storage(), &held, &window, which)).await;
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return error(StatusCode::NOT_FOUND, "no such code-profile file"),
        Ok(Err(e)) => return error(StatusCode::BAD_GATEWAY, e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut headers = HeaderMap::new();
    match which {
        CodeFile::Flamegraph => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            );
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(code::FLAMEGRAPH_CSP),
            );
        }
        CodeFile::Pprof => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            headers.insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"profile.pb.gz\""),
            );
        }
    }
    (headers, bytes).into_response()
}

async fn code_flamegraph(
    State(state): State<Shared>,
    UrlPath((id, window)): UrlPath<(usize, String)>,
) -> Response {
    code_file(&state, id, window, CodeFile::Flamegraph).await
}

async fn code_pprof(
    State(state): State<Shared>,
    UrlPath((id, window)): UrlPath<(usize, String)>,
) -> Response {
    code_file(&state, id, window, CodeFile::Pprof).await
}

#[derive(Deserialize)]
struct StopBody {
    #[serde(default)]
    confirm: bool,
    reason: Option<String>,
}

async fn stop(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    axum::Json(body): axum::Json<StopBody>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    if !body.confirm {
        return error(
            StatusCode::BAD_REQUEST,
            "a stop request needs {\"confirm\": true}",
        );
    }
    let writable = run.data.read().map(|d| d.writable).unwrap_or(false);
    let (true, Some(storage)) = (writable, run.storage()) else {
        return error(
            StatusCode::FORBIDDEN,
            "this server cannot write into the run (read-only, or no write access)",
        );
    };
    let reason = body
        .reason
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "stopped from the smdebug serve dashboard".to_owned());
    let request = StopRequest::new(reason);
    match tokio::task::spawn_blocking(move || request_stop(storage.as_ref(), &request)).await {
        Ok(Ok(())) => axum::Json(json!({"requested": true})).into_response(),
        Ok(Err(e)) => error(StatusCode::BAD_GATEWAY, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
