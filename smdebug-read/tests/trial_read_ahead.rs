//! Reading ahead of a caller that reads value by value (`TrialOptions::read_files_ahead`, on
//! by default: event files read ahead of `raw_bytes`, values decoded ahead of `raw_value`)
//! changes nothing a read gives: the same values and the same errors, in whatever order the
//! values are asked for, whatever the file cache holds, for files deleted or cut short after
//! the trial was opened, and for index files read after the values were decoded ahead.

use half::f16;
use smdebug_core::{Mode, TensorView};
use smdebug_read::trial::{Conversion, TensorValue, Trial, TrialOptions};
use smdebug_storage::open_storage;
use smdebug_storage::testing::wait_until;
use smdebug_testkit::runs::every_step_hook_on;
use smdebug_testkit::storage::{EventReads, Intercepted};

/// More steps than one window of files read ahead (256), so the window moves on several times.
const STEPS: u64 = 700;

/// A run of STEPS steps (TRAIN, with an EVAL step every tenth): a float32 matrix and a float16
/// vector every step, an int64 scalar every third step.
fn write_run(dir: &std::path::Path) -> String {
    let run = dir.join("run").to_str().unwrap().to_string();
    let mut hook = every_step_hook_on(open_storage(&run).unwrap());
    for step in 0..STEPS {
        hook.set_mode(if step % 10 == 9 {
            Mode::Eval
        } else {
            Mode::Train
        });
        let w: Vec<f32> = (0..12).map(|i| step as f32 * 0.5 - i as f32).collect();
        hook.save_tensor(
            "w",
            &TensorView::from_slice(&w, &[3, 4]).unwrap(),
            &["weights"],
        );
        if step % 3 == 0 {
            let count = [step as i64 * 3];
            hook.save_tensor(
                "count",
                &TensorView::from_slice(&count, &[]).unwrap(),
                &["metrics"],
            );
        }
        let half: Vec<f16> = (0..5)
            .map(|i| f16::from_f32(step as f32 + i as f32))
            .collect();
        hook.save_tensor(
            "h",
            &TensorView::from_slice(&half, &[5]).unwrap(),
            &["weights"],
        );
        hook.step();
    }
    hook.close();
    run
}

fn options(read_files_ahead: bool, file_cache_bytes: usize) -> TrialOptions {
    TrialOptions {
        read_files_ahead,
        file_cache_bytes,
        ..TrialOptions::default()
    }
}

/// A value asked for: tensor, step, mode.
type Ask = (String, u64, Option<Mode>);

/// One read: the value's dtype, shape and bytes, or the error's text.
type Read = Result<(String, Vec<usize>, Vec<u8>), String>;

