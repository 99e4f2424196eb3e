//! `Trial::release_steps_before`: a reader going step by step lets go of the index of the steps
//! it is past. A released step is never taken for a step without the tensor, nor for one not
//! written yet: every query about it is `Error::StepReleased`; the steps still held read as
//! before, and steps not complete yet (a worker behind) are never released.

use smdebug_core::Mode;
use smdebug_format::layout;
use smdebug_io::crafted::{scalar, write_collections, write_step};
use smdebug_read::Error;
use smdebug_read::trial::{StepState, Trial, TrialOptions};
use smdebug_testkit::runs::write_losses;

/// Steps 0..10 of worker_0: TRAIN steps 0..6 (mode steps 0..6), EVAL steps 6..10 (mode steps
/// 0..4), each saving `loss` = the global step and `acc` = 2 × the step.
fn write_run(run: &std::path::Path, workers: &[&str], steps: std::ops::Range<u64>) {
    for s in steps {
        let (mode, mode_step) = if s < 6 {
            (Mode::Train, s)
        } else {
            (Mode::Eval, s - 6)
        };
        for w in workers {
            let records = [scalar("loss", s as f32), scalar("acc", 2.0 * s as f32)];
            write_step(run, s, w, mode, mode_step, &records);
        }
    }
}

fn is_released(e: &Error, step: u64, mode: Mode) -> bool {
    matches!(e, Error::StepReleased { step: s, mode: m, .. } if *s == step && *m == mode)
}

#[test]
fn released_steps_answer_step_released_and_held_steps_read_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_collections(run, "worker_0", 1);
    write_run(run, &["worker_0"], 0..10);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.released_before(), 0);

    // Global steps 0..8 go: TRAIN mode steps 0..6 and EVAL mode steps 0..2 with them.
    assert_eq!(trial.release_steps_before(8), 8);
    assert_eq!(trial.released_before(), 8);
    let loss = trial.tensor("loss").unwrap();
    for s in 0..8 {
        let e = loss.value(s, None, None).unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
        assert!(e.to_string().contains("was released"), "{e}");
        let e = trial.has_passed_step(s, None).unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
        let e = trial.step_mode(s).unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
        let e = trial.tensor_names_in(Some(s), None).unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
        let e = loss.workers(s, None).unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
        let e = trial
            .wait_for_steps(&[s], None, std::time::Duration::ZERO)
            .unwrap_err();
        assert!(is_released(&e, s, Mode::Global), "{e}");
    }
    for s in 0..6 {
        let e = loss.value(s, Some(Mode::Train), None).unwrap_err();
        assert!(is_released(&e, s, Mode::Train), "{e}");
        let e = trial.global_step(Mode::Train, s).unwrap_err();
        assert!(is_released(&e, s, Mode::Train), "{e}");
    }
    for s in 0..2 {
        let e = loss.value(s, Some(Mode::Eval), None).unwrap_err();
        assert!(is_released(&e, s, Mode::Eval), "{e}");
    }
    // The steps still held read as before, in both numberings, values exact.
    for s in 8..10 {
        let v = loss.value(s, None, None).unwrap();
        assert_eq!(v.iter().next().copied(), Some(s as f64));
        let v = trial
            .tensor("acc")
            .unwrap()
            .value(s - 6, Some(Mode::Eval), None)
            .unwrap();
        assert_eq!(v.iter().next().copied(), Some(2.0 * s as f64));
        assert_eq!(
            trial.has_passed_step(s, None).unwrap(),
            StepState::Available
        );
        assert_eq!(trial.step_mode(s).unwrap(), Some((Mode::Eval, s - 6)));
    }
    // A step past the last is still what it was: after the run's end, not released.
    assert!(matches!(
        loss.value(10, None, None).unwrap_err(),
        Error::StepUnavailable { .. }
    ));
    // Listings hold the steps still held; the names stay known.
    assert_eq!(trial.steps(None).unwrap(), [8, 9]);
    assert_eq!(trial.steps(Some(Mode::Eval)).unwrap(), [2, 3]);
    assert!(trial.steps(Some(Mode::Train)).unwrap().is_empty());
    assert_eq!(trial.tensor_names().unwrap(), ["acc", "loss"]);
    assert_eq!(
        loss.values(None, None)
            .unwrap()
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [8, 9]
    );
    // Releasing less than before changes nothing.
    assert_eq!(trial.release_steps_before(3), 8);
    assert!(is_released(
        &loss.value(7, None, None).unwrap_err(),
        7,
        Mode::Global
    ));
}

