//! smdebug-io's errors as the exceptions Python smdebug 1.0.34 raises in the same case.
//!
//! The exception classes live in Python (`smdebug_rs.exceptions`, same names, arguments and
//! messages as `smdebug.exceptions`); this module picks the class and builds the instance.

use pyo3::exceptions::{PyKeyError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use smdebug_core::Mode;
use smdebug_io::{Error, StepState, Trial};

/// An instance of `smdebug_rs.exceptions.<class>(*args)` as a Python error.
pub fn smdebug_exception<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("smdebug_rs.exceptions")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// `smdebug_rs.modes.<MODE>`, the enum member smdebug's exceptions carry.
pub fn mode_key(py: Python<'_>, mode: Mode) -> PyResult<Bound<'_, PyAny>> {
    py.import("smdebug_rs._modes")?
        .getattr("ModeKeys")?
        .getattr(mode.name())
}

/// An error that is not about a lookup (storage, corrupt data, bad arguments).
pub fn io_error(py: Python<'_>, err: Error) -> PyErr {
    match err {
        Error::BadRegex { .. } => PyValueError::new_err(err.to_string()),
        // smdebug's CollectionManager.get raises KeyError for an unknown collection.
        Error::CollectionNotFound { .. } => PyKeyError::new_err(err.to_string()),
        Error::Timeout { .. } => PyTimeoutError::new_err(err.to_string()),
        Error::TensorNotFound { name, .. } => smdebug_exception(py, "TensorUnavailable", (name,)),
        Error::WorkerNotFound { worker, .. } => smdebug_exception(py, "InvalidWorker", (worker,)),
        other => smdebug_exception(py, "SMDebugRuntimeError", (other.to_string(),)),
    }
}

/// What a value lookup of `tensor` at (`step`, `mode`, `worker`) raises, decided as smdebug's
/// `Tensor._step` does: a step that every worker wrote but that lacks the tensor is
/// `TensorUnavailableForStep`; a step that will never come is `StepUnavailable`; one that may
/// still come is `StepNotYetAvailable`.
pub fn lookup_error(
    py: Python<'_>,
    trial: &Trial,
    err: Error,
    tensor: &str,
    step: u64,
    mode: Mode,
    worker: Option<&str>,
) -> PyErr {
    let mode_obj = match mode_key(py, mode) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let workers_here = crate::workers::workers_of(trial, tensor, step, mode).unwrap_or_default();
    match err {
        // smdebug looks the worker up among those that saved the tensor at the step first.
        Error::OnlyReductionsSaved { .. } | Error::StepNotAvailable { .. }
            if worker.is_some_and(|w| {
                !workers_here.is_empty() && !workers_here.iter().any(|x| x == w)
            }) =>
        {
            smdebug_exception(
                py,
                "InvalidWorker",
                (worker.unwrap_or_default().to_string(),),
            )
        }
        // Only reductions of the tensor were saved at this step: smdebug says so in the message.
        Error::OnlyReductionsSaved { .. } if !workers_here.is_empty() => smdebug_exception(
            py,
            "TensorUnavailableForStep",
            (tensor.to_string(), step, mode_obj, true),
        ),
        Error::OnlyReductionsSaved { .. } | Error::StepNotAvailable { .. } => {
            step_error(py, trial, tensor, step, mode, mode_obj)
        }
        // A worker that did not write a step where the tensor is not saved anyway: smdebug
        // reports the step, not the worker.
        Error::WorkerNotFound { .. } if workers_here.is_empty() => {
            step_error(py, trial, tensor, step, mode, mode_obj)
        }
        other => io_error(py, other),
    }
}

/// What smdebug raises for a step where the tensor is not: it asks where the step stands.
fn step_error(
    py: Python<'_>,
    trial: &Trial,
    tensor: &str,
    step: u64,
    mode: Mode,
    mode_obj: Bound<'_, PyAny>,
) -> PyErr {
    match trial.has_passed_step(step, Some(mode)) {
        Ok(StepState::Available) => smdebug_exception(
            py,
            "TensorUnavailableForStep",
            (tensor.to_string(), step, mode_obj),
        ),
        Ok(StepState::Unavailable) => smdebug_exception(py, "StepUnavailable", (step, mode_obj)),
        Ok(StepState::NotYetAvailable) => {
            smdebug_exception(py, "StepNotYetAvailable", (step, mode_obj))
        }
        Err(e) => io_error(py, e),
    }
}
