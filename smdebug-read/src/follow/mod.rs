//! The one incremental reader of a run's profiler data: system metrics, framework spans,
//! code-profile windows and Kineto traces.
//!
//! Offline, [`ProfilerFollower::read_to_end`] reads everything once. Following a live run,
//! each [`ProfilerFollower::poll`] reads only what is new: new files, and the appended bytes
//! of a system-metrics file whose window is still current (see `system.rs`). Trace files and
//! code-profile summaries are written once each and read once. Kineto traces, given by path,
//! are summarized again only when they change.
//!
//! A poll hands out an [`Increment`]: the new samples and spans in file order, the new
//! windows, the Kineto summaries when they changed, and the [`DataProblem`]s met. A consumer
//! keeps what it needs: the rule runner cuts increments into windows, the report and the
//! dashboard gather them in a [`ProfileData`](crate::profile::ProfileData), whose series and
//! spans come out the same whatever the order and batches they arrived in.
//!
//! ```no_run
//! use smdebug_read::follow::ProfilerFollower;
//! use smdebug_read::profile::ProfileData;
//!
//! let mut follower = ProfilerFollower::open("/tmp/run")?;
//! let mut data = ProfileData::default();
//! let increment = follower.read_to_end();
//! data.add_system_samples(&increment.samples);
//! data.add_spans(&increment.spans);
//! # Ok::<(), smdebug_read::ProfileError>(())
//! ```

mod follower;
mod kineto;
mod problems;
mod shared;
mod system;

pub use follower::{Increment, ProfilerFollower, TraceRead, merge_code_windows};
pub use kineto::KinetoTraces;
pub use problems::{DataArea, DataProblem, DataProblems, MAX_PROBLEMS};
pub use shared::{ITEMS_PER_READ, ProfilerSource, ProfilerSubscription};

#[cfg(test)]
mod tests;
