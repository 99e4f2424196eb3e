//! Saved values of any dtype, shape and content through smdebug_rs's conversion into numpy
//! arrays (`convert::value_to_numpy`), in an embedded CPython with numpy: never a panic (which
//! would reach Python as `PyException`) or an abort; an array is returned only with the stored
//! shape and the stored values, and a refusal is one of the exceptions the package documents
//! (`SMDebugValueError`, `TensorTooLarge`, `UnicodeDecodeError`).
//!
//! Input: `kind | ndims | dims… | data`. `kind`'s low nibble picks the dtype (or strings);
//! each dimension is one byte (0-254), or 255 then eight bytes of a little-endian `u64`, so
//! that shapes numpy refuses (`[2^62, 0]`, 70 dimensions) come up as often as ordinary ones.
//! The numeric data is the next `elements × itemsize` bytes (an input too short for its shape
//! is skipped: the record decoder, fuzzed in smdebug-io, never makes such a value); strings are
//! the rest split at `0xff`.
//!
//! Run with `PYTHONPATH` naming a site-packages that holds numpy (1.x or 2.x); the package's own
//! Python half is loaded from `smdebug-py/python` without its `_native` import.
#![no_main]

use std::sync::Once;

use _native::convert::value_to_numpy;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use smdebug_core::{DType, StringTensor};
use smdebug_read::trial::{TensorBytes, TensorValue};

/// The reader's budget in this target: small, so the `TensorTooLarge` path comes up.
const BUDGET: u64 = 1 << 16;

static PYTHON: Once = Once::new();

/// Starts the interpreter once, with `smdebug_rs` a package whose modules load from
/// `smdebug-py/python/smdebug_rs` but whose `__init__` (which imports the extension) is not run.
fn python() {
    PYTHON.call_once(|| {
        Python::initialize();
        Python::attach(|py| {
            let package = concat!(env!("CARGO_MANIFEST_DIR"), "/../python/smdebug_rs");
            let code = format!(
                "import sys, types\n\
                 import numpy\n\
                 package = types.ModuleType('smdebug_rs')\n\
                 package.__path__ = [{package:?}]\n\
                 sys.modules['smdebug_rs'] = package\n\
                 import smdebug_rs.exceptions\n"
            );
            let code = std::ffi::CString::new(code).expect("no NUL in the setup code");
            py.run(&code, None, None)
                .expect("numpy on PYTHONPATH and smdebug-py/python beside this crate");
        });
    });
}

/// The value the input describes, or `None` when the input is too short for its shape.
fn value(data: &[u8]) -> Option<TensorValue> {
    let (&kind, rest) = data.split_first()?;
    let (&ndims, mut rest) = rest.split_first()?;
    let mut shape = Vec::new();
    for _ in 0..ndims % 72 {
        let (&d, tail) = rest.split_first()?;
        if d == 255 {
            let (wide, tail) = tail.split_at_checked(8)?;
            shape.push(u64::from_le_bytes(wide.try_into().ok()?) as usize);
            rest = tail;
        } else {
            shape.push(usize::from(d));
            rest = tail;
        }
    }
    let choice = usize::from(kind & 0x0f);
    if choice >= DType::ALL.len() {
        let values: Vec<Vec<u8>> = rest.split(|&b| b == 0xff).map(<[u8]>::to_vec).collect();
        // A shape that does not hold this many strings is refused by `StringTensor::new`, as
        // the decoder refuses it: take the values' own count as a vector then.
        let strings = StringTensor::new(shape, values.clone())
            .or_else(|_| StringTensor::new(vec![values.len()], values))
            .ok()?;
        return Some(TensorValue::Strings(strings));
    }
    let dtype = DType::ALL[choice];
    let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    let bytes = elements.checked_mul(dtype.size())?;
    let data = Bytes::copy_from_slice(rest.get(..bytes)?);
    Some(TensorValue::Numbers(TensorBytes { dtype, shape, data }))
}

/// The exceptions a refusal may be.
const REFUSALS: [&str; 3] = ["SMDebugValueError", "TensorTooLarge", "UnicodeDecodeError"];

fuzz_target!(|data: &[u8]| {
    python();
    let Some(value) = value(data) else { return };
    // The value's bytes are its own (as a value decoded ahead is): the conversion may make the
    // array over them. What it must hold is checked against a copy made before.
    let expected = match &value {
        TensorValue::Numbers(b) => TensorValue::Numbers(TensorBytes {
            dtype: b.dtype,
            shape: b.shape.clone(),
            data: Bytes::copy_from_slice(&b.data),
        }),
        TensorValue::Strings(s) => TensorValue::Strings(s.clone()),
    };
    Python::attach(|py| {
        let array = match value_to_numpy(py, "fuzz", value, BUDGET) {
            Ok(array) => array,
            Err(e) => {
                let class = e
                    .get_type(py)
                    .name()
                    .expect("an exception class has a name");
                assert!(
                    REFUSALS.iter().any(|r| class == *r),
                    "refused with {class}: {e}"
                );
                return;
            }
        };
        let shape: Vec<usize> = array.getattr("shape").unwrap().extract().unwrap();
        match &expected {
            TensorValue::Numbers(v) => {
                assert_eq!(shape, v.shape, "the array's shape");
                check_numbers(py, &array, v);
            }
            TensorValue::Strings(s) => {
                assert_eq!(shape, s.shape(), "the array's shape");
                let flat: Vec<String> = array
                    .call_method0("ravel")
                    .and_then(|a| a.call_method0("tolist"))
                    .and_then(|l| l.extract())
                    .unwrap();
                let stored: Vec<&str> = s
                    .values()
                    .iter()
                    .map(|v| std::str::from_utf8(v).expect("a converted string is UTF-8"))
                    .collect();
                // numpy's `<U` strips trailing NULs, as Python smdebug's arrays do.
                let stored: Vec<&str> = stored.iter().map(|t| t.trim_end_matches('\0')).collect();
                assert_eq!(flat, stored, "the strings");
            }
        }
    });
});

/// The array holds the stored values: the same bytes for the dtypes numpy has, 0/1 for bool,
/// the float32 of each bfloat16.
fn check_numbers(py: Python<'_>, array: &Bound<'_, PyAny>, v: &TensorBytes) {
    let bytes = |a: &Bound<'_, PyAny>| -> Vec<u8> {
        let b = a.call_method0("tobytes").unwrap();
        b.cast::<PyBytes>().unwrap().as_bytes().to_vec()
    };
    match v.dtype {
        DType::Bool => {
            let got = bytes(array);
            let want: Vec<u8> = v.data.iter().map(|&b| u8::from(b != 0)).collect();
            assert_eq!(got, want, "bool values");
        }
        DType::BF16 => {
            let got = bytes(array);
            let want: Vec<u8> = v
                .data
                .chunks_exact(2)
                .flat_map(|c| (u32::from(u16::from_le_bytes([c[0], c[1]])) << 16).to_le_bytes())
                .collect();
            // NaN payloads may be quieted by the float conversion; compare NaN as NaN.
            for (g, w) in got.chunks_exact(4).zip(want.chunks_exact(4)) {
                let (g, w) = (
                    f32::from_le_bytes(g.try_into().unwrap()),
                    f32::from_le_bytes(w.try_into().unwrap()),
                );
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "bfloat16 {w} became {g}"
                );
            }
        }
        _ => assert_eq!(bytes(array), v.data.to_vec(), "{} values", v.dtype),
    }
    let _ = py;
}
