//! The run as the runner reads it: its storage, the trial the debugging rules read (opened once
//! tensor data appears), whether the run has ended, and when new data last arrived.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use smdebug_read::run::{EndMarker, FolderChange, FolderWatch, has_profiler_data};
use smdebug_read::trial::{TensorSubscription, Trial, TrialOptions};
use smdebug_storage::Storage;

use crate::error::{Error, Result};

/// The runner's whole-file cache budget: 32 MiB.
const RUNNER_FILE_CACHE_BYTES: usize = 32 << 20;

/// How many global steps past the rules' look-back the runner's trial reads the index (when
/// every rule's look-back is bounded): about 6 MB of index for 50 scalars a step, and a run of
/// 400,000 steps listed and read in 40 stretches. Ten times Python smdebug's incomplete-step
/// window, so that a step a lost worker never wrote is still given up on while reading ahead.
const RUNNER_READ_AHEAD: u64 = 10_000;

/// How the runner's trial reads. The runner reads each step's tensors once, as the steps come,
/// often inside the training process: a small whole-file cache holds the current steps' files,
/// where the default (sized for notebooks sweeping a whole run tensor by tensor) would keep up
/// to 256 MiB of old steps in the training job's memory.
///
/// When every debugging rule looks back a bounded number of steps, the trial reads the index
/// [`RUNNER_READ_AHEAD`] steps past the rules' look-back and no further
/// ([`TrialOptions::index_read_ahead`]): with the steps behind the rules let go, a run of any
/// length costs the same.
fn runner_trial_options(options: &OpenOptions) -> TrialOptions {
    let defaults = TrialOptions::default();
    let ahead = options.read_ahead.unwrap_or(RUNNER_READ_AHEAD);
    TrialOptions {
        max_tensor_bytes: options
            .max_tensor_bytes
            .unwrap_or(defaults.max_tensor_bytes),
        index_read_ahead: options.look_back.map(|n| n.saturating_add(ahead)),
        file_cache_bytes: RUNNER_FILE_CACHE_BYTES,
        // The runner looks for new files itself, once per poll (`refresh`): the rules' own
        // queries at every step (tensor names, collections) need not list the run again.
        auto_refresh: false,
        // No event files read ahead on other threads (`TrialOptions::read_files_ahead`): the
        // runner often lives in the training job, whose cores and memory are the job's.
        read_files_ahead: false,
        tensor_source: options.tensor_source.clone(),
        ..defaults
    }
}

/// How a run is opened ([`RunSource::open`]).
pub(super) struct OpenOptions {
    /// A storage already open, else `location` is opened with the defaults.
    pub storage: Option<Arc<dyn Storage>>,
    pub max_tensor_bytes: Option<u64>,
    /// Some rule (or the reporter) reads profiler data: a run with profiler data and no
    /// tensors opens too.
    pub profiler: bool,
    /// The longest look-back of the debugging rules, `None` when one needs the whole run.
    pub look_back: Option<u64>,
    /// How far past it the trial reads the index (default [`RUNNER_READ_AHEAD`]).
    pub read_ahead: Option<u64>,
    /// Some rule reads tensors. Without one, a run that has profiler data opens without a
    /// trial (whose index of every tensor of every step no rule would read: ~410 MB for the
    /// 5 M tensors of a 1-hour run).
    pub tensors: bool,
    /// The source of the run's tensor files shared with other readers in the process (let go
    /// when no rule reads tensors and no trial is opened; a trial no rule reads takes no event
    /// file from it).
    pub tensor_source: Option<TensorSubscription>,
    /// How long to wait for the run to appear, looking every `poll_interval`.
    pub timeout: Duration,
    pub poll_interval: Duration,
}

/// The run being evaluated.
pub(super) struct RunSource {
    /// Where the run lives.
    pub location: smdebug_storage::Location,
    pub storage: Arc<dyn Storage>,
    /// `None` while the run holds no tensor data (a run with profiler data only), and when no
    /// rule reads tensors on a run with profiler data.
    pub trial: Option<Trial>,
    trial_options: TrialOptions,
    /// The run has written its end marker.
    pub complete: bool,
    /// The end marker's reason.
    pub end_reason: Option<smdebug_core::EndReason>,
    /// Whether the run's local folder was deleted while followed.
    pub folder: FolderWatch,
    /// When a step was last evaluated or profiler data last arrived (the idle time-out's
    /// clock).
    pub last_arrival: Instant,
}

