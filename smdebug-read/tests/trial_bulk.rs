//! Reading a whole tensor at once (`values`, `raw_values`) gives what reading it step by step
//! gives, on runs long enough to be read on several threads, whatever the file cache holds: the
//! whole run, part of it (the rest read record by record), or nothing.

mod support;

use std::collections::BTreeMap;

use half::f16;
use smdebug_core::{DType, Mode, Tensor, TensorView};
use smdebug_read::trial::{Trial, TrialOptions};
use smdebug_storage::open_storage;
use smdebug_testkit::runs::every_step_hook_on;
use smdebug_testkit::storage::{EventReads, Intercepted};

/// Steps written: more than one reader thread's share (256 files), so opening parses index
/// files and `values` reads event files on several threads where the machine has the cores.
const STEPS: u64 = 700;

fn weights_at(step: u64) -> Vec<f32> {
    (0..12).map(|i| step as f32 * 0.5 - i as f32).collect()
}

/// A run of STEPS steps: TRAIN steps with a few EVAL steps in between, a float32 matrix, an
/// int64 scalar and a float16 vector every step, so every read path meets several dtypes.
fn write_run(dir: &std::path::Path) -> String {
    let run = dir.join("run").to_str().unwrap().to_string();
    write_run_at(&run);
    run
}

