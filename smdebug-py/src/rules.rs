//! Rules from Python: built-in rules by spec (`"LossNotDecreasing:num_steps=20"`) and custom
//! rules written in Python, evaluated together by smdebug-rules' [`RuleRunner`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use smdebug_read::Trial;
use smdebug_rules::{Evidence, Needs, Rule, RuleResult, RuleRunner, RuleSpec, TensorRule};

use crate::convert::to_python;

/// Exceptions a Python rule raises when the data it asked for is not at this step: the step is
/// skipped for that rule, as the built-in rules skip tensors not saved at a step.
const NOT_SAVED_HERE: [&str; 4] = [
    "TensorUnavailableForStep",
    "TensorUnavailable",
    "StepUnavailable",
    "InvalidWorker",
];

/// A rule written in Python: an object with `invoke_at_step(trial, step)`, a debugging rule
/// ([`TensorRule`]). It reads through its own trial, so it declares no tensor selection and asks
/// no hook for anything; a call that returns (rather than raising one of [`NOT_SAVED_HERE`])
/// checked one datapoint unless the result says otherwise, and a rule that checked none over
/// the whole run ends in `NoData`.
///
/// The rule reads through its own `smdebug_rs.trials.Trial` on the same run (handed to every
/// call), so it sees the steps the runner evaluates. What `invoke_at_step` returns decides the
/// result: false or `None` (nothing found), true (fired), a string (fired, with that message),
/// or a dict with `fired`, `message`, `evidence` (list of dicts: tensor, step, measure, value,
/// limit) and `datapoints`.
struct PythonRule {
    name: String,
    rule: Py<PyAny>,
    trial: Py<PyAny>,
    stop: Stop,
}

/// What stops an offline evaluation from inside a Python rule: an exception that is not an
/// `Exception` (`KeyboardInterrupt` from Ctrl-C, `SystemExit` from `sys.exit`,
/// `GeneratorExit`) is not a rule's error. The first one is kept here and the runner's
/// interrupt flag set, so no step or rule is evaluated after it; `run_rules` raises it again
/// once the runner has returned.
#[derive(Clone, Default)]
struct Stop {
    flag: Arc<AtomicBool>,
    raised: Arc<Mutex<Option<PyErr>>>,
}