impl RunSource {
    /// Opens the run at `location`, waiting up to `options.timeout` for it to appear (unless
    /// `cancel` is set).
    pub fn open(
        location: &smdebug_storage::Location,
        options: OpenOptions,
        cancel: Option<&AtomicBool>,
    ) -> Result<RunSource> {
        let mut trial_options = runner_trial_options(&options);
        let text = location.to_string();
        let open_error = |e: smdebug_read::Error| Error::OpenRun {
            location: text.clone(),
            source: Box::new(e),
        };
        let open = || -> Result<(Arc<dyn Storage>, Option<Trial>)> {
            let storage = match &options.storage {
                Some(s) => s.clone(),
                None => {
                    smdebug_storage::open_storage(location).map_err(|e| open_error(e.into()))?
                }
            };
            if !options.tensors
                && options.profiler
                && has_profiler_data(storage.as_ref()).map_err(open_error)?
            {
                return Ok((storage, None));
            }
            match Trial::from_storage(&text, storage.clone(), trial_options.clone()) {
                Ok(trial) => Ok((storage, Some(trial))),
                // A run with profiler data and no tensors is a run for the profiler rules.
                Err(e @ smdebug_read::Error::NoSuchRun { .. }) if options.profiler => {
                    if has_profiler_data(storage.as_ref()).map_err(open_error)? {
                        Ok((storage, None))
                    } else {
                        Err(open_error(e))
                    }
                }
                Err(e) => Err(open_error(e)),
            }
        };
        let deadline = Instant::now() + options.timeout;
        let (storage, trial) = loop {
            match open() {
                Ok(x) => break x,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(e) if cancel.is_some_and(|c| c.load(Ordering::Acquire)) => return Err(e),
                // Parked, not asleep: a wake ([`RunnerHandle::waker`](super::RunnerHandle),
                // the writer's first step) or a cancel looks again at once.
                Err(_) => std::thread::park_timeout(options.poll_interval),
            }
        };
        if !options.tensors {
            // No rule reads tensors: the other readers of the source hold nothing for the
            // runner (none at all when it opened no trial, which it then never opens).
            match &trial {
                None => trial_options.tensor_source = None,
                Some(_) => {
                    if let Some(share) = &trial_options.tensor_source {
                        share.release_events_before(u64::MAX);
                    }
                }
            }
        }
        Ok(RunSource {
            location: location.clone(),
            storage,
            trial,
            trial_options,
            complete: false,
            end_reason: None,
            folder: FolderWatch::new(location),
            last_arrival: Instant::now(),
        })
    }

    /// The error of a failed read of the run.
    pub fn read_error(&self, e: smdebug_read::Error) -> Error {
        Error::OpenRun {
            location: self.location.to_string(),
            source: Box::new(e),
        }
    }

    /// Refreshes the trial (opening it once tensor data appeared, when `wants_tensors`) and
    /// learns whether the run has ended.
    pub fn refresh(&mut self, wants_tensors: bool) -> Result<()> {
        if self.trial.is_none() && wants_tensors {
            match Trial::from_storage(
                &self.location.to_string(),
                self.storage.clone(),
                self.trial_options.clone(),
            ) {
                Ok(t) => self.trial = Some(t),
                Err(smdebug_read::Error::NoSuchRun { .. }) => {}
                Err(e) => return Err(self.read_error(e)),
            }
        }
        match &self.trial {
            Some(trial) => {
                trial.refresh().map_err(|e| self.read_error(e))?;
                self.complete = trial.is_complete().map_err(|e| self.read_error(e))?;
                self.end_reason = trial.end_reason().map_err(|e| self.read_error(e))?;
            }
            None => {
                if let Some(reason) =
                    EndMarker::read(self.storage.as_ref()).map_err(|e| self.read_error(e))?
                {
                    self.complete = true;
                    self.end_reason = reason;
                }
            }
        }
        Ok(())
    }

    /// Whether the run's local folder is gone (deleted under the runner).
    pub fn folder_gone(&mut self) -> bool {
        self.folder.look(false) == FolderChange::Gone
    }
}
