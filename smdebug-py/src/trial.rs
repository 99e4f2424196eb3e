//! `NativeTrial`: smdebug-read's [`Trial`] for the Python `smdebug_rs.trials.Trial`.
//!
//! Modes cross as smdebug names (`"TRAIN"`, `None` for GLOBAL); step numbers follow smdebug
//! (global steps for GLOBAL, mode steps otherwise). The reader runs with the GIL released.
//! Every answer about steps, workers and where a step stands is the `Trial`'s own (Python
//! smdebug 1.0.34's semantics live there); this module only converts.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use smdebug_core::Mode;
use smdebug_read::Error;
use smdebug_read::StepState;
use smdebug_read::Trial;
use smdebug_read::trial::{Conversion, StepRange, TrialOptions};

use crate::convert::{mode, to_python, value_to_numpy};
use crate::errors::{io_error, read_error};

/// How long a blocking call waits with the GIL released before it checks for a signal
/// (Ctrl-C) and waits again.
const SIGNAL_CHECK: Duration = Duration::from_millis(200);

/// Polls for a run's collections files before the wait is logged (10 s).
const WARN_AFTER_POLLS: u64 = 50;

#[pyclass(frozen, module = "smdebug_rs._native")]
pub struct NativeTrial {
    trial: Trial,
}

impl NativeTrial {
    /// The value of `name` at a step as a numpy array (see [`NativeTrial::value`]).
    fn read_value<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // A value decoded ahead is taken with the GIL held (that never blocks: `decoded_value`);
        // otherwise, with the GIL released, `Trial::raw_value_as` waits for the batch being
        // decoded, or looks the value up and reads it.
        // The budget counts the numpy copy too (`Conversion::Array`), before decoding.
        let conversion = Conversion::Array;
        let read = match self
            .trial
            .decoded_value(name, step, Some(mode), worker, conversion)
        {
            Some(value) => Ok(value),
            None => py.detach(|| {
                self.trial
                    .raw_value_as(name, step, Some(mode), worker, conversion)
            }),
        };
        match read {
            Ok(value) => value_to_numpy(py, name, value, self.trial.options().max_tensor_bytes),
            Err(e) => Err(read_error(py, e, mode)),
        }
    }
}

/// The base of the Python `smdebug_rs.trials.Tensor`: its `value`, called once per step by
/// notebooks, goes straight to the reader (no Python frame, the mode converted here).
#[pyclass(subclass, frozen, module = "smdebug_rs._native")]
pub struct NativeTensor {
    trial: Py<NativeTrial>,
    name: String,
}

#[pymethods]
impl NativeTensor {
    /// `Tensor(name, trial)`: `trial` is a `smdebug_rs.trials.Trial` (its `_native`).
    #[new]
    fn new(name: String, trial: &Bound<'_, PyAny>) -> PyResult<Self> {
        let trial = trial
            .getattr("_native")?
            .cast_into::<NativeTrial>()?
            .unbind();
        Ok(NativeTensor { trial, name })
    }

    /// The value at a step, a numpy array of the stored dtype and shape. `mode`: a `ModeKeys`
    /// member (this package's or smdebug's), its name, or None for GLOBAL (global steps).
    #[pyo3(signature = (step_num, mode=None, worker=None))]
    fn value<'py>(
        &self,
        py: Python<'py>,
        step_num: u64,
        mode: Option<&Bound<'py, PyAny>>,
        worker: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mode = match mode {
            None => Mode::Global,
            Some(m) => mode_of(m)?,
        };
        self.trial
            .get()
            .read_value(py, &self.name, step_num, mode, worker)
    }
}

/// A mode given as Python's `mode_name` takes it: an enum member (its `name`) or a name, in
/// any case.
fn mode_of(m: &Bound<'_, PyAny>) -> PyResult<Mode> {
    let name = if m.is_instance_of::<pyo3::types::PyString>() {
        m.clone()
    } else {
        m.getattr("name").unwrap_or_else(|_| m.clone())
    };
    let Ok(name) = name.extract::<String>() else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "mode must be a ModeKeys member or its name, not {}",
            m.repr()?
        )));
    };
    mode(Some(&name.to_uppercase()))
}

