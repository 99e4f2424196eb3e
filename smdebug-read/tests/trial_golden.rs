//! Runs written by Python smdebug 1.0.34 (committed under tests/data/golden, made by
//! tests/interop/make_golden.py) read back through our Trial with the same names, steps, modes,
//! workers, collections and values — for every dtype, several modes and two workers.

mod support;

use smdebug_read::trial::{StepState, Trial};
use support::expected_run;

fn check_run(name: &str) -> support::Checked {
    support::check_run("golden", name)
}

#[test]
fn reads_python_multi_worker_multi_mode_run_with_every_dtype() {
    let checked = check_run("pysmdebug_multi");
    assert_eq!(
        checked.dtypes.len(),
        12,
        "every numpy dtype smdebug writes: {:?}",
        checked.dtypes
    );
}

#[test]
fn reads_python_run_with_real_payload_checksums() {
    check_run("pysmdebug_checksum");
}

#[test]
fn reads_python_run_that_has_not_ended() {
    check_run("pysmdebug_incomplete");
    let (path, _) = expected_run("golden", "pysmdebug_incomplete");
    let trial = Trial::open(path.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.has_passed_step(2, None).unwrap(),
        StepState::Available
    );
    assert_eq!(
        trial.has_passed_step(3, None).unwrap(),
        StepState::NotYetAvailable,
        "the run has not ended, step 3 may still come"
    );
}

#[test]
fn missing_tensor_step_and_run_are_clear_errors() {
    let (path, _) = expected_run("golden", "pysmdebug_multi");
    let trial = Trial::open(path.to_str().unwrap()).unwrap();
    let err = trial.tensor("no/such/tensor").err().unwrap().to_string();
    assert!(err.contains("no/such/tensor"), "{err}");
    let err = trial
        .tensor("fc1.weight")
        .unwrap()
        .value(999, None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("999") && err.contains("fc1.weight"), "{err}");
    let err = trial
        .tensor("fc1.weight")
        .unwrap()
        .value(0, None, Some("worker_9"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("worker_9"), "{err}");
    let err = Trial::open("/nonexistent/run/dir")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("/nonexistent/run/dir"), "{err}");
    assert_eq!(
        trial.has_passed_step(999, None).unwrap(),
        StepState::Unavailable
    );
}
