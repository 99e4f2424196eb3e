//! # smdebug-serve
//!
//! `smdebug serve`: a live dashboard of one or more runs, local or in an object store, served
//! over HTTP by the CLI.
//!
//! ```no_run
//! use smdebug_serve::{ServeOptions, Server};
//!
//! let server = Server::start(ServeOptions::new(["/tmp/run"]))?;
//! println!("{}", server.url()); // http://127.0.0.1:<port>/
//! server.wait();
//! # Ok::<(), smdebug_serve::ServeError>(())
//! ```
//!
//! **Data.** Each run is followed (`run` module, passes scheduled by the `pool` module): system metrics,
//! framework spans and code-profile windows through smdebug-read's `ProfilerFollower` (the
//! one incremental reader the rule runner and the report use too), aggregated as read in a size
//! that does not grow with the run (`profile_model` module: smdebug-analysis's `ProfileDigest`
//! with lines of at most 1,024 slices a series, an index of the trace files read, the slowest
//! step spans; a window finer than the lines, and the spans a view lists, read again from the
//! run's files); steps,
//! tensor names and scalar values through smdebug-read's `TensorFollower` (the `Trial`'s listing,
//! step completeness and checks; each new index file and its event file read once, scalars
//! kept as fixed-size summaries: per tensor and mode its steps as arithmetic runs and at most
//! 1,024 buckets of count, sum, first, last, lowest and highest value, a window finer than the
//! buckets read again from the run's files (smdebug-analysis's `scalars`, this crate's `downsample` module)); rule statuses from the summary a
//! rule runner writes into the run; the end marker. Whole tensors (distributions, 2-D views)
//! are read through smdebug-read's `Trial`, opened when a view first asks for one. Only what is
//! new is read on each pass (every 200 ms by default). A run may not exist yet, be still
//! written, or have ended.
//!
//! **API** (JSON; `/api/…` needs the token when there is one):
//!
//! ```text
//! GET  /api/runs                          the runs and their live state
//! GET  /api/events                        server-sent events (gzip when accepted): `runs`,
//!                                         the runs' state and per run what is new since
//!                                         the previous push to this page (at most every 500 ms)
//! GET  /api/runs/{id}/overview            job summary, per-node statistics, rule statuses
//! GET  /api/runs/{id}/headlines?points&loss_width&loss_since&…   the summary's loss and
//!                                         accuracy charts (min-max by step; the last buckets only)
//! GET  /api/runs/{id}/system?from&to&points&offset&limit   a page of timelines (64 by
//!                                         default, 256 at most) and the per-core/per-GPU
//!                                         heatmap (256 rows at most: bands of neighbours)
//! GET  /api/runs/{id}/spans?from&to&sort&order   framework spans inside a window (time
//!                                         order, or sorted by a column)
//! GET  /api/runs/{id}/steps?from&to&last&slowest  step durations, outliers, log-binned
//!                                         histogram, phases, the slowest steps
//! GET  /api/runs/{id}/scalars?regex&from&to&smoothing   scalars per mode (x = step; each point's
//!                                         wall time), from the buckets or, zoomed in, the files
//! GET  /api/runs/{id}/tensor?name&steps   reductions and distribution over steps
//! GET  /api/runs/{id}/tensor2d?name&step  a tensor at one step as a 2-D grid
//! GET  /api/kineto                        Kineto summaries of the `--trace` files
//! GET  /api/runs/{id}/code                code-profile windows: top functions by self and total samples
//! GET  /api/runs/{id}/code/{window}/flamegraph.svg   a window's flame graph (sandboxed, no script)
//! GET  /api/runs/{id}/code/{window}/profile.pb.gz    a window's pprof profile (a download)
//! GET  /api/runs/{id}/report              the profiling report (HTML), generated now
//! POST /api/runs/{id}/stop                {"confirm": true, "reason": "…"}: a stop request
//! ```
//!
//! Times are seconds since the epoch. No series is ever sent more than
//! [`downsample::MAX_POINTS`] points: min-max decimation over the requested window, so a
//! zoomed window gets finer detail.
//!
//! **Security.** Binds 127.0.0.1 unless told otherwise; then a random token is required
//! (`?token=` or the `x-smdebug-token` header) and printed with the URL. On loopback without a
//! token, requests must name a loopback `Host` (no DNS rebinding). Every response carries a
//! strict Content-Security-Policy (`default-src 'none'`, scripts and styles from the server
//! only, `connect-src 'self'`); the page loads nothing from elsewhere (uPlot is embedded) and
//! writes run data with `textContent` only. A request whose `Origin` is not this server, or
//! that a browser says another site started (`Sec-Fetch-Site`), is refused (403), GET
//! included. One report is built at a time; another request meanwhile gets 429.
//!
//! **Staying up** (`conn` module, [`ConnectionLimits`]): a header-read timeout, idle
//! connections closed, a cap on connections and on connections without the token per client
//! address; when full, the oldest idle connection without the token is closed first. Event
//! streams have a budget below the connection cap (per client address and in all, the oldest
//! stream closed first), so that streams held by another process never leave a person's page
//! without room; a request's body must arrive within a timeout (408), with or without the
//! token. Runs are followed by a few threads whatever their number, and ended runs are looked at
//! less and less often while nothing changes, and once settled without listing or reading
//! their data folders.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod api;
mod assets;
mod code;
mod compress;
mod conn;
mod delta;
mod diagnosis;
pub mod downsample;
mod expand;
mod guard;
mod identity;
mod journal;
mod liveness;
mod natural;
mod non_finite;
mod overview;
mod page;
mod pool;
mod processes;
mod profile_model;
mod push;
mod push_views;
mod report;
mod routes;
mod run;
mod run_data;
mod schema;
mod series;
mod server;
mod state;
mod system;
mod tensor_views;
mod verdicts;
mod views;

pub use conn::{Closed, ConnectionLimits, ConnectionStats};
pub use expand::{expand_runs, expand_runs_with};
pub use report::ServedScalars;
pub use schema::api_schema;
pub use server::{
    Handover, RunStorage, ServeError, ServeOptions, Server, SharedProfiler, SharedTensors,
};
