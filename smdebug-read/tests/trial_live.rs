//! A Trial following a run while it is written: new steps appear, never half-written, and the
//! reader ends when the run's end marker appears. Same behaviour on local disk and memory://.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::writer::Writer;
use smdebug_read::trial::{StepState, Trial, TrialOptions};
use smdebug_storage::open_storage;
use smdebug_storage::testing::{wait_for, wait_until};

const STEPS: u64 = 40;

fn values_at(step: u64) -> Vec<f32> {
    (0..256).map(|i| (step * 1000 + i) as f32).collect()
}

/// Writes STEPS steps, one every `pace`; sends (step, instant the step ended) to `ended`.
fn train(location: String, pace: Duration, ended: mpsc::Sender<(u64, Instant)>) {
    let writer = Writer::open(&location).unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    hook.set_mode(Mode::Train);
    for step in 0..STEPS {
        let v = values_at(step);
        hook.save_tensor(
            "w",
            &TensorView::from_slice(&v, &[16, 16]).unwrap(),
            &["weights"],
        );
        hook.save_scalar("loss", step as f64, &["losses"]);
        hook.step();
        ended.send((step, Instant::now())).unwrap();
        // workload: a training step's time; the next step comes `pace` later.
        std::thread::sleep(pace);
    }
    hook.close();
}

fn follow(location: &str) {
    let (tx, rx) = mpsc::channel();
    let loc = location.to_string();
    let trainer = std::thread::spawn(move || train(loc, Duration::from_millis(30), tx));

    let opts = TrialOptions {
        refresh_interval: Duration::from_millis(20),
        poll_interval: Duration::from_millis(20),
        ..TrialOptions::default()
    };
    let what = format!("a run to appear at {location}");
    let trial = wait_for(Duration::from_secs(60), &what, || {
        match Trial::open_with(location, opts.clone()) {
            Ok(t) => Some(t),
            Err(smdebug_read::Error::NoSuchRun { .. }) => None,
            Err(e) => panic!("{e}"),
        }
    });

    let mut latencies = Vec::new();
    for step in 0..STEPS {
        let (s, ended_at) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(s, step);
        trial
            .wait_for_steps(&[step], None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("step {step} never became visible: {e}"));
        latencies.push(ended_at.elapsed());
        assert_eq!(
            trial.has_passed_step(step, None).unwrap(),
            StepState::Available
        );
        // A visible step is whole: both tensors, right values.
        let w = trial.tensor("w").unwrap().raw(step, None, None).unwrap();
        assert_eq!(
            w.to_f64_vec(),
            values_at(step)
                .iter()
                .map(|v| f64::from(*v))
                .collect::<Vec<_>>()
        );
        let loss = trial
            .tensor("loss")
            .unwrap()
            .value(step, Some(Mode::Train), None)
            .unwrap();
        assert_eq!(loss.sum(), step as f64);
    }
    trainer.join().unwrap();
    // Past the last step of a run that has ended: Python smdebug's NoMoreData.
    let err = trial
        .wait_for_steps(&[STEPS], None, Duration::from_secs(30))
        .unwrap_err();
    assert!(
        matches!(
            err,
            smdebug_read::Error::NoMoreData { step, last_step: Some(last), .. }
                if step == STEPS && last == STEPS - 1
        ),
        "{err}"
    );
    assert!(trial.is_complete().unwrap());
    assert_eq!(
        trial.has_passed_step(STEPS, None).unwrap(),
        StepState::Unavailable,
        "after the end marker a missing step will never come"
    );
    latencies.sort();
    eprintln!(
        "{location}: step visible to a following reader after p50 {:?}, max {:?}",
        latencies[latencies.len() / 2],
        latencies.last().unwrap()
    );
}

#[test]
fn follows_a_live_run_on_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    follow(dir.path().join("run").to_str().unwrap());
}

#[test]
fn follows_a_live_run_on_an_in_memory_object_store() {
    // Make sure the store exists for the reader before the writer's first put.
    let location = "memory://trial-live/run";
    open_storage(location).unwrap();
    follow(location);
}

