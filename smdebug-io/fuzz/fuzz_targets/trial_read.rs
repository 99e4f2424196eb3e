//! Index JSON and event-file bytes through the whole read path: a `Trial` over an in-memory run,
//! listing and reading every tensor, step, worker and reduction it finds.
//!
//! Input: `u16 LE n | n bytes: an index file | the rest: an event file`. The index file is stored
//! for the step and worker of the event file it names (step 0, worker_0 when that name is not an
//! event file's), the event bytes under that name and under step 0's.
//!
//! Never a panic or an allocation over the budget (run with `-malloc_limit_mb`); a value is only
//! ever returned when the record at the index's location carries exactly one tensor value under
//! the asked name, and it is that value.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use smdebug_core::Reduction;
use smdebug_read::Result;
use smdebug_read::trial::{StepSelector, Trial, TrialOptions};

use common::{BUDGET, oracle, run_of};

fn check_value(got: Result<smdebug_core::Tensor>, want: Option<&smdebug_core::Tensor>) {
    match (got, want) {
        (Ok(t), Some(w)) => {
            assert!(t.bytes().len() as u64 <= BUDGET);
            assert_eq!(t.dtype(), w.dtype());
            assert_eq!(t.shape(), w.shape());
            assert_eq!(t.bytes(), w.bytes());
        }
        (Ok(t), None) => panic!(
            "a value ({} {:?}) from a record that holds no single tensor under its name",
            t.dtype(),
            t.shape()
        ),
        (Err(_), _) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((run, step, events, parsed)) = run_of(data) else {
        return;
    };

    let options = TrialOptions {
        auto_refresh: false,
        max_tensor_bytes: BUDGET,
        ..TrialOptions::default()
    };
    let Ok(trial) = Trial::from_storage("fuzz", run.clone(), options) else {
        return;
    };
    let index = parsed.expect("a trial opened, so its one index file parsed");
    let names = trial.tensor_names().unwrap();
    let steps = trial.steps(None).unwrap();
    let workers = trial.workers().unwrap();
    for name in &names {
        let Ok(t) = trial.tensor(name) else { continue };
        for &at in &steps {
            for w in workers.iter().map(|w| Some(w.as_str())).chain([None]) {
                check_value(
                    t.raw(at, None, w),
                    oracle(&index, &events, step, name).as_ref(),
                );
            }
            for loc in &index.tensor_payload {
                let Some((reduction, base)) = Reduction::parse_tensor_name(&loc.tensorname) else {
                    continue;
                };
                if base != name {
                    continue;
                }
                let got = t.reduction_value(at, reduction, None, None);
                let want = oracle(&index, &events, step, &loc.tensorname);
                match (got, want) {
                    (Ok(v), Some(w)) => {
                        let values = w.to_f64_vec();
                        assert_eq!(values.len(), 1, "a reduction of several values was read");
                        assert!(v.to_bits() == values[0].to_bits());
                    }
                    (Ok(v), None) => panic!("reduction {v} from a record with no such tensor"),
                    (Err(_), _) => {}
                }
            }
        }
        if let Ok(records) = trial.tensor_records(name, StepSelector::All, None, None) {
            for r in records {
                assert_eq!(&r.name, name);
            }
        }
    }
});
