//! The system sampler: a background thread that records host (and optionally one process
//! tree's) metrics at a fixed interval into smdebug's system-metrics files.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

use super::error::{ProfilerError, Result};
use super::node::NodeId;

/// Shortest sampling interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest sampling interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// Default sampling interval (SageMaker Debugger's).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
/// Default length of the window one file covers.
pub const DEFAULT_ROTATION: Duration = Duration::from_secs(60);
/// Default time between republications of the file being written.
pub const DEFAULT_PUBLISH_INTERVAL: Duration = Duration::from_secs(5);

/// What the sampler records and where it says it came from.
///
/// ```
/// use std::time::Duration;
/// use smdebug_profiler::system::{NodeId, SamplerConfig};
///
/// let config = SamplerConfig::default()
///     .interval(Duration::from_millis(200))
///     .node(NodeId::algo(1));
/// assert!(config.validate().is_ok());
/// assert!(SamplerConfig::default().interval(Duration::from_millis(50)).validate().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct SamplerConfig {
    interval: Duration,
    node: NodeId,
    rotation: Duration,
    publish_interval: Duration,
    watch_pid: Option<u32>,
    gpu: bool,
}

impl Default for SamplerConfig {
    /// 500 ms interval, node from the host name, 60 s files republished every 5 s, no
    /// watched process, GPUs sampled when NVML finds any.
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            node: NodeId::from_hostname(),
            rotation: DEFAULT_ROTATION,
            publish_interval: DEFAULT_PUBLISH_INTERVAL,
            watch_pid: None,
            gpu: true,
        }
    }
}

impl SamplerConfig {
    /// Time between samples: 100 ms to 60 s.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The node id written into records and file names.
    pub fn node(mut self, node: NodeId) -> Self {
        self.node = node;
        self
    }

    /// Length of the window one file covers: whole seconds dividing an hour (1 s to 3600 s),
    /// so a file never straddles two hour folders.
    pub fn rotation(mut self, rotation: Duration) -> Self {
        self.rotation = rotation;
        self
    }

    /// How often the file being written is republished (from 100 ms up to the rotation).
    pub fn publish_interval(mut self, publish_interval: Duration) -> Self {
        self.publish_interval = publish_interval;
        self
    }

    /// Also record CPU %, RSS and process count of `pid` and its descendants.
    pub fn watch_pid(mut self, pid: u32) -> Self {
        self.watch_pid = Some(pid);
        self
    }

    /// Whether to load NVML and sample GPUs.
    pub fn gpu(mut self, enabled: bool) -> Self {
        self.gpu = enabled;
        self
    }

    /// The configured interval.
    pub fn sampling_interval(&self) -> Duration {
        self.interval
    }

    /// The configured node id.
    pub fn node_id(&self) -> &NodeId {
        &self.node
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&self.interval) {
            return Err(ProfilerError::InvalidInterval {
                interval: self.interval,
            });
        }
        let rotation = self.rotation.as_secs();
        if self.rotation.subsec_nanos() != 0 || rotation == 0 || 3600 % rotation != 0 {
            return Err(ProfilerError::InvalidConfig {
                setting: "rotation",
                reason: format!(
                    "{:?} is not a whole number of seconds dividing 3600",
                    self.rotation
                ),
            });
        }
        if self.publish_interval < MIN_INTERVAL || self.publish_interval > self.rotation {
            return Err(ProfilerError::InvalidConfig {
                setting: "publish_interval",
                reason: format!(
                    "{:?} is outside 100 ms ..= the rotation ({:?})",
                    self.publish_interval, self.rotation
                ),
            });
        }
        Ok(())
    }
}

/// What a sampler did over its run, returned by [`SamplerHandle::stop`].
#[derive(Clone, Debug, Default)]
pub struct SamplerReport {
    /// Samples taken (each yields one record per metric).
    pub samples: u64,
    /// Records in files storage acknowledged.
    pub records: u64,
    /// Records not stored: their file's last publication failed.
    pub records_lost: u64,
    /// Distinct files started.
    pub files: u64,
    /// Atomic publications (a file is republished while it grows).
    pub publications: u64,
    /// GPUs sampled (0 on a machine without GPUs or NVML).
    pub gpus: u32,
    /// CPU time the sampler thread consumed, when the OS reports it.
    pub thread_cpu_time: Option<Duration>,
    /// Wall time the sampler ran.
    pub wall_time: Duration,
    /// Failed publications; the records stay in memory and go out with the next one.
    pub write_errors: u64,
    /// The last publication error, if any.
    pub last_write_error: Option<String>,
    /// Counter files that could not be read (their metrics were left out of that sample).
    pub read_failures: u64,
}