/// Reads `(name, step, mode)` in the order given, value by value.
fn read_all(trial: &Trial, order: &[Ask]) -> Vec<Read> {
    order
        .iter()
        .map(|(name, step, mode)| {
            trial
                .raw_bytes(name, *step, *mode, None)
                .map(|v| (v.dtype.name().to_string(), v.shape, v.data.to_vec()))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Reads `(name, step, mode)` in the order given, value by value, with `raw_value` (values
/// decoded ahead when the trial reads ahead).
fn read_values(trial: &Trial, order: &[Ask]) -> Vec<Read> {
    order
        .iter()
        .map(|(name, step, mode)| {
            trial
                .raw_value(name, *step, *mode, None)
                .map_err(|e| e.to_string())
                .and_then(|v| match v {
                    TensorValue::Numbers(v) => {
                        Ok((v.dtype.name().to_string(), v.shape, v.data.to_vec()))
                    }
                    TensorValue::Strings(_) => Err("a string tensor".to_string()),
                })
        })
        .collect()
}

/// The orders a reader asks for values in: tensor by tensor (twice over, so files are fetched
/// again), step by step, backwards, every seventh step, by TRAIN step, and names and steps the
/// run does not have in between.
fn orders(trial: &Trial) -> Vec<(&'static str, Vec<Ask>)> {
    let names = trial.tensor_names().unwrap();
    let steps = trial.global_steps(None).unwrap();
    let by_tensor: Vec<_> = names
        .iter()
        .flat_map(|n| {
            let steps = trial.tensor(n).unwrap().steps(None).unwrap();
            steps.into_iter().map(move |s| (n.clone(), s, None))
        })
        .collect();
    let twice = [by_tensor.clone(), by_tensor.clone()].concat();
    // `count` is not at every step: those reads are errors, the same either way.
    let by_step: Vec<_> = steps
        .iter()
        .flat_map(|s| names.iter().map(move |n| (n.clone(), *s, None)))
        .collect();
    let backwards: Vec<_> = by_tensor.iter().rev().cloned().collect();
    let strided: Vec<_> = by_tensor.iter().step_by(7).cloned().collect();
    let train: Vec<_> = trial
        .steps(Some(Mode::Train))
        .unwrap()
        .into_iter()
        .map(|s| ("w".to_string(), s, Some(Mode::Train)))
        .collect();
    let misses: Vec<_> = (0..40)
        .flat_map(|s| {
            [
                ("count".to_string(), s, None),
                ("no_such_tensor".to_string(), s, None),
                ("w".to_string(), STEPS + s, None),
            ]
        })
        .collect();
    vec![
        ("tensor by tensor, twice", twice),
        ("step by step", by_step),
        ("backwards", backwards),
        ("every seventh", strided),
        ("TRAIN steps", train),
        ("misses", misses),
    ]
}

#[test]
fn reading_ahead_gives_the_values_and_errors_reading_without_it_gives_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let reference = Trial::open_with(&run, options(false, 256 << 20)).unwrap();
    let file_len = std::fs::metadata(
        dir.path()
            .join("run/events/000000000000/000000000000_worker_0.tfevents"),
    )
    .unwrap()
    .len() as usize;
    // Room for every file, for a few (reading ahead stops when the budget is spent), none.
    for budget in [256 << 20, 20 * file_len, 0] {
        for (what, order) in orders(&reference) {
            let want = read_all(
                &Trial::open_with(&run, options(false, budget)).unwrap(),
                &order,
            );
            let got = read_all(
                &Trial::open_with(&run, options(true, budget)).unwrap(),
                &order,
            );
            // Values decoded ahead (`raw_value`), and `raw_value` with nothing read ahead.
            let decoded = read_values(
                &Trial::open_with(&run, options(true, budget)).unwrap(),
                &order,
            );
            let plain = read_values(
                &Trial::open_with(&run, options(false, budget)).unwrap(),
                &order,
            );
            assert_eq!(want.len(), got.len());
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(w == g, "{what}, budget {budget}: read {i} {:?}", order[i]);
            }
            for (i, ((w, d), p)) in want.iter().zip(&decoded).zip(&plain).enumerate() {
                assert!(
                    w == p,
                    "{what}, budget {budget}: raw_value {i} {:?}",
                    order[i]
                );
                assert!(
                    w == d,
                    "{what}, budget {budget}: decoded {i} {:?}",
                    order[i]
                );
            }
            let errors = want.iter().filter(|r| r.is_err()).count();
            let expected = match what {
                "misses" => 2 * 40 + 26, // every unknown name and step, `count` off its steps
                "step by step" => 2 * STEPS as usize / 3, // `count` off its steps
                _ => 0,
            };
            assert_eq!(errors, expected, "{what}, budget {budget}");
        }
    }
}

#[test]
fn a_file_deleted_or_cut_short_after_opening_is_the_same_error_with_or_without_reading_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let event = |step: u64| {
        dir.path().join(format!(
            "run/events/{step:012}/{step:012}_worker_0.tfevents"
        ))
    };
    let ahead = Trial::open_with(&run, options(true, 256 << 20)).unwrap();
    let not_ahead = Trial::open_with(&run, options(false, 256 << 20)).unwrap();
    let decoding = Trial::open_with(&run, options(true, 256 << 20)).unwrap();
    // All opened; then step 100's file is deleted and step 200's cut to half, before any value
    // is read (the files read ahead of step 1 reach both).
    std::fs::remove_file(event(100)).unwrap();
    let cut = std::fs::OpenOptions::new()
        .write(true)
        .open(event(200))
        .unwrap();
    let len = cut.metadata().unwrap().len();
    cut.set_len(len / 2).unwrap();
    drop(cut);
    let order: Vec<_> = ["w", "h"]
        .iter()
        .flat_map(|n| (0..STEPS).map(move |s| (n.to_string(), s, None)))
        .collect();
    let want = read_all(&not_ahead, &order);
    let got = read_all(&ahead, &order);
    assert_eq!(want, got);
    // Values decoded ahead (from step 2 on, past both files): the same, errors included.
    assert_eq!(read_values(&decoding, &order), want);
    let errors: Vec<_> = order
        .iter()
        .zip(&want)
        .filter_map(|((n, s, _), r)| r.as_ref().err().map(|e| (n.as_str(), *s, e.clone())))
        .collect();
    assert_eq!(
        errors.iter().map(|(n, s, _)| (*n, *s)).collect::<Vec<_>>(),
        [("w", 100), ("w", 200), ("h", 100), ("h", 200)],
        "{errors:?}"
    );
    for (_, step, e) in &errors {
        assert!(
            e.contains(&format!("{step:012}_worker_0.tfevents")),
            "the error names the file: {e}"
        );
    }
}

/// A record damaged in the middle of a run (a byte of step 300's event file changed after the
/// trial was opened) is an error at its step, and only there, for a caller reading value by
/// value tensor after tensor with values decoded ahead (its files read into the trial's blocks
/// of memory), the same error a plain read of that record gives; every other value is the same.
#[test]
fn a_damaged_record_mid_run_is_its_steps_error_for_a_value_by_value_reader() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let reference = Trial::open_with(&run, options(false, 0)).unwrap();
    let reader = Trial::open_with(&run, options(true, 256 << 20)).unwrap();
    let path = dir
        .path()
        .join("run/events/000000000300/000000000300_worker_0.tfevents");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&path, bytes).unwrap();
    let order: Vec<_> = reference
        .tensor_names()
        .unwrap()
        .into_iter()
        .flat_map(|n| {
            let steps = reference.tensor(&n).unwrap().steps(None).unwrap();
            steps.into_iter().map(move |s| (n.clone(), s, None))
        })
        .collect();
    let want = read_all(&reference, &order);
    let got: Vec<Read> = order
        .iter()
        .map(|(name, step, _)| {
            reader
                .raw_value_as(name, *step, None, None, Conversion::Array)
                .map_err(|e| e.to_string())
                .and_then(|v| match v {
                    TensorValue::Numbers(v) => {
                        Ok((v.dtype.name().to_string(), v.shape, v.data.to_vec()))
                    }
                    TensorValue::Strings(_) => Err("a string tensor".to_string()),
                })
        })
        .collect();
    assert_eq!(got, want);
    let failed: Vec<_> = order
        .iter()
        .zip(&want)
        .filter(|(_, r)| r.is_err())
        .map(|((n, s, _), _)| (n.as_str(), *s))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].1, 300, "{failed:?}");
}

