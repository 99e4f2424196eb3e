//! The server: its options, the runs it follows (a few follower threads) and the thread
//! that serves the routes ([`crate::routes`]) on its own runtime.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use smdebug_read::follow::ProfilerSubscription;
use smdebug_read::trial::TensorSubscription;
use smdebug_storage::{IntoLocation, Location, Storage, StorageOptions};
use tokio::sync::{oneshot, watch};

use crate::conn::{ConnectionLimits, ConnectionStats, Connections};
use crate::expand::{expand_runs_but, random_token};
use crate::guard::Guard;
use crate::pool;
use crate::report::ServedScalars;
use crate::routes::router;
use crate::run::Run;
use crate::state::AppState;

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
    /// A run location given as text names none (`s3:/bucket` with one slash, `foo://x`).
    #[error(transparent)]
    Location(Arc<smdebug_storage::Error>),
}

/// What to serve and how.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Run locations: run folders, folders of runs, object-store URLs (see
    /// [`add_run`](Self::add_run)).
    pub runs: Vec<Location>,
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
    /// (default [`DEFAULT_MAX_TENSOR_BYTES`](smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES), the
    /// CLI's `--max-tensor-bytes`): a view of a larger value is refused with an error naming
    /// the tensor and its size, never decoded.
    pub max_tensor_bytes: u64,
    /// The most scalar values one answer of `/scalars/values` holds (default 1,000,000): the
    /// page asks for more in several.
    pub max_download_values: usize,
    /// Profiler subscriptions handed over by the process the server runs in, by run location:
    /// a `Session` subscribes its rules and its dashboard to one source, so that each profiler
    /// file of its run is read once.
    pub shared_profiler: SharedProfiler,
    /// Tensor subscriptions handed over the same way: a `Session` subscribes its rules' trial
    /// and its dashboard's follower to one `TensorSource`, so that each index file and event
    /// file of its run is read once. A served run that takes one follows its tensors through
    /// the source's storage.
    pub shared_tensors: SharedTensors,
    /// The storage to read a run through, by run location, instead of one opened from the
    /// location with [`storage`](Self::storage): an object-store client of the caller's own,
    /// or a wrapper around one (a `Session` hands over the storage it writes its run through).
    /// A run given its storage is served as one run, never taken for a folder of runs.
    pub run_storage: RunStorage,
    /// The first run location given as text that named none, returned by [`Server::start`].
    refused: Option<Arc<smdebug_storage::Error>>,
}

/// Subscriptions handed over by the process the server runs in, by run location
/// ([`ServeOptions::shared_profiler`], [`ServeOptions::shared_tensors`]): a served run whose
/// location is one of these reads through it; one that no run takes is let go when the server
/// starts. Clones share the subscriptions.
pub struct Handover<S>(Arc<std::sync::Mutex<Vec<(Location, S)>>>);

/// Profiler subscriptions for [`ServeOptions::shared_profiler`].
pub type SharedProfiler = Handover<ProfilerSubscription>;

/// Tensor subscriptions for [`ServeOptions::shared_tensors`].
pub type SharedTensors = Handover<TensorSubscription>;

/// Runs' storage for [`ServeOptions::run_storage`].
pub type RunStorage = Handover<Arc<dyn Storage>>;

impl<S> Handover<S> {
    /// Hands over `subscription` for the run at `location`.
    pub fn add(&self, location: &Location, subscription: S) {
        if let Ok(mut held) = self.0.lock() {
            held.push((location.clone(), subscription));
        }
    }

    /// Takes every subscription: each run location with its own.
    fn take_all(&self) -> Vec<(Location, S)> {
        self.0
            .lock()
            .map(|mut held| std::mem::take(&mut *held))
            .unwrap_or_default()
    }
}

impl<S> Clone for Handover<S> {
    fn clone(&self) -> Self {
        Handover(Arc::clone(&self.0))
    }
}

impl<S> Default for Handover<S> {
    fn default() -> Self {
        Handover(Arc::default())
    }
}

impl<S> std::fmt::Debug for Handover<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let locations: Vec<String> = self
            .0
            .lock()
            .map(|held| held.iter().map(|(l, _)| l.to_string()).collect())
            .unwrap_or_default();
        f.debug_tuple("Handover").field(&locations).finish()
    }
}