#[test]
fn end_reason_carries_the_stop_message() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("run");
    let location = location.to_str().unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(location).unwrap())
        .unwrap();
    hook.save_scalar("loss", 1.0, &["losses"]);
    hook.step();
    hook.stop_signal()
        .request("LossNotDecreasing fired at step 0");
    hook.close();
    drop(hook);
    let trial = Trial::open(location).unwrap();
    assert_eq!(
        trial.end_reason().unwrap(),
        Some(smdebug_core::EndReason::Stopped(
            "LossNotDecreasing fired at step 0".into()
        ))
    );
    let info = trial.info().unwrap();
    assert_eq!(
        info.end_reason.as_ref().map(ToString::to_string).as_deref(),
        Some("stopped: LossNotDecreasing fired at step 0")
    );
    // In the JSON the report has always written: the words.
    assert_eq!(
        serde_json::to_value(&info).unwrap()["end_reason"],
        "stopped: LossNotDecreasing fired at step 0"
    );
}

/// A collection's members are worked out once and kept while nothing changes; a tensor that
/// appears later (here `w2`, first saved at step 1 and listed once step 1's index file is
/// there) joins the collection on the next refresh.
#[test]
fn a_collection_gains_the_tensors_that_appear_later() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    let writer = Writer::open(full.to_str().unwrap()).unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    for step in 0..2u64 {
        let v = values_at(step);
        let view = TensorView::from_slice(&v, &[16, 16]).unwrap();
        hook.save_tensor("w", &view, &["weights"]);
        if step == 1 {
            hook.save_tensor("w2", &view, &["weights"]);
        }
        hook.save_scalar("loss", step as f64, &["losses"]);
        hook.step();
    }
    // Dropping the hook closes the run and waits for the writer (`close()` alone does not).
    drop(hook);
    // The run as it stood before step 1's index file was published: that file and the end
    // marker moved aside.
    use smdebug_format::layout::{END_MARKER, index_file};
    let step1_index = full.join(index_file(1, "worker_0"));
    let aside = dir.path().join("step1_index.json");
    std::fs::rename(&step1_index, &aside).unwrap();
    std::fs::rename(full.join(END_MARKER), dir.path().join(END_MARKER)).unwrap();
    let trial = Trial::open(full.to_str().unwrap()).unwrap();
    let weights = || trial.tensor_names_filtered(Some("weights"), None).unwrap();
    assert_eq!(weights(), ["w"]);
    assert_eq!(weights(), ["w"]);
    std::fs::rename(&aside, &step1_index).unwrap();
    trial.refresh().unwrap();
    assert_eq!(weights(), ["w", "w2"]);
    assert_eq!(
        trial.tensor_names_filtered(Some("losses"), None).unwrap(),
        ["loss"]
    );
}

/// The hook rewrites its collections file when a step brings a tensor to a collection (here a
/// collection that did not exist, `late`, named only by the save, no regex). A trial that read
/// the file before reads it again when the new names come, so the collection is there with its
/// member; and once the run has ended, it holds what the last file says.
#[test]
fn a_collections_file_rewritten_after_it_was_read_is_read_again() {
    use smdebug_format::layout::index_file;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let writer = Writer::open(run.to_str().unwrap()).unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    let published = |step: u64| {
        let path = run.join(index_file(step, "worker_0"));
        wait_until(Duration::from_secs(30), "the step's index file", || {
            path.exists()
        });
    };
    let v = values_at(0);
    let view = TensorView::from_slice(&v, &[16, 16]).unwrap();
    for step in 0..2u64 {
        hook.save_tensor("w", &view, &["weights"]);
        hook.step();
        published(step);
    }
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.tensor_names_filtered(Some("weights"), None).unwrap(),
        ["w"]
    );
    assert!(trial.tensor_names_filtered(Some("late"), None).is_err());

    hook.save_tensor("w", &view, &["weights"]);
    hook.save_tensor("x", &view, &["late"]);
    hook.step();
    published(2);
    trial.refresh().unwrap();
    assert_eq!(
        trial.tensor_names_filtered(Some("late"), None).unwrap(),
        ["x"],
        "the collection the rewritten file added"
    );
    assert_eq!(
        trial.tensor_names_filtered(Some("weights"), None).unwrap(),
        ["w"]
    );

    // Another name joins an existing collection by name only, at the run's last step.
    hook.save_tensor("y", &view, &["weights"]);
    hook.step();
    drop(hook);
    trial.refresh().unwrap();
    assert!(trial.is_complete().unwrap());
    assert_eq!(
        trial.tensor_names_filtered(Some("weights"), None).unwrap(),
        ["w", "y"]
    );
    let on_disk = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.collections().unwrap().len(),
        on_disk.collections().unwrap().len()
    );
}