/// Once a reader has read two steps of a tensor in order, the next files are read on other
/// threads, a window of 256 files; the reader reads none of them itself once they are in.
/// Without reading ahead, the reader reads every file itself.
#[test]
fn the_files_after_the_callers_position_are_read_on_other_threads() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let open = |read_files_ahead| {
        let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
        let trial =
            Trial::from_storage(&run, storage.clone(), options(read_files_ahead, 256 << 20))
                .unwrap();
        (trial, storage)
    };
    let (trial, storage) = open(true);
    trial.raw_bytes("w", 0, None, None).unwrap();
    trial.raw_bytes("w", 1, None, None).unwrap();
    assert_eq!(storage.by_caller(), 2);
    // The window: steps 2 to 257, read on the pool.
    wait_until(
        std::time::Duration::from_secs(60),
        "the pool to read steps 2 to 257 ahead",
        || storage.by_others() >= 256,
    );
    assert_eq!(storage.by_others(), 256);
    for step in 2..100 {
        trial.raw_bytes("w", step, None, None).unwrap();
    }
    assert_eq!(storage.by_caller(), 2, "the caller read none itself");
    // Without reading ahead: every file by the caller.
    let (plain, plain_storage) = open(false);
    for step in 0..100 {
        plain.raw_bytes("w", step, None, None).unwrap();
    }
    assert_eq!(plain_storage.by_caller(), 100);
    assert_eq!(plain_storage.by_others(), 0);
}

