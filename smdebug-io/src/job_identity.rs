//! This process as an identity file describes it ([`identity_here`]), and whether the process
//! an identity file names still runs ([`Liveness`]): the part of [`crate::jobs`] a refusal
//! ([`crate::Error::Refused`]) needs, apart from it so that the error type and the claim do not
//! import each other. The file's layout is smdebug-format's (`smdebug_format::jobs`).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use smdebug_format::jobs::{JobIdentity, utc};

/// The variable a launcher sets to the same value in every process of one job.
pub const JOB_ID_ENV: &str = "SMDEBUG_JOB_ID";

/// When this process started, seconds since the epoch, and how that was found: on Linux the
/// kernel's start time of the process (`/proc/self/stat` `starttime`, placed in wall time
/// through `/proc/uptime`, to 10 ms), or when its program was written if that is later (a
/// program `exec`'d by a process that built it, as `cargo run` does); elsewhere, or when /proc cannot be read, the first time
/// smdebug asked (the first session's start). Found once, the first time it is asked: every reader of it in the process (the identity
/// file, the session's `Process` span) has the same time.
pub fn process_started() -> (f64, ProcessStartSource) {
    static STARTED: std::sync::OnceLock<(f64, ProcessStartSource)> = std::sync::OnceLock::new();
    *STARTED.get_or_init(|| {
        let first_use = now_s();
        match kernel_process_start() {
            Some(started) => (started.min(first_use), ProcessStartSource::Kernel),
            None => (first_use, ProcessStartSource::FirstUse),
        }
    })
}

/// Where [`process_started`] found the process's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessStartSource {
    /// The kernel's start time of the process (Linux).
    Kernel,
    /// The first time smdebug was used in the process.
    FirstUse,
}

