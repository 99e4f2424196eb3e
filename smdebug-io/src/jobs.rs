//! Who writes a run, on the training side: one identity file per writing process
//! (`smdebug_format::jobs::JobIdentity`, whose layout smdebug-format owns), so that a run whose
//! files came from two jobs, or a worker written by two processes at once, is never read as
//! one job's.
//!
//! Every session writes `jobs/<worker>/<process>.json` ([`identity_here`]) when it has claimed
//! the run ([`JobClaim`]), rewrites it every `HEARTBEAT_INTERVAL` while it runs, and marks it
//! `finished` when it ends. Python smdebug's `create_trial` and TensorBoard read nothing in
//! `jobs/`.
//!
//! - `process` is random (128 bits) for each session; `job` is shared by the processes of one
//!   job: the launcher's id when it gives one ([`shared_job_id`]: `SMDEBUG_JOB_ID`, SageMaker's
//!   `TRAINING_JOB_NAME`, torchrun's `TORCHELASTIC_RUN_ID` with its restart count, Slurm's
//!   `SLURM_JOB_ID` with its step), else rank 0's, which the other ranks adopt when they join
//!   (see [`crate::run_folder::claim`]).
//! - A process is *live* while its file is not `finished`, its heartbeat is younger than
//!   `STALE_AFTER`, and, on this host, its process id still runs a process started before its
//!   session ([`Liveness::is_live`]). [`Liveness::state`] says which: on this host a
//!   process gone without marking its file finished is known to have crashed or been killed;
//!   on another host a stale heartbeat only says it is silent.
//! - [`read_jobs`] reads a run's files back (as smdebug-read's does), and
//!   `smdebug_format::jobs::job_problems` flags a run whose identity files name more than one
//!   job, or one worker written by more than one process.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::job_identity::lock_running;
pub use crate::job_identity::{
    JOB_ID_ENV, Liveness, ProcessStartSource, ProcessState, host_name, identity_here, now_s,
    pid_namespace, process_started, random_id, shared_job_id,
};
use smdebug_format::jobs::{HEARTBEAT_INTERVAL, JobIdentity, read_job_files};
use smdebug_format::layout::JOBS_DIR;
use smdebug_storage::Storage;

/// The run's identity files, and one line for each that could not be read (too large, not an
/// identity). A run without `jobs/` (Python smdebug's, or one written before identity files)
/// has none.
pub fn read_jobs(storage: &dyn Storage) -> Result<(Vec<JobIdentity>, Vec<String>)> {
    let got = |key: &str| match storage.get(key) {
        Ok(body) => Ok(Some(body)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    };
    Ok(read_job_files(
        storage.list(JOBS_DIR)?,
        |key| storage.size(key),
        got,
    )?)
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
        if let Err(e) = storage.put(&identity.key(), identity.encode().into()) {
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
                        (id.key(), id.encode().into())
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
            (id.key(), id.encode().into(), id.process.clone())
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
        let mut j = identity_here(job.into(), worker.into(), 0, 1);
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
