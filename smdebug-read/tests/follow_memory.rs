//! What the tensor follower holds at most while it reads a long run to its end, counted with a
//! counting allocator (never timed): it lists the index a folder (1,000 steps) at a time as it
//! reads, so the most it holds grows with the run only by its list of steps (8 bytes a step),
//! not by a listing of every index file (a path, its step and its worker: ~130 bytes a file,
//! held through the whole read, and more while the listing was copied into the backlog: 159
//! bytes a step more at 30,000 steps than at 10,000 when the follower listed the run whole, 8
//! bytes since). One test in this binary: the counter is the process's.

use std::path::Path;
use std::time::Duration;

use smdebug_read::trial::TensorFollower;
use smdebug_testkit::alloc;
use smdebug_testkit::runs::write_scalar_run;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Scalars a step: few, so that what is measured is what a step's files cost to list and
/// read, not its values (each batch of values is dropped as soon as it is checked).
const TENSORS: usize = 2;

/// The most bytes held at once beyond what was held before, while a follower reads `run` to
/// its end over polls (each increment dropped once checked), every value checked.
fn follow_peak(run: &Path, steps: u64) -> isize {
    let (read, peak) = alloc::peak_during(|| {
        let mut follower = TensorFollower::open(run.to_str().unwrap()).unwrap();
        let (mut values, mut polls) = (0u64, 0);
        while follower.end().is_none() {
            let inc = follower.poll(Duration::ZERO, &mut |batch, _| {
                for (name, _, column) in batch {
                    for (step, value, _) in column {
                        // Exact: each step saved its own number.
                        assert_eq!(value, step as f64, "{name} at step {step}");
                        values += 1;
                    }
                }
            });
            assert!(inc.problems.is_empty(), "{:?}", inc.problems);
            polls += 1;
            assert!(polls < 10_000, "no end to the reading");
        }
        assert_eq!(follower.steps().len() as u64, steps);
        values
    });
    assert_eq!(read, steps * TENSORS as u64);
    peak
}

#[test]
fn following_a_run_three_times_as_long_holds_its_steps_more_not_its_listing() {
    // In memory where the machine has it: 60,000 folders are slow to make and delete on a
    // busy disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let (short, long) = (dir.path().join("short"), dir.path().join("long"));
    let (short_steps, long_steps) = (10_000, 30_000);
    write_scalar_run(&short, short_steps, TENSORS);
    write_scalar_run(&long, long_steps, TENSORS);
    let at_short = follow_peak(&short, short_steps);
    let at_long = follow_peak(&long, long_steps);
    let a_step = (at_long - at_short) as f64 / (long_steps - short_steps) as f64;
    eprintln!(
        "following a run: {at_short} bytes at most at {short_steps} steps, {at_long} at \
         {long_steps}: {a_step:.1} bytes a step more"
    );
    // The steps' list, 8 bytes a step, up to twice that while it grows: 24 bytes a step leaves
    // room for the vector's doubling, none for a listing of the run's files.
    assert!(
        a_step <= 24.0,
        "{a_step:.1} bytes a step more at {long_steps} steps"
    );
}
