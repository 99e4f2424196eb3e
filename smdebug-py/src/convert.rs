//! Values and names crossing into Python: tensors as numpy arrays, modes by name, JSON
//! documents as Python objects.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{PyUnicodeDecodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use smdebug_core::{DType, Mode, Tensor};
use smdebug_read::trial::{TensorBytes, TensorValue};

use crate::errors::smdebug_exception;

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

/// A tensor as a numpy array of its own dtype and shape.
///
/// Numeric dtypes numpy knows natively become an array over the decoded bytes without copying
/// them, when their allocation is aligned for the element type (it practically always is): the
/// bytes become a `uint8` array that owns them and is the typed array's base. Otherwise, and for
/// `bool` (a stored byte may be any value, and numpy's bool must be 0 or 1), the elements are
/// converted into an array of their own. Either way it is one or two numpy C-API calls, no
/// Python-level `view`/`reshape`: reading a long run makes tens of thousands of arrays.
/// float16 is the decoded bytes viewed as `<f2`. bfloat16 has no numpy dtype and comes back as
/// float32 (exact: every bfloat16 is a float32).
pub fn tensor_to_numpy(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    match tensor.dtype() {
        DType::F32 => over_bytes::<f32>(py, tensor),
        DType::F64 => over_bytes::<f64>(py, tensor),
        DType::I8 => over_bytes::<i8>(py, tensor),
        DType::I16 => over_bytes::<i16>(py, tensor),
        DType::I32 => over_bytes::<i32>(py, tensor),
        DType::I64 => over_bytes::<i64>(py, tensor),
        DType::U8 => over_bytes::<u8>(py, tensor),
        DType::U16 => over_bytes::<u16>(py, tensor),
        DType::U32 => over_bytes::<u32>(py, tensor),
        DType::U64 => over_bytes::<u64>(py, tensor),
        DType::Bool => owned_array::<bool>(py, &tensor),
        DType::F16 => {
            let shape = PyTuple::new(py, tensor.shape())?;
            PyArray1::from_vec(py, tensor.into_bytes())
                .call_method1("view", ("<f2",))?
                .call_method1("reshape", (shape,))
        }
        DType::BF16 => {
            let values: Vec<f32> = tensor.to_f64_vec().into_iter().map(|v| v as f32).collect();
            shaped(py, tensor.shape(), values)
        }
    }
}

/// The most dimensions an array may have: numpy 1's `NPY_MAXDIMS` (numpy 2 allows 64; one limit
/// for both keeps a run readable the same way in either).
pub const MAX_DIMS: usize = 32;

/// Checks that numpy can make an array of `shape` with elements of `itemsize` bytes, before any
/// numpy call: at most [`MAX_DIMS`] dimensions, and the product of the non-zero dimensions
/// times the item size within `isize` (numpy's own check, which it applies to empty arrays too:
/// `[2**62, 0]` of float32 is refused). A shape numpy would refuse is `SMDebugValueError` naming
/// the tensor, never a failed array that aborts the conversion.
pub fn check_numpy_shape(
    py: Python<'_>,
    name: &str,
    shape: &[usize],
    itemsize: usize,
) -> PyResult<()> {
    let refuse = |why: String| {
        Err(smdebug_exception(
            py,
            "SMDebugValueError",
            (format!("tensor `{name}` of shape {shape:?}: {why}"),),
        ))
    };
    if shape.len() > MAX_DIMS {
        return refuse(format!(
            "{} dimensions, more than numpy's {MAX_DIMS}",
            shape.len()
        ));
    }
    let bytes = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(itemsize as u128, |acc, &d| acc.checked_mul(d as u128));
    if bytes.is_none_or(|b| b > isize::MAX as u128) {
        return refuse(format!(
            "numpy cannot make an array this large ({itemsize}-byte elements)"
        ));
    }
    Ok(())
}

/// The item size of the numpy array a value of `dtype` becomes.
fn numpy_itemsize(dtype: DType) -> usize {
    match dtype {
        DType::BF16 => 4,
        d => d.size(),
    }
}

