//! A real training process (the demo) killed with SIGKILL mid-run leaves every published step
//! readable and no partial step visible; a reader following the run meanwhile never sees a step
//! it cannot read.

use std::process::{Command, Stdio};
use std::time::Duration;

use smdebug_core::Mode;
use smdebug_read::trial::{StepState, Trial, TrialOptions};
use smdebug_storage::testing::{wait_for, wait_until};

/// Every tensor of every listed step reads back (CRC-checked) with the shape its name implies.
fn check_all_steps_readable(trial: &Trial) -> usize {
    let mut values = 0;
    for name in trial.tensor_names().unwrap() {
        let t = trial.tensor(&name).unwrap();
        for step in t.steps(None).unwrap() {
            match t.value(step, None, None) {
                Ok(v) => {
                    if name == "fc1.weight" {
                        assert_eq!(v.shape(), &[64, 32]);
                    }
                    values += 1;
                }
                // Only reductions of this tensor at this step: read one of them instead.
                Err(smdebug_read::Error::OnlyReductionsSaved { .. }) => {}
                Err(e) => panic!("{name} at step {step}: {e}"),
            }
        }
    }
    values
}

#[test]
fn sigkill_leaves_every_published_step_readable() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--out",
            run.to_str().unwrap(),
            "--epochs",
            "100000",
            "--side",
            "8",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Follow the live run until a good number of steps are there.
    let trial = wait_for(
        Duration::from_secs(60),
        "the demo to publish a step",
        || Trial::open_with(run.to_str().unwrap(), TrialOptions::default()).ok(),
    );
    let mut live_reads = 0;
    wait_until(
        Duration::from_secs(60),
        "the demo to publish 300 steps",
        || {
            // Read while it is written: whatever is listed must be whole.
            if let Some(last) = trial.last_complete_step().unwrap() {
                let loss = trial.tensor("loss").unwrap();
                loss.value(last, None, None).unwrap();
                live_reads += 1;
            }
            trial.steps(None).unwrap().len() >= 300
        },
    );
    assert!(live_reads > 0);

    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let after = Trial::open(run.to_str().unwrap()).unwrap();
    assert!(
        !after.is_complete().unwrap(),
        "a killed job wrote no end marker"
    );
    let steps = after.steps(None).unwrap();
    assert!(steps.len() >= 300);
    let values = check_all_steps_readable(&after);
    assert!(
        values > steps.len(),
        "read {values} values over {} steps",
        steps.len()
    );
    // No temporary file is ever listed as data: every step file found is an index entry.
    let last = *steps.last().unwrap();
    assert_eq!(
        after.has_passed_step(last, None).unwrap(),
        StepState::Available
    );
    assert_eq!(
        after.has_passed_step(last + 10_000, None).unwrap(),
        StepState::NotYetAvailable
    );
    assert!(after.steps(Some(Mode::Train)).unwrap().len() > 200);

    // The demo run again into the same folder (it replaces a run, `overwrite(true)`): one
    // epoch of the new job, nothing of the killed one's hundreds of steps left to read as
    // its continuation.
    let rerun = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--out",
            run.to_str().unwrap(),
            "--epochs",
            "1",
            "--side",
            "8",
        ])
        .output()
        .unwrap();
    assert!(
        rerun.status.success(),
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    let replaced = Trial::open(run.to_str().unwrap()).unwrap();
    assert!(replaced.is_complete().unwrap());
    // One epoch: 45 training steps and 12 evaluation steps.
    assert_eq!(
        replaced.global_steps(None).unwrap(),
        (0..57).collect::<Vec<u64>>()
    );
    assert!(
        replaced.warnings().unwrap().is_empty(),
        "{:?}",
        replaced.warnings()
    );
    assert_eq!(replaced.jobs().unwrap().len(), 1);
}
