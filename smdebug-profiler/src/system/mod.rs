//! The system sampler: host CPU (per core and total, busy and I/O-wait), memory, disk and
//! network throughput, per-GPU utilization, memory, power and temperature (NVML), and
//! optionally one process tree, written in SageMaker Debugger's system-metrics layout:
//!
//! ```text
//! <run>/system/incremental/<YYYYMMDDHH>/<window_start_s>.<node>.json    JSON lines
//! {"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":12.5,"NodeId":"algo-1","Timestamp":1704110400.5}
//! ```
//!
//! Python smdebug's `LocalSystemMetricsReader` reads these files when the node id is
//! `algo-<n>` ([`NodeId::algo`]); smdebug-read's profiler reader reads any node id.
//!
//! ```no_run
//! use std::time::Duration;
//! use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
//!
//! let sampler = SystemSampler::start_local(
//!     SamplerConfig::default().interval(Duration::from_millis(500)).node(NodeId::algo(1)),
//!     "/tmp/run",
//! )?;
//! // ... train ...
//! let report = sampler.stop()?;
//! println!("{} samples, sampler used {:?} of CPU", report.samples, report.thread_cpu_time);
//! # Ok::<(), smdebug_profiler::ProfilerError>(())
//! ```

mod error;
mod gpu;
mod node;
#[cfg(target_os = "linux")]
pub(crate) mod probe;
mod profile;
mod sampler;
#[cfg(target_os = "linux")]
mod writer;

pub use error::{ProfilerError, Result};
pub use node::NodeId;
pub use profile::{ProfiledCommand, profile_command};
pub use sampler::{
    DEFAULT_INTERVAL, DEFAULT_PUBLISH_INTERVAL, DEFAULT_ROTATION, MAX_INTERVAL, MIN_INTERVAL,
    SamplerConfig, SamplerHandle, SamplerReport, SystemSampler,
};
