//! `NativeTrial`: smdebug-io's [`Trial`] for the Python `smdebug_rs.trials.Trial`.
//!
//! Modes cross as smdebug names (`"TRAIN"`, `None` for GLOBAL); step numbers follow smdebug
//! (global steps for GLOBAL, mode steps otherwise). The reader runs with the GIL released.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use smdebug_core::Mode;
use smdebug_io::{StepState, Trial};

use crate::convert::{bytes_to_numpy, mode, to_python};
use crate::errors::{io_error, lookup_error};
use crate::workers::workers_of;

#[pyclass(frozen, module = "smdebug_rs._native")]
pub struct NativeTrial {
    trial: Trial,
}

impl NativeTrial {
    /// The global steps of `mode`'s steps, to tell complete steps from incomplete ones.
    fn global_of(&self, py: Python<'_>, mode: Mode) -> PyResult<HashMap<u64, u64>> {
        let steps = self.trial.steps(Some(mode)).map_err(|e| io_error(py, e))?;
        let globals = self
            .trial
            .global_steps(Some(mode))
            .map_err(|e| io_error(py, e))?;
        Ok(steps.into_iter().zip(globals).collect())
    }

    /// Keeps the steps smdebug shows by default: all of them once the run ended, else those
    /// whose global step is at or before the last step every worker wrote.
    fn completed(&self, py: Python<'_>, steps: Vec<u64>, mode: Mode) -> PyResult<Vec<u64>> {
        if self.trial.is_complete().map_err(|e| io_error(py, e))? {
            return Ok(steps);
        }
        let Some(last) = self
            .trial
            .last_complete_step()
            .map_err(|e| io_error(py, e))?
        else {
            return Ok(Vec::new());
        };
        if mode == Mode::Global {
            return Ok(steps.into_iter().filter(|s| *s <= last).collect());
        }
        let global = self.global_of(py, mode)?;
        Ok(steps
            .into_iter()
            .filter(|s| global.get(s).is_some_and(|g| *g <= last))
            .collect())
    }
}

#[pymethods]
impl NativeTrial {
    /// Opens a run directory or object-store URL (`s3://…`, `gs://…`, `az://…`).
    #[new]
    fn new(py: Python<'_>, location: &str) -> PyResult<Self> {
        let trial = py
            .detach(|| Trial::open(location))
            .map_err(|e| io_error(py, e))?;
        Ok(NativeTrial { trial })
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
        self.trial.tensor_names().map_err(|e| io_error(py, e))
    }