impl Stop {
    fn set(&self, err: PyErr) {
        let mut raised = self.raised.lock().unwrap_or_else(|p| p.into_inner());
        raised.get_or_insert(err);
        self.flag.store(true, Ordering::Release);
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    fn take(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl PythonRule {
    fn failure(&self, step: u64, reason: String) -> smdebug_rules::Error {
        smdebug_rules::Error::Rule {
            rule: self.name.clone(),
            step,
            source: reason.into(),
        }
    }

    fn result_from(&self, step: u64, out: &Bound<'_, PyAny>) -> PyResult<RuleResult> {
        let mut result = RuleResult::new(step);
        result.datapoints = 1;
        if out.is_none() {
            return Ok(result);
        }
        if let Ok(message) = out.cast::<PyString>() {
            result.fire(message.extract::<String>()?);
            return Ok(result);
        }
        if let Ok(dict) = out.cast::<PyDict>() {
            if let Some(d) = dict.get_item("datapoints")? {
                result.datapoints = d.extract()?;
            }
            let message: Option<String> = match dict.get_item("message")? {
                Some(m) if !m.is_none() => Some(m.extract()?),
                _ => None,
            };
            let fired = match dict.get_item("fired")? {
                Some(f) => f.is_truthy()?,
                None => message.is_some(),
            };
            if fired {
                result
                    .fire(message.unwrap_or_else(|| format!("{} fired at step {step}", self.name)));
            }
            if let Some(evidence) = dict.get_item("evidence")? {
                for e in evidence.try_iter()? {
                    let e = e?;
                    let mut ev = Evidence::new(
                        &e.get_item("tensor")?.extract::<String>()?,
                        e.get_item("step").map_or(Ok(step), |s| s.extract())?,
                        &e.get_item("measure")?.extract::<String>()?,
                        e.get_item("value")?.extract()?,
                    );
                    if let Ok(limit) = e.get_item("limit")
                        && !limit.is_none()
                    {
                        ev = ev.limit(limit.extract()?);
                    }
                    result.evidence.push(ev);
                }
            }
            return Ok(result);
        }
        if out.is_truthy()? {
            result.fire(format!("{} fired at step {step}", self.name));
        }
        Ok(result)
    }
}

impl TensorRule for PythonRule {
    fn name(&self) -> &str {
        &self.name
    }

    fn needs(&self) -> Needs {
        Needs::default().requiring(
            "a step where invoke_at_step returned a result instead of raising \
             TensorUnavailableForStep (or another not-saved-here exception)",
        )
    }

    fn invoke_at_step(&mut self, _trial: &Trial, step: u64) -> smdebug_rules::Result<RuleResult> {
        Python::attach(|py| {
            if self.stop.is_set() {
                // Another rule was interrupted: nothing more is evaluated.
                return Err(self.failure(step, "the evaluation was interrupted".to_string()));
            }
            let out = self
                .rule
                .bind(py)
                .call_method1("invoke_at_step", (self.trial.bind(py), step));
            let out = match out {
                Ok(out) => out,
                Err(err) => {
                    if !err.is_instance_of::<PyException>(py) {
                        // KeyboardInterrupt, SystemExit: the caller's, not the rule's.
                        self.stop.set(err);
                        return Err(self.failure(step, "interrupted".to_string()));
                    }
                    let class = err.get_type(py).name().map(|n| n.to_string());
                    if class.is_ok_and(|c| NOT_SAVED_HERE.contains(&c.as_str())) {
                        return Ok(RuleResult::new(step));
                    }
                    return Err(self.failure(step, describe(py, &err)));
                }
            };
            self.result_from(step, &out).map_err(|err| {
                self.failure(step, format!("bad return value: {}", describe(py, &err)))
            })
        })
    }
}

/// An exception as `Class: message`.
fn describe(py: Python<'_>, err: &PyErr) -> String {
    let class = err
        .get_type(py)
        .name()
        .map_or_else(|_| "Exception".to_string(), |n| n.to_string());
    format!("{class}: {}", err.value(py))
}

/// Runs rules over the run at `path` and returns the summary (every rule's status, firings and
/// evidence) as a dict. `specs` are built-in rules in the CLI's form; `custom` are
/// `(name, rule object, trial object)` triples. With `follow`, waits for a live run to end
/// (Ctrl-C stops following and returns the statuses so far). A `KeyboardInterrupt` or
/// `SystemExit` raised inside a custom rule stops the evaluation and is raised from here.
/// `max_tensor_bytes`: the runner's budget for one tensor read (`None`: 1 GiB).
#[pyfunction]
#[pyo3(signature = (path, specs, custom, follow=false, write_into_run=false, poll_interval_s=0.2, max_tensor_bytes=None))]
#[allow(clippy::too_many_arguments)]
pub fn run_rules<'py>(
    py: Python<'py>,
    path: &str,
    specs: Vec<String>,
    custom: Vec<(String, Py<PyAny>, Py<PyAny>)>,
    follow: bool,
    write_into_run: bool,
    poll_interval_s: f64,
    max_tensor_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyAny>> {
    let rule_error = |e: smdebug_rules::Error| PyValueError::new_err(e.to_string());
    let stop = Stop::default();
    let mut builder = RuleRunner::builder(path)
        .write_into_run(write_into_run)
        .poll_interval(Duration::from_secs_f64(poll_interval_s))
        .interrupt(stop.flag.clone());
    if let Some(limit) = max_tensor_bytes {
        builder = builder.max_tensor_bytes(limit);
    }
    for spec in &specs {
        builder = builder.spec(RuleSpec::parse(spec).map_err(rule_error)?);
    }
    for (name, rule, trial) in custom {
        let stop = stop.clone();
        builder = builder.rule(
            Rule::tensor(PythonRule {
                name,
                rule,
                trial,
                stop,
            }),
            Vec::new(),
        );
    }
    let mut runner = py.detach(|| builder.build()).map_err(rule_error)?;
    let summary = if follow {
        let handle = runner.spawn().map_err(rule_error)?;
        loop {
            if handle.is_finished() {
                break py.detach(|| handle.join());
            }
            if let Some(raised) = stop.take() {
                py.detach(|| handle.cancel()).map_err(rule_error)?;
                return Err(raised);
            }
            if let Err(interrupt) = py.check_signals() {
                py.detach(|| handle.cancel()).map_err(rule_error)?;
                return Err(interrupt);
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
        }
    } else {
        py.detach(|| runner.run_offline())
    };
    if let Some(raised) = stop.take() {
        return Err(raised);
    }
    let summary = summary.map_err(rule_error)?;
    to_python(py, &summary)
}

/// The built-in rules: name, kind, when each fires, parameters and defaults.
#[pyfunction]
pub fn builtin_rules(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_python(py, &smdebug_rules::all_builtin_rules())
}

/// The rules' summary at `path`: a run (its `rules/rule_job_summary.json`) or a summary file
/// (`….json`, such as the one the profiling report writes beside its page), local or in an
/// object store.
#[pyfunction]
pub fn read_summary<'py>(py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyAny>> {
    let read = py.detach(|| -> Result<Option<smdebug_rules::Summary>, String> {
        match path.trim_end_matches('/').rsplit_once('/') {
            Some((dir, file)) if file.ends_with(".json") => {
                let storage = smdebug_storage::open_storage(dir).map_err(|e| e.to_string())?;
                match storage.get(file) {
                    Ok(bytes) => serde_json::from_slice(&bytes)
                        .map(Some)
                        .map_err(|e| format!("{path} is not a rules summary: {e}")),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(format!("cannot read {path}: {e}")),
                }
            }
            _ => smdebug_rules::runner::read_summary(path).map_err(|e| e.to_string()),
        }
    });
    match read {
        Ok(Some(summary)) => to_python(py, &summary),
        Ok(None) => Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
            "no rules summary at {path} (a run holds one when its rules write into it: \
             `smdebug rules --write-into-run`)"
        ))),
        Err(e) => Err(PyValueError::new_err(e)),
    }
}
