//! Host counters from Linux procfs (`/proc/stat`, `/proc/meminfo`, `/proc/diskstats`,
//! `/proc/net/dev`, `/proc/<pid>/stat`) turned into per-interval records.
//!
//! Counters are cumulative, so every figure except memory is the difference between two
//! snapshots divided by the time between them (measured, not the nominal interval).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use procfs::net::InterfaceDeviceStatus;
use procfs::{DiskStats, FromRead, FromReadSI, KernelStats, Meminfo, WithCurrentSystemInfo};

use smdebug_format::system::round2;
use smdebug_format::system::{SystemSample, vocab};

/// How often the watched tree's membership is rediscovered by scanning every process; between
/// scans only known members are read, which keeps a 100 ms interval cheap.
const TREE_RESCAN: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Default)]
struct CpuTicks {
    busy: u64,
    iowait: u64,
    total: u64,
}

impl CpuTicks {
    fn of(t: &procfs::CpuTime) -> Self {
        let iowait = t.iowait.unwrap_or(0);
        // Guest time is already counted in user/nice, so it is left out of the total.
        let total = t.user
            + t.nice
            + t.system
            + t.idle
            + iowait
            + t.irq.unwrap_or(0)
            + t.softirq.unwrap_or(0)
            + t.steal.unwrap_or(0);
        Self {
            busy: total - t.idle - iowait,
            iowait,
            total,
        }
    }

    /// Busy and I/O-wait percentages between `self` (earlier) and `now`.
    fn percent_until(&self, now: &CpuTicks) -> Option<(f64, f64)> {
        let total = now.total.checked_sub(self.total)?;
        if total == 0 {
            return None;
        }
        let busy = now.busy.saturating_sub(self.busy) as f64 * 100.0 / total as f64;
        let iowait = now.iowait.saturating_sub(self.iowait) as f64 * 100.0 / total as f64;
        Some((busy.min(100.0), iowait.min(100.0)))
    }
}

#[derive(Clone, Copy, Default)]
struct TreeTotals {
    cpu_ticks: u64,
    rss_bytes: u64,
    count: u64,
}

struct Snapshot {
    at: Instant,
    cpu_total: Option<CpuTicks>,
    cpu_cores: Vec<CpuTicks>,
    disk: Option<(u64, u64, u64)>,
    net: Option<(u64, u64)>,
    tree: Option<TreeTotals>,
}

/// A procfs file kept open and read again from its start at each sample: two system calls
/// (the read and the one that finds its end) where opening it by name takes four, on a thread
/// that wakes ten times a second. The kernel writes the file anew for a read from its start.
struct ProcFile {
    path: &'static str,
    file: Option<std::fs::File>,
}

impl ProcFile {
    const fn new(path: &'static str) -> ProcFile {
        ProcFile { path, file: None }
    }

    /// The file's whole text now, into `buf`; opened (again) when it is not open.
    fn read<'b>(&mut self, buf: &'b mut Vec<u8>) -> std::io::Result<&'b [u8]> {
        use std::os::unix::fs::FileExt;
        let file = match &mut self.file {
            Some(file) => file,
            none => none.insert(std::fs::File::open(self.path)?),
        };
        let mut len = 0;
        let read = loop {
            if len == buf.len() {
                buf.resize((buf.len() * 2).max(16 << 10), 0);
            }
            match file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break Ok(()),
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = read {
            // Opened by name at the next sample.
            self.file = None;
            return Err(e);
        }
        Ok(&buf[..len])
    }
}

/// The procfs files of the host's counters, kept open.
struct HostFiles {
    stat: ProcFile,
    diskstats: ProcFile,
    net_dev: ProcFile,
    meminfo: ProcFile,
    buf: Vec<u8>,
}

impl HostFiles {
    fn new() -> HostFiles {
        HostFiles {
            stat: ProcFile::new("/proc/stat"),
            diskstats: ProcFile::new("/proc/diskstats"),
            net_dev: ProcFile::new("/proc/net/dev"),
            meminfo: ProcFile::new("/proc/meminfo"),
            buf: Vec::new(),
        }
    }

