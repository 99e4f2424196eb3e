//! What a code profiler samples and how it names its files.

use std::time::Duration;

use crate::system::{NodeId, ProfilerError, Result};

/// Default sampling frequency: 99 samples per CPU second (not 100, so the timer does not run in
/// lockstep with other periodic work).
pub const DEFAULT_FREQUENCY_HZ: u32 = 99;
/// Default number of functions kept in each of a summary's top lists.
pub const DEFAULT_TOP_FUNCTIONS: usize = 25;
/// Default longest wait for the writer thread when the profiler is finished or dropped.
pub const DEFAULT_FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// How a [`CodeProfiler`](super::CodeProfiler) samples and names its files.
#[derive(Clone, Debug)]
pub struct CodeProfileConfig {
    pub(crate) node: NodeId,
    pub(crate) worker: u32,
    pub(crate) frequency_hz: u32,
    pub(crate) top_functions: usize,
    pub(crate) finish_timeout: Duration,
    pub(crate) warm_up: bool,
}

impl Default for CodeProfileConfig {
    /// Node from the host name, worker 0, 99 Hz, 25 functions per top list, 30 s to finish,
    /// the sampler readied at start.
    fn default() -> Self {
        Self {
            node: NodeId::from_hostname(),
            worker: 0,
            frequency_hz: DEFAULT_FREQUENCY_HZ,
            top_functions: DEFAULT_TOP_FUNCTIONS,
            finish_timeout: DEFAULT_FINISH_TIMEOUT,
            warm_up: true,
        }
    }
}

impl CodeProfileConfig {
    /// The node id written into file names.
    pub fn node(mut self, node: NodeId) -> Self {
        self.node = node;
        self
    }

    /// The worker (rank) of this process.
    pub fn worker(mut self, worker: u32) -> Self {
        self.worker = worker;
        self
    }

    /// Samples per second of the process's CPU time (1 to 1000 Hz).
    pub fn frequency_hz(mut self, hz: u32) -> Self {
        self.frequency_hz = hz;
        self
    }

    /// Functions kept in each of a summary's top lists (1 to 1000).
    pub fn top_functions(mut self, n: usize) -> Self {
        self.top_functions = n;
        self
    }

    /// Longest wait for pending windows to be written when the profiler is finished or dropped
    /// (100 ms to 1 h); past it the writer thread is left to finish on its own.
    pub fn finish_timeout(mut self, timeout: Duration) -> Self {
        self.finish_timeout = timeout;
        self
    }

    /// Whether [`CodeProfiler::start`](super::CodeProfiler::start) readies pprof-rs's sampler
    /// at once (default: yes), so that the first window is sampled from its first instant.
    /// Readying it allocates pprof-rs's sample table, 45 MB or more that the process keeps for its
    /// life; a profiler that may never open a window (one started in case a configuration file
    /// asks for a window later) is started without, and readied by
    /// [`CodeProfiler::warm_up`](super::CodeProfiler::warm_up) or by its first window.
    pub fn warm_up(mut self, on: bool) -> Self {
        self.warm_up = on;
        self
    }

    /// The sampling frequency.
    pub fn frequency(&self) -> u32 {
        self.frequency_hz
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |setting, reason: String| Err(ProfilerError::InvalidConfig { setting, reason });
        if !(1..=1000).contains(&self.frequency_hz) {
            return invalid(
                "frequency_hz",
                format!("{} is outside 1 ..= 1000", self.frequency_hz),
            );
        }
        if !(1..=1000).contains(&self.top_functions) {
            return invalid(
                "top_functions",
                format!("{} is outside 1 ..= 1000", self.top_functions),
            );
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&self.finish_timeout)
        {
            return invalid(
                "finish_timeout",
                format!("{:?} is outside 100 ms ..= 1 h", self.finish_timeout),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_outside_their_ranges_are_refused_by_name() {
        assert!(CodeProfileConfig::default().validate().is_ok());
        for (config, setting) in [
            (CodeProfileConfig::default().frequency_hz(0), "frequency_hz"),
            (
                CodeProfileConfig::default().frequency_hz(1001),
                "frequency_hz",
            ),
            (
                CodeProfileConfig::default().top_functions(0),
                "top_functions",
            ),
            (
                CodeProfileConfig::default().finish_timeout(Duration::from_millis(10)),
                "finish_timeout",
            ),
        ] {
            match config.validate() {
                Err(ProfilerError::InvalidConfig { setting: s, .. }) => assert_eq!(s, setting),
                other => panic!("{setting}: {other:?}"),
            }
        }
    }
}
