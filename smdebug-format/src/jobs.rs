//! The identity files of the processes that write a run, without I/O: one file per writing
//! process (`jobs/<worker>/<process>.json`, [`JobIdentity`]), so that a run whose files came
//! from two jobs, or a worker written by two processes at once, is never read as one job's.
//!
//! ```json
//! {"version": 1, "job": "4f0c…", "process": "9a1e…", "worker": "worker_0", "rank": 0,
//!  "world_size": 2, "host": "trainer-1", "pid": 4242, "started": 1795000000.25,
//!  "heartbeat": 1795000015.25, "finished": false, "pid_namespace": "pid:[4026531836]"}
//! ```
//!
//! smdebug-io writes them (a session's claim, its heartbeat every [`HEARTBEAT_INTERVAL`], its
//! end) and judges whether a process of this host still runs; smdebug-read reads them back.
//! Both read a run's files with [`read_job_files`] and flag them with [`job_problems`].
//! Python smdebug's `create_trial` and TensorBoard read nothing in `jobs/`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::layout::{job_file, parse_job_file};

/// How often a running session rewrites its identity file.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// A process whose heartbeat is older than this no longer runs (four missed heartbeats).
pub const STALE_AFTER: Duration = Duration::from_secs(20);
/// The largest identity file read; a larger one is a problem, not read.
pub const MAX_JOB_FILE_BYTES: u64 = 64 * 1024;

/// One writing process of a run, as its identity file says (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobIdentity {
    /// The file format's version, 1.
    pub version: u32,
    /// The job: shared by every process of it.
    pub job: String,
    /// This process's session: random, one per session.
    pub process: String,
    /// The worker it writes (`worker_0`).
    pub worker: String,
    /// Its rank in the job.
    pub rank: usize,
    /// The job's number of workers.
    pub world_size: usize,
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// When the session started, seconds since the epoch.
    pub started: f64,
    /// When the file was last rewritten, seconds since the epoch.
    pub heartbeat: f64,
    /// The session ended (its files are complete).
    pub finished: bool,
    /// The process-id namespace its `pid` is in (`pid:[4026531836]`, Linux), so that a reader on
    /// the same host name but in another namespace (a container sharing the host's network and
    /// name) does not look the id up among its own processes. Absent in files written before it
    /// was recorded, and elsewhere than Linux.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<String>,
    /// When the process started, seconds since the epoch: on Linux its kernel start time,
    /// elsewhere when smdebug was first used in it (smdebug-io's `process_started`). The report
    /// counts the job's initialization from here. Absent in files written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_started: Option<f64>,
}

impl JobIdentity {
    /// The file it is kept in (`jobs/<worker>/<process>.json`).
    pub fn key(&self) -> String {
        job_file(&self.worker, &self.process)
    }

    /// Its heartbeat is younger than [`STALE_AFTER`] at `now` (seconds since the epoch).
    pub fn heartbeat_fresh(&self, now: f64) -> bool {
        now - self.heartbeat < STALE_AFTER.as_secs_f64()
    }

    /// `worker_0 of job 4f0c… (host h, pid 4242, started 2026-11-28 20:53:51 UTC)`.
    pub fn describe(&self) -> String {
        format!(
            "{} of job {} (host {}, pid {}, started {})",
            self.worker,
            short_id(&self.job),
            self.host,
            self.pid,
            utc(self.started)
        )
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an identity serializes")
    }

    /// The identity in the file at `key` (`jobs/<worker>/<process>.json`), or why it is not
    /// read: not an identity, or one naming another worker or process than its path.
    pub fn decode(key: &str, body: &[u8]) -> Result<JobIdentity, String> {
        let (worker, process) =
            parse_job_file(key).ok_or_else(|| format!("{key}: not an identity file's path"))?;
        match serde_json::from_slice::<JobIdentity>(body) {
            Ok(id) if id.worker == worker && id.process == process => Ok(id),
            Ok(id) => Err(format!(
                "{key}: names worker {} and process {}, not the ones its path names: not read",
                id.worker, id.process
            )),
            Err(e) => Err(format!("{key}: not a job identity file: {e}")),
        }
    }
}