impl SamplerReport {
    /// The sampler thread's CPU time over its wall time (0.01 = 1 % of one core).
    pub fn cpu_share(&self) -> Option<f64> {
        let wall = self.wall_time.as_secs_f64();
        self.thread_cpu_time
            .filter(|_| wall > 0.0)
            .map(|cpu| cpu.as_secs_f64() / wall)
    }
}

/// Starts system samplers.
pub struct SystemSampler;

impl SystemSampler {
    /// Starts sampling into the run `storage` (local disk or an object store) on a new thread.
    pub fn start(config: SamplerConfig, storage: Arc<dyn Storage>) -> Result<SamplerHandle> {
        config.validate()?;
        if !cfg!(target_os = "linux") {
            return Err(ProfilerError::UnsupportedPlatform);
        }
        let (stop_tx, stop_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("smdebug-sampler".to_owned())
            .spawn(move || run(config, storage, stop_rx))
            .map_err(|source| ProfilerError::Thread {
                thread: "system sampler",
                source,
            })?;
        Ok(SamplerHandle {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Starts sampling into the run directory `run_dir` on local disk.
    pub fn start_local(
        config: SamplerConfig,
        run_dir: impl Into<std::path::PathBuf>,
    ) -> Result<SamplerHandle> {
        Self::start(config, Arc::new(LocalStorage::new(run_dir)?))
    }
}

/// A running sampler. Dropping it stops the sampler and publishes the last file; call
/// [`SamplerHandle::stop`] to get the report.
pub struct SamplerHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<SamplerReport>>,
}

impl SamplerHandle {
    /// Takes a last sample, publishes the open file and returns what the sampler did.
    pub fn stop(mut self) -> Result<SamplerReport> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<SamplerReport> {
        if let Some(stop) = self.stop.take() {
            // The thread may already be gone; then there is nothing to tell it.
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().map_err(|_| ProfilerError::ThreadPanicked {
                thread: "system sampler",
            }),
            None => Ok(SamplerReport::default()),
        }
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

fn epoch_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(target_os = "linux")]
fn run(
    config: SamplerConfig,
    storage: Arc<dyn Storage>,
    stop: mpsc::Receiver<()>,
) -> SamplerReport {
    use super::gpu::GpuProbe;
    use super::probe::{HostProbe, current_thread_cpu_time};
    use super::writer::SystemFileWriter;

    let started = Instant::now();
    let cpu_at_start = current_thread_cpu_time();
    let gpu = if config.gpu {
        GpuProbe::load()
    } else {
        GpuProbe::disabled()
    };
    let node = config.node.as_str().to_owned();
    let mut probe = HostProbe::new(config.watch_pid);
    let mut writer = SystemFileWriter::new(
        storage,
        node.clone(),
        config.rotation,
        config.publish_interval,
    );
    let mut report = SamplerReport {
        gpus: gpu.device_count(),
        ..SamplerReport::default()
    };
    let record_error = |report: &mut SamplerReport, error: ProfilerError| {
        if report.write_errors == 0 {
            log::warn!("smdebug-profiler: system metrics not published: {error}; retrying");
        }
        report.write_errors += 1;
        report.last_write_error = Some(error.to_string());
    };
    let mut records = Vec::with_capacity(64);
    let mut last_sample = Instant::now();
    let mut next = last_sample + config.interval;
    loop {
        let stopping = match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => false,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
        };
        // A last sample on stop, unless one was taken just before: rates over a few
        // milliseconds would be mostly noise.
        if !stopping || last_sample.elapsed() >= config.interval / 4 {
            let timestamp = epoch_seconds();
            records.clear();
            probe.sample(&node, timestamp, &mut records);
            gpu.sample(&node, timestamp, &mut records);
            last_sample = Instant::now();
            report.samples += 1;
            if let Err(e) = writer.append(timestamp, &records) {
                record_error(&mut report, e);
            }
        }
        if stopping {
            break;
        }
        next += config.interval;
        let now = Instant::now();
        if next <= now {
            // Fell behind (suspended, overloaded): skip the missed ticks instead of bursting.
            next = now + config.interval;
        }
    }
    if let Err(e) = writer.publish_current() {
        record_error(&mut report, e);
    }
    report.records = writer.records_written;
    report.records_lost = writer.records_lost + writer.unstored();
    report.files = writer.files_started;
    report.publications = writer.publications;
    report.read_failures = probe.read_failures;
    report.wall_time = started.elapsed();
    report.thread_cpu_time = match (cpu_at_start, current_thread_cpu_time()) {
        (Some(start), Some(end)) => Some(end.saturating_sub(start)),
        _ => None,
    };
    report
}

#[cfg(not(target_os = "linux"))]
fn run(
    _config: SamplerConfig,
    _storage: Arc<dyn Storage>,
    _stop: mpsc::Receiver<()>,
) -> SamplerReport {
    SamplerReport::default()
}
