//! `cargo run --release -p smdebug-read --example read_or_map -- RUN [ROUNDS]`: the cost of
//! reading a run's event files instead of mapping them (`TrialOptions::map_files`). Each round
//! opens the run afresh twice, mapped and read (alternately first), and reads every value of
//! every tensor tensor by tensor, as a notebook sweeps a run, then step by step
//! (`Trial::read_steps`). Prints the wall time of each phase, and the sums of the values (the
//! same both ways).

use std::time::Instant;

use smdebug_read::trial::{Trial, TrialOptions};

/// Open + list, then every value tensor by tensor, then every value step by step: seconds of
/// each, and a checksum.
fn sweep(run: &str, map_files: bool) -> Result<(f64, f64, f64, f64), smdebug_read::Error> {
    let options = TrialOptions {
        map_files,
        ..TrialOptions::default()
    };
    let t0 = Instant::now();
    let trial = Trial::open_with(run, options.clone())?;
    let names = trial.tensor_names()?;
    let open = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut sum = 0.0;
    for name in &names {
        // The stored names (a tensor saved only as reductions has no value of its own).
        let Ok(values) = trial
            .tensor(name)
            .and_then(|t| t.raw_bytes_values(None, None))
        else {
            continue;
        };
        for v in values.values() {
            sum += v.data.len() as f64;
        }
    }
    let by_tensor = t1.elapsed().as_secs_f64();
    let trial = Trial::open_with(run, options)?;
    let t2 = Instant::now();
    for step in trial.read_steps(None, None)? {
        for v in step?.values {
            if let Ok(value) = v.value {
                sum += value.data.len() as f64;
            }
        }
    }
    let by_step = t2.elapsed().as_secs_f64();
    Ok((open, by_tensor, by_step, sum))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let run = args.next().ok_or("usage: read_or_map RUN [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    println!("mode  open+list_s  by_tensor_s  by_step_s  bytes");
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for map in order {
            let (open, by_tensor, by_step, sum) = sweep(&run, map)?;
            let mode = if map { "map " } else { "read" };
            println!("{mode}  {open:.4}  {by_tensor:.4}  {by_step:.4}  {sum}");
        }
    }
    Ok(())
}
