//! Reading a whole tensor at once (`values`, `raw_values`) gives what reading it step by step
//! gives, on runs long enough to be read on several threads, whatever the file cache holds: the
//! whole run, part of it (the rest read record by record), or nothing.

mod support;

use std::collections::BTreeMap;

use half::f16;
use smdebug_core::{DType, Hook, Mode, SaveConfig, Tensor, TensorView};
use smdebug_io::storage::open_storage;
use smdebug_io::trial::{Trial, TrialOptions};
use smdebug_io::writer::{OverflowPolicy, Writer};

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
    let writer = Writer::builder(open_storage(&run).unwrap())
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
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
    run
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
                Err(smdebug_io::Error::TensorNotFound { .. })
            ),
            "{what}"
        );
        assert!(
            matches!(
                trial.raw_bytes("count", STEPS, None, None),
                Err(smdebug_io::Error::StepNotAvailable { .. })
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
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
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