/// [`write_run`] at any storage location (`memory://...` too).
fn write_run_at(run: &str) {
    let mut hook = every_step_hook_on(open_storage(run).unwrap());
    for step in 0..STEPS {
        hook.set_mode(if step % 10 == 9 {
            Mode::Eval
        } else {
            Mode::Train
        });
        let w = weights_at(step);
        hook.save_tensor(
            "w",
            &TensorView::from_slice(&w, &[3, 4]).unwrap(),
            &["weights"],
        );
        let count = [step as i64 * 3];
        hook.save_tensor(
            "count",
            &TensorView::from_slice(&count, &[]).unwrap(),
            &["metrics"],
        );
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
}

/// Every way a trial reads event files: mapped (the default for local runs), and fetched into
/// memory with room for every file, a few, or none.
fn budgets() -> [(&'static str, TrialOptions); 4] {
    let unmapped = |file_cache_bytes| TrialOptions {
        map_files: false,
        file_cache_bytes,
        ..TrialOptions::default()
    };
    [
        ("mapped files", TrialOptions::default()),
        (
            "the default cache",
            unmapped(TrialOptions::default().file_cache_bytes),
        ),
        // A few event files fit; the rest are read record by record.
        ("a cache of 8 KiB", unmapped(8 << 10)),
        ("no cache", unmapped(0)),
    ]
}

/// Every tensor of `trial` read whole, compared with reading it step by step.
fn check_bulk_reads_match_step_reads(trial: &Trial, what: &str) -> usize {
    let mut checked = 0;
    for name in trial.tensor_names().unwrap() {
        let t = trial.tensor(&name).unwrap();
        for mode in [None, Some(Mode::Train), Some(Mode::Eval)] {
            let steps = t.steps(mode).unwrap();
            let raw = match t.raw_values(mode, None) {
                Ok(raw) => raw,
                // Saved only as reductions, or a string tensor: reading one step fails too.
                Err(e) => {
                    let one = t.raw(steps[0], mode, None).unwrap_err();
                    assert_eq!(one.to_string(), e.to_string(), "{what}: {name}");
                    let bytes = trial.raw_bytes(&name, steps[0], mode, None).unwrap_err();
                    assert_eq!(bytes.to_string(), e.to_string(), "{what}: {name}");
                    continue;
                }
            };
            let floats = t.values(mode, None).unwrap();
            assert_eq!(
                raw.keys().copied().collect::<Vec<_>>(),
                steps,
                "{what}: {name}"
            );
            assert_eq!(
                floats.keys().copied().collect::<Vec<_>>(),
                steps,
                "{what}: {name}"
            );
            let bytes = t.raw_bytes_values(mode, None).unwrap();
            assert_eq!(
                bytes.keys().copied().collect::<Vec<_>>(),
                steps,
                "{what}: {name}"
            );
            for (step, value) in &raw {
                let one = t.raw(*step, mode, None).unwrap();
                assert_eq!(value, &one, "{what}: {name} at {mode:?} step {step}");
                assert_eq!(&bytes[step].to_tensor(), &one, "{what}: {name} {step}");
                assert_eq!(
                    t.raw_bytes(*step, mode, None).unwrap(),
                    bytes[step],
                    "{what}: {name} {step}"
                );
                // The one-call form the Python binding's `value` uses.
                assert_eq!(
                    trial.raw_bytes(&name, *step, mode, None).unwrap(),
                    bytes[step],
                    "{what}: {name} {step}"
                );
                let bits =
                    |a: &ndarray::ArrayD<f64>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(floats[step].shape(), one.shape(), "{what}: {name} {step}");
                assert_eq!(
                    bits(&floats[step]),
                    bits(&one.to_array_f64()),
                    "{what}: {name} {step}"
                );
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn whole_tensor_reads_match_step_reads_on_a_long_run_with_any_cache() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    for (what, options) in budgets() {
        let trial = Trial::open_with(&run, options).unwrap();
        assert_eq!(
            trial.steps(None).unwrap(),
            (0..STEPS).collect::<Vec<_>>(),
            "{what}"
        );
        let train: BTreeMap<u64, Tensor> = trial
            .tensor("w")
            .unwrap()
            .raw_values(Some(Mode::Train), None)
            .unwrap();
        assert_eq!(train.len() as u64, STEPS - STEPS / 10, "{what}");
        // Mode steps count within the mode: TRAIN step 9 is global step 10.
        assert_eq!(
            train[&9].to_f64_vec(),
            weights_at(10)
                .iter()
                .map(|v| f64::from(*v))
                .collect::<Vec<_>>(),
            "{what}"
        );
        let count = trial
            .tensor("count")
            .unwrap()
            .raw_values(None, None)
            .unwrap();
        assert_eq!(count[&699].dtype(), DType::I64, "{what}");
        assert!(
            matches!(
                trial.raw_bytes("no_such_tensor", 0, None, None),
                Err(smdebug_read::Error::TensorNotFound { .. })
            ),
            "{what}"
        );
        assert!(
            matches!(
                trial.raw_bytes("count", STEPS, None, None),
                Err(smdebug_read::Error::StepUnavailable { .. })
            ),
            "{what}"
        );
        assert_eq!(count[&699].to_f64_vec(), [2097.0], "{what}");
        let half = trial
            .tensor("h")
            .unwrap()
            .values(Some(Mode::Eval), None)
            .unwrap();
        // EVAL step 3 is global step 39.
        assert_eq!(
            half[&3].iter().copied().collect::<Vec<_>>(),
            [39.0, 40.0, 41.0, 42.0, 43.0],
            "{what}"
        );
        // w, count and h at every step, once for all modes and once for the step's own mode.
        assert_eq!(
            check_bulk_reads_match_step_reads(&trial, what),
            3 * 2 * STEPS as usize,
            "{what}"
        );
    }
}

#[test]
fn whole_tensor_reads_match_step_reads_on_runs_written_by_python_hooks() {
    for name in [
        "pt_healthy",
        "pt_two_workers",
        "pt_exploding",
        "xgb_healthy",
        "tf_keras",
    ] {
        let (path, _) = support::expected_run("hooks", name);
        for (what, options) in budgets() {
            let trial = Trial::open_with(path.to_str().unwrap(), options).unwrap();
            let checked = check_bulk_reads_match_step_reads(&trial, &format!("{name}, {what}"));
            assert!(checked > 0, "{name}: nothing read");
        }
    }
}

/// Every value of every golden run and every run of the hook corpus, read from mapped event
/// files, equals the value read from files fetched into memory and record by record.
#[test]
fn mapped_files_give_the_values_reading_gives() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data");
    let mut runs = Vec::new();
    for set in ["golden", "hooks"] {
        for entry in std::fs::read_dir(data.join(set)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && Trial::open(path.to_str().unwrap()).is_ok() {
                runs.push(path);
            }
        }
    }
    assert!(runs.len() >= 10, "{runs:?}");
    let mut compared = 0;
    for run in &runs {
        let run = run.to_str().unwrap();
        let trials: Vec<(&str, Trial)> = budgets()
            .into_iter()
            .map(|(what, options)| (what, Trial::open_with(run, options).unwrap()))
            .collect();
        let (_, mapped) = &trials[0];
        for name in mapped.tensor_names().unwrap() {
            let t = mapped.tensor(&name).unwrap();
            for step in t.steps(None).unwrap() {
                for worker in t.workers(step, None).unwrap() {
                    let want = t.raw(step, None, Some(&worker));
                    for (what, other) in &trials[1..] {
                        let got = other.tensor(&name).unwrap().raw(step, None, Some(&worker));
                        match (&want, &got) {
                            (Ok(a), Ok(b)) => assert_eq!(a, b, "{run} {name} {step} {what}"),
                            (Err(a), Err(b)) => {
                                assert_eq!(a.to_string(), b.to_string(), "{run} {name} {what}")
                            }
                            _ => panic!("{run} {name} {step} {worker} {what}: {want:?} / {got:?}"),
                        }
                    }
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 1000, "{compared} values compared");
}

/// Everything `read_steps` gives, compared value by value with reading each one on its own
/// (`Trial::raw_bytes` for the same stored name, step and worker; errors alike): the steps in
/// order, each with its own mode numbering. Returns the values compared.
fn check_step_reads_match_value_reads(
    trial: &Trial,
    mode: Option<Mode>,
    names: Option<&[&str]>,
    what: &str,
) -> usize {
    let mut seen = 0;
    let mut last = None;
    let mode_steps = trial.steps(mode).unwrap();
    let global = trial.global_steps(mode).unwrap();
    for step in trial.read_steps(mode, names).unwrap() {
        let step = step.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(last < Some(step.step), "{what}: steps out of order");
        last = Some(step.step);
        let i = global.binary_search(&step.step).unwrap();
        if mode.is_some_and(|m| m != Mode::Global) {
            assert_eq!(step.mode, mode.unwrap(), "{what}");
            assert_eq!(step.mode_step, mode_steps[i], "{what}");
        }
        assert!(!step.values.is_empty(), "{what}: step {} empty", step.step);
        for v in &step.values {
            if let Some(names) = names {
                assert!(
                    names.contains(&&*v.name),
                    "{what}: {} not asked for",
                    v.name
                );
            }
            let one = trial.raw_bytes(&v.name, step.step, None, Some(&v.worker));
            match (&v.value, &one) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}: {} at {}", v.name, step.step),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
                (a, b) => panic!("{what}: {} at {}: {a:?} / {b:?}", v.name, step.step),
            }
            seen += 1;
        }
    }
    seen
}

#[test]
fn reading_step_by_step_gives_every_value_in_step_order_whatever_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    for (what, options) in budgets() {
        let trial = Trial::open_with(&run, options).unwrap();
        // w, count and h at every step; then EVAL (every 10th step) and one tensor.
        assert_eq!(
            check_step_reads_match_value_reads(&trial, None, None, what),
            3 * STEPS as usize,
            "{what}"
        );
        assert_eq!(
            check_step_reads_match_value_reads(&trial, Some(Mode::Eval), Some(&["h"]), what),
            STEPS as usize / 10,
            "{what}"
        );
        let eval: Vec<(u64, u64)> = trial
            .read_steps(Some(Mode::Eval), Some(&["h", "no_such_tensor"]))
            .unwrap()
            .map(|s| s.map(|s| (s.step, s.mode_step)).unwrap())
            .collect();
        assert_eq!(eval.len() as u64, STEPS / 10, "{what}");
        // EVAL step 3 is global step 39.
        assert_eq!(eval[3], (39, 3), "{what}");
        assert_eq!(
            trial
                .read_steps(None, Some(&["no_such_tensor"]))
                .unwrap()
                .count(),
            0,
            "{what}"
        );
    }
}

#[test]
fn reading_step_by_step_matches_value_reads_on_every_golden_and_hook_run() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../smdebug-io/tests/data");
    let mut runs = 0;
    for set in ["golden", "hooks"] {
        for entry in std::fs::read_dir(data.join(set)).unwrap() {
            let path = entry.unwrap().path();
            let Ok(trial) = Trial::open(path.to_str().unwrap()) else {
                continue;
            };
            let what = path.display().to_string();
            let read = check_step_reads_match_value_reads(&trial, None, None, &what);
            // Every (stored name, step, worker) the run lists is read, once.
            let mut listed = 0;
            for step in trial.steps(None).unwrap() {
                for worker in trial.workers().unwrap() {
                    for name in trial.tensor_names().unwrap() {
                        listed += trial
                            .tensor_records(
                                &name,
                                smdebug_read::trial::StepSelector::One(step),
                                None,
                                Some(&worker),
                            )
                            .map_or(0, |r| r.len());
                    }
                }
            }
            assert!(read > 0, "{what}: nothing read");
            assert!(
                read >= listed,
                "{what}: {read} values read, {listed} listed"
            );
            runs += 1;
        }
    }
    assert!(runs >= 10, "{runs} runs");
}

#[test]
fn reading_step_by_step_from_object_storage_gives_what_the_local_run_gives() {
    write_run_at("memory://bulk/steps");
    let dir = tempfile::tempdir().unwrap();
    let local = Trial::open(write_run(dir.path())).unwrap();
    let remote = Trial::open("memory://bulk/steps").unwrap();
    let collect = |trial: &Trial| -> Vec<(u64, String, Vec<u8>)> {
        let mut out = Vec::new();
        for step in trial.read_steps(None, None).unwrap() {
            let step = step.unwrap();
            for v in step.values {
                out.push((
                    step.step,
                    v.name.to_string(),
                    v.value.unwrap().data.to_vec(),
                ));
            }
        }
        out
    };
    let (a, b) = (collect(&local), collect(&remote));
    assert_eq!(a.len(), 3 * STEPS as usize);
    assert_eq!(a, b);
    assert_eq!(
        check_step_reads_match_value_reads(&remote, None, None, "memory://"),
        a.len()
    );
}

/// A missing step file, one cut short and one damaged record: each costs exactly what it
/// damaged (the step, the records past the cut, the record), named in its error; every other
/// value is read, and the steps come in order. A stream dropped half-way stops its threads.
#[test]
fn reading_step_by_step_reports_damage_where_it_is_and_reads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let file_of = |step: u64| {
        let events = std::path::Path::new(&run)
            .join("events")
            .join(format!("{step:012}"));
        std::fs::read_dir(events)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    std::fs::remove_file(file_of(100)).unwrap();
    let cut = file_of(200);
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let damaged = file_of(300);
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[40] ^= 0x55;
    std::fs::write(&damaged, &bytes).unwrap();

    let trial = Trial::open(&run).unwrap();
    let (mut steps, mut good, mut bad) = (Vec::new(), 0, Vec::new());
    for step in trial.read_steps(None, None).unwrap() {
        match step {
            Ok(step) => {
                steps.push(step.step);
                for v in &step.values {
                    match &v.value {
                        Ok(_) => good += 1,
                        Err(e) => bad.push((step.step, v.name.to_string(), e.to_string())),
                    }
                }
            }
            Err(e) => {
                assert!(e.to_string().contains("000000000100"), "{e}");
                steps.push(100);
            }
        }
    }
    assert_eq!(steps, (0..STEPS).collect::<Vec<_>>());
    // Step 200 loses its last record (cut short), step 300 its first (damaged).
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert_eq!((bad[0].0, bad[1].0), (200, 300), "{bad:?}");
    assert!(bad[0].2.contains("000000000200"), "{bad:?}");
    assert!(bad[1].2.contains("000000000300"), "{bad:?}");
    assert_eq!(good, 3 * STEPS as usize - 3 - 2);
    // The same errors as reading those values one by one.
    for (step, name, e) in &bad {
        let one = trial.raw_bytes(name, *step, None, None).unwrap_err();
        assert_eq!(&one.to_string(), e);
    }

    let mut stream = trial.read_steps(None, None).unwrap();
    assert_eq!(stream.next().unwrap().unwrap().step, 0);
    assert_eq!(
        stream.size_hint(),
        (STEPS as usize - 1, Some(STEPS as usize - 1))
    );
    drop(stream);
}

/// A reader going step by step with a file cache of a few files (the rule runner's way): each
/// step's file is read once, whether or not the reader lets go of the steps it is past, and the
/// values are the same.
#[test]
fn letting_go_of_past_steps_keeps_a_small_file_cache_serving_the_steps_to_come() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let names = ["count", "h", "w"];
    let file_len = std::fs::metadata(
        dir.path()
            .join("run/events/000000000000/000000000000_worker_0.tfevents"),
    )
    .unwrap()
    .len() as usize;
    let read_step_by_step = |forget: bool| {
        let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
        let options = TrialOptions {
            // Room for three of the step files.
            file_cache_bytes: 3 * file_len + file_len / 2,
            // The cache's own reads counted (reading ahead: tests/trial_read_ahead.rs).
            read_files_ahead: false,
            ..TrialOptions::default()
        };
        let trial = Trial::from_storage(&run, storage.clone(), options).unwrap();
        let mut values = Vec::new();
        for step in trial.global_steps(None).unwrap() {
            for name in names {
                let value = trial.tensor(name).unwrap().raw(step, None, None).unwrap();
                values.push(value);
            }
            if forget {
                trial.forget_files_before(step);
            }
        }
        // Reading a step let go of again reads its file again.
        let again = trial.tensor("w").unwrap().raw(0, None, None).unwrap();
        assert_eq!(again, values[2]);
        (values, storage.total())
    };
    let (kept_first, reads_kept_first) = read_step_by_step(false);
    let (let_go, reads_let_go) = read_step_by_step(true);
    assert_eq!(kept_first, let_go);
    assert_eq!(let_go.len(), STEPS as usize * names.len());
    // One read per step file, plus step 0's again.
    assert_eq!(reads_let_go, STEPS as usize + 1);
    // Without letting go, the same: a file fetched for the first time is let go when the next
    // one is, so a step-by-step reader never spends the budget on steps it is past (it used
    // to keep the first three files, then read every value on its own).
    assert_eq!(reads_kept_first, STEPS as usize + 1);
}

/// A file fetched a second time is kept for good, even when it was let go
/// (`forget_files_before`) while it was the provisionally kept one: the next file's first fetch
/// does not let it go again.
#[test]
fn a_file_fetched_again_stays_kept_after_the_next_files_first_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let run = write_run(dir.path());
    let storage = Intercepted::new(open_storage(&run).unwrap(), EventReads::new());
    let options = TrialOptions {
        // The cache's own reads counted (reading ahead: tests/trial_read_ahead.rs).
        read_files_ahead: false,
        ..TrialOptions::default()
    };
    let trial = Trial::from_storage(&run, storage.clone(), options).unwrap();
    let reads = || storage.total();
    let w = trial.tensor("w").unwrap();
    let first = w.raw(0, None, None).unwrap();
    trial.forget_files_before(1);
    // Fetched again: kept for good.
    assert_eq!(w.raw(0, None, None).unwrap(), first);
    assert_eq!(reads(), 2);
    // Step 1's file, fetched for the first time, is the provisional one now...
    w.raw(1, None, None).unwrap();
    assert_eq!(reads(), 3);
    // ...and step 0's is still in memory.
    assert_eq!(w.raw(0, None, None).unwrap(), first);
    assert_eq!(reads(), 3);
}
