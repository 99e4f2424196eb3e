//! One system-metric record, smdebug's vocabulary for it, and the file layout.

use serde::{Deserialize, Serialize};

/// One metric value of one host at one time: one JSON line of a system-metrics file.
///
/// Field names, order and units are those of SageMaker Debugger's system monitor, which
/// Python smdebug's `SystemMetricsReader` parses: `Timestamp` is seconds since the Unix epoch
/// (fractional), `Type`/`Name`/`Dimension` use the vocabulary in [`vocab`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemSample {
    /// `cpu`, `gpu`, `memory`, `i/o`, `network` or `process`.
    #[serde(rename = "Type")]
    pub metric_type: String,
    /// The device or metric (`cpu0`, `total`, `gpu1`, `MemoryUsedPercent`, ...). Optional in
    /// the format; read as empty when absent.
    #[serde(rename = "Name", default)]
    pub name: String,
    /// The measured quantity for devices (`CPUUtilization`), the traffic class for network
    /// (`Algorithm`), empty for memory and I/O.
    #[serde(rename = "Dimension")]
    pub dimension: String,
    /// The value, in the unit the name or dimension says.
    #[serde(rename = "Value")]
    pub value: f64,
    /// The host.
    #[serde(rename = "NodeId")]
    pub node_id: String,
    /// Seconds since the Unix epoch.
    #[serde(rename = "Timestamp")]
    pub timestamp: f64,
}

/// The series a [`SystemSample`] belongs to: `(node, type, name, dimension)`.
pub type SeriesKey = (String, String, String, String);

/// Rounds to two decimals, as SageMaker's system monitor writes percentages and rates.
pub fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

impl SystemSample {
    /// The timestamp in whole microseconds since the Unix epoch.
    pub fn timestamp_us(&self) -> u64 {
        timestamp_us(self.timestamp)
    }
}

/// Seconds since the Unix epoch in whole microseconds (0 for a time before the epoch).
pub fn timestamp_us(seconds: f64) -> u64 {
    (seconds * 1e6).round().max(0.0) as u64
}

/// smdebug's `Type`, `Name` and `Dimension` strings, and the ones this crate adds.
///
/// SageMaker's: CPU per core (`cpu`/`cpuN`/`CPUUtilization` and `I/OWaitPercentage`), GPU per
/// device (`gpu`/`gpuN`/`GPUUtilization` and `GPUMemoryUtilization` = memory used %), memory
/// (`memory`/`MemoryUsedPercent`), disk (`i/o`/`ReadThroughputInBytesPerSecond`,
/// `WriteThroughputInBytesPerSecond`, `IOPS`), network
/// (`network`/`ReceiveBytesPerSecond`, `TransmitBytesPerSecond` with dimension `Algorithm`).
///
/// Added here (Python's readers pass unknown names through): the CPU `total` over all cores
/// (for each CPU dimension, so per-timestamp averages over all names stay the core mean), GPU
/// memory bytes, power and temperature, host memory bytes, and the watched process tree.
pub mod vocab {
    /// Type of CPU records.
    pub const TYPE_CPU: &str = "cpu";
    /// Type of GPU records.
    pub const TYPE_GPU: &str = "gpu";
    /// Type of host-memory records.
    pub const TYPE_MEMORY: &str = "memory";
    /// Type of disk records.
    pub const TYPE_IO: &str = "i/o";
    /// Type of network records.
    pub const TYPE_NETWORK: &str = "network";
    /// Type of watched-process-tree records.
    pub const TYPE_PROCESS: &str = "process";

    /// Name of the all-cores CPU record.
    pub const CPU_TOTAL: &str = "total";
    /// Busy share of a core (or of all cores for `total`), percent.
    pub const CPU_UTILIZATION: &str = "CPUUtilization";
    /// Share of a core's time spent idle waiting for I/O, percent.
    pub const IO_WAIT_PERCENTAGE: &str = "I/OWaitPercentage";

