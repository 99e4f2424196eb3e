//! Why a location cannot take a new run ([`Refusal`]), and what it holds that decides it:
//! entries that are not a run's ([`Foreign`]) and the run there ([`RunExtent`]). Apart from
//! [`super`] so that [`crate::Error`] can carry a refusal without the two modules importing
//! each other.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use crate::job_identity::{self as jobs, Liveness};
use smdebug_format::jobs::{JobIdentity, STALE_AFTER, utc};

/// What in a location is not a run's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreign {
    /// The first few entries, relative to the location, each with what it is when it is not a
    /// regular file (`src/`, `link (a symbolic link)`).
    pub entries: Vec<String>,
    /// How many there are in all (at the top, plus any link or special file inside the run's
    /// folders).
    pub count: usize,
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.entries.join(", "))?;
        if self.count > self.entries.len() {
            write!(f, " and {} more", self.count - self.entries.len())?;
        }
        Ok(())
    }
}

/// What a run in a location holds, for messages and decisions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunExtent {
    /// Its end marker is there.
    pub ended: bool,
    /// How many files it has.
    pub files: usize,
    /// The first and last global step its index files name.
    pub steps: Option<(u64, u64)>,
    /// How many distinct global steps its index files name.
    pub step_count: usize,
    /// The workers its index files name.
    pub workers: BTreeSet<String>,
    /// Its processes' identity files.
    pub jobs: Vec<JobIdentity>,
    /// The files and folders of the run, relative to the location, in the order [`clear`](super::clear)
    /// removes them (files first, then folders deepest first). Folders only on local disk.
    pub(super) paths: Vec<(String, bool)>,
}

impl RunExtent {
    /// Its processes that still write (see [`Liveness::is_live`]).
    pub fn live_writers(&self) -> Vec<&JobIdentity> {
        let now = jobs::now_s();
        self.jobs.iter().filter(|j| j.is_live(now)).collect()
    }
}

impl fmt::Display for RunExtent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.steps {
            Some((first, last)) => write!(f, "{} steps ({first} to {last})", self.step_count)?,
            None => f.write_str("no step")?,
        }
        if !self.workers.is_empty() {
            let w: Vec<&str> = self.workers.iter().map(String::as_str).collect();
            write!(f, " of {}", w.join(", "))?;
        }
        write!(f, ", {} files", self.files)?;
        if let Some(last) = self
            .jobs
            .iter()
            .max_by(|a, b| a.heartbeat.total_cmp(&b.heartbeat))
        {
            write!(
                f,
                "; last written by {}, alive at {}",
                last.describe(),
                utc(last.heartbeat)
            )?;
        }
        Ok(())
    }
}

/// Why a location cannot take a new run (see [`claim`](super::claim)).
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// It holds files that are not a run's.
    Foreign(Foreign),
    /// It holds a run that ended, and replacing it was not asked for.
    Ended(RunExtent),
    /// It holds a run without an end marker (its job was killed, or still runs elsewhere), and
    /// replacing it was not asked for.
    Unfinished(RunExtent),
    /// A process of the run there still writes it.
    InUse {
        /// Who.
        writer: String,
        /// Seconds since its last heartbeat.
        seconds_ago: f64,
    },
    /// A rank > 0 waited for rank 0 of its job to claim the run, in vain.
    NoChief {
        /// The worker that waited.
        worker: String,
        /// The job it waited for, when the launcher names it.
        job: Option<String>,
        /// How long.
        waited: Duration,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const REPLACE: &str =
            "choose another location, or replace it (SessionBuilder::overwrite(true))";
        match self {
            Refusal::Foreign(foreign) => write!(
                f,
                "holds files that are not a run's ({foreign}): a run is written only into an \
                 empty folder or one that holds only a run, and nothing was deleted; choose a \
                 new folder for the run"
            ),
            Refusal::Ended(extent) => {
                write!(f, "holds a run that ended already ({extent}): {REPLACE}")
            }
            Refusal::Unfinished(extent) => write!(
                f,
                "holds an unfinished run, without an end marker: its job was stopped or still \
                 runs elsewhere ({extent}); a new job must not continue its steps: {REPLACE}"
            ),
            Refusal::InUse {
                writer,
                seconds_ago,
            } => write!(
                f,
                "{writer} still writes the run here (its last heartbeat {seconds_ago:.0} s ago): \
                 a second process of the same worker would mix its files with it; stop it, or \
                 choose another location (a process that was killed counts as stopped once its \
                 heartbeat is {} s old)",
                STALE_AFTER.as_secs()
            ),
            Refusal::NoChief {
                worker,
                job,
                waited,
            } => {
                write!(
                    f,
                    "{worker} waited {:.0} s for worker_0 of its job to claim the run, and none \
                     did",
                    waited.as_secs_f64()
                )?;
                match job {
                    Some(job) => write!(f, " (job {job})"),
                    None => write!(
                        f,
                        "; start worker 0 with a session on the same location, and give every \
                         process of the job the same {} so that they find each other",
                        jobs::JOB_ID_ENV
                    ),
                }
            }
        }
    }
}
