//! # smdebug-serve
//!
//! `smdebug serve`: a live dashboard of one or more runs, local or in an object store, served
//! over HTTP by the CLI.
//!
//! ```no_run
//! use smdebug_serve::{ServeOptions, Server};
//!
//! let server = Server::start(ServeOptions::new(vec!["/tmp/run".into()]))?;
//! println!("{}", server.url()); // http://127.0.0.1:<port>/
//! server.wait();
//! # Ok::<(), smdebug_serve::ServeError>(())
//! ```
//!
//! **Data.** Each run is followed by a thread of its own (`run` module): system metrics,
//! framework spans and code-profile windows through smdebug-profiler's `ProfilerFollower` (the
//! one incremental reader the rule runner and the report use too) into its `ProfileData`; steps, tensor names and scalar values in bulk from the index
//! files through smdebug-io's format layer, each new index file and its event file read once
//! and scalars kept as compact columns (16 bytes a value); rule statuses from the summary a
//! rule runner writes into the run; the end marker. Whole tensors (distributions, 2-D views)
//! are read through smdebug-io's `Trial`, opened when a view first asks for one. Only what is
//! new is read on each pass (every 200 ms by default). A run may not exist yet, be still
//! written, or have ended.
//!
//! **API** (JSON; `/api/…` needs the token when there is one):
//!
//! ```text
//! GET  /api/runs                          the runs and their live state
//! GET  /api/events                        server-sent events: `runs` on every change
//! GET  /api/runs/{id}/overview            job summary, per-node statistics, rule statuses
//! GET  /api/runs/{id}/system?from&to&points   timelines and the per-core/per-GPU heatmap
//! GET  /api/runs/{id}/spans?from&to       framework spans inside a window
//! GET  /api/runs/{id}/steps?from&to&last  step durations, outliers, histogram, phases
//! GET  /api/runs/{id}/scalars?regex&from&to   scalars per mode (x = step)
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
//! writes run data with `textContent` only.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod api;
mod code;
mod conn;
pub mod downsample;
mod guard;
mod identity;
mod pool;
mod report;
mod run;
mod server;
mod tensors;

pub use conn::{ConnectionLimits, ConnectionStats};
pub use server::{ServeError, ServeOptions, Server, expand_runs, expand_runs_with};
