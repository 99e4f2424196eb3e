//! What reading one tensor's values over a whole run costs besides the index, counted with a
//! counting allocator (never timed): read a stretch of steps at a time
//! (`TrialTensor::value_chunks`, what `smdebug_rs`'s `values()` converts into its dict), the
//! reader holds one stretch's values, record places and event files, however long the run. One
//! test in this binary: the counter is the process's.

use std::path::Path;

use smdebug_read::trial::{Conversion, TensorValue, Trial, VALUE_CHUNK_STEPS};
use smdebug_testkit::alloc;
use smdebug_testkit::runs::write_scalar_run;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Tensors a step: the synthetic benchmark run's count, so each step's event file holds 50
/// records (a value's bytes are sliced from its whole file).
const TENSORS: usize = 50;

/// The most bytes held at once beyond the opened trial while every value of one tensor is read
/// a stretch at a time (each stretch dropped before the next), and how many values were read.
fn chunked_peak(run: &Path, steps: u64) -> isize {
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let tensor = trial.tensor("layer07/value").unwrap();
    let (read, peak) = alloc::peak_during(|| {
        let mut chunks = tensor.value_chunks(None, None, Conversion::Array).unwrap();
        let mut read = 0u64;
        while let Some(chunk) = chunks.next_chunk() {
            let chunk = chunk.unwrap();
            assert!(chunk.len() <= VALUE_CHUNK_STEPS);
            for (step, value) in chunk {
                let TensorValue::Numbers(bytes) = value else {
                    panic!("step {step}: not numbers")
                };
                // Exact: each step saved its own number.
                assert_eq!(bytes.to_tensor().to_f64_vec(), [step as f64], "step {step}");
                assert_eq!(step, read);
                read += 1;
            }
        }
        read
    });
    assert_eq!(read, steps);
    peak
}

#[test]
fn reading_a_tensor_a_stretch_at_a_time_holds_the_same_whatever_the_run_length() {
    let dir = tempfile::tempdir().unwrap();
    let (short, long) = (dir.path().join("short"), dir.path().join("long"));
    let (short_steps, long_steps) = (2 * VALUE_CHUNK_STEPS as u64, 8 * VALUE_CHUNK_STEPS as u64);
    write_scalar_run(&short, short_steps, TENSORS);
    write_scalar_run(&long, long_steps, TENSORS);
    let at_short = chunked_peak(&short, short_steps);
    let at_long = chunked_peak(&long, long_steps);
    eprintln!(
        "reading one tensor a stretch at a time: {at_short} bytes at most beyond the trial at \
         {short_steps} steps, {at_long} at {long_steps}"
    );
    // The steps' list is 8 bytes a step (64 KB at the long run): what grows with the run. One
    // stretch's values and places, and the event file being read: the same at both lengths
    // (a value kept its whole file, 50 records, before small values were copied out of it).
    let step_list = 8 * (long_steps - short_steps) as isize;
    assert!(
        at_long <= at_short + step_list + (64 << 10),
        "{at_long} bytes at {long_steps} steps against {at_short} at {short_steps}"
    );
}
