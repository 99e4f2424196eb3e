//! The `Trial`: reads a run (written by these crates or by Python smdebug), offline or while it
//! is still being written.
//!
//! Opening a trial lists the run's collections and index files once; after that every refresh
//! lists only what is new (index files after the first step that is not yet complete on every
//! worker), so following a live run costs one small listing per poll, not a full re-list.
//!
//! Step numbers follow smdebug: with `Mode::Global` (or no mode) a step is a global step; with a
//! mode it is the step counted within that mode.

mod source;
mod state;
mod steps;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ndarray::ArrayD;
use serde::Serialize;
use smdebug_core::{Collection, EndReason, Mode, PyRegex, Reduction, Tensor};

use crate::error::{Error, Result};
pub use crate::format::tensor::DEFAULT_MAX_TENSOR_BYTES;
use crate::storage::Storage;
use source::Location;
pub use source::TensorBytes;
use state::State;
pub use state::{RepeatedName, StepSelector, StepState};
pub use steps::{StepStream, StepValue, StepValues};

/// How a trial reads.
#[derive(Clone, Debug)]
pub struct TrialOptions {
    /// Before answering a query about steps or tensors, look for new data (at most once per
    /// `refresh_interval`). Default: true.
    pub auto_refresh: bool,
    /// Minimum time between two automatic refreshes. Default: 100 ms.
    pub refresh_interval: Duration,
    /// Poll interval of [`Trial::wait_for_steps`]. Default: 100 ms.
    pub poll_interval: Duration,
    /// Memory-map the event files of a run on local disk: records are read straight from the
    /// page cache, with no copy into fresh memory, and each map is kept until the trial is
    /// dropped (at most 32,768 maps for all trials of a process; past that, files are read as
    /// when this is off). A file's length is checked when it is mapped, so a file cut short
    /// before that gives [`Error::IncompleteRecord`] for the records it lost. A file cut short
    /// in place *while mapped* makes the process fault (SIGBUS) when the lost bytes are read:
    /// smdebug's writers, ours and Python's, never do that (they publish a file by renaming a
    /// finished temporary file, and never change it after); turn this off for a run whose
    /// event files something else rewrites in place. Default: true.
    pub map_files: bool,
    /// Memory for whole event files kept after a read when they are not mapped (object stores,
    /// or [`map_files`](TrialOptions::map_files) off): files up to 1 MiB are fetched whole while
    /// this budget lasts, so the other tensors of a step cost no further I/O; once it is spent,
    /// other files are read record by record. Nothing is evicted on its own: a reader going step
    /// by step gives old steps' files back with
    /// [`forget_files_before`](Trial::forget_files_before). Default: 256 MiB (a 10,000-step
    /// PyTorch run of 7 small tensors a step is 236 MB).
    pub file_cache_bytes: usize,
    /// The most bytes one read may hold for a tensor: a tensor whose shape and dtype claim more
    /// (or whose record is longer) is [`Error::TensorTooLarge`], naming the file, the offset and
    /// the size, and nothing of that size is allocated. Runs come from other machines and other
    /// tools: a record of a few bytes can claim a tensor of any size, which would otherwise be
    /// expanded in full. Counted in the tensor's own dtype ([`TrialTensor::value`] converts to
    /// `f64`, up to 8× that). Default: [`DEFAULT_MAX_TENSOR_BYTES`] (1 GiB).
    pub max_tensor_bytes: u64,
}

impl Default for TrialOptions {
    fn default() -> Self {
        TrialOptions {
            auto_refresh: true,
            refresh_interval: Duration::from_millis(100),
            poll_interval: Duration::from_millis(100),
            map_files: true,
            file_cache_bytes: 256 << 20,
            max_tensor_bytes: DEFAULT_MAX_TENSOR_BYTES,
        }
    }
}

/// A run, opened for reading. Cheap to share across threads (`Arc<Trial>`); queries lock briefly.
pub struct Trial {
    location: String,
    storage: Arc<dyn Storage>,
    options: TrialOptions,
    state: Mutex<State>,
    files: source::Files,
}