/// The identity files among `keys` (a listing of `jobs/`), read with `size` and `get` (the
/// caller's storage: `Ok(None)` for a file removed since the listing), and one line for each
/// that could not be read (too large, not an identity). An error of `size` or `get` ends the
/// read.
pub fn read_job_files<E, B: AsRef<[u8]>>(
    keys: impl IntoIterator<Item = String>,
    mut size: impl FnMut(&str) -> Result<Option<u64>, E>,
    mut get: impl FnMut(&str) -> Result<Option<B>, E>,
) -> Result<(Vec<JobIdentity>, Vec<String>), E> {
    let mut jobs = Vec::new();
    let mut problems = Vec::new();
    for key in keys {
        if parse_job_file(&key).is_none() {
            continue;
        }
        match size(&key)? {
            Some(n) if n > MAX_JOB_FILE_BYTES => {
                problems.push(format!(
                    "{key}: {n} bytes, more than an identity file may be ({MAX_JOB_FILE_BYTES}): not read"
                ));
                continue;
            }
            None => continue, // removed since the listing
            Some(_) => {}
        }
        let Some(body) = get(&key)? else {
            continue;
        };
        match JobIdentity::decode(&key, body.as_ref()) {
            Ok(id) => jobs.push(id),
            Err(problem) => problems.push(problem),
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
                    short_id(job),
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

/// Seconds since the epoch as the identity files' messages write them
/// (`2026-11-28 20:53:51 UTC`, to the second).
pub fn utc(seconds: f64) -> String {
    chrono::DateTime::from_timestamp(seconds.floor() as i64, 0).map_or_else(
        || format!("{seconds} s after the epoch"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// An id cut to 12 characters for messages (`4f0c1d2e3a4b…`).
pub fn short_id(id: &str) -> String {
    match id.char_indices().nth(12) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(job: &str, worker: &str, process: &str) -> JobIdentity {
        JobIdentity {
            version: 1,
            job: job.into(),
            process: process.into(),
            worker: worker.into(),
            rank: 0,
            world_size: 1,
            host: "h".into(),
            pid: 1,
            started: 1_795_000_000.0,
            heartbeat: 1_795_000_000.0,
            finished: false,
            pid_namespace: None,
            process_started: None,
        }
    }

    #[test]
    fn files_are_read_back_checked_against_their_path_and_bounded() {
        let a = identity("job-a", "worker_0", "p1");
        let mut b = identity("job-b", "worker_0", "p2");
        b.started += 100.0;
        let mut files: BTreeMap<String, Vec<u8>> =
            [&a, &b].iter().map(|id| (id.key(), id.encode())).collect();
        // A file naming another process than its path, one that is not JSON, one too large,
        // and one that is no identity file's path at all.
        files.insert(job_file("worker_1", "p3"), a.encode());
        files.insert(job_file("worker_1", "p4"), b"{not json".to_vec());
        files.insert(
            job_file("worker_1", "p5"),
            vec![b' '; MAX_JOB_FILE_BYTES as usize + 1],
        );
        files.insert("jobs/README".into(), b"x".to_vec());
        let (jobs, problems) = read_job_files::<(), _>(
            files.keys().cloned(),
            |k| Ok(files.get(k).map(|b| b.len() as u64)),
            |k| Ok(files.get(k)),
        )
        .unwrap();
        assert_eq!(jobs, [a.clone(), b.clone()]);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].contains("not the ones its path names"));
        assert!(problems[1].contains("not a job identity file"));
        assert!(problems[2].contains("more than an identity file may be"));
        let said = job_problems(&jobs);
        assert_eq!(said.len(), 2, "{said:#?}");
        assert!(said[0].starts_with("the run holds the files of 2 jobs"));
        let (first, second) = (said[0].find("job job-a"), said[0].find("job job-b"));
        assert!(
            first.unwrap() < second.unwrap(),
            "earliest first: {}",
            said[0]
        );
        assert!(said[1].starts_with("worker_0 was written by 2 processes"));
        assert!(job_problems(&[a]).is_empty());
    }
}