    fn kernel_stats(&mut self) -> procfs::ProcResult<KernelStats> {
        let text = self.stat.read(&mut self.buf)?;
        KernelStats::from_read(text, procfs::current_system_info())
    }

    fn disk_stats(&mut self) -> procfs::ProcResult<DiskStats> {
        <DiskStats as FromRead>::from_read(self.diskstats.read(&mut self.buf)?)
    }

    fn net_dev(&mut self) -> procfs::ProcResult<InterfaceDeviceStatus> {
        <InterfaceDeviceStatus as FromRead>::from_read(self.net_dev.read(&mut self.buf)?)
    }

    fn meminfo(&mut self) -> procfs::ProcResult<Meminfo> {
        <Meminfo as FromRead>::from_read(self.meminfo.read(&mut self.buf)?)
    }
}

/// Reads host counters and (optionally) one process tree.
pub struct HostProbe {
    files: HostFiles,
    disks: Option<HashSet<String>>,
    watch: Option<TreeWatch>,
    previous: Snapshot,
    ticks_per_second: f64,
    pub(crate) read_failures: u64,
}

struct TreeWatch {
    root: i32,
    members: Vec<i32>,
    last_scan: Option<Instant>,
}

impl HostProbe {
    /// Takes the first snapshot; records start with the next one.
    pub fn new(watch_pid: Option<u32>) -> Self {
        let mut probe = Self {
            files: HostFiles::new(),
            disks: physical_disks(),
            watch: watch_pid
                .and_then(|pid| i32::try_from(pid).ok())
                .map(|root| TreeWatch {
                    root,
                    members: vec![root],
                    last_scan: None,
                }),
            previous: Snapshot {
                at: Instant::now(),
                cpu_total: None,
                cpu_cores: Vec::new(),
                disk: None,
                net: None,
                tree: None,
            },
            ticks_per_second: procfs::ticks_per_second() as f64,
            read_failures: 0,
        };
        probe.previous = probe.snapshot();
        probe
    }

    fn snapshot(&mut self) -> Snapshot {
        let at = Instant::now();
        let (cpu_total, cpu_cores) = match self.files.kernel_stats() {
            Ok(stats) => (
                Some(CpuTicks::of(&stats.total)),
                stats.cpu_time.iter().map(CpuTicks::of).collect(),
            ),
            Err(_) => {
                self.read_failures += 1;
                (None, Vec::new())
            }
        };
        let disk = match self.files.disk_stats() {
            Ok(stats) => Some(stats.0.iter().filter(|d| self.counts_disk(&d.name)).fold(
                (0u64, 0u64, 0u64),
                |(read, written, ios), d| {
                    (
                        read + d.sectors_read * 512,
                        written + d.sectors_written * 512,
                        ios + d.reads + d.writes,
                    )
                },
            )),
            Err(_) => {
                self.read_failures += 1;
                None
            }
        };
        let net = match self.files.net_dev() {
            Ok(devices) => Some(devices.0.values().fold((0u64, 0u64), |(rx, tx), d| {
                (rx + d.recv_bytes, tx + d.sent_bytes)
            })),
            Err(_) => {
                self.read_failures += 1;
                None
            }
        };
        let tree = self.watch.as_mut().and_then(|watch| watch.measure(at));
        Snapshot {
            at,
            cpu_total,
            cpu_cores,
            disk,
            net,
            tree,
        }
    }

    fn counts_disk(&self, name: &str) -> bool {
        match &self.disks {
            Some(disks) => disks.contains(name),
            None => !["loop", "ram", "zram", "dm-", "md", "sr"]
                .iter()
                .any(|prefix| name.starts_with(prefix)),
        }
    }

