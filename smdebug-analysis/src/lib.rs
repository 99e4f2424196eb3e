//! # smdebug-analysis
//!
//! What the rules, the report and the dashboard compute from a run, in one place so that a
//! figure means the same wherever it is shown:
//!
//! - [`stats`]: the percentile every figure of the profiler rules and the report uses, and the
//!   quantile sketch for series too long to keep.
//! - [`downsample`]: the one min-max downsampler of long series, for the report's charts and
//!   the dashboard.
//! - [`digest`]: a run's profiler data aggregated as it is read ([`ProfileDigest`](digest::ProfileDigest)),
//!   in a size that does not grow with the run.
//! - [`scalars`]: a run's scalars summarized as they are read
//!   ([`ScalarSummaries`](scalars::ScalarSummaries)), in a size that does not grow with the run:
//!   the dashboard's charts and the report's curves.
//! - [`phases`]: the job's initialization, training loop and finalization
//!   ([`JobPhases`](phases::JobPhases)), one definition for the report and the dashboard.
//! - [`time`]: times and durations as every message, page and chart writes them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod digest;
pub mod downsample;
pub mod phases;
pub mod scalars;
pub mod stats;
pub mod time;
