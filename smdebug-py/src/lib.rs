//! `smdebug_rs._native`: the Rust half of the `smdebug-rs` Python package.
//!
//! The Python half (`python/smdebug_rs/`) gives notebooks smdebug's names and signatures; this
//! module gives it the Rust reader ([`trial`]), the rule runner ([`rules`]) and the profiler
//! readers ([`profiler`]). Values cross as numpy arrays, writable and sharing their memory with
//! nothing: made over the memory a value was decoded into when it is the value's alone (values
//! decoded ahead of a value-by-value loop), else a copy of the bytes read; errors as the
//! exceptions of `smdebug_rs.exceptions`.

// Unsafe code is refused everywhere but in `convert`: handing numpy a buffer it does not copy
// (`PyArray::as_slice`, `borrow_from_array`) has no safe form in the numpy crate. Each use there
// carries its SAFETY argument.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code)]
pub mod convert;
mod errors;
mod profiler;
mod rules;
mod trial;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<trial::NativeTrial>()?;
    m.add_class::<trial::NativeTensor>()?;
    m.add_function(wrap_pyfunction!(rules::run_rules, m)?)?;
    m.add_function(wrap_pyfunction!(rules::builtin_rules, m)?)?;
    m.add_function(wrap_pyfunction!(rules::read_summary, m)?)?;
    m.add_function(wrap_pyfunction!(profiler::system_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(profiler::framework_spans, m)?)?;
    m.add_function(wrap_pyfunction!(profiler::kineto_summary, m)?)?;
    Ok(())
}