    /// GPU busy share (NVML utilization rate), percent.
    pub const GPU_UTILIZATION: &str = "GPUUtilization";
    /// GPU memory used / total, percent.
    pub const GPU_MEMORY_UTILIZATION: &str = "GPUMemoryUtilization";
    /// GPU memory used, bytes.
    pub const GPU_MEMORY_USED_BYTES: &str = "GPUMemoryUsedBytes";
    /// GPU memory total, bytes.
    pub const GPU_MEMORY_TOTAL_BYTES: &str = "GPUMemoryTotalBytes";
    /// GPU power draw, watts.
    pub const GPU_POWER_WATTS: &str = "GPUPowerWatts";
    /// GPU core temperature, degrees Celsius.
    pub const GPU_TEMPERATURE_CELSIUS: &str = "GPUTemperatureCelsius";

    /// Host memory used (total − available) / total, percent.
    pub const MEMORY_USED_PERCENT: &str = "MemoryUsedPercent";
    /// Host memory used (total − available), bytes.
    pub const MEMORY_USED_BYTES: &str = "MemoryUsedBytes";
    /// Host memory total, bytes.
    pub const MEMORY_TOTAL_BYTES: &str = "MemoryTotalBytes";

    /// Bytes read from disks per second.
    pub const READ_BYTES_PER_SECOND: &str = "ReadThroughputInBytesPerSecond";
    /// Bytes written to disks per second.
    pub const WRITE_BYTES_PER_SECOND: &str = "WriteThroughputInBytesPerSecond";
    /// Completed disk reads and writes per second.
    pub const IOPS: &str = "IOPS";

    /// Bytes received per second over all interfaces (loopback included).
    pub const RECEIVE_BYTES_PER_SECOND: &str = "ReceiveBytesPerSecond";
    /// Bytes sent per second over all interfaces (loopback included).
    pub const TRANSMIT_BYTES_PER_SECOND: &str = "TransmitBytesPerSecond";
    /// Network dimension for the job's own traffic.
    pub const NETWORK_ALGORITHM: &str = "Algorithm";

    /// CPU time of the watched tree over wall time, percent of one core (can exceed 100).
    pub const PROCESS_CPU_UTILIZATION: &str = "ProcessCPUUtilization";
    /// Resident memory of the watched tree, bytes.
    pub const PROCESS_RSS_BYTES: &str = "ProcessRSSBytes";
    /// Number of live processes in the watched tree.
    pub const PROCESS_COUNT: &str = "ProcessCount";

    /// The unit of a metric's values: `%`, `% of one core`, `B/s`, `B`, `W`, `°C`, `ops/s`,
    /// `processes`, or `""` when the record's names do not say. CPU and GPU records carry the
    /// quantity in their dimension (their name is the device), the others in their name.
    pub fn unit(metric_type: &str, name: &str, dimension: &str) -> &'static str {
        let key = if metric_type == TYPE_CPU || metric_type == TYPE_GPU {
            dimension
        } else {
            name
        };
        if key == PROCESS_CPU_UTILIZATION {
            "% of one core"
        } else if key.contains("Percent") || key.contains("Utilization") {
            "%"
        } else if key.ends_with("BytesPerSecond") {
            "B/s"
        } else if key.ends_with("Bytes") {
            "B"
        } else if key.ends_with("Watts") {
            "W"
        } else if key.ends_with("Celsius") {
            "°C"
        } else if key == IOPS {
            "ops/s"
        } else if key == PROCESS_COUNT {
            "processes"
        } else {
            ""
        }
    }
}

/// The storage folder of system-metrics files.
pub const SYSTEM_PREFIX: &str = "system/incremental";

/// `YYYYMMDDHH` (UTC) of a time in seconds since the epoch: the folder smdebug files go in.
pub fn hour_folder(epoch_s: u64) -> String {
    i64::try_from(epoch_s)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.format("%Y%m%d%H").to_string())
        .unwrap_or_else(|| "1970010100".to_owned())
}

