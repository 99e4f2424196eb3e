//! `NativeTrial`: smdebug-io's [`Trial`] for the Python `smdebug_rs.trials.Trial`.
//!
//! Modes cross as smdebug names (`"TRAIN"`, `None` for GLOBAL); step numbers follow smdebug
//! (global steps for GLOBAL, mode steps otherwise). The reader runs with the GIL released.
//! Every answer about steps, workers and where a step stands is the `Trial`'s own (Python
//! smdebug 1.0.34's semantics live there); this module only converts.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use smdebug_core::Mode;
use smdebug_io::trial::{StepRange, TrialOptions};
use smdebug_io::{Error, StepState, Trial};

use crate::convert::{mode, to_python, value_to_numpy};
use crate::errors::{io_error, read_error};

/// How long a blocking call waits with the GIL released before it checks for a signal
/// (Ctrl-C) and waits again.
const SIGNAL_CHECK: Duration = Duration::from_millis(200);

#[pyclass(frozen, module = "smdebug_rs._native")]
pub struct NativeTrial {
    trial: Trial,
}

#[pymethods]
impl NativeTrial {
    /// Opens a run directory or object-store URL (`s3://…`, `gs://…`, `az://…`).
    ///
    /// `range_start`/`range_end`: Python smdebug's `range_steps`. `window`: its
    /// `SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`. With `wait_for_collections`, waits (as Python
    /// smdebug's `create_trial` does) until the run's collections files are all there, and raises
    /// `MissingCollectionFiles` when the run ends without them.
    #[new]
    #[pyo3(signature = (location, range_start=None, range_end=None, window=1000, wait_for_collections=false))]
    fn new(
        py: Python<'_>,
        location: &str,
        range_start: Option<u64>,
        range_end: Option<u64>,
        window: u64,
        wait_for_collections: bool,
    ) -> PyResult<Self> {
        let options = TrialOptions {
            range_steps: StepRange {
                start: range_start,
                end: range_end,
            },
            incomplete_step_window: window,
            require_collections: wait_for_collections,
            ..TrialOptions::default()
        };
        loop {
            match py.detach(|| Trial::open_with(location, options.clone())) {
                Ok(trial) => return Ok(NativeTrial { trial }),
                Err(Error::MissingCollectionFiles { ended: false, .. }) => {
                    py.detach(|| std::thread::sleep(SIGNAL_CHECK));
                    py.check_signals()?;
                }
                Err(e) => return Err(io_error(py, e)),
            }
        }
    }

    fn location(&self) -> String {
        self.trial.location().to_string()
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
        let mode = self::mode(mode)?;
        // One lookup and one lock per value (`Trial::raw_value`), the GIL released meanwhile.
        let read = py.detach(|| self.trial.raw_value(name, step, Some(mode), worker));
        match read {
            Ok(value) => value_to_numpy(py, &value, self.trial.options().max_tensor_bytes),
            Err(e) => Err(read_error(py, e, mode)),
        }
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
        // Every step at once, read on the Rust reader's threads without the GIL.
        let all = py
            .detach(|| {
                self.trial
                    .tensor(name)
                    .and_then(|t| t.read_values(Some(mode), worker))
            })
            .map_err(|e| read_error(py, e, mode))?;
        let budget = self.trial.options().max_tensor_bytes;
        let out = PyDict::new(py);
        for (step, value) in all {
            out.set_item(step, value_to_numpy(py, &value, budget)?)?;
        }
        Ok(out)
    }
}
