//! Opens a run and reads one tensor's value at every step, as a notebook does first
//! (`create_trial(path).tensor(name).values()`): what the `Trial` costs on a long run. The peak
//! memory and time are measured from outside (BENCHMARKS.md, "Long runs").
//!
//! With `--chunks` the values are read a stretch of steps at a time
//! (`TrialTensor::value_chunks`, what `smdebug_rs`'s `values()` converts into its dict) and
//! summed, none kept: what the reading costs without the map of every step's array that
//! `values` returns.
//!
//! ```sh
//! cargo run --release -p smdebug-read --example read_one_tensor -- RUN [TENSOR] [--chunks]   # TENSOR: loss
//! /usr/bin/time -f "%e s %M KB" target/release/examples/read_one_tensor RUN
//! ```

use smdebug_read::trial::{Conversion, TensorValue, Trial};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let chunks = args.iter().any(|a| a == "--chunks");
    let mut args = args.into_iter().filter(|a| a != "--chunks");
    let run = args
        .next()
        .ok_or("usage: read_one_tensor RUN [TENSOR] [--chunks]")?;
    let name = args.next().unwrap_or_else(|| "loss".to_string());
    let trial = Trial::open(&run)?;
    let steps = trial.steps(None)?.len();
    let tensor = trial.tensor(&name)?;
    let (read, sum) = if chunks {
        let mut chunks = tensor.value_chunks(None, None, Conversion::Array)?;
        let (mut read, mut sum) = (0usize, 0f64);
        while let Some(chunk) = chunks.next_chunk() {
            for (_, value) in chunk? {
                if let TensorValue::Numbers(bytes) = value {
                    sum += bytes.to_tensor().to_f64_vec().iter().sum::<f64>();
                }
                read += 1;
            }
        }
        (read, sum)
    } else {
        let values = tensor.values(None, None)?;
        let sum: f64 = values.values().flat_map(|v| v.iter().copied()).sum();
        (values.len(), sum)
    };
    println!("{steps} steps; `{name}` at {read} of them, sum {sum}");
    Ok(())
}