/// The key of the system-metrics file of `node` whose window starts at `start_s`:
/// `system/incremental/<YYYYMMDDHH>/<start_s>.<node>.json`.
pub fn system_file_key(start_s: u64, node: &str) -> String {
    format!(
        "{SYSTEM_PREFIX}/{}/{start_s:010}.{node}.json",
        hour_folder(start_s)
    )
}

/// A system-metrics file found in storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemFileName {
    /// The file's key.
    pub key: String,
    /// Start of the file's window, seconds since the epoch (from the name).
    pub start_s: u64,
    /// The node (from the name).
    pub node: String,
}

/// The longest window one system-metrics file covers: rotations divide an hour, and SageMaker
/// keeps each hour's files in a folder of its own.
pub const MAX_FILE_WINDOW_S: u64 = 3600;

/// How far outside its file's window a sample may lie (a clock step, the name's rounding).
const FILE_WINDOW_SLACK_S: u64 = 60;

impl SystemFileName {
    /// Whether a sample stamped `timestamp` (seconds since the epoch) can be in this file: at
    /// most an hour (`MAX_FILE_WINDOW_S`) after the start its name gives, with a minute's
    /// slack either side. A sample stamped 0 or 1e308 is not a measurement of this window;
    /// taken at its word it would move the job's start to 1970 or its end past the year 9999.
    pub fn holds(&self, timestamp: f64) -> bool {
        let first = self.start_s.saturating_sub(FILE_WINDOW_SLACK_S) as f64;
        let last = self
            .start_s
            .saturating_add(MAX_FILE_WINDOW_S + FILE_WINDOW_SLACK_S) as f64;
        (first..=last).contains(&timestamp)
    }

    /// Why a sample at `timestamp` cannot be in this file, or `None` when it can.
    pub fn misplaced(&self, timestamp: f64) -> Option<String> {
        (!self.holds(timestamp)).then(|| {
            format!(
                "Timestamp {timestamp} is not within the file's window (its name says it starts \
                 at {}; a file covers at most {MAX_FILE_WINDOW_S} s)",
                self.start_s
            )
        })
    }
}

/// Parses a key named `.../system/.../<digits>.<node>.json`; `None` for anything else.
pub fn parse_system_file_key(key: &str) -> Option<SystemFileName> {
    let (folder, file) = key.rsplit_once('/').unwrap_or(("", key));
    if !(folder == "system"
        || folder.starts_with("system/")
        || folder.contains("/system/")
        || folder.ends_with("/system"))
    {
        return None;
    }
    let stem = file.strip_suffix(".json")?;
    let (start, node) = stem.split_once('.')?;
    if start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) || node.is_empty() {
        return None;
    }
    Some(SystemFileName {
        key: key.to_owned(),
        start_s: start.parse().ok()?,
        node: node.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_serializes_with_smdebug_field_names_in_order() {
        let sample = SystemSample {
            metric_type: "cpu".into(),
            name: "cpu0".into(),
            dimension: "CPUUtilization".into(),
            value: 1.5,
            node_id: "algo-1".into(),
            timestamp: 1591748109.25,
        };
        assert_eq!(
            serde_json::to_string(&sample).unwrap(),
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1.5,"NodeId":"algo-1","Timestamp":1591748109.25}"#
        );
        assert_eq!(sample.timestamp_us(), 1_591_748_109_250_000);
    }

    #[test]
    fn file_keys_round_trip() {
        let key = system_file_key(1591748100, "algo-1");
        assert_eq!(key, "system/incremental/2020061000/1591748100.algo-1.json");
        let parsed = parse_system_file_key(&key).unwrap();
        assert_eq!(
            (parsed.start_s, parsed.node.as_str()),
            (1591748100, "algo-1")
        );
        assert!(parse_system_file_key("system/incremental/x/abc.algo-1.json").is_none());
        assert!(parse_system_file_key("framework/pevents/x/1.algo-1.json").is_none());
    }
}
