//! Values and names crossing into Python: tensors as numpy arrays, modes by name, JSON
//! documents as Python objects.

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use smdebug_core::{DType, Mode, Tensor};

/// A mode from its smdebug name (`TRAIN`, `EVAL`, `PREDICT`, `GLOBAL`); `None` is `GLOBAL`.
pub fn mode(name: Option<&str>) -> PyResult<Mode> {
    match name {
        None => Ok(Mode::Global),
        Some(n) => Mode::from_name(n).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown mode `{n}` (expected TRAIN, EVAL, PREDICT or GLOBAL)"
            ))
        }),
    }
}

/// The numpy dtype of a stored dtype, little-endian as the bytes are; `None` for bfloat16,
/// which numpy does not have.
fn numpy_dtype(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F16 => "<f2",
        DType::BF16 => return None,
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I8 => "i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "?",
    })
}

/// A tensor as a numpy array of its own dtype and shape.
///
/// The array owns the decoded bytes (a `u8` array made from the `Vec` without copying, viewed
/// as the dtype and reshaped): no copy after the decode. numpy records whether the buffer is
/// aligned for the dtype, so an unaligned buffer still reads correctly. bfloat16 has no numpy
/// dtype and comes back as float32 (exact: every bfloat16 is a float32).
pub fn tensor_to_numpy(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let shape = PyTuple::new(py, tensor.shape())?;
    let Some(dtype) = numpy_dtype(tensor.dtype()) else {
        let values: Vec<f32> = tensor.to_f64_vec().into_iter().map(|v| v as f32).collect();
        return PyArray1::from_vec(py, values)
            .into_any()
            .call_method1("reshape", (shape,));
    };
    PyArray1::from_vec(py, tensor.into_bytes())
        .call_method1("view", (dtype,))?
        .call_method1("reshape", (shape,))
}

/// A serializable Rust value as the Python object `json.loads` makes of it.
pub fn to_python<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| PyValueError::new_err(format!("cannot convert to Python: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}
