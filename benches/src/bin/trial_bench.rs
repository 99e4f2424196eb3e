//! `trial_bench DIR`: the Rust side of the Trial comparison with Python smdebug
//! (`benches/python_trial_bench.py DIR` is the other side). Times, from a cold start of the
//! process: open the run and list its steps and tensor names; then read every value of every
//! tensor, tensor by tensor as a notebook does, in the dtype it was saved in (what Python
//! smdebug's `value()` returns); then the same read converted to `f64` arrays.
//!
//! Then value by value, as Python's loop reads (`raw(step)` per step, each value summed and
//! dropped). Last, the same read once more without copying the values (`raw_bytes_values`: each value read
//! where it lies in the mapped event file, as a Rust caller that only looks at the values can).
//! Last, the whole run step by step (`Trial::read_steps`: each step file read once, on the
//! reader threads, each value read where it lies in the buffer).
//! Each read phase runs on a trial of its own, opened afresh, so each one maps the event files.
//!
//! `TRIAL_CACHE_MIB=N` sets the trial's whole-file cache budget (`TrialOptions::file_cache_bytes`);
//! `TRIAL_MAP=1` maps the event files (`TrialOptions::map_files`, off by default), `TRIAL_MAP=0`
//! reads them;
//! `TRIAL_BENCH_OPEN_ONLY=1` stops after open+list (for profiling the open);
//! `TRIAL_BENCH_MODE=TRAIN` (or `EVAL`) reads value by value with steps numbered in that mode;
//! `TRIAL_BENCH_PHASES=raw,f64,step,bytes,stream` runs only the named read phases (default: all five);
//! `TRIAL_BENCH_REPEAT=N` runs each phase N times on its trial (for profiling a phase; the repeats
//! after the first find the files a phase keeps already kept).

#![forbid(unsafe_code)]

use std::time::Instant;

use smdebug_core::{DType, Mode, Tensor};
use smdebug_read::trial::{Trial, TrialOptions};

fn open(dir: &str) -> Result<Trial, Box<dyn std::error::Error>> {
    let mut options = TrialOptions::default();
    if let Ok(mib) = std::env::var("TRIAL_CACHE_MIB") {
        options.file_cache_bytes = mib.parse::<usize>()? << 20;
    }
    match std::env::var("TRIAL_MAP").as_deref() {
        Ok("1") => options.map_files = true,
        Ok("0") => options.map_files = false,
        _ => {}
    }
    Ok(Trial::open_with(dir, options)?)
}

/// The sum of a tensor's elements, read in place (as numpy's `sum()` on the array Python gets).
fn sum_native(t: &Tensor) -> f64 {
    match t.dtype() {
        DType::F32 => sum_f32(t.bytes()),
        _ => t.to_f64_vec().iter().sum(),
    }
}

/// The sum of little-endian f32s, in eight independent running sums (which the compiler turns
/// into vector adds, as numpy's `sum` is): the checksum is the harness's cost, not the reader's.
fn sum_f32(bytes: &[u8]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let chunks = bytes.chunks_exact(32);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, b) in lanes.iter_mut().zip(chunk.chunks_exact(4)) {
            *lane += f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes")));
        }
    }
    let tail: f64 = rest
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))))
        .sum();
    lanes.iter().sum::<f64>() + tail
}

/// The sum of a value's elements read in place from its bytes (f32 as the common case).
fn sum_bytes(dtype: DType, bytes: &[u8], shape: &[usize]) -> f64 {
    match dtype {
        DType::F32 => sum_f32(bytes),
        _ => Tensor::from_bytes(dtype, shape.to_vec(), bytes.to_vec())
            .map_or(0.0, |t| t.to_f64_vec().iter().sum()),
    }
}

/// CPU time (user + system, all threads) this process has used, from `/proc/self/stat` (Linux;
/// zero elsewhere): the machine may be loaded, and CPU time shows the work done whatever the wait.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// How many values a read phase read, and the sum of their elements.
#[derive(Default)]
struct Tally {
    values: usize,
    checksum: f64,
}

impl Tally {
    fn add(&mut self, sum: f64) {
        self.values += 1;
        self.checksum += sum;
    }
}

/// Runs one read phase and prints its wall and CPU time beside what it read.
fn timed(
    label: &str,
    mut read: impl FnMut(&mut Tally) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let repeat = std::env::var("TRIAL_BENCH_REPEAT").map_or(Ok(1), |n| n.parse::<usize>())?;
    for _ in 0..repeat {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        let mut tally = Tally::default();
        read(&mut tally)?;
        println!(
            "rust: read {} values ({label}): {:.3} s (cpu {:.2} s, sum {:.6e})",
            tally.values,
            wall.elapsed().as_secs_f64(),
            cpu_seconds() - cpu,
            tally.checksum
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: trial_bench DIR")?;
    let (t0, c0) = (Instant::now(), cpu_seconds());
    let trial = open(&dir)?;
    let steps = trial.steps(None)?;
    let names = trial.tensor_names()?;
    let open_list = t0.elapsed();
    println!(
        "rust: open+list {} steps, {} tensors: {:.3} s (cpu {:.2} s)",
        steps.len(),
        names.len(),
        open_list.as_secs_f64(),
        cpu_seconds() - c0
    );
    if std::env::var_os("TRIAL_BENCH_OPEN_ONLY").is_some() {
        return Ok(());
    }

    let phases =
        std::env::var("TRIAL_BENCH_PHASES").unwrap_or_else(|_| "raw,f64,step,bytes,stream".into());
    let phases: Vec<&str> = phases.split(',').collect();

    if phases.contains(&"raw") {
        timed("saved dtype", |tally| {
            for name in &names {
                for t in trial.tensor(name)?.raw_values(None, None)?.values() {
                    tally.add(sum_native(t));
                }
            }
            Ok(())
        })?;
    }

    if phases.contains(&"f64") {
        // A fresh trial, so this read maps the event files as the first one did.
        let trial = open(&dir)?;
        timed("as f64", |tally| {
            for name in &names {
                for v in trial.tensor(name)?.values(None, None)?.values() {
                    tally.add(v.sum());
                }
            }
            Ok(())
        })?;
    }

    if phases.contains(&"step") {
        // Python's loop exactly: one value at a time, summed and dropped.
        let trial = open(&dir)?;
        let mode = match std::env::var("TRIAL_BENCH_MODE").as_deref() {
            Ok("TRAIN") => Some(Mode::Train),
            Ok("EVAL") => Some(Mode::Eval),
            _ => None,
        };
        timed("value by value, saved dtype", |tally| {
            for name in &names {
                let tensor = trial.tensor(name)?;
                for step in tensor.steps(mode)? {
                    tally.add(sum_native(&tensor.raw(step, mode, None)?));
                }
            }
            Ok(())
        })?;
    }

    if phases.contains(&"bytes") {
        let trial = open(&dir)?;
        timed("in place", |tally| {
            for name in &names {
                for v in trial.tensor(name)?.raw_bytes_values(None, None)?.values() {
                    tally.add(sum_bytes(v.dtype, &v.data, &v.shape));
                }
            }
            Ok(())
        })?;
    }

    if phases.contains(&"stream") {
        // The whole run step by step (`read_steps`): each step file read once, ahead of this
        // loop on the reader threads, each value summed where it lies.
        let trial = open(&dir)?;
        timed("step by step", |tally| {
            for step in trial.read_steps(None, None)? {
                for v in &step?.values {
                    let value = v.value.as_ref().map_err(|e| e.to_string())?;
                    tally.add(sum_bytes(value.dtype, &value.data, &value.shape));
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}
