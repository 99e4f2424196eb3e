//! `trial_bench DIR`: the Rust side of the Trial comparison with Python smdebug
//! (`benches/python_trial_bench.py DIR` is the other side). Times, from a cold start of the
//! process: open the run and list its steps and tensor names; then read every value.

use std::time::Instant;

use smdebug_io::trial::Trial;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: trial_bench DIR")?;
    let t0 = Instant::now();
    let trial = Trial::open(&dir)?;
    let steps = trial.steps(None)?;
    let names = trial.tensor_names()?;
    let open_list = t0.elapsed();

    let t1 = Instant::now();
    let mut values = 0usize;
    let mut checksum = 0.0f64;
    for name in &names {
        let t = trial.tensor(name)?;
        for (_, v) in t.values(None, None)? {
            values += 1;
            checksum += v.sum();
        }
    }
    let read_all = t1.elapsed();
    println!(
        "rust: open+list {} steps, {} tensors: {:.3} s; read {values} values: {:.3} s (sum {checksum:.6e})",
        steps.len(),
        names.len(),
        open_list.as_secs_f64(),
        read_all.as_secs_f64()
    );
    Ok(())
}