/// A run of two workers where worker_1 is behind: only the steps both wrote (the complete
/// ones) can be released; worker_1's late files of the others are still read.
#[test]
fn steps_a_worker_has_not_written_yet_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_collections(run, "worker_0", 2);
    write_collections(run, "worker_1", 2);
    write_run(run, &["worker_0"], 0..10);
    write_run(run, &["worker_1"], 0..4);
    let options = TrialOptions {
        auto_refresh: false,
        ..TrialOptions::default()
    };
    let trial = Trial::open_with(run.to_str().unwrap(), options).unwrap();
    trial.refresh().unwrap();
    assert_eq!(trial.last_complete_step().unwrap(), Some(3));
    // Asked to let go of everything before step 9, the trial lets go of steps 0..4 only.
    assert_eq!(trial.release_steps_before(9), 4);
    let loss = trial.tensor("loss").unwrap();
    assert!(is_released(
        &loss.value(3, None, None).unwrap_err(),
        3,
        Mode::Global
    ));
    assert_eq!(
        trial.has_passed_step(5, None).unwrap(),
        StepState::NotYetAvailable
    );
    // worker_1 catches up: its late steps are read, none lost.
    write_run(run, &["worker_1"], 4..10);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    trial.refresh().unwrap();
    for s in 4..10 {
        assert_eq!(
            trial.has_passed_step(s, None).unwrap(),
            StepState::Available
        );
        assert_eq!(loss.workers(s, None).unwrap(), ["worker_0", "worker_1"]);
        let v = loss.value(s, None, Some("worker_1")).unwrap();
        assert_eq!(v.iter().next().copied(), Some(s as f64));
    }
    // Once the run has ended every step is complete: all may go.
    assert_eq!(trial.release_steps_before(10), 10);
    assert!(trial.steps(None).unwrap().is_empty());
}

/// Steps `steps` of worker_0, TRAIN, `loss` = the step; a collections file of one worker.
fn write_steps(run: &std::path::Path, steps: impl Iterator<Item = u64>) {
    write_collections(run, "worker_0", 1);
    write_losses(run, steps);
}

/// Reads a run the way the rule runner does with a read-ahead: every step held, in order, then
/// lets go of it, refreshing until the trial is complete (or a refresh brings nothing new).
/// Returns every step read with its value, and how many steps were held at most at once.
fn read_step_by_step(trial: &Trial) -> (Vec<(u64, f64)>, usize) {
    let mut read = Vec::new();
    let mut most_held = 0;
    let mut next = 0;
    loop {
        let steps = trial.all_steps(None).unwrap();
        most_held = most_held.max(steps.len());
        let new: Vec<u64> = steps.into_iter().filter(|s| *s >= next).collect();
        for &s in &new {
            let v = trial.tensor("loss").unwrap().value(s, None, None).unwrap();
            read.push((s, v.iter().next().copied().unwrap()));
            next = s + 1;
        }
        if trial.is_complete().unwrap() && new.is_empty() {
            break;
        }
        trial.release_steps_before(next);
        trial.refresh().unwrap();
        if new.is_empty() && trial.all_steps(None).unwrap().iter().all(|s| *s < next) {
            break;
        }
    }
    (read, most_held)
}