/// The kernel's start time of this process, but never before its program file was last
/// written: a process that replaced its program (`exec`) keeps the start time of the process it
/// was, and `cargo run` builds the program in its own process and then becomes it, so the
/// kernel's time alone counted the build (2 min 15 s of a demo that trained for a second). A
/// program written after the process started was run by an `exec` since: it started then at
/// the earliest.
#[cfg(target_os = "linux")]
fn kernel_process_start() -> Option<f64> {
    use procfs::Current;
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let uptime = procfs::Uptime::current().ok()?.uptime;
    let now = now_s();
    let since_boot = stat.starttime as f64 / procfs::ticks_per_second() as f64;
    let age = uptime - since_boot;
    let started = (age >= 0.0).then_some(now - age)?;
    let program_written = std::fs::metadata("/proc/self/exe")
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    Some(match program_written {
        Some(written) if written > started && written <= now => written,
        _ => started,
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel_process_start() -> Option<f64> {
    None
}

/// This process's process-id namespace (`pid:[4026531836]`), Linux only.
pub fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Seconds since the epoch, now.
pub fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This machine's host name: the kernel's UTS name (what `hostname` prints), else
/// `/etc/hostname`, else `$HOSTNAME`; empty when none is there.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        })
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// A new random id: 128 bits as 32 hex digits.
pub fn random_id() -> String {
    // fastrand's global generator is seeded from the standard library's per-process random
    // state; the time and the process id are mixed in so that two processes started from one
    // snapshot still differ.
    let mut rng = fastrand::Rng::new();
    let salt = (u128::from(std::process::id()) << 64) ^ (now_s() * 1e9) as u128;
    format!("{:032x}", rng.u128(..) ^ salt.rotate_left(17))
}

/// The id the launcher gives every process of one job, from the environment as `var` reads
/// it: `SMDEBUG_JOB_ID`; SageMaker's `TRAINING_JOB_NAME`; torchrun's `TORCHELASTIC_RUN_ID`
/// (not its default `none`) with `TORCHELASTIC_RESTART_COUNT`, since a restarted group is a new
/// job; Slurm's `SLURM_JOB_ID` with `SLURM_STEP_ID`. `None` when none is set.
pub fn shared_job_id(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |name: &str| {
        var(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(id) = set(JOB_ID_ENV) {
        return Some(id);
    }
    if let Some(name) = set("TRAINING_JOB_NAME") {
        return Some(format!("sagemaker:{name}"));
    }
    if let Some(run) = set("TORCHELASTIC_RUN_ID").filter(|r| r != "none") {
        let restart = set("TORCHELASTIC_RESTART_COUNT").unwrap_or_else(|| "0".into());
        return Some(format!("torchelastic:{run}.{restart}"));
    }
    set("SLURM_JOB_ID").map(|job| match set("SLURM_STEP_ID") {
        Some(step) => format!("slurm:{job}.{step}"),
        None => format!("slurm:{job}"),
    })
}

/// The identity files of the sessions that run in this process: a file naming this process
/// is live exactly while its session is in here.
fn running_here() -> &'static Mutex<HashSet<String>> {
    static RUNNING: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

pub(crate) fn lock_running() -> std::sync::MutexGuard<'static, HashSet<String>> {
    running_here().lock().unwrap_or_else(|p| p.into_inner())
}

/// What became of the process that wrote an identity file, as far as this host can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessState {
    /// Its file is marked finished: the session ended.
    Finished,
    /// On this host (and in this process-id namespace): its process id runs the process that
    /// started the session.
    Running,
    /// On this host: the process is gone without marking its file finished (it crashed or was
    /// killed); why it is known to be gone.
    Gone(String),
    /// On another host, or in another process-id namespace of this one (where process ids
    /// cannot be checked): its heartbeat is younger than
    /// [`STALE_AFTER`](smdebug_format::jobs::STALE_AFTER); whether it runs cannot be seen from here.
    Beating,
    /// On another host: no heartbeat for [`STALE_AFTER`](smdebug_format::jobs::STALE_AFTER) or longer; it died or hangs, which
    /// cannot be told from here.
    Silent,
}

/// Seconds of slack when comparing a process's start time (the kernel's boot time is in whole
/// seconds) with its session's.
const START_SLACK_S: f64 = 2.0;

/// Why process `pid` of this host is not the one whose session started at `session_started`
/// (seconds since the epoch): it does not run, or it started after the session did (the id was
/// reused). `None` while it runs and started before the session; elsewhere than Linux, `None`
/// (unknown, taken as running).
#[cfg(target_os = "linux")]
fn process_gone(pid: u32, session_started: f64) -> Option<String> {
    let Ok(id) = i32::try_from(pid) else {
        return Some(format!("process id {pid} is not one this host can have"));
    };
    let process = match procfs::process::Process::new(id) {
        Ok(p) => p,
        Err(procfs::ProcError::NotFound(_)) => {
            return Some(format!("process {pid} no longer runs on this host"));
        }
        // Another error (no /proc here): unknown, taken as running.
        Err(_) => return None,
    };
    let stat = match process.stat() {
        Ok(s) => s,
        Err(procfs::ProcError::NotFound(_)) => {
            return Some(format!("process {pid} no longer runs on this host"));
        }
        Err(_) => return None,
    };
    // A zombie has exited; only its parent has not collected it yet.
    if stat.state == 'Z' {
        return Some(format!(
            "process {pid} has exited (a zombie its parent has not reaped)"
        ));
    }
    let boot = procfs::boot_time_secs().ok()?;
    let started = boot as f64 + stat.starttime as f64 / procfs::ticks_per_second() as f64;
    (started > session_started + START_SLACK_S).then(|| {
        format!(
            "process id {pid} now belongs to another process, started {} (after the session, \
             started {})",
            utc(started),
            utc(session_started)
        )
    })
}

#[cfg(not(target_os = "linux"))]
fn process_gone(_pid: u32, _session_started: f64) -> Option<String> {
    None
}

/// A new identity for a session of `worker` (rank `rank` of `world_size`) in job `job`, started
/// now, on this host and in this process.
pub fn identity_here(job: String, worker: String, rank: usize, world_size: usize) -> JobIdentity {
    let now = now_s();
    JobIdentity {
        version: 1,
        job,
        process: random_id(),
        worker,
        rank,
        world_size,
        host: host_name(),
        pid: std::process::id(),
        started: now,
        heartbeat: now,
        finished: false,
        pid_namespace: pid_namespace(),
        process_started: Some(process_started().0),
    }
}

/// Whether the process an identity file names still runs, as far as this host can tell: its
/// process id looked up on this host, the sessions of this process, its heartbeat elsewhere.
pub trait Liveness {
    /// What became of the writing process, at `now` (seconds since the epoch): on this host its
    /// process id is looked up (and its start time compared with the session's, so that an id
    /// taken by a newer process does not pass for the writer); on another host only the
    /// heartbeat tells.
    fn state(&self, now: f64) -> ProcessState;

    /// Whether the process still writes (see the [module docs](crate::jobs)) at `now` (seconds
    /// since the epoch): [`state`](Self::state) says it runs or beats, and its heartbeat is
    /// fresh.
    fn is_live(&self, now: f64) -> bool;
}

impl Liveness for JobIdentity {
    fn state(&self, now: f64) -> ProcessState {
        if self.finished {
            return ProcessState::Finished;
        }
        // Its process id can be looked up here: this host, and this process-id namespace when
        // the file names one.
        let here = self.host == host_name()
            && self
                .pid_namespace
                .as_ref()
                .is_none_or(|ns| Some(ns) == pid_namespace().as_ref());
        if here {
            if self.pid == std::process::id() {
                return if lock_running().contains(&self.process) {
                    ProcessState::Running
                } else {
                    ProcessState::Gone(format!(
                        "process {} (this one) holds no session of it",
                        self.pid
                    ))
                };
            }
            return match process_gone(self.pid, self.started) {
                Some(why) => ProcessState::Gone(why),
                None => ProcessState::Running,
            };
        }
        if self.heartbeat_fresh(now) {
            ProcessState::Beating
        } else {
            ProcessState::Silent
        }
    }

    fn is_live(&self, now: f64) -> bool {
        match self.state(now) {
            ProcessState::Running => {
                self.heartbeat_fresh(now)
                    || (self.pid == std::process::id() && self.host == host_name())
            }
            ProcessState::Beating => true,
            ProcessState::Finished | ProcessState::Gone(_) | ProcessState::Silent => false,
        }
    }
}