/// A saved value as a numpy array of its own dtype and shape. When the value's bytes are a
/// buffer of their own (a value taken out of its event file, see
/// `smdebug_read::trial::TrialOptions::read_files_ahead`, or one small enough to be copied out
/// of it) and aligned for the dtype, the array is made over them without a copy: its base is a
/// capsule that owns them (a `PyCapsule`, which the cycle collector does not track: a
/// Python class would be, and a loop keeping tens of thousands of arrays would pay for
/// collections over their bases), as smdebug's arrays have a base of their own (smdebug
/// reshapes a copy), and it is writable and shares its memory with nothing. Otherwise (a value
/// sliced from a kept or mapped file) the bytes are copied into a new array. `bool`, float16
/// and bfloat16 take [`tensor_to_numpy`]'s way, as do big-endian hosts (the stored bytes are
/// little-endian). The shape is checked first ([`check_numpy_shape`]).
pub fn bytes_to_numpy<'py>(
    py: Python<'py>,
    name: &str,
    value: TensorBytes,
) -> PyResult<Bound<'py, PyAny>> {
    check_numpy_shape(py, name, &value.shape, numpy_itemsize(value.dtype))?;
    if cfg!(target_endian = "big") {
        return tensor_to_numpy(py, value.to_tensor());
    }
    match value.dtype {
        DType::F32 => handed_over::<f32>(py, value),
        DType::F64 => handed_over::<f64>(py, value),
        DType::I8 => handed_over::<i8>(py, value),
        DType::I16 => handed_over::<i16>(py, value),
        DType::I32 => handed_over::<i32>(py, value),
        DType::I64 => handed_over::<i64>(py, value),
        DType::U8 => handed_over::<u8>(py, value),
        DType::U16 => handed_over::<u16>(py, value),
        DType::U32 => handed_over::<u32>(py, value),
        DType::U64 => handed_over::<u64>(py, value),
        DType::Bool | DType::F16 | DType::BF16 => tensor_to_numpy(py, value.to_tensor()),
    }
}

/// A saved value, numbers or strings, as the numpy array Python smdebug returns: numbers as
/// [`bytes_to_numpy`]; strings as `numpy.array(list_of_str)` makes them (`<U{longest}`, UTF-8
/// decoded; an element that is not UTF-8 raises `UnicodeDecodeError`, as smdebug's
/// `bytes.decode("utf-8")` does), reshaped to the stored shape. `max_bytes`: the reader's
/// budget, which the unicode array (4 bytes per character) must fit too: over it is
/// `TensorTooLarge` (a `MemoryError`). `name`: the tensor, for errors.
pub fn value_to_numpy<'py>(
    py: Python<'py>,
    name: &str,
    value: TensorValue,
    max_bytes: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let strings = match value {
        TensorValue::Numbers(bytes) => return bytes_to_numpy(py, name, bytes),
        TensorValue::Strings(s) => s,
    };
    // numpy's `<U1` for an empty array: 4 bytes an element.
    check_numpy_shape(py, name, strings.shape(), 4)?;
    let mut texts = Vec::with_capacity(strings.len());
    for v in strings.values() {
        match std::str::from_utf8(v) {
            Ok(t) => texts.push(t),
            Err(e) => return Err(PyUnicodeDecodeError::new_utf8(py, v, e)?.into()),
        }
    }
    let needed = strings.unicode_array_bytes().unwrap_or(u64::MAX);
    if needed > max_bytes {
        return Err(smdebug_exception(
            py,
            "TensorTooLarge",
            (format!(
                "string tensor `{name}` of {} elements needs {needed} bytes as a numpy unicode \
                 array, more than the reader's limit of {max_bytes} bytes (raise it with \
                 create_trial(path, max_tensor_bytes=...))",
                strings.len()
            ),),
        ));
    }
    let np = py.import("numpy")?;
    let array = if texts.is_empty() {
        np.call_method1("array", (PyList::empty(py), "<U1"))?
    } else {
        np.call_method1("array", (texts,))?
    };
    array.call_method1("reshape", (PyTuple::new(py, strings.shape())?,))
}

/// The name of the capsules that own the memory of values handed to numpy.
const VALUE_MEMORY: &std::ffi::CStr = c"smdebug_rs.value_memory";

