//! Profiler data as columns (`{column: values}`), which the Python side turns into pandas
//! DataFrames when pandas is installed: system metrics and framework spans from
//! smdebug-read's profiler reader, and Kineto trace summaries.

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use smdebug_read::profile::{ProfilerReader, SpanQuery, SystemQuery};

use crate::convert::to_python;

fn profiler_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// System metrics of the run at `path`, one row per sample, ordered by time. Column names
/// follow smdebug's `PandasFrame.get_all_system_metrics`; times are absolute (microseconds and
/// seconds since the epoch).
#[pyfunction]
#[pyo3(signature = (path, start_us=None, end_us=None))]
pub fn system_metrics<'py>(
    py: Python<'py>,
    path: &str,
    start_us: Option<u64>,
    end_us: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let samples = py
        .detach(|| {
            let reader = ProfilerReader::open(path)?;
            let query = SystemQuery::default()
                .time_range(start_us.unwrap_or(0), end_us.unwrap_or(u64::MAX));
            reader.system_samples(&query)
        })
        .map_err(profiler_error)?;
    let columns = PyDict::new(py);
    let timestamp: Vec<f64> = samples.iter().map(|s| s.timestamp).collect();
    let timestamp_us: Vec<u64> = samples.iter().map(|s| s.timestamp_us()).collect();
    let value: Vec<f64> = samples.iter().map(|s| s.value).collect();
    columns.set_item("timestamp", PyArray1::from_vec(py, timestamp))?;
    columns.set_item("timestamp_us", PyArray1::from_vec(py, timestamp_us))?;
    columns.set_item("value", PyArray1::from_vec(py, value))?;
    let text = |f: fn(&smdebug_format::system::SystemSample) -> &str| -> Vec<&str> {
        samples.iter().map(f).collect()
    };
    columns.set_item("system_metric", text(|s| &s.name))?;
    columns.set_item("dimension", text(|s| &s.dimension))?;
    columns.set_item("nodeID", text(|s| &s.node_id))?;
    columns.set_item("type", text(|s| &s.metric_type))?;
    Ok(columns)
}

/// Framework spans (step, data loading, forward, backward, optimizer, custom) of the run at
/// `path`, one row per span, ordered by start. Column names follow smdebug's
/// `PandasFrame.get_all_framework_metrics`; `step` and `worker` are -1 where the span has none.
#[pyfunction]
#[pyo3(signature = (path, start_us=None, end_us=None))]
pub fn framework_spans<'py>(
    py: Python<'py>,
    path: &str,
    start_us: Option<u64>,
    end_us: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let spans = py
        .detach(|| {
            let reader = ProfilerReader::open(path)?;
            let mut query = SpanQuery::default();
            if start_us.is_some() || end_us.is_some() {
                query = query.time_range(start_us.unwrap_or(0), end_us.unwrap_or(u64::MAX));
            }
            reader.spans(&query)
        })
        .map_err(profiler_error)?;
    let columns = PyDict::new(py);
    let start: Vec<u64> = spans.iter().map(|s| s.start_us).collect();
    let end: Vec<u64> = spans.iter().map(|s| s.end_us).collect();
    let duration: Vec<u64> = spans.iter().map(|s| s.duration_us()).collect();
    let step: Vec<i64> = spans
        .iter()
        .map(|s| s.step.and_then(|v| i64::try_from(v).ok()).unwrap_or(-1))
        .collect();
    let worker: Vec<i64> = spans
        .iter()
        .map(|s| s.worker.map_or(-1, i64::from))
        .collect();
    columns.set_item("start_time_us", PyArray1::from_vec(py, start))?;
    columns.set_item("end_time_us", PyArray1::from_vec(py, end))?;
    columns.set_item("duration_us", PyArray1::from_vec(py, duration))?;
    columns.set_item(
        "framework_metric",
        spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
    )?;
    columns.set_item("step", PyArray1::from_vec(py, step))?;
    columns.set_item(
        "mode",
        spans
            .iter()
            .map(|s| s.mode.map(|m| m.name()))
            .collect::<Vec<_>>(),
    )?;
    columns.set_item(
        "process",
        spans.iter().map(|s| s.phase.as_str()).collect::<Vec<_>>(),
    )?;
    columns.set_item(
        "nodeID",
        spans.iter().map(|s| s.node.as_str()).collect::<Vec<_>>(),
    )?;
    columns.set_item("worker", PyArray1::from_vec(py, worker))?;
    Ok(columns)
}

/// Summaries of PyTorch profiler (Kineto) trace files, one per rank: span, GPU busy and idle
/// time, and kernel, memcpy, memset, CPU operator and annotation tables.
#[pyfunction]
pub fn kineto_summary(py: Python<'_>, paths: Vec<String>) -> PyResult<Bound<'_, PyAny>> {
    let report = py
        .detach(|| smdebug_read::kineto::summarize_traces(&paths))
        .map_err(profiler_error)?;
    to_python(py, &report)
}
