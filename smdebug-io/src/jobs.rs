//! Who writes a run: one identity file per writing process, so that a run whose files came from
//! two jobs, or a worker written by two processes at once, is never read as one job's.
//!
//! Every session writes `jobs/<worker>/<process>.json` ([`JobIdentity`]) when it has claimed
//! the run, rewrites it every [`HEARTBEAT_INTERVAL`] while it runs, and marks it `finished`
//! when it ends. Python smdebug's `create_trial` and TensorBoard read nothing in `jobs/`.
//!
//! ```json
//! {"version": 1, "job": "4f0c…", "process": "9a1e…", "worker": "worker_0", "rank": 0,
//!  "world_size": 2, "host": "trainer-1", "pid": 4242, "started": 1795000000.25,
//!  "heartbeat": 1795000015.25, "finished": false, "pid_namespace": "pid:[4026531836]"}
//! ```
//!
//! - `process` is random (128 bits) for each session; `job` is shared by the processes of one
//!   job: the launcher's id when it gives one ([`shared_job_id`]: `SMDEBUG_JOB_ID`, SageMaker's
//!   `TRAINING_JOB_NAME`, torchrun's `TORCHELASTIC_RUN_ID` with its restart count, Slurm's
//!   `SLURM_JOB_ID` with its step), else rank 0's, which the other ranks adopt when they join
//!   (see [`crate::run_folder::claim`]).
//! - A process is *live* while its file is not `finished`, its heartbeat is younger than
//!   [`STALE_AFTER`], and, on this host, its process id still runs a process started before its
//!   session ([`JobIdentity::is_live`]). [`JobIdentity::state`] says which: on this host a
//!   process gone without marking its file finished is known to have crashed or been killed;
//!   on another host a stale heartbeat only says it is silent.
//! - Readers ([`read_jobs`], [`job_problems`]) flag a run whose identity files name more than
//!   one job, or one worker written by more than one process.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
pub use crate::job_identity::{
    HEARTBEAT_INTERVAL, JOB_ID_ENV, JobIdentity, MAX_JOB_FILE_BYTES, ProcessStartSource,
    ProcessState, STALE_AFTER, host_name, now_s, pid_namespace, process_started, random_id,
    shared_job_id, utc,
};
use crate::job_identity::{lock_running, short};
use smdebug_format::layout::{JOBS_DIR, parse_job_file};
use smdebug_storage::Storage;

/// The run's identity files, and one line for each that could not be read (too large, not an
/// identity). A run without `jobs/` (Python smdebug's, or one written before identity files)
/// has none.
pub fn read_jobs(storage: &dyn Storage) -> Result<(Vec<JobIdentity>, Vec<String>)> {
    let mut jobs = Vec::new();
    let mut problems = Vec::new();
    for key in storage.list(JOBS_DIR)? {
        let Some((worker, process)) = parse_job_file(&key) else {
            continue;
        };
        match storage.size(&key)? {
            Some(n) if n > MAX_JOB_FILE_BYTES => {
                problems.push(format!(
                    "{key}: {n} bytes, more than an identity file may be ({MAX_JOB_FILE_BYTES}): not read"
                ));
                continue;
            }
            None => continue, // removed since the listing
            Some(_) => {}
        }
        let body = match storage.get(&key) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        match serde_json::from_slice::<JobIdentity>(&body) {
            Ok(id) if id.worker == worker && id.process == process => jobs.push(id),
            Ok(id) => problems.push(format!(
                "{key}: names worker {} and process {}, not the ones its path names: not read",
                id.worker, id.process
            )),
            Err(e) => problems.push(format!("{key}: not a job identity file: {e}")),
        }
    }
    Ok((jobs, problems))
}

/// What the identity files say is wrong with a run: files from more than one job, or a
/// worker written by more than one process. Empty for a run written by one job.
pub fn job_problems(jobs: &[JobIdentity]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut by_job: BTreeMap<&str, Vec<&JobIdentity>> = BTreeMap::new();
    for j in jobs {
        by_job.entry(&j.job).or_default().push(j);
    }
    if by_job.len() > 1 {
        let mut list: Vec<(&str, Vec<&JobIdentity>)> = by_job.into_iter().collect();
        list.sort_by(|a, b| earliest(&a.1).total_cmp(&earliest(&b.1)));
        let each: Vec<String> = list
            .iter()
            .map(|(job, procs)| {
                let workers: BTreeSet<&str> = procs.iter().map(|p| p.worker.as_str()).collect();
                let first = procs
                    .iter()
                    .min_by(|a, b| a.started.total_cmp(&b.started))
                    .expect("a job listed has a process");
                format!(
                    "job {} ({} on host {}, started {})",
                    short(job),
                    workers.into_iter().collect::<Vec<_>>().join(", "),
                    first.host,
                    utc(first.started)
                )
            })
            .collect();
        problems.push(format!(
            "the run holds the files of {} jobs, read here as one: {}",
            list.len(),
            each.join("; ")
        ));
    }
    let mut by_worker: BTreeMap<&str, Vec<&JobIdentity>> = BTreeMap::new();
    for j in jobs {
        by_worker.entry(&j.worker).or_default().push(j);
    }
    for (worker, procs) in by_worker {
        if procs.len() > 1 {
            let each: Vec<String> = procs.iter().map(|p| p.describe()).collect();
            problems.push(format!(
                "{worker} was written by {} processes: {}",
                procs.len(),
                each.join("; ")
            ));
        }
    }
    problems
}