    /// Takes a snapshot and appends the records for the time since the previous one.
    pub fn sample(&mut self, node: &str, timestamp: f64, out: &mut Vec<SystemSample>) {
        let now = self.snapshot();
        let seconds = now.at.duration_since(self.previous.at).as_secs_f64();
        let mut records = Records {
            node,
            timestamp,
            out,
        };
        cpu_records(&self.previous, &now, &mut records);
        match self.files.meminfo() {
            Ok(mem) => memory_records(&mem, &mut records),
            Err(_) => self.read_failures += 1,
        }
        if seconds > 0.0 {
            rate_records(&self.previous, &now, seconds, &mut records);
            if let (Some(watch), Some(after)) = (&self.watch, now.tree) {
                let cpu_seconds = self.previous.tree.map(|before| {
                    after.cpu_ticks.saturating_sub(before.cpu_ticks) as f64 / self.ticks_per_second
                });
                process_records(watch.root, after, cpu_seconds, seconds, &mut records);
            }
        }
        self.previous = now;
    }
}

/// The records of one node at one time, appended to `out`.
struct Records<'a> {
    node: &'a str,
    timestamp: f64,
    out: &'a mut Vec<SystemSample>,
}

impl Records<'_> {
    fn push(&mut self, metric_type: &str, name: &str, dimension: &str, value: f64) {
        self.out.push(SystemSample {
            metric_type: metric_type.to_owned(),
            name: name.to_owned(),
            dimension: dimension.to_owned(),
            value,
            node_id: self.node.to_owned(),
            timestamp: self.timestamp,
        });
    }
}

/// Each core's and the total's busy and I/O-wait percentages between two snapshots.
fn cpu_records(previous: &Snapshot, now: &Snapshot, records: &mut Records) {
    let mut cpu = |name: &str, before: &CpuTicks, after: &CpuTicks| {
        if let Some((busy, iowait)) = before.percent_until(after) {
            records.push(vocab::TYPE_CPU, name, vocab::CPU_UTILIZATION, round2(busy));
            records.push(
                vocab::TYPE_CPU,
                name,
                vocab::IO_WAIT_PERCENTAGE,
                round2(iowait),
            );
        }
    };
    for (index, (before, after)) in previous.cpu_cores.iter().zip(&now.cpu_cores).enumerate() {
        cpu(&format!("cpu{index}"), before, after);
    }
    if let (Some(before), Some(after)) = (&previous.cpu_total, &now.cpu_total) {
        cpu(vocab::CPU_TOTAL, before, after);
    }
}

/// Memory used (percent and bytes) and the total, now.
fn memory_records(mem: &Meminfo, records: &mut Records) {
    let total = mem.mem_total;
    // Kernels before 3.14 lack MemAvailable; free + buffers + cache approximates it.
    let available = mem
        .mem_available
        .unwrap_or(mem.mem_free + mem.buffers + mem.cached);
    let used = total.saturating_sub(available);
    if total > 0 {
        let percent = used as f64 * 100.0 / total as f64;
        records.push(
            vocab::TYPE_MEMORY,
            vocab::MEMORY_USED_PERCENT,
            "",
            round2(percent),
        );
    }
    records.push(
        vocab::TYPE_MEMORY,
        vocab::MEMORY_USED_BYTES,
        "",
        used as f64,
    );
    records.push(
        vocab::TYPE_MEMORY,
        vocab::MEMORY_TOTAL_BYTES,
        "",
        total as f64,
    );
}

/// Disk and network rates over the `seconds` between two snapshots.
fn rate_records(previous: &Snapshot, now: &Snapshot, seconds: f64, records: &mut Records) {
    let rate = |before: u64, after: u64| round2(after.saturating_sub(before) as f64 / seconds);
    if let (Some(before), Some(after)) = (previous.disk, now.disk) {
        records.push(
            vocab::TYPE_IO,
            vocab::READ_BYTES_PER_SECOND,
            "",
            rate(before.0, after.0),
        );
        records.push(
            vocab::TYPE_IO,
            vocab::WRITE_BYTES_PER_SECOND,
            "",
            rate(before.1, after.1),
        );
        records.push(vocab::TYPE_IO, vocab::IOPS, "", rate(before.2, after.2));
    }
    if let (Some(before), Some(after)) = (previous.net, now.net) {
        records.push(
            vocab::TYPE_NETWORK,
            vocab::RECEIVE_BYTES_PER_SECOND,
            vocab::NETWORK_ALGORITHM,
            rate(before.0, after.0),
        );
        records.push(
            vocab::TYPE_NETWORK,
            vocab::TRANSMIT_BYTES_PER_SECOND,
            vocab::NETWORK_ALGORITHM,
            rate(before.1, after.1),
        );
    }
}

