//! What a `Trial` holds to know a run: its index, counted byte by byte with a counting
//! allocator (never timed). A long job's index must cost a fixed number of bytes a tensor entry,
//! however many steps the run has: the same per entry on a run four times as long, and few
//! bytes (a step's table shares its names, and its records' places when their lengths are the
//! same, with the steps around it; a tensor's steps are arithmetic runs). One test in this
//! binary: the counter is the process's.

use std::path::Path;

use smdebug_read::trial::{Trial, TrialOptions};
use smdebug_testkit::alloc;
use smdebug_testkit::runs::write_scalar_run;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Tensors a step: the synthetic benchmark run's count (`smdebug-serve/examples/synthetic_run`).
const TENSORS: usize = 50;

/// Bytes the trial of `run` holds once it has listed the steps and looked one tensor up at
/// every step (which builds what lookups by name need), per tensor entry of the run.
fn bytes_an_entry(run: &Path, steps: u64) -> f64 {
    // The default options, file cache included: a sweep over one tensor fetches each step's
    // file once and keeps none of them past the next (it used to keep them all, within 256 MiB:
    // 2.3 KB a step here), so what is measured is the index.
    let options = TrialOptions::default();
    let before = alloc::live();
    let trial = Trial::open_with(run.to_str().unwrap(), options).unwrap();
    assert_eq!(trial.steps(None).unwrap().len() as u64, steps);
    let values = trial
        .tensor("layer07/value")
        .unwrap()
        .values(None, None)
        .unwrap();
    assert_eq!(values.len() as u64, steps);
    assert!(
        values
            .iter()
            .all(|(s, v)| v.iter().all(|x| *x == *s as f64))
    );
    drop(values);
    let held = alloc::live() - before;
    drop(trial);
    held as f64 / (steps as f64 * TENSORS as f64)
}

#[test]
fn the_index_of_a_long_run_costs_the_same_few_bytes_an_entry_at_any_length() {
    let dir = tempfile::tempdir().unwrap();
    let (short, long) = (dir.path().join("short"), dir.path().join("long"));
    write_scalar_run(&short, 1_000, TENSORS);
    write_scalar_run(&long, 4_000, TENSORS);
    let at_short = bytes_an_entry(&short, 1_000);
    let at_long = bytes_an_entry(&long, 4_000);
    eprintln!("index: {at_short:.1} bytes an entry at 1,000 steps, {at_long:.1} at 4,000");
    // A step's table shares its names and its records' places with the steps around it, its
    // event file's and index file's paths are made again when asked for (when they are the
    // usual ones), a worker's name is kept once, and the steps' tables are sorted vectors:
    // what remains is what each step holds once (its entries in the step tables, its worker's
    // slot, event file and table: about 210 bytes), a 50th of it an entry: 4.2 bytes an entry
    // here. Before, 106.5; with the step tables in `BTreeMap`s, 7.3.
    assert!(at_long <= 6.0, "{at_long:.1} bytes an entry at 4,000 steps");
    // Flat: a run four times as long costs no more an entry (within 10 %: allocation sizes
    // round differently).
    assert!(
        at_long <= at_short * 1.1,
        "{at_long:.1} bytes an entry at 4,000 steps against {at_short:.1} at 1,000"
    );
}
