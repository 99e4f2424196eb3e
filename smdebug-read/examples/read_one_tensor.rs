//! Opens a run and reads one tensor's value at every step, as a notebook does first
//! (`create_trial(path).tensor(name).values()`): what the `Trial` costs on a long run. The peak
//! memory and time are measured from outside (BENCHMARKS.md, "Long runs").
//!
//! ```sh
//! cargo run --release -p smdebug-read --example read_one_tensor -- RUN [TENSOR]   # TENSOR: loss
//! /usr/bin/time -f "%e s %M KB" target/release/examples/read_one_tensor RUN
//! ```

use smdebug_read::trial::Trial;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let run = args.next().ok_or("usage: read_one_tensor RUN [TENSOR]")?;
    let name = args.next().unwrap_or_else(|| "loss".to_string());
    let trial = Trial::open(&run)?;
    let steps = trial.steps(None)?.len();
    let values = trial.tensor(&name)?.values(None, None)?;
    let sum: f64 = values.values().flat_map(|v| v.iter().copied()).sum();
    println!(
        "{steps} steps; `{name}` at {} of them, sum {sum}",
        values.len()
    );
    Ok(())
}