/// The watched process tree rooted at `root`: its CPU use over the `seconds` between two
/// snapshots (`cpu_seconds` of it, when the previous one measured the tree), RSS and count.
fn process_records(
    root: i32,
    after: TreeTotals,
    cpu_seconds: Option<f64>,
    seconds: f64,
    records: &mut Records,
) {
    let name = format!("pid{root}");
    if let Some(cpu_seconds) = cpu_seconds {
        records.push(
            vocab::TYPE_PROCESS,
            &name,
            vocab::PROCESS_CPU_UTILIZATION,
            round2(cpu_seconds * 100.0 / seconds),
        );
    }
    records.push(
        vocab::TYPE_PROCESS,
        &name,
        vocab::PROCESS_RSS_BYTES,
        after.rss_bytes as f64,
    );
    records.push(
        vocab::TYPE_PROCESS,
        &name,
        vocab::PROCESS_COUNT,
        after.count as f64,
    );
}

impl TreeWatch {
    /// Sums CPU time and RSS over the root and its descendants; `None` once the root is gone.
    ///
    /// CPU time per member is `utime + stime + cutime + cstime`: a member that exits and is
    /// reaped hands its time to its parent's `cutime`, so the sum stays continuous as long as
    /// the parent is in the tree.
    fn measure(&mut self, now: Instant) -> Option<TreeTotals> {
        if self
            .last_scan
            .is_none_or(|t| now.duration_since(t) >= TREE_RESCAN)
        {
            self.rescan();
            self.last_scan = Some(now);
        }
        let mut totals = TreeTotals::default();
        let mut root_alive = false;
        for &pid in &self.members {
            let Ok(stat) = procfs::process::Process::new(pid).and_then(|p| p.stat()) else {
                continue;
            };
            // A zombie root has exited; its numbers no longer change.
            if pid == self.root {
                root_alive = stat.state != 'Z' && stat.state != 'X';
            }
            totals.cpu_ticks += stat.utime
                + stat.stime
                + u64::try_from(stat.cutime).unwrap_or(0)
                + u64::try_from(stat.cstime).unwrap_or(0);
            totals.rss_bytes += stat.rss_bytes().get();
            totals.count += 1;
        }
        root_alive.then_some(totals)
    }

    fn rescan(&mut self) {
        let Ok(all) = procfs::process::all_processes() else {
            return;
        };
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for process in all.flatten() {
            if let Ok(stat) = process.stat() {
                children.entry(stat.ppid).or_default().push(stat.pid);
            }
        }
        let mut members = vec![self.root];
        let mut seen: HashSet<i32> = HashSet::from([self.root]);
        let mut next = 0;
        while next < members.len() {
            for &kid in children.get(&members[next]).into_iter().flatten() {
                if seen.insert(kid) {
                    members.push(kid);
                }
            }
            next += 1;
        }
        self.members = members;
    }
}

/// Whole physical disks: `/sys/block` entries backed by a device. Partitions (not listed in
/// `/sys/block`), device-mapper and md volumes (no `device` link; their I/O is counted on the
/// disks beneath), loop, RAM and zram devices are left out so no byte is counted twice.
/// `None` when `/sys/block` cannot be read.
fn physical_disks() -> Option<HashSet<String>> {
    let entries = std::fs::read_dir("/sys/block").ok()?;
    Some(
        entries
            .flatten()
            .filter(|e| e.path().join("device").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    )
}

/// CPU time consumed so far by the calling thread, from `/proc/thread-self/schedstat`
/// (nanosecond resolution), falling back to the tick-resolution `stat` of the same thread.
pub(crate) fn current_thread_cpu_time() -> Option<Duration> {
    if let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat")
        && let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
    {
        return Some(Duration::from_nanos(ns));
    }
    let text = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / procfs::ticks_per_second() as f64,
    ))
}