/// With a read-ahead, a trial opened on a finished run of 500 steps holds a stretch of them at
/// a time: a reader going step by step reads every step once, in order, values exact, and the
/// trial is complete once the last stretch is read, not before.
#[test]
fn a_trial_reading_ahead_holds_a_stretch_and_reads_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_steps(run, 0..500);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let options = TrialOptions {
        index_read_ahead: Some(40),
        auto_refresh: false,
        ..TrialOptions::default()
    };
    let trial = Trial::open_with(run.to_str().unwrap(), options).unwrap();
    assert_eq!(trial.all_steps(None).unwrap(), (0..40).collect::<Vec<_>>());
    assert!(!trial.is_complete().unwrap(), "460 steps are still to read");
    // A step not read yet is not yet available, not unavailable.
    assert_eq!(
        trial.has_passed_step(300, None).unwrap(),
        StepState::NotYetAvailable
    );
    let (read, most_held) = read_step_by_step(&trial);
    assert_eq!(read, (0..500).map(|s| (s, s as f64)).collect::<Vec<_>>());
    assert!(most_held <= 80, "held {most_held} steps at once");
    assert!(trial.is_complete().unwrap());
    assert_eq!(
        trial.has_passed_step(500, None).unwrap(),
        StepState::Unavailable
    );
}

/// Steps saved further apart than the read-ahead are still all read (the next stretch past the
/// horizon is read when none is before it), on a finished run and on one still being written.
#[test]
fn steps_further_apart_than_the_read_ahead_are_all_read() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    let saved: Vec<u64> = (0..30).map(|i| i * 97).collect();
    write_steps(run, saved[..20].iter().copied());
    let options = TrialOptions {
        index_read_ahead: Some(10),
        auto_refresh: false,
        ..TrialOptions::default()
    };
    let trial = Trial::open_with(run.to_str().unwrap(), options).unwrap();
    let (read, _) = read_step_by_step(&trial);
    assert_eq!(
        read,
        saved[..20]
            .iter()
            .map(|s| (*s, *s as f64))
            .collect::<Vec<_>>()
    );
    assert!(!trial.is_complete().unwrap());
    // The writer goes on, then ends the run: the reader reads the rest.
    write_steps(run, saved[20..].iter().copied());
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    trial.refresh().unwrap();
    let (rest, _) = read_step_by_step(&trial);
    assert_eq!(
        rest,
        saved[20..]
            .iter()
            .map(|s| (*s, *s as f64))
            .collect::<Vec<_>>()
    );
    assert!(trial.is_complete().unwrap());
}

/// A reader with a read-ahead that has not moved (its rules look back over every step, so it
/// lets go of none) on a run that ends with fewer steps than the read-ahead: once the end
/// marker is there, the trial is complete at the next refresh, and a step written after the
/// horizon is still found before it is. (A listing that started at the horizon once the run
/// ended never looked past it: the rule runner of a one-step job waited out its time-out.)
#[test]
fn a_run_that_ends_within_the_read_ahead_is_complete_though_the_reader_never_moved() {
    // The trial opens as the job starts (its collections file only), then the job writes
    // one step and ends.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_steps(run, 0..0);
    let trial = Trial::open_with(run.to_str().unwrap(), options_ahead(10)).unwrap();
    trial.refresh().unwrap();
    assert!(trial.all_steps(None).unwrap().is_empty());
    write_steps(run, 0..1);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    for _ in 0..3 {
        trial.refresh().unwrap();
    }
    assert_eq!(trial.all_steps(None).unwrap(), [0]);
    assert!(trial.is_complete().unwrap());

    // Past the horizon: steps 0..10 and 15 with the reader still at 0 keep the trial
    // incomplete (step 15 is not read while the reader has not moved) until the reader gets
    // there.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_steps(run, (0..10).chain([15]));
    let trial = Trial::open_with(run.to_str().unwrap(), options_ahead(10)).unwrap();
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    for _ in 0..3 {
        trial.refresh().unwrap();
    }
    assert_eq!(trial.all_steps(None).unwrap(), (0..10).collect::<Vec<_>>());
    assert!(!trial.is_complete().unwrap(), "step 15 is still to read");
    let (read, _) = read_step_by_step(&trial);
    let expected: Vec<(u64, f64)> = (0..10).chain([15]).map(|s| (s, s as f64)).collect();
    assert_eq!(read, expected);
    assert!(trial.is_complete().unwrap());
}

fn options_ahead(steps: u64) -> TrialOptions {
    TrialOptions {
        index_read_ahead: Some(steps),
        auto_refresh: false,
        ..TrialOptions::default()
    }
}