#[pymethods]
impl NativeTrial {
    /// Opens a run directory or object-store URL (`s3://…`, `gs://…`, `az://…`).
    ///
    /// `range_start`/`range_end`: Python smdebug's `range_steps`. `window`: its
    /// `SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`. With `wait_for_collections`, waits (as Python
    /// smdebug's `create_trial` does) until the run's collections files are all there, and raises
    /// `MissingCollectionFiles` when the run ends without them.
    ///
    /// `max_tensor_bytes`: the most bytes one value may cost, decoded and copied into its numpy
    /// array (`TrialOptions::max_tensor_bytes`, 1 GiB by default); over it a read raises
    /// `TensorTooLarge`, a `MemoryError`. `map_files`: memory-map the event files (off by
    /// default: a file cut short in place while mapped would kill the interpreter with SIGBUS).
    /// `read_ahead`: decode the next values on other threads while values are read one by one
    /// (`TrialOptions::read_files_ahead`, on by default).
    #[new]
    #[pyo3(signature = (location, range_start=None, range_end=None, window=1000, wait_for_collections=false, max_tensor_bytes=None, map_files=false, read_ahead=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        location: &str,
        range_start: Option<u64>,
        range_end: Option<u64>,
        window: u64,
        wait_for_collections: bool,
        max_tensor_bytes: Option<u64>,
        map_files: bool,
        read_ahead: bool,
    ) -> PyResult<Self> {
        let defaults = TrialOptions::default();
        let options = TrialOptions {
            max_tensor_bytes: max_tensor_bytes.unwrap_or(defaults.max_tensor_bytes),
            map_files,
            read_files_ahead: read_ahead,
            range_steps: StepRange {
                start: range_start,
                end: range_end,
            },
            incomplete_step_window: window,
            require_collections: wait_for_collections,
            ..defaults
        };
        for attempt in 0u64.. {
            match py.detach(|| Trial::open_with(location, options.clone())) {
                Ok(trial) => return Ok(NativeTrial { trial }),
                Err(Error::MissingCollectionFiles { ended: false, .. }) => {
                    if attempt == WARN_AFTER_POLLS {
                        // As smdebug does after its tenth attempt: the path may be wrong.
                        py.import("logging")?
                            .call_method1("getLogger", ("smdebug_rs",))?
                            .call_method1(
                                "warning",
                                (format!(
                                    "Waiting to read collections files generated by the \
                                     training job, from {location}. If this has been a while, \
                                     you might want to check that the trial is pointed at the \
                                     right path."
                                ),),
                            )?;
                    }
                    py.detach(|| std::thread::sleep(SIGNAL_CHECK));
                    py.check_signals()?;
                }
                Err(e) => return Err(io_error(py, e)),
            }
        }
        unreachable!("the loop above returns")
    }

    fn location(&self) -> String {
        self.trial.location().to_string()
    }

    /// Whether queries look for new files (Python smdebug's `dynamic_refresh`).
    fn auto_refresh(&self) -> bool {
        self.trial.auto_refresh()
    }

    /// Turns automatic refresh on or off (`Trial::set_auto_refresh`).
    fn set_auto_refresh(&self, on: bool) {
        self.trial.set_auto_refresh(on);
    }

    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.trial.refresh())
            .map_err(|e| io_error(py, e))
    }

    /// Every tensor name, sorted; reductions listed under their tensor's name.
    fn tensor_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.trial.tensor_names())
            .map_err(|e| io_error(py, e))
    }

    /// Python's `tensor_names(step=…, mode=…)` before its regex or collection filter.
    #[pyo3(signature = (step=None, mode=None))]
    fn tensor_names_in(
        &self,
        py: Python<'_>,
        step: Option<u64>,
        mode: Option<&str>,
    ) -> PyResult<Vec<String>> {
        let mode = Some(self::mode(mode)?);
        py.detach(|| self.trial.tensor_names_in(step, mode))
            .map_err(|e| io_error(py, e))
    }

    /// The collections as smdebug's collections file stores them (one dict per collection).
    fn collections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let collections = self.trial.collections().map_err(|e| io_error(py, e))?;
        collections
            .iter()
            .map(|c| to_python(py, &c.to_smdebug_json()))
            .collect()
    }

    /// Python's `steps(mode, show_incomplete_steps)`.
    #[pyo3(signature = (mode=None, show_incomplete_steps=false))]
    fn steps(
        &self,
        py: Python<'_>,
        mode: Option<&str>,
        show_incomplete_steps: bool,
    ) -> PyResult<Vec<u64>> {
        let mode = Some(self::mode(mode)?);
        py.detach(|| {
            if show_incomplete_steps {
                self.trial.all_steps(mode)
            } else {
                self.trial.steps(mode)
            }
        })
        .map_err(|e| io_error(py, e))
    }

    /// The global step of a mode step, if the run has it.
    fn global_step(&self, py: Python<'_>, mode: Option<&str>, step: u64) -> PyResult<Option<u64>> {
        let mode = self::mode(mode)?;
        py.detach(|| self.trial.global_step(mode, step))
            .map_err(|e| io_error(py, e))
    }

    /// The mode and mode step of a global step, if the run has it.
    fn mode_modestep(&self, py: Python<'_>, step: u64) -> PyResult<Option<(&'static str, u64)>> {
        let found = py
            .detach(|| self.trial.step_mode(step))
            .map_err(|e| io_error(py, e))?;
        Ok(found.map(|(mode, mode_step)| (mode.name(), mode_step)))
    }

    /// The modes the run recorded steps in (smdebug names, GLOBAL left out as smdebug does).
    fn modes(&self, py: Python<'_>) -> PyResult<Vec<&'static str>> {
        let modes = py
            .detach(|| self.trial.modes())
            .map_err(|e| io_error(py, e))?;
        Ok(modes
            .into_iter()
            .filter(|m| *m != Mode::Global)
            .map(Mode::name)
            .collect())
    }

    fn workers(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.trial.workers())
            .map_err(|e| io_error(py, e))
    }

    fn num_workers(&self, py: Python<'_>) -> PyResult<usize> {
        self.trial.num_workers().map_err(|e| io_error(py, e))
    }

    fn is_complete(&self, py: Python<'_>) -> PyResult<bool> {
        self.trial.is_complete().map_err(|e| io_error(py, e))
    }

    /// Why the run ended (`completed`, `stopped: …`), when its end marker says.
    fn end_reason(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let reason = self.trial.end_reason().map_err(|e| io_error(py, e))?;
        Ok(reason.map(|r| r.to_string()))
    }

    /// smdebug's `StepState` member name for a step.
    #[pyo3(signature = (step, mode=None))]
    fn has_passed_step(
        &self,
        py: Python<'_>,
        step: u64,
        mode: Option<&str>,
    ) -> PyResult<&'static str> {
        let mode = Some(self::mode(mode)?);
        let state = py
            .detach(|| self.trial.has_passed_step(step, mode))
            .map_err(|e| io_error(py, e))?;
        Ok(match state {
            StepState::Available => "AVAILABLE",
            StepState::NotYetAvailable => "NOT_YET_AVAILABLE",
            StepState::Unavailable => "UNAVAILABLE",
        })
    }

    /// Waits for `steps` as Python's `wait_for_steps` does (the Trial decides; this releases the
    /// GIL and checks for signals between short waits). `timeout` in seconds, `None` for ever:
    /// past it, `StepNotYetAvailable` for the first step still missing.
    #[pyo3(signature = (steps, mode=None, timeout=None))]
    fn wait_for_steps(
        &self,
        py: Python<'_>,
        steps: Vec<u64>,
        mode: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let mode = self::mode(mode)?;
        let deadline =
            timeout.map(|t| std::time::Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        for step in steps {
            loop {
                let wait = deadline.map_or(SIGNAL_CHECK, |d| {
                    d.saturating_duration_since(std::time::Instant::now())
                        .min(SIGNAL_CHECK)
                });
                match py.detach(|| self.trial.wait_for_steps(&[step], Some(mode), wait)) {
                    Ok(()) => break,
                    Err(Error::Timeout { .. }) => {
                        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                            return Err(read_error(
                                py,
                                Error::StepNotYetAvailable {
                                    tensor: None,
                                    step,
                                    mode,
                                    location: self.trial.location().to_string(),
                                },
                                mode,
                            ));
                        }
                        py.check_signals()?;
                    }
                    Err(e) => return Err(read_error(py, e, mode)),
                }
            }
        }
        Ok(())
    }

    fn last_complete_step(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.trial.last_complete_step().map_err(|e| io_error(py, e))
    }

    /// The collections' regexes the Rust engines do not compile: `(collection, pattern,
    /// reason)` each (`Trial::unusable_patterns`). Python's `re` may still take them.
    fn unusable_patterns(&self, py: Python<'_>) -> PyResult<Vec<(String, String, String)>> {
        let patterns = self
            .trial
            .unusable_patterns()
            .map_err(|e| io_error(py, e))?;
        Ok(patterns
            .into_iter()
            .map(|p| (p.collection, p.pattern, p.reason))
            .collect())
    }

    /// Names an index file lists twice, one `(first file's line, line)` per name
    /// (`Trial::repeated_names`): the first line stays the same as more files repeat the name,
    /// the second counts them.
    fn repeated_names(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        let names = self.trial.repeated_names().map_err(|e| io_error(py, e))?;
        Ok(names
            .into_iter()
            .map(|r| {
                let line = r.to_string();
                (r.first, line)
            })
            .collect())
    }

    /// Whether `name` is a tensor name of the run (a listed name or a stored reduction name);
    /// a name not known yet is looked for in new files.
    fn has_tensor(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        match py.detach(|| self.trial.tensor(name).map(|_| ())) {
            Ok(()) => Ok(true),
            Err(Error::TensorNotFound { .. }) => Ok(false),
            Err(e) => Err(io_error(py, e)),
        }
    }

    /// Python's `Tensor.steps(mode, show_incomplete_steps)`.
    #[pyo3(signature = (name, mode=None, show_incomplete_steps=false))]
    fn tensor_steps(
        &self,
        py: Python<'_>,
        name: &str,
        mode: Option<&str>,
        show_incomplete_steps: bool,
    ) -> PyResult<Vec<u64>> {
        let mode = Some(self::mode(mode)?);
        py.detach(|| {
            let t = self.trial.tensor(name)?;
            if show_incomplete_steps {
                t.all_steps(mode)
            } else {
                t.steps(mode)
            }
        })
        .map_err(|e| io_error(py, e))
    }

    /// Workers that saved `name` (or reductions of it) at a step.
    #[pyo3(signature = (name, step, mode=None))]
    fn tensor_workers(
        &self,
        py: Python<'_>,
        name: &str,
        step: u64,
        mode: Option<&str>,
    ) -> PyResult<Vec<String>> {
        let mode = Some(self::mode(mode)?);
        self.trial
            .tensor(name)
            .and_then(|t| t.workers(step, mode))
            .map_err(|e| io_error(py, e))
    }

    /// The value of `name` at a step, as a numpy array of the stored dtype and shape (a string
    /// tensor as numpy's `<U…` array, as smdebug returns it).
    #[pyo3(signature = (name, step, mode=None, worker=None))]
    fn value<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        step: u64,
        mode: Option<&str>,
        worker: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_value(py, name, step, self::mode(mode)?, worker)
    }

    /// Every value of `name` at its complete steps in a mode, `{step: array}` in step order
    /// (smdebug's `Tensor.values`).
    #[pyo3(signature = (name, mode=None, worker=None))]
    fn values<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        mode: Option<&str>,
        worker: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mode = self::mode(mode)?;
        // A stretch of steps at a time, read on the Rust reader's threads without the GIL and
        // copied into numpy with it: the Rust side holds one stretch's values, not the run's.
        let mut chunks = py
            .detach(|| {
                self.trial
                    .tensor(name)
                    .and_then(|t| t.value_chunks(Some(mode), worker, Conversion::Array))
            })
            .map_err(|e| read_error(py, e, mode))?;
        let budget = self.trial.options().max_tensor_bytes;
        let out = PyDict::new(py);
        while let Some(chunk) = py.detach(|| chunks.next_chunk()) {
            for (step, value) in chunk.map_err(|e| read_error(py, e, mode))? {
                out.set_item(step, value_to_numpy(py, name, value, budget)?)?;
            }
        }
        Ok(out)
    }
}
