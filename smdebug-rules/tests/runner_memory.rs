//! What the rule runner holds while and once it has evaluated a run, counted byte by byte with a
//! counting allocator (never timed): with rules that judge step by step (the built-in ones), the
//! trial reads the index a bounded stretch ahead of the rules and lets go of the steps behind
//! every rule's look-back, so a run four times as long costs the runner the same bytes, at its
//! peak and after. One test in this binary: the counter is the process's.

use std::path::Path;

use smdebug_io::crafted::scalar;
use smdebug_rules::{RuleRunner, RuleSpec, Status};
use smdebug_testkit::alloc;
use smdebug_testkit::runs::write_finished_run;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Scalars a step, as in the synthetic benchmark run (`smdebug-serve/examples/synthetic_run`):
/// a loss and 49 others.
const TENSORS: usize = 50;

/// How far ahead of the rules the runner's trial reads the index here: a tenth of the short
/// run, so that both runs are read in stretches.
const READ_AHEAD: u64 = 100;

/// A finished run of `steps` TRAIN steps of worker_0: a loss falling steadily, and
/// `TENSORS - 1` other scalars.
fn write_run(run: &Path, steps: u64) {
    let names: Vec<String> = (1..TENSORS).map(|i| format!("layer{i:02}/value")).collect();
    write_finished_run(run, steps, |s| {
        let mut records = vec![scalar("loss", 1000.0 - 0.2 * s as f32)];
        records.extend(names.iter().map(|n| scalar(n, 1.0 + s as f32)));
        records
    });
}

/// Bytes a runner of LossNotDecreasing, Overtraining and ExplodingTensor holds at its peak
/// while it evaluates the run at `run`, and after (the runner still alive), over what the
/// process held before.
fn bytes_evaluating(run: &Path, steps: u64) -> (isize, isize) {
    let before = alloc::live();
    alloc::reset_peak();
    let mut runner = RuleRunner::builder(run)
        .write_into_run(false)
        .index_read_ahead(READ_AHEAD)
        .spec(RuleSpec::parse("LossNotDecreasing").unwrap())
        .spec(RuleSpec::parse("Overtraining").unwrap())
        .spec(RuleSpec::parse("ExplodingTensor").unwrap())
        .build()
        .unwrap();
    let summary = runner.run_offline().unwrap();
    // Every rule judged every step, and nothing was lost: the loss falls, no value is NaN.
    for rule in ["LossNotDecreasing", "Overtraining", "ExplodingTensor"] {
        let status = summary.rule(rule).unwrap();
        assert_eq!(status.status, Status::NoIssuesFound, "{status:#?}");
        assert_eq!(status.steps_evaluated, steps, "{status:#?}");
    }
    assert_eq!(
        summary.rule("ExplodingTensor").unwrap().datapoints,
        steps * TENSORS as u64
    );
    drop(summary);
    let held = alloc::live() - before;
    let peak = alloc::peak() - before;
    // The trial still answers about the last step, with its value exact.
    let trial = runner.trial().unwrap();
    let last = trial
        .tensor("layer07/value")
        .unwrap()
        .value(steps - 1, None, None)
        .unwrap();
    assert_eq!(last.iter().next().copied(), Some(steps as f64));
    drop(runner);
    (peak, held)
}

/// The runner costs the same bytes while and after evaluating a run of 4,000 steps as one of
/// 1,000 (50 scalars a step): the index of 3,000 more steps (about 1.8 MB of it at ~12 bytes
/// an entry) was never all held at once, and was let go as the rules went past it.
#[test]
fn the_runner_costs_the_same_bytes_on_a_run_four_times_as_long() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    let long = dir.path().join("long");
    write_run(&short, 1_000);
    write_run(&long, 4_000);
    // A first evaluation warms what the process keeps once (thread pools, regex caches).
    bytes_evaluating(&short, 1_000);
    let (peak_n, n) = bytes_evaluating(&short, 1_000);
    let (peak_four_n, four_n) = bytes_evaluating(&long, 4_000);
    eprintln!(
        "1,000 steps: peak {peak_n} B, held after {n} B; 4,000 steps: peak {peak_four_n} B, \
         held after {four_n} B"
    );
    // 3,000 steps more, 150,000 index entries: held, they would be ~1.8 MB.
    let bound = 64 * 1024;
    assert!(
        four_n - n < bound,
        "after 4,000 steps the runner holds {four_n} B, after 1,000 {n} B: {} B more, \
         over the {bound} B a run of any length may add",
        four_n - n
    );
    assert!(
        peak_four_n - peak_n < 4 * bound,
        "evaluating 4,000 steps the runner's peak is {peak_four_n} B, evaluating 1,000 \
         {peak_n} B: {} B more, over the {} B a run of any length may add",
        peak_four_n - peak_n,
        4 * bound
    );
}