/// One saved value of a tensor, in the JSON shape of the interop checkers' `expected.json`
/// (`smdebug value --json` prints it too).
#[derive(Clone, Debug, Serialize)]
pub struct TensorRecordJson {
    /// The tensor's name.
    pub name: String,
    /// The global step.
    pub step: u64,
    /// The step's mode.
    pub mode: Mode,
    /// The step within the mode.
    pub mode_step: u64,
    /// The worker that saved it (`worker_0`).
    pub worker: String,
    /// numpy's dtype name (`float32`).
    pub dtype: String,
    /// The dimensions.
    pub shape: Vec<usize>,
    /// Row-major values; NaN and ±Inf are written as the strings "nan", "inf", "-inf".
    pub values: Vec<JsonNumber>,
}

/// A number that JSON can carry, with NaN/Inf as strings.
#[derive(Clone, Copy, Debug)]
pub struct JsonNumber(pub f64);

impl Serialize for JsonNumber {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("nan")
        } else if v.is_infinite() {
            s.serialize_str(if v > 0.0 { "inf" } else { "-inf" })
        } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
            s.serialize_i64(v as i64)
        } else {
            s.serialize_f64(v)
        }
    }
}

/// A run summary, as `smdebug info` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct TrialInfo {
    /// The run's location.
    pub location: String,
    /// The workers that wrote it.
    pub workers: Vec<String>,
    /// How many workers the collections file declares.
    pub num_workers: usize,
    /// The modes present.
    pub modes: Vec<Mode>,
    /// Number of global steps.
    pub num_steps: usize,
    /// Number of steps per mode.
    pub steps_per_mode: BTreeMap<String, usize>,
    /// The collection names.
    pub collections: Vec<String>,
    /// Number of tensor names (reductions folded into their tensor).
    pub num_tensors: usize,
    /// Whether the end marker (`training_job_end.ts`) exists.
    pub complete: bool,
    /// Why the run ended: `completed`, `stopped: <message>`, or null (still running, or a
    /// Python smdebug run whose marker says nothing).
    pub end_reason: Option<String>,
    /// What the reader had to ignore, e.g. a regex in a collections file that does not compile
    /// (see [`Trial::warnings`]). Left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Trial {
    /// Opens a run directory or object-store URL (`s3://bucket/run`, `memory://run`, …).
    /// Fails when nothing of a run is there yet.
    pub fn open(location: &str) -> Result<Trial> {
        Trial::open_with(location, TrialOptions::default())
    }

    /// Opens with explicit options.
    pub fn open_with(location: &str, options: TrialOptions) -> Result<Trial> {
        let (storage, dir) = source::open(location)?;
        Trial::build(location, storage, dir, options)
    }

    /// Opens a run on an already-built storage (rooted at the run).
    pub fn from_storage(
        location: &str,
        storage: Arc<dyn Storage>,
        options: TrialOptions,
    ) -> Result<Trial> {
        Trial::build(location, storage, None, options)
    }

    /// `dir`: the run's directory when it is on local disk (its event files may be mapped).
    fn build(
        location: &str,
        storage: Arc<dyn Storage>,
        dir: Option<std::path::PathBuf>,
        options: TrialOptions,
    ) -> Result<Trial> {
        let map_root = dir.clone().filter(|_| options.map_files);
        let trial = Trial {
            location: location.to_string(),
            storage,
            files: source::Files::new(map_root, options.file_cache_bytes),
            options,
            state: Mutex::new(State::new(dir)),
        };
        {
            let mut st = trial.lock();
            st.refresh(trial.storage.as_ref())?;
            if !st.has_anything() {
                return Err(Error::NoSuchRun {
                    location: location.to_string(),
                });
            }
        }
        Ok(trial)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the index half-updated in a way that
        // matters more than losing the trial, so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks for new steps, workers, collections and the end marker now.
    pub fn refresh(&self) -> Result<()> {
        self.lock().refresh(self.storage.as_ref())
    }

    fn maybe_refresh(&self) -> Result<MutexGuard<'_, State>> {
        let mut st = self.lock();
        if self.options.auto_refresh
            && !st.finished()
            && st
                .last_refresh
                .is_none_or(|t| t.elapsed() >= self.options.refresh_interval)
        {
            st.refresh(self.storage.as_ref())?;
        }
        Ok(st)
    }

    /// Where the run is.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Every tensor name seen so far, sorted. Reductions are listed under their tensor's name,
    /// as Python smdebug does; read them with [`TrialTensor::reduction_value`].
    pub fn tensor_names(&self) -> Result<Vec<String>> {
        Ok(self.maybe_refresh()?.listed.keys().cloned().collect())
    }

    /// Tensor names of a collection and/or matching a regex (Python `re` syntax, searched
    /// anywhere in the name as Python smdebug's `tensor_names(regex=…)` does).
    pub fn tensor_names_filtered(
        &self,
        collection: Option<&str>,
        regex: Option<&str>,
    ) -> Result<Vec<String>> {
        let re = regex
            .map(|r| {
                PyRegex::new(r).map_err(|e| Error::BadRegex {
                    pattern: r.to_string(),
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let mut st = self.maybe_refresh()?;
        let names = match collection {
            Some(c) => st.collection_members(c)?,
            None => st.listed.keys().cloned().collect(),
        };
        Ok(match re {
            Some(re) => names.into_iter().filter(|n| re.is_match(n)).collect(),
            None => names,
        })
    }

    /// Steps in smdebug's sense: global steps for `None`/`Global`, mode steps for a mode.
    pub fn steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        let st = self.maybe_refresh()?;
        Ok(match mode {
            None | Some(Mode::Global) => st.steps.keys().copied().collect(),
            Some(m) => st
                .steps
                .values()
                .filter(|e| e.mode == m)
                .map(|e| e.mode_step)
                .collect(),
        })
    }

    /// Global steps, optionally only those recorded in `mode`.
    pub fn global_steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        let st = self.maybe_refresh()?;
        Ok(st
            .steps
            .iter()
            .filter(|(_, e)| mode.is_none_or(|m| m == Mode::Global || e.mode == m))
            .map(|(s, _)| *s)
            .collect())
    }

    /// The mode global step `step` was recorded in and its step within that mode, as
    /// [`steps`](Trial::steps) numbers them (a `Global` step is its own global step), or `None`
    /// when the run has no such step: one lookup, for callers going step by step (where
    /// [`global_steps`](Trial::global_steps) would list the whole run at each step).
    pub fn step_mode(&self, step: u64) -> Result<Option<(Mode, u64)>> {
        let st = self.maybe_refresh()?;
        Ok(st.steps.get(&step).map(|e| match e.mode {
            Mode::Global => (Mode::Global, step),
            mode => (mode, e.mode_step),
        }))
    }

    /// Lets go of the event files of global steps before `step` that reads kept (mapped, or
    /// fetched within [`file_cache_bytes`](TrialOptions::file_cache_bytes)), so that the
    /// budget serves the steps to come: for readers that go step by step and do not come back,
    /// as the rule runner does. Without it, a small budget is spent on the first steps and
    /// every later value is a read of its own. Reading those steps again still works (it
    /// reads their files again); values already read keep their bytes.
    pub fn forget_files_before(&self, step: u64) {
        let mut st = self.lock();
        let from = st.files_forgotten_before;
        if step <= from {
            return;
        }
        for entry in st.steps.range(from..step).map(|(_, e)| e) {
            for w in entry.workers.values() {
                w.file.forget(&self.files);
            }
        }
        st.files_forgotten_before = step;
    }

    /// The modes the run recorded steps in.
    pub fn modes(&self) -> Result<Vec<Mode>> {
        let st = self.maybe_refresh()?;
        let mut modes: Vec<Mode> = st.steps.values().map(|e| e.mode).collect();
        modes.sort();
        modes.dedup();
        Ok(modes)
    }

    /// Worker names (`worker_0`, …) seen in collections files or index files.
    pub fn workers(&self) -> Result<Vec<String>> {
        Ok(self.maybe_refresh()?.workers.iter().cloned().collect())
    }

    /// The number of workers the job declared (from the collections files), or as many as
    /// wrote steps when that is more (a run whose collections file is missing declares none).
    pub fn num_workers(&self) -> Result<usize> {
        let st = self.maybe_refresh()?;
        Ok(st.num_workers.max(st.workers.len()))
    }

    /// The collections, merged over workers.
    pub fn collections(&self) -> Result<Vec<Collection>> {
        Ok(self
            .maybe_refresh()?
            .collections
            .values()
            .cloned()
            .collect())
    }

    /// Whether the run wrote its end marker.
    pub fn is_complete(&self) -> Result<bool> {
        Ok(self.maybe_refresh()?.complete)
    }

    /// Why the run ended, when it ended and said so (our writer stores completion or the stop
    /// request's message; Python smdebug's marker is empty, which gives `None`).
    pub fn end_reason(&self) -> Result<Option<EndReason>> {
        Ok(self.maybe_refresh()?.end_reason.clone())
    }

    /// Where `step` stands: available on every worker, not yet, or skipped for good.
    pub fn has_passed_step(&self, step: u64, mode: Option<Mode>) -> Result<StepState> {
        Ok(self
            .maybe_refresh()?
            .step_state(step, mode.unwrap_or(Mode::Global)))
    }

    /// The last global step every worker has written.
    pub fn last_complete_step(&self) -> Result<Option<u64>> {
        Ok(self.maybe_refresh()?.last_complete_step())
    }

    /// Waits until every step in `steps` is available or known to be skipped, polling. Fails
    /// with [`Error::Timeout`] after `timeout`.
    pub fn wait_for_steps(
        &self,
        steps: &[u64],
        mode: Option<Mode>,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mode = mode.unwrap_or(Mode::Global);
        loop {
            {
                let mut st = self.lock();
                st.refresh(self.storage.as_ref())?;
                if steps
                    .iter()
                    .all(|s| st.step_state(*s, mode) != StepState::NotYetAvailable)
                {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("steps {steps:?} ({mode})"),
                    waited: timeout,
                });
            }
            std::thread::sleep(self.options.poll_interval);
        }
    }

    /// A handle on one tensor.
    pub fn tensor(&self, name: &str) -> Result<TrialTensor<'_>> {
        let st = self.maybe_refresh()?;
        if !st.names.contains_key(name) && !st.listed.contains_key(name) {
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: self.location.clone(),
            });
        }
        Ok(TrialTensor {
            trial: self,
            name: name.to_string(),
        })
    }

    /// Every value of the run, step by step in step order: the way to read a whole run (or
    /// several tensors across it) when each step's values can be handled together.
    ///
    /// `mode` picks the steps (`None` or `Global`: all of them); `names` the tensors, by stored
    /// name (`None`: every record, saved reductions included). A few threads read the step
    /// files ahead of the caller, each file once, into reused buffers, and decode the records
    /// with the checks of [`TrialTensor::raw`]; the values are not copied out of the buffers.
    /// Steps listed when this is called are read; steps written later need another call.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), smdebug_io::Error> {
    /// let trial = smdebug_io::trial::Trial::open("/tmp/run")?;
    /// for step in trial.read_steps(None, Some(&["loss"]))? {
    ///     let step = step?;
    ///     for v in &step.values {
    ///         match &v.value {
    ///             Ok(value) => println!("{} {}: {:?}", step.step, v.name, value.to_tensor()),
    ///             Err(e) => eprintln!("{} {}: {e}", step.step, v.name),
    ///         }
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_steps(&self, mode: Option<Mode>, names: Option<&[&str]>) -> Result<StepStream> {
        let (plan, local_root) = {
            let st = self.maybe_refresh()?;
            (st.plan_steps(mode, names), st.local_root.clone())
        };
        StepStream::start(
            self.storage.clone(),
            local_root,
            self.options.max_tensor_bytes,
            plan,
        )
    }

    /// Tensor `name`'s value at a step, its bytes not copied: what
    /// `trial.tensor(name)?.raw_bytes(step, mode, worker)` gives, looked up in one go (one lock,
    /// no handle), for callers that read one value per call (the Python binding's `value`).
    /// An unknown name is [`Error::TensorNotFound`], a tensor saved only as reductions
    /// [`Error::OnlyReductionsSaved`].
    pub fn raw_bytes(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorBytes> {
        let loc = self.locate(name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.read_bytes(name, &loc)
    }

    fn locate(&self, name: &str, step: u64, mode: Mode, worker: Option<&str>) -> Result<Location> {
        let st = self.maybe_refresh()?;
        st.locate(name, step, mode, worker, &self.location)
    }

    /// Tensor `name`'s record at `loc`: only a record tagged `name` gives a value.
    fn read(&self, name: &str, loc: &Location) -> Result<Tensor> {
        source::read_tensor(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.options.max_tensor_bytes,
        )
    }

    /// Tensor `name`'s record at `loc`, its values not copied.
    fn read_bytes(&self, name: &str, loc: &Location) -> Result<TensorBytes> {
        source::read_tensor_bytes(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.options.max_tensor_bytes,
        )
    }

    /// The summary the CLI's `info` prints.
    pub fn info(&self) -> Result<TrialInfo> {
        let st = self.maybe_refresh()?;
        let mut steps_per_mode = BTreeMap::new();
        for e in st.steps.values() {
            *steps_per_mode.entry(e.mode.name().to_string()).or_insert(0) += 1;
        }
        let mut modes: Vec<Mode> = st.steps.values().map(|e| e.mode).collect();
        modes.sort();
        modes.dedup();
        Ok(TrialInfo {
            location: self.location.clone(),
            workers: st.workers.iter().cloned().collect(),
            num_workers: st.num_workers.max(st.workers.len()),
            modes,
            num_steps: st.steps.len(),
            steps_per_mode,
            collections: st.collections.keys().cloned().collect(),
            num_tensors: st.listed.len(),
            complete: st.complete,
            end_reason: st.end_reason.as_ref().map(|r| r.to_string()),
            warnings: st.warnings(),
        })
    }

    /// What reading had to work around, one line each: a regex in the run's collections files
    /// that does not compile selects nothing (its collection keeps the tensor names the files
    /// list), where Python smdebug would have used it; a name listed twice in one index file is
    /// read from its later entry, as Python smdebug does (smdebug's Keras hook writes an
    /// epoch's metrics twice in its last step): one line per name, however many index files
    /// repeat it. Each is also logged (`log::warn!`) once, when first seen.
    pub fn warnings(&self) -> Result<Vec<String>> {
        let st = self.maybe_refresh()?;
        Ok(st.warnings())
    }

    /// The regexes in the run's collections files that neither engine here compiles (the
    /// first kind of [`warnings`](Trial::warnings)), each with its collection and the reason: a
    /// reader with another regex engine (Python's `re`, in `smdebug_rs`) may still use them.
    pub fn unusable_patterns(&self) -> Result<Vec<smdebug_core::UnusablePattern>> {
        let st = self.maybe_refresh()?;
        Ok(st.unusable_patterns.clone())
    }

    /// Names an index file lists twice, each once with the first file that does and how many
    /// do (the second kind of [`warnings`](Trial::warnings)).
    pub fn repeated_names(&self) -> Result<Vec<RepeatedName>> {
        let st = self.maybe_refresh()?;
        Ok(st.repeated_names.values().cloned().collect())
    }

    /// Values of `name` in the CLI's JSON shape: one global step, or every step (in order),
    /// optionally restricted to a mode and a worker.
    pub fn tensor_records(
        &self,
        name: &str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<Vec<TensorRecordJson>> {
        let locations = {
            let st = self.maybe_refresh()?;
            st.locations_for(name, steps, mode, worker, &self.location)?
        };
        locations
            .into_iter()
            .map(|loc| {
                let t = self.read(name, &loc)?;
                Ok(TensorRecordJson {
                    name: name.to_string(),
                    step: loc.step,
                    mode: loc.mode,
                    mode_step: loc.mode_step,
                    worker: loc.file.worker.to_string(),
                    dtype: t.dtype().name().to_string(),
                    shape: t.shape().to_vec(),
                    values: t.to_f64_vec().into_iter().map(JsonNumber).collect(),
                })
            })
            .collect()
    }
}

/// One tensor of a trial.
pub struct TrialTensor<'t> {
    trial: &'t Trial,
    name: String,
}

impl TrialTensor<'_> {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Steps this tensor was saved at (smdebug numbering: global for `None`, else mode steps).
    pub fn steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        let st = self.trial.maybe_refresh()?;
        Ok(st.tensor_steps(&self.name, mode))
    }

    /// The value at a step as an `f64` array (every dtype converts).
    pub fn value(
        &self,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<ArrayD<f64>> {
        Ok(self.raw(step, mode, worker)?.to_array_f64())
    }

    /// The value at a step with its own dtype.
    pub fn raw(&self, step: u64, mode: Option<Mode>, worker: Option<&str>) -> Result<Tensor> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.trial.read(&self.name, &loc)
    }

    /// The value at a step with its own dtype, its bytes not copied: a slice of the event file
    /// as it was read or mapped (for a caller that copies them into an array of its own).
    pub fn raw_bytes(
        &self,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorBytes> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.trial.read_bytes(&self.name, &loc)
    }

    /// A saved reduction of this tensor at a step (e.g. `"mean".parse()?`, `"abs_l2_norm"`).
    pub fn reduction_value(
        &self,
        step: u64,
        reduction: Reduction,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<f64> {
        let name = reduction.tensor_name(&self.name);
        let loc = self
            .trial
            .locate(&name, step, mode.unwrap_or(Mode::Global), worker)
            .map_err(|e| match e {
                Error::TensorNotFound { .. } => Error::ReductionNotSaved {
                    tensor: self.name.clone(),
                    reduction: reduction.to_string(),
                    step,
                },
                other => other,
            })?;
        let t = self.trial.read(&name, &loc)?;
        // A reduction is one number; more than one is not a value to pick from silently.
        match t.to_f64_vec()[..] {
            [v] => Ok(v),
            [] => Err(Error::ReductionNotSaved {
                tensor: self.name.clone(),
                reduction: reduction.to_string(),
                step,
            }),
            ref values => Err(Error::CorruptRecord {
                path: loc.file.path.to_string(),
                offset: loc.start,
                reason: format!(
                    "reduction `{name}` holds {} values; a reduction is one value",
                    values.len()
                ),
            }),
        }
    }

    /// Every saved value of this tensor in a mode, keyed by step (smdebug numbering), as `f64`
    /// arrays. Reads on a few threads when there are many steps: each step is its own event file.
    pub fn values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, ArrayD<f64>>> {
        self.read_every_step(mode, worker, |loc| {
            Ok(self.trial.read(&self.name, loc)?.to_array_f64())
        })
    }

    /// Every saved value of this tensor in a mode, keyed by step, in the dtype it was saved in
    /// (what Python smdebug's `Tensor.values` returns). Reads on a few threads like
    /// [`TrialTensor::values`].
    pub fn raw_values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, Tensor>> {
        self.read_every_step(mode, worker, |loc| self.trial.read(&self.name, loc))
    }

    /// Every saved value of this tensor in a mode, keyed by step, their bytes not copied (see
    /// [`TrialTensor::raw_bytes`]). Reads on a few threads like [`TrialTensor::values`].
    pub fn raw_bytes_values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, TensorBytes>> {
        self.read_every_step(mode, worker, |loc| self.trial.read_bytes(&self.name, loc))
    }

    /// Reads every step of this tensor with `read`, on a few threads when there are many.
    fn read_every_step<T: Send>(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
        read: impl Fn(&Location) -> Result<T> + Sync,
    ) -> Result<BTreeMap<u64, T>> {
        let mode_or_global = mode.unwrap_or(Mode::Global);
        let locations: Vec<(u64, Location)> = {
            let st = self.trial.maybe_refresh()?;
            st.tensor_steps(&self.name, mode)
                .into_iter()
                .map(|s| {
                    Ok((
                        s,
                        st.locate(&self.name, s, mode_or_global, worker, &self.trial.location)?,
                    ))
                })
                .collect::<Result<_>>()?
        };
        let threads = source::reader_threads(locations.len());
        let read_chunk = |chunk: &[(u64, Location)]| -> Result<Vec<(u64, T)>> {
            chunk.iter().map(|(s, loc)| Ok((*s, read(loc)?))).collect()
        };
        if threads <= 1 {
            return Ok(read_chunk(&locations)?.into_iter().collect());
        }
        let chunk_len = locations.len().div_ceil(threads);
        let parts: Vec<Result<Vec<(u64, T)>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = locations
                .chunks(chunk_len)
                .map(|c| scope.spawn(|| read_chunk(c)))
                .collect();
            handles
                .into_iter()
                // A panic in a reader thread is a bug: re-raise it here rather than hide it.
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut out = BTreeMap::new();
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Workers that saved this tensor at a step.
    pub fn workers(&self, step: u64, mode: Option<Mode>) -> Result<Vec<String>> {
        let st = self.trial.maybe_refresh()?;
        Ok(st.tensor_workers(&self.name, step, mode.unwrap_or(Mode::Global)))
    }
}
