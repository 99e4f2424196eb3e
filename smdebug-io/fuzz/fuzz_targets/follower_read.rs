//! Index JSON and event-file bytes through the one tensor follower (`TensorFollower`, what the
//! dashboard, rules and `--follow` read tensors with), over the same in-memory run as
//! `trial_read`: never a panic or an allocation over the limit (run with `-malloc_limit_mb`);
//! a value is only ever handed out for a step the index describes, when the record at the
//! index's location carries exactly one tensor value under that name holding one number, and
//! it is that number. A second poll of the unchanged run hands out nothing new.
#![no_main]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use smdebug_read::trial::TensorFollower;

use common::{oracle, run_of};

fuzz_target!(|data: &[u8]| {
    let Some((run, step, events, parsed)) = run_of(data) else {
        return;
    };
    let mut follower = TensorFollower::new(run);
    let mut values = Vec::new();
    let first = follower.read_to_end(&mut |batch, _| values.extend(batch));
    let mut seen = HashSet::new();
    for (name, _mode, column) in &values {
        let index = parsed
            .as_ref()
            .expect("a value came from an index file that does not parse");
        for &(at, value, _wall_time) in column {
            assert_eq!(
                at, step,
                "{name}: a value at a step the index does not describe"
            );
            assert!(seen.insert(name.clone()), "{name}: two values for one step");
            let want = oracle(index, &events, step, name)
                .unwrap_or_else(|| panic!("{name}: a value from a record without one tensor"));
            let want = want.to_f64_vec();
            assert_eq!(
                want.len(),
                1,
                "{name}: a value from a tensor of {} elements",
                want.len()
            );
            assert!(
                value.to_bits() == want[0].to_bits() || (value.is_nan() && want[0].is_nan()),
                "{name}: {value} handed out for {}",
                want[0]
            );
        }
    }
    assert_eq!(
        first.values,
        values.iter().map(|(_, _, c)| c.len()).sum::<usize>()
    );
    let mut more = 0usize;
    let again = follower.poll(Duration::from_secs(10), &mut |batch, _| {
        more += batch.iter().map(|(_, _, c)| c.len()).sum::<usize>()
    });
    assert_eq!(more, 0, "an unchanged run gave new values");
    assert!(again.steps.is_empty(), "an unchanged run gave new steps");
});