/// The runs to serve, numbered in order, each with the subscriptions handed over for its
/// location; a subscription no run takes is dropped here, since it would hold its source's
/// data for nobody.
fn served_runs(
    runs: Vec<(String, Location)>,
    options: &ServeOptions,
    mut storages: Vec<(Location, Arc<dyn Storage>)>,
) -> Vec<Arc<Run>> {
    let mut shared = options.shared_profiler.take_all();
    let mut shared_tensors = options.shared_tensors.take_all();
    runs.into_iter()
        .enumerate()
        .map(|(id, (name, location))| {
            let mut run = Run::new(id, name, location, !options.read_only);
            run.max_tensor_bytes = options.max_tensor_bytes;
            if let Some(storage) = take_for(&mut storages, &run.location) {
                run.storage = std::sync::RwLock::new(Some(storage));
            }
            if let Some(subscription) = take_for(&mut shared, &run.location) {
                run.shared_profiler = std::sync::Mutex::new(Some(subscription));
            }
            if let Some(subscription) = take_for(&mut shared_tensors, &run.location) {
                run.shared_tensors = std::sync::Mutex::new(Some(subscription));
            }
            Arc::new(run)
        })
        .collect()
}

/// The page's URL at `addr`, with the token when there is one.
fn page_url(addr: SocketAddr, token: Option<&str>) -> String {
    let host = match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let mut url = format!("http://{host}:{}/", addr.port());
    if let Some(t) = token {
        url.push_str(&format!("?token={t}"));
    }
    url
}

/// The subscription of `held` for the run at `location`, taken out of it.
fn take_for<S>(held: &mut Vec<(Location, S)>, location: &Location) -> Option<S> {
    let i = held.iter().position(|(l, _)| same_location(l, location))?;
    Some(held.swap_remove(i).1)
}

/// Whether two locations name the same run: the same folder (paths compared by component, so a
/// trailing `/` aside), or the same URL but for a trailing `/`.
fn same_location(a: &Location, b: &Location) -> bool {
    match (a, b) {
        (Location::Local(a), Location::Local(b)) => a == b,
        (Location::Store { url: a, .. }, Location::Store { url: b, .. }) => {
            a.trim_end_matches('/') == b.trim_end_matches('/')
        }
        _ => false,
    }
}

impl ServeOptions {
    /// Serve `runs` on 127.0.0.1, any free port, polling every 200 ms. Each run is text (a
    /// path or a URL, parsed once), a `Path` (always a local folder) or a parsed [`Location`];
    /// text that names none is the error of [`Server::start`].
    pub fn new<L: IntoLocation>(runs: impl IntoIterator<Item = L>) -> ServeOptions {
        let mut options = ServeOptions::default();
        for run in runs {
            options.add_run(run);
        }
        options
    }

    /// Adds a run location: text (parsed once), a `Path` or a [`Location`]. Text that names
    /// no location is held and is the error of [`Server::start`].
    pub fn add_run(&mut self, location: impl IntoLocation) {
        match location.into_location() {
            Ok(location) => self.runs.push(location),
            Err(e) => {
                self.refused.get_or_insert(Arc::new(e));
            }
        }
    }
}

impl Default for ServeOptions {
    /// No run yet (a `Session` adds its own), on 127.0.0.1, any free port, polling every
    /// 200 ms.
    fn default() -> ServeOptions {
        ServeOptions {
            runs: Vec::new(),
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            traces: Vec::new(),
            poll: Duration::from_millis(200),
            read_only: false,
            token: None,
            storage: StorageOptions::default(),
            limits: ConnectionLimits::default(),
            max_tensor_bytes: smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES,
            max_download_values: crate::api::MAX_EVERY_VALUE,
            shared_profiler: SharedProfiler::default(),
            shared_tensors: SharedTensors::default(),
            run_storage: RunStorage::default(),
            refused: None,
        }
    }
}

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
        if let Some(e) = &options.refused {
            return Err(ServeError::Location(Arc::clone(e)));
        }
        let storages = options.run_storage.take_all();
        // A run given its storage is one run, read through that storage alone.
        let runs = expand_runs_but(&options.runs, &options.storage, |arg| {
            storages.iter().any(|(l, _)| same_location(l, arg))
        });
        if runs.is_empty() {
            return Err(ServeError::NoRuns);
        }
        let traces = if options.traces.is_empty() {
            Vec::new()
        } else {
            smdebug_read::summarize_traces(&options.traces)
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

        let runs = served_runs(runs, &options, storages);
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
            max_download_values: options.max_download_values.max(1),
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
        let url = page_url(addr, token.as_deref());
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

    /// The scalars of the served run at `location` for a report written in this process
    /// (smdebug-report's `ReportWriter::scalars_from`): the dashboard's summaries, as its
    /// "Download report" takes them, so that the report reads none of the run's files again.
    /// `None` when no served run is at `location`.
    pub fn report_scalars(&self, location: &Location) -> Option<ServedScalars> {
        let run = self
            .runs
            .iter()
            .find(|r| same_location(&r.location, location))?;
        Some(ServedScalars::new(Arc::clone(run)))
    }

    /// Passes the followers made over the runs so far (all runs together).
    pub fn follower_passes(&self) -> u64 {
        self.runs.iter().map(|r| r.passes.count()).sum()
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
        for run in &self.runs {
            run.passes.stopped();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_all();
    }
}