/// A C-ordered array of `T` over `value`'s bytes (little-endian host): the bytes themselves when
/// they are a buffer of their own, aligned for `T`; else a copy.
fn handed_over<T: numpy::Element>(
    py: Python<'_>,
    value: TensorBytes,
) -> PyResult<Bound<'_, PyAny>> {
    let elements: usize = value.shape.iter().product();
    if elements.checked_mul(std::mem::size_of::<T>()) != Some(value.data.len()) {
        return Err(PyValueError::new_err(format!(
            "{} bytes for shape {:?} of {}",
            value.data.len(),
            value.shape,
            value.dtype
        )));
    }
    let mut memory = match value.data.try_into_mut() {
        Ok(memory) if memory.as_ptr().align_offset(std::mem::align_of::<T>()) == 0 => memory,
        Ok(memory) => return Ok(copied::<T>(py, &value.shape, &memory)),
        Err(shared) => return Ok(copied::<T>(py, &value.shape, &shared)),
    };
    let ptr = memory.as_mut_ptr().cast::<T>();
    // SAFETY: `ptr` points at `elements` elements of `T` (the length was checked above), aligned
    // for `T` (checked above); any bit pattern is a valid value of these numeric types. The
    // memory is `memory`'s alone (`try_into_mut` gave it: no other `Bytes` shares it), and moving
    // `memory` into its owner (a capsule, which drops it when it is destroyed) below does not
    // move its heap buffer, which lives as long as the owner. The array is the owner's only
    // user: numpy holds the owner as the array's base, so the buffer outlives the array and
    // every view of it, and nothing else reads or writes it.
    unsafe {
        let view = numpy::ndarray::ArrayViewD::<T>::from_shape_ptr(
            numpy::ndarray::IxDyn(&value.shape),
            ptr,
        );
        let owner = pyo3::types::PyCapsule::new_with_value(py, memory, VALUE_MEMORY)?;
        Ok(PyArrayDyn::<T>::borrow_from_array(&view, owner.into_any()).into_any())
    }
}

/// A new C-ordered array of `T` of `shape` holding a copy of `data` (little-endian host), whose
/// length was checked against the shape.
fn copied<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
    data: &[u8],
) -> Bound<'py, PyAny> {
    // SAFETY: the array is new and C-contiguous with exactly `data.len()` bytes of elements
    // (checked by the caller), every one of them written below before Python can see it; any
    // bit pattern is a valid value of these numeric types.
    unsafe {
        let array = PyArrayDyn::<T>::new(py, numpy::ndarray::IxDyn(shape), false);
        std::ptr::copy_nonoverlapping(data.as_ptr(), array.data().cast::<u8>(), data.len());
        array.into_any()
    }
}

/// A typed array over the tensor's own bytes (see [`tensor_to_numpy`]); a converted copy when the
/// bytes are not aligned for `T` or the host is big-endian (the stored bytes are little-endian).
fn over_bytes<T>(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>>
where
    T: smdebug_core::Element + numpy::Element + bytemuck::Pod,
{
    let aligned = cfg!(target_endian = "little")
        && tensor
            .bytes()
            .as_ptr()
            .align_offset(std::mem::align_of::<T>())
            == 0;
    if !aligned {
        return owned_array::<T>(py, &tensor);
    }
    let shape = tensor.shape().to_vec();
    let base = PyArray1::from_vec(py, tensor.into_bytes());
    // SAFETY: `base` was made just now and no other reference to its buffer exists, so reading
    // it as a slice cannot race a write.
    let bytes: &[u8] = unsafe { base.as_slice() }
        .map_err(|e| PyValueError::new_err(format!("decoded tensor buffer: {e}")))?;
    // Checks the alignment and that the length is a whole number of elements.
    let elements: &[T] = bytemuck::try_cast_slice(bytes)
        .map_err(|e| PyValueError::new_err(format!("decoded tensor buffer: {e}")))?;
    let view = numpy::ndarray::ArrayView::from_shape(numpy::ndarray::IxDyn(&shape), elements)
        .map_err(|e| PyValueError::new_err(format!("tensor of shape {shape:?}: {e}")))?;
    // SAFETY: the new array reads `base`'s buffer and holds `base` as its base object, which
    // keeps the buffer alive as long as the array (or any view of it) lives.
    let array = unsafe { PyArrayDyn::<T>::borrow_from_array(&view, base.clone().into_any()) };
    Ok(array.into_any())
}

/// The tensor's elements converted into an array of `T` (the tensor's own element type).
fn owned_array<'py, T>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyAny>>
where
    T: smdebug_core::Element + numpy::Element,
{
    let values: Vec<T> = tensor
        .bytes()
        .chunks_exact(std::mem::size_of::<T>())
        .map(T::read_le)
        .collect();
    shaped(py, tensor.shape(), values)
}

fn shaped<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
    values: Vec<T>,
) -> PyResult<Bound<'py, PyAny>> {
    let array = numpy::ndarray::ArrayD::from_shape_vec(numpy::ndarray::IxDyn(shape), values)
        .map_err(|e| PyValueError::new_err(format!("tensor of shape {shape:?}: {e}")))?;
    Ok(PyArrayDyn::from_owned_array(py, array).into_any())
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
