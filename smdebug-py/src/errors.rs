//! smdebug-io's errors as the exceptions Python smdebug 1.0.34 raises in the same case.
//!
//! The exception classes live in Python (`smdebug_rs.exceptions`, same names, arguments and
//! messages as `smdebug.exceptions`); this module picks the class and builds the instance. Which
//! error a lookup is (a step that will never come, one not yet there, a tensor not saved at a
//! complete step) is decided by the Rust `Trial`, as Python's `Tensor._step` decides it: here
//! each error only maps to its class.

use pyo3::exceptions::{PyAssertionError, PyKeyError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use smdebug_core::Mode;
use smdebug_read::Error;

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

/// The exception Python smdebug raises for `err`. `mode`: the mode the caller asked in (the
/// reduction-only error does not carry it).
pub fn io_error(py: Python<'_>, err: Error) -> PyErr {
    to_python(py, err, Mode::Global)
}

/// [`io_error`] for a read asked in `mode`.
pub fn read_error(py: Python<'_>, err: Error, mode: Mode) -> PyErr {
    to_python(py, err, mode)
}

fn to_python(py: Python<'_>, err: Error, asked: Mode) -> PyErr {
    // An exception whose arguments include the mode (a failure to build it is the error).
    let with_mode = |m: Mode, build: &dyn Fn(Bound<'_, PyAny>) -> PyErr| {
        mode_key(py, m).map_or_else(|e| e, build)
    };
    match err {
        Error::BadRegex { .. } => PyValueError::new_err(err.to_string()),
        // smdebug's CollectionManager.get raises KeyError for an unknown collection.
        Error::CollectionNotFound { .. } => PyKeyError::new_err(err.to_string()),
        // Python smdebug's tensor_names(step=…, mode=…) looks the step up in a dict.
        Error::UnknownStep { .. } => PyKeyError::new_err(err.to_string()),
        // Python smdebug asserts its range_steps.
        Error::BadRangeSteps { .. } => PyAssertionError::new_err(err.to_string()),
        Error::Timeout { .. } => PyTimeoutError::new_err(err.to_string()),
        Error::MissingCollectionFiles { .. } => smdebug_exception(py, "MissingCollectionFiles", ()),
        Error::TensorNotFound { name, .. } => smdebug_exception(py, "TensorUnavailable", (name,)),
        Error::WorkerNotFound { worker, .. } => smdebug_exception(py, "InvalidWorker", (worker,)),
        Error::StepNotAvailable {
            tensor, step, mode, ..
        } => with_mode(mode, &|m| {
            smdebug_exception(py, "TensorUnavailableForStep", (tensor.clone(), step, m))
        }),
        // smdebug says so in the message: only reductions of the tensor were saved there.
        Error::OnlyReductionsSaved { tensor, step } => with_mode(asked, &|m| {
            smdebug_exception(
                py,
                "TensorUnavailableForStep",
                (tensor.clone(), step, m, true),
            )
        }),
        Error::StepUnavailable { step, mode, .. } => with_mode(mode, &|m| {
            smdebug_exception(py, "StepUnavailable", (step, m))
        }),
        Error::StepNotYetAvailable { step, mode, .. } => with_mode(mode, &|m| {
            smdebug_exception(py, "StepNotYetAvailable", (step, m))
        }),
        Error::NoMoreData {
            step,
            mode,
            last_step,
            ..
        } => {
            let last = last_step.map_or(-1, i128::from);
            with_mode(mode, &|m| {
                smdebug_exception(py, "NoMoreData", (step, m, last))
            })
        }
        // An index entry that locates no record: Python smdebug fails deep in its record reader
        // (`struct.error`); this names the file and the entry.
        Error::BadIndexEntry { .. } => {
            smdebug_exception(py, "IndexReaderException", (err.to_string(),))
        }
        // Over the reader's allocation budget: a MemoryError, nothing of that size allocated.
        Error::Format(smdebug_format::Error::TensorTooLarge { .. }) => {
            smdebug_exception(py, "TensorTooLarge", (err.to_string(),))
        }
        other => smdebug_exception(py, "SMDebugRuntimeError", (other.to_string(),)),
    }
}