    /// The collections as smdebug's collections file stores them (one dict per collection).
    fn collections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let collections = self.trial.collections().map_err(|e| io_error(py, e))?;
        collections
            .iter()
            .map(|c| to_python(py, &c.to_smdebug_json()))
            .collect()
    }

    #[pyo3(signature = (mode=None, show_incomplete_steps=false))]
    fn steps(
        &self,
        py: Python<'_>,
        mode: Option<&str>,
        show_incomplete_steps: bool,
    ) -> PyResult<Vec<u64>> {
        let mode = self::mode(mode)?;
        let steps = self.trial.steps(Some(mode)).map_err(|e| io_error(py, e))?;
        if show_incomplete_steps {
            return Ok(steps);
        }
        self.completed(py, steps, mode)
    }

    /// The global step of a mode step, if the run has it.
    fn global_step(&self, py: Python<'_>, mode: Option<&str>, step: u64) -> PyResult<Option<u64>> {
        let mode = self::mode(mode)?;
        if mode == Mode::Global {
            let steps = self.trial.steps(None).map_err(|e| io_error(py, e))?;
            return Ok(steps.binary_search(&step).ok().map(|_| step));
        }
        Ok(self.global_of(py, mode)?.get(&step).copied())
    }

    /// The mode and mode step of a global step, if the run has it.
    fn mode_modestep(&self, py: Python<'_>, step: u64) -> PyResult<Option<(&'static str, u64)>> {
        let found = self.trial.step_mode(step).map_err(|e| io_error(py, e))?;
        Ok(found.map(|(mode, mode_step)| (mode.name(), mode_step)))
    }

    /// The modes the run recorded steps in (smdebug names).
    fn modes(&self, py: Python<'_>) -> PyResult<Vec<&'static str>> {
        let modes = self.trial.modes().map_err(|e| io_error(py, e))?;
        Ok(modes.into_iter().map(Mode::name).collect())
    }

    fn workers(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.trial.workers().map_err(|e| io_error(py, e))
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
        let state = self
            .trial
            .has_passed_step(step, Some(self::mode(mode)?))
            .map_err(|e| io_error(py, e))?;
        Ok(match state {
            StepState::Available => "AVAILABLE",
            StepState::NotYetAvailable => "NOT_YET_AVAILABLE",
            StepState::Unavailable => "UNAVAILABLE",
        })
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

    /// Whether `name` is a tensor name of the run (a listed name or a stored reduction name).
    fn has_tensor(&self, name: &str) -> bool {
        self.trial.tensor(name).is_ok()
    }

    #[pyo3(signature = (name, mode=None, show_incomplete_steps=false))]
    fn tensor_steps(
        &self,
        py: Python<'_>,
        name: &str,
        mode: Option<&str>,
        show_incomplete_steps: bool,
    ) -> PyResult<Vec<u64>> {
        let mode = self::mode(mode)?;
        let steps = self
            .trial
            .tensor(name)
            .and_then(|t| t.steps(Some(mode)))
            .map_err(|e| io_error(py, e))?;
        if show_incomplete_steps {
            return Ok(steps);
        }
        self.completed(py, steps, mode)
    }

    /// Workers that saved `name` at a step.
    #[pyo3(signature = (name, step, mode=None))]
    fn tensor_workers(
        &self,
        py: Python<'_>,
        name: &str,
        step: u64,
        mode: Option<&str>,
    ) -> PyResult<Vec<String>> {
        let mode = self::mode(mode)?;
        workers_of(&self.trial, name, step, mode).map_err(|e| io_error(py, e))
    }

    /// The value of `name` at a step, as a numpy array of the stored dtype and shape.
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
        // One lookup and one lock per value (`Trial::raw_bytes`), the GIL released meanwhile.
        let read = py.detach(|| self.trial.raw_bytes(name, step, Some(mode), worker));
        match read {
            Ok(value) => bytes_to_numpy(py, &value),
            Err(e) => Err(lookup_error(py, &self.trial, e, name, step, mode, worker)),
        }
    }

    /// Every value of `name` in a mode, `{step: array}` in step order (completed steps only,
    /// as smdebug's `Tensor.values`).
    #[pyo3(signature = (name, mode=None, worker=None))]
    fn values<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        mode: Option<&str>,
        worker: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mode_name = mode;
        let mode = self::mode(mode)?;
        let steps = self.tensor_steps(py, name, mode_name, false)?;
        // Every step at once, read on the Rust reader's threads without the GIL. Should that
        // fail, or miss a step (another worker's), the step-by-step reads below raise the error
        // smdebug would for the step it concerns.
        let mut all = py
            .detach(|| {
                self.trial
                    .tensor(name)
                    .and_then(|t| t.raw_bytes_values(Some(mode), worker))
            })
            .unwrap_or_default();
        let out = PyDict::new(py);
        for step in steps {
            let read = match all.remove(&step) {
                Some(value) => Ok(value),
                None => py.detach(|| {
                    self.trial
                        .tensor(name)
                        .and_then(|t| t.raw_bytes(step, Some(mode), worker))
                }),
            };
            match read {
                Ok(value) => out.set_item(step, bytes_to_numpy(py, &value)?)?,
                Err(e) => return Err(lookup_error(py, &self.trial, e, name, step, mode, worker)),
            }
        }
        Ok(out)
    }
}
