//! The run's writing processes as the page lists them ([`ProcessView`], from the identity
//! files), and when new data reached this server ([`Arrivals`], the progress points): what the
//! follower records as it reads, and what [`liveness`](crate::liveness) decides from.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::Serialize;
use smdebug_format::jobs::JobIdentity;
use smdebug_format::progress::Progress;
use smdebug_io::jobs::{Liveness, ProcessState};
use smdebug_storage::Storage;

/// The progress points kept (steps done, wall time), about 17 minutes of a job writing its
/// progress every second.
pub(crate) const PROGRESS_HISTORY: usize = 1024;

/// One writing process as the page lists it.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ProcessView {
    /// The worker it writes.
    pub worker: String,
    /// Its host.
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// `finished`, `running`, `gone` (this host), `beating` or `silent` (another host).
    pub state: &'static str,
    /// Why it is known gone.
    pub why: Option<String>,
    /// Its last heartbeat, seconds since the epoch.
    pub heartbeat: f64,
}

impl ProcessView {
    /// `identity`'s process as seen now (its state looked up: call it off the async runtime).
    pub(crate) fn of(identity: &JobIdentity, now: f64) -> ProcessView {
        let (state, why) = match identity.state(now) {
            ProcessState::Finished => ("finished", None),
            ProcessState::Running => ("running", None),
            ProcessState::Gone(why) => ("gone", Some(why)),
            ProcessState::Beating => ("beating", None),
            ProcessState::Silent => ("silent", None),
        };
        ProcessView {
            worker: identity.worker.clone(),
            host: identity.host.clone(),
            pid: identity.pid,
            state,
            why,
            heartbeat: identity.heartbeat,
        }
    }
}

/// When data last arrived, as this server saw it (seconds since the epoch, its clock). Only
/// what arrives after the follower first caught up counts: a backlog read at the start says
/// nothing about when it was written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Arrivals {
    /// The follower first had nothing left to read.
    pub caught_up_at: Option<f64>,
    /// New steps: tensor steps or values, spans, a progress file that advanced.
    pub steps: Option<f64>,
    /// New system samples (the sampler runs on while a loop hangs: counted only for a run
    /// without steps).
    pub samples: Option<f64>,
}

impl Arrivals {
    /// A pass read `steps`/`samples` new and left `backlog` to read, at `now`.
    pub(crate) fn note(&mut self, steps: bool, samples: bool, backlog: bool, now: f64) {
        if self.caught_up_at.is_some() {
            if steps {
                self.steps = Some(now);
            }
            if samples {
                self.samples = Some(now);
            }
        } else if !backlog {
            self.caught_up_at = Some(now);
        }
    }
}

/// Appends a progress point (newest wall time, most steps) when the steps moved.
pub(crate) fn note_progress(history: &mut VecDeque<(f64, u64)>, point: Option<(u64, f64)>) {
    let Some((steps, wall)) = point else { return };
    if history.back().is_some_and(|&(_, s)| s >= steps) {
        return;
    }
    if history.len() == PROGRESS_HISTORY {
        history.pop_front();
    }
    history.push_back((wall, steps));
}

/// Each identity file's process looked up. One newly seen gone (not so in `before`) is looked
/// up again after its file is read again: a process that marked its file finished just before
/// it exited is not taken for crashed.
pub(crate) fn look_up(
    storage: &dyn Storage,
    jobs: &[JobIdentity],
    before: &[ProcessView],
) -> Vec<ProcessView> {
    let now = smdebug_io::jobs::now_s();
    let views: Vec<ProcessView> = jobs.iter().map(|j| ProcessView::of(j, now)).collect();
    let newly_gone = views.iter().any(|v| {
        v.state == "gone"
            && !before.iter().any(|b| {
                b.state == "gone" && (&b.worker, &b.host, b.pid) == (&v.worker, &v.host, v.pid)
            })
    });
    if !newly_gone {
        return views;
    }
    match smdebug_read::run::read_jobs(storage) {
        Ok((again, _)) => again.iter().map(|j| ProcessView::of(j, now)).collect(),
        Err(_) => views,
    }
}

/// The most steps any worker's progress file shows, and the newest file's wall time.
pub(crate) fn progress_point(progress: &[Progress]) -> Option<(u64, f64)> {
    let steps = progress.iter().map(|p| p.steps).max()?;
    let wall = progress.iter().map(|p| p.wall_time).fold(0.0, f64::max);
    Some((steps, wall))
}