/// A caller reading one tensor value by value (`raw_value_as`, the Python binding's `value`)
/// reads the first two steps itself; then the next 512 values are decoded on the pool's
/// threads, and the 512 after them once half of those are taken, while the caller takes the
/// rest: a caller that finds each batch decoded when it gets there (here it waits for that)
/// reads no file itself, and each of the other files is read once, by another thread. The
/// values are those a reader without reading ahead reads.
#[test]
fn a_caller_reading_value_by_value_takes_values_decoded_on_other_threads() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
    let trial = Trial::from_storage(&run, storage.clone(), options(true, 256 << 20)).unwrap();
    let plain = Trial::open_with(&run, options(false, 256 << 20)).unwrap();
    let steps = trial.tensor("w").unwrap().steps(None).unwrap();
    assert_eq!(steps.len() as u64, STEPS);
    let read = |range: std::ops::Range<usize>| {
        for &step in &steps[range] {
            let value = trial
                .raw_value_as("w", step, None, None, Conversion::Array)
                .unwrap();
            let expected = plain
                .raw_value_as("w", step, None, None, Conversion::Array)
                .unwrap();
            assert_eq!(value, expected, "step {step}");
        }
    };
    let pool_read = |files: usize| {
        wait_until(
            std::time::Duration::from_secs(60),
            &format!("the pool to read {files} files"),
            || storage.by_others() >= files,
        );
    };
    read(0..2);
    assert_eq!(storage.by_caller(), 2);
    // Steps 2 to 513.
    pool_read(512);
    // Taking steps 2 to 257 leaves half the batch: the rest of the run is decoded meanwhile.
    read(2..258);
    pool_read(STEPS as usize - 2);
    read(258..steps.len());
    assert_eq!(storage.by_caller(), 2, "the caller read steps 0 and 1 only");
    assert_eq!(
        storage.by_others() as u64,
        STEPS - 2,
        "every other file once"
    );
}

/// A caller reading value by value, tensor after tensor (`for name in names: for step in
/// steps: raw_value_as(name, step)`, Python's notebook loop), reads each event file once: the
/// values of the next tensors, saved in the same files, are taken out of the files read for
/// the first tensor's values decoded ahead and kept (within the file cache's budget) until the
/// next tensors' reads take them. With a budget too small to keep them, the next tensors read
/// the files again, and the values are the same.
#[test]
fn reading_tensor_after_tensor_value_by_value_reads_each_event_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let read_all = |file_cache_bytes| {
        let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
        let trial =
            Trial::from_storage(&run, storage.clone(), options(true, file_cache_bytes)).unwrap();
        let mut values = Vec::new();
        for name in ["count", "h", "w"] {
            for step in trial.tensor(name).unwrap().steps(None).unwrap() {
                let value = trial
                    .raw_value_as(name, step, None, None, Conversion::Array)
                    .unwrap();
                values.push((name, step, value));
            }
        }
        (values, storage.total())
    };
    let (values, reads) = read_all(256 << 20);
    assert_eq!(values.len() as u64, 2 * STEPS + STEPS.div_ceil(3));
    assert_eq!(reads as u64, STEPS, "every step's file read once");
    let (again, rereads) = read_all(0);
    assert_eq!(again, values);
    assert!(
        rereads as u64 > STEPS,
        "{rereads} reads without a budget to keep files"
    );
}