fn earliest(procs: &[&JobIdentity]) -> f64 {
    procs
        .iter()
        .map(|p| p.started)
        .fold(f64::INFINITY, f64::min)
}

/// A session's hold on its identity file: a thread rewrites it every [`HEARTBEAT_INTERVAL`];
/// [`finish`](JobClaim::finish) (or dropping the claim) marks it finished.
pub struct JobClaim {
    identity: Arc<Mutex<JobIdentity>>,
    storage: Arc<dyn Storage>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for JobClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobClaim")
            .field("identity", &self.identity())
            .finish_non_exhaustive()
    }
}

impl JobClaim {
    /// Writes `identity` into the run and keeps it beating. The process counts as live here
    /// from this call until [`finish`](Self::finish).
    pub fn start(storage: Arc<dyn Storage>, identity: JobIdentity) -> Result<JobClaim> {
        lock_running().insert(identity.process.clone());
        if let Err(e) = storage.put(&identity.key(), identity.to_json()) {
            lock_running().remove(&identity.process);
            return Err(e.into());
        }
        let identity = Arc::new(Mutex::new(identity));
        let (stop, rx) = mpsc::channel::<()>();
        let beat = (identity.clone(), storage.clone());
        let thread = std::thread::Builder::new()
            .name("smdebug-job-heartbeat".into())
            .spawn(move || {
                let (identity, storage) = beat;
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(HEARTBEAT_INTERVAL) {
                    let (key, body) = {
                        let mut id = identity.lock().unwrap_or_else(|p| p.into_inner());
                        id.heartbeat = now_s();
                        (id.key(), id.to_json())
                    };
                    if let Err(e) = storage.put(&key, body) {
                        log::warn!("smdebug: cannot renew this job's identity file: {e}");
                    }
                }
            })
            .map_err(|source| Error::Thread {
                thread: "job heartbeat",
                source,
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let id = identity.lock().unwrap_or_else(|p| p.into_inner()).clone();
                lock_running().remove(&id.process);
                let _ = storage.delete(&id.key());
                return Err(e);
            }
        };
        Ok(JobClaim {
            identity,
            storage,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The identity as last written.
    pub fn identity(&self) -> JobIdentity {
        self.identity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops the heartbeat and marks the identity finished (once; later calls do nothing).
    pub fn finish(&mut self) -> Result<()> {
        let Some(stop) = self.stop.take() else {
            return Ok(());
        };
        drop(stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let (key, body, process) = {
            let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
            id.heartbeat = now_s();
            id.finished = true;
            (id.key(), id.to_json(), id.process.clone())
        };
        let written = self.storage.put(&key, body);
        lock_running().remove(&process);
        Ok(written?)
    }

    /// Gives the claim up without marking it finished: the file is removed (a session that
    /// failed to start leaves no identity behind).
    pub fn withdraw(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let id = self.identity();
        let _ = self.storage.delete(&id.key());
        lock_running().remove(&id.process);
    }
}

impl Drop for JobClaim {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            log::warn!("smdebug: cannot mark this job's identity file finished: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn id(job: &str, worker: &str, started: f64) -> JobIdentity {
        let mut j = JobIdentity::new(job.into(), worker.into(), 0, 1);
        j.started = started;
        j
    }

    #[test]
    fn the_launchers_id_is_shared_and_a_restart_is_a_new_job() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(shared_job_id(vars(&[])), None);
        assert_eq!(
            shared_job_id(vars(&[("SMDEBUG_JOB_ID", "a"), ("SLURM_JOB_ID", "7")])).as_deref(),
            Some("a")
        );
        assert_eq!(
            shared_job_id(vars(&[("TORCHELASTIC_RUN_ID", "none")])),
            None,
            "torchrun's default rendezvous id names no job"
        );
        assert_eq!(
            shared_job_id(vars(&[
                ("TORCHELASTIC_RUN_ID", "r1"),
                ("TORCHELASTIC_RESTART_COUNT", "2")
            ]))
            .as_deref(),
            Some("torchelastic:r1.2")
        );
        assert_eq!(
            shared_job_id(vars(&[("SLURM_JOB_ID", "7"), ("SLURM_STEP_ID", "0")])).as_deref(),
            Some("slurm:7.0")
        );
    }

    #[test]
    fn two_jobs_and_two_writers_of_a_worker_are_named() {
        assert!(job_problems(&[]).is_empty());
        let a0 = id("aaaa", "worker_0", 100.0);
        let a1 = id("aaaa", "worker_1", 101.0);
        assert!(job_problems(&[a0.clone(), a1.clone()]).is_empty());
        let b0 = id("bbbb", "worker_0", 200.0);
        let p = job_problems(&[b0, a0, a1]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("2 jobs"), "{}", p[0]);
        assert!(
            p[0].find("job aaaa").unwrap() < p[0].find("job bbbb").unwrap(),
            "{}",
            p[0]
        );
        assert!(
            p[1].starts_with("worker_0 was written by 2 processes"),
            "{}",
            p[1]
        );
    }

    #[test]
    fn a_process_is_live_while_it_beats_and_runs() {
        let mut other = id("j", "worker_0", now_s());
        other.pid = u32::MAX; // runs nowhere
        other.host = "another-host".into();
        assert!(
            other.is_live(now_s()),
            "another host: the heartbeat decides"
        );
        assert!(!other.is_live(now_s() + 21.0), "a stale heartbeat");
        other.host = host_name();
        assert!(
            !other.is_live(now_s()),
            "this host, a process id that does not run"
        );
        let mut here = id("j", "worker_0", now_s());
        assert!(!here.is_live(now_s()), "this process, no session holds it");
        lock_running().insert(here.process.clone());
        assert!(here.is_live(now_s()));
        here.finished = true;
        assert!(!here.is_live(now_s()));
        lock_running().remove(&here.process);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_of_this_host_is_gone_once_its_id_runs_nothing_or_a_newer_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut j = id("j", "worker_0", now_s());
        j.host = host_name();
        j.pid = child.id();
        assert_eq!(j.state(now_s()), ProcessState::Running);
        assert!(j.is_live(now_s()));
        // A session that started well before the process holding its id: the id was reused.
        j.started = now_s() - 100.0;
        match j.state(now_s()) {
            ProcessState::Gone(why) => assert!(why.contains("another process"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!j.is_live(now_s()));
        j.started = now_s();
        child.kill().unwrap();
        // Killed and not reaped yet: a zombie, exited all the same.
        let why = smdebug_storage::testing::wait_for(
            Duration::from_secs(30),
            "the killed process",
            || match j.state(now_s()) {
                ProcessState::Gone(why) => Some(why),
                _ => None,
            },
        );
        assert!(
            why.contains("exited") || why.contains("no longer runs"),
            "{why}"
        );
        child.wait().unwrap();
        match j.state(now_s()) {
            ProcessState::Gone(why) => assert!(why.contains("no longer runs"), "{why}"),
            other => panic!("{other:?}"),
        }
        j.finished = true;
        assert_eq!(j.state(now_s()), ProcessState::Finished);
        // Another host: the heartbeat only.
        let mut far = id("j", "worker_0", now_s());
        far.host = "another-host".into();
        assert_eq!(far.state(now_s()), ProcessState::Beating);
        assert_eq!(far.state(now_s() + 21.0), ProcessState::Silent);
        // This host's name, another process-id namespace (a container sharing the host's name):
        // its id is not looked up here, the heartbeat decides.
        let mut boxed = id("j", "worker_0", now_s());
        assert!(boxed.pid_namespace.is_some());
        boxed.pid = u32::MAX; // runs nowhere here
        boxed.pid_namespace = Some("pid:[1]".into());
        assert_eq!(boxed.state(now_s()), ProcessState::Beating);
        assert_eq!(boxed.state(now_s() + 21.0), ProcessState::Silent);
        // A file written before namespaces were recorded: looked up here, as before.
        boxed.pid_namespace = None;
        assert!(matches!(boxed.state(now_s()), ProcessState::Gone(_)));
        // The field round-trips, and a file without it reads.
        let json = serde_json::to_string(&j).unwrap();
        assert_eq!(serde_json::from_str::<JobIdentity>(&json).unwrap(), j);
        let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
        old.as_object_mut().unwrap().remove("pid_namespace");
        let read: JobIdentity = serde_json::from_value(old).unwrap();
        assert_eq!(read.pid_namespace, None);
    }
}