/// Values taken out of a file for the next tensors were decoded within the budget of the read
/// that took them out (its conversion): a read of another conversion does not take them but
/// reads the file again, within its own budget, and gets the values a plain reader gets; and
/// each value a caller takes is its own (its bytes shared with no other value or file).
#[test]
fn values_taken_out_for_one_conversion_are_read_again_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
    let trial = Trial::from_storage(&run, storage.clone(), options(true, 256 << 20)).unwrap();
    let plain = Trial::open_with(&run, options(false, 256 << 20)).unwrap();
    let sweep = |name: &str, conversion| {
        for step in trial.tensor(name).unwrap().steps(None).unwrap() {
            let value = trial
                .raw_value_as(name, step, None, None, conversion)
                .unwrap();
            let expected = plain
                .raw_value_as(name, step, None, None, conversion)
                .unwrap();
            assert_eq!(value, expected, "{name} at step {step}");
            if let TensorValue::Numbers(mut bytes) = value {
                assert!(
                    bytes.data.is_empty() || bytes.data.is_unique(),
                    "{name} at step {step}: the value's bytes are shared"
                );
                bytes.data.clear();
            }
        }
    };
    sweep("w", Conversion::Array);
    assert_eq!(storage.total() as u64, STEPS, "every file read once");
    // `h` was taken out with `w`, for an array: read for an array, no file is read again.
    sweep("h", Conversion::Array);
    assert_eq!(storage.total() as u64, STEPS);
    // `count` was taken out for an array too: read as stored, its files are read again.
    sweep("count", Conversion::Stored);
    assert!(
        storage.total() as u64 > STEPS,
        "{} reads: `count` was not read again",
        storage.total()
    );
}

/// A worker's run of STEPS steps, `w` at every step holding the worker's rank and the step.
fn write_worker(dir: &std::path::Path, rank: usize) {
    let mut hook = smdebug_testkit::runs::worker_hook(dir, rank, 2);
    for step in 0..STEPS {
        let w = [rank as f32, step as f32];
        hook.save_tensor(
            "w",
            &TensorView::from_slice(&w, &[2]).unwrap(),
            &["weights"],
        );
        hook.step();
    }
    hook.close();
}

/// Copies a worker's run into `run`, its end marker left out: the run goes on.
fn copy_run(from: &std::path::Path, to: &std::path::Path) {
    for entry in walkdir(from) {
        let rel = entry.strip_prefix(from).unwrap();
        if rel.to_str() == Some("training_job_end.ts") {
            continue;
        }
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &dest).unwrap();
    }
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Values decoded ahead are the ones the index gave when they were looked up: once a refresh
/// reads index files that change what a read gives (a worker that sorts first writes the steps
/// already decoded), reads give the new worker's values; with automatic refresh off and before
/// the refresh, the values of the files read before, as a read without decoding ahead.
#[test]
fn values_decoded_ahead_are_not_given_once_a_refresh_changed_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second, run) = (
        dir.path().join("w0"),
        dir.path().join("w1"),
        dir.path().join("run"),
    );
    write_worker(&first, 0);
    write_worker(&second, 1);
    // Only worker 1 has written: every step is incomplete (one of two workers), and readable.
    copy_run(&second, &run);
    let trials: Vec<Trial> = [true, false]
        .into_iter()
        .map(|ahead| {
            Trial::open_with(
                run.to_str().unwrap(),
                TrialOptions {
                    auto_refresh: false,
                    ..options(ahead, 256 << 20)
                },
            )
            .unwrap()
        })
        .collect();
    let w_at = |trial: &Trial, step: u64| match trial.raw_value("w", step, None, None).unwrap() {
        TensorValue::Numbers(v) => v.to_tensor().to_f64_vec(),
        TensorValue::Strings(_) => panic!("a string tensor"),
    };
    for trial in &trials {
        // In order: from step 2 on, the values are decoded ahead.
        for step in 0..10 {
            assert_eq!(w_at(trial, step), [1.0, step as f64]);
        }
    }
    // Worker 0 writes the same steps; nothing is refreshed yet.
    copy_run(&first, &run);
    for trial in &trials {
        for step in 10..20 {
            assert_eq!(w_at(trial, step), [1.0, step as f64], "before the refresh");
        }
        trial.refresh().unwrap();
        // Worker 0 sorts first: reads without a worker read its values now.
        for step in 20..STEPS {
            assert_eq!(w_at(trial, step), [0.0, step as f64], "after the refresh");
        }
    }
}
