//! The tensor follower's cost on a long run of scalars (BENCHMARKS.md, "Following a run's
//! tensors"):
//!
//! ```sh
//! cargo run --release -p smdebug-read --example follow_scalars -- write /tmp/scalars-run [STEPS]
//! cargo run --release -p smdebug-read --example follow_scalars -- read /tmp/scalars-run
//! ```
//!
//! `write` writes STEPS (100,000 by default) training steps of 50 scalars each (a loss, an
//! accuracy, 48 metrics; the tensors of the synthetic 1-hour run of `smdebug-serve`'s
//! `synthetic_run` example) through the hook and writer, one event and one index file a step.
//! `write-fill` writes issue 27's second case instead: STEPS (114) steps, each with a `loss` and
//! a 50-byte record claiming `[2^28]` float32 (1 GiB; smdebug-io's `crafted::write_step`).
//! `read` reads the run once with [`TensorFollower::read_to_end`] into [`ScalarColumns`], as the
//! dashboard does, and prints the wall time, the values held and the process's peak resident
//! memory (Linux `VmHWM`).

use std::sync::Arc;
use std::time::Instant;

use smdebug_core::{Hook, Mode, SaveConfig};
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_read::trial::{ScalarColumns, TensorFollower};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

const TENSORS: usize = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: follow_scalars write|write-fill|read DIR [STEPS]";
    let command = args.next().ok_or(usage)?;
    let dir = args.next().ok_or(usage)?;
    match command.as_str() {
        "write" => write(&dir, args.next().map_or(Ok(100_000), |s| s.parse())?),
        "write-fill" => {
            write_fill(&dir, args.next().map_or(Ok(114), |s| s.parse())?);
            Ok(())
        }
        "read" => read(&dir),
        _ => Err(usage.into()),
    }
}

fn write(dir: &str, steps: u64) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let started = Instant::now();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir)?);
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()?;
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)?;
    let names: Vec<String> = (0..TENSORS)
        .map(|i| match i {
            0 => "loss".to_owned(),
            1 => "accuracy".to_owned(),
            _ => format!("metric_{i:02}"),
        })
        .collect();
    hook.set_mode(Mode::Train);
    for step in 0..steps {
        let x = step as f64;
        for (i, name) in names.iter().enumerate() {
            let collection = if i == 0 { "losses" } else { "metrics" };
            let value = match i {
                0 => 2.0 / (1.0 + x / 1000.0),
                1 => 1.0 - 1.0 / (1.0 + x / 500.0),
                _ => (x / (100.0 + i as f64)).sin() * i as f64,
            };
            hook.save_scalar(name, value, &[collection]);
        }
        hook.step();
    }
    hook.close();
    eprintln!(
        "{steps} steps of {TENSORS} scalars in {:.1} s: {dir}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn write_fill(dir: &str, steps: u64) {
    use smdebug_io::crafted::{CraftedRecord, scalar, write_step};
    for s in 0..steps {
        let records = [
            scalar("loss", s as f32),
            CraftedRecord::Fill {
                name: "mask".into(),
                dtype: smdebug_core::DType::F32,
                dims: vec![1 << 28],
            },
        ];
        write_step(
            std::path::Path::new(dir),
            s,
            "worker_0",
            Mode::Train,
            s,
            &records,
        );
    }
}

fn read(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    // On storage, as the dashboard opens it.
    let mut follower = TensorFollower::new(Arc::new(LocalStorage::new(dir)?));
    let mut columns = ScalarColumns::default();
    let increment = follower.read_to_end(&mut |batch, more| columns.add(batch, more));
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"seconds\": {seconds:.2}, \"steps\": {}, \"names\": {}, \"values\": {}, \
         \"column_bytes\": {}, \"bytes_per_value\": {:.1}, \"problems\": {}, \"peak_rss_mb\": {}}}",
        follower.steps().len(),
        follower.names().len(),
        columns.values(),
        columns.heap_bytes(),
        columns.heap_bytes() as f64 / columns.values().max(1) as f64,
        increment.problems.len() + increment.problems_left_out,
        peak_rss_mb().map_or("null".to_string(), |m| format!("{m:.0}")),
    );
    Ok(())
}

/// The process's peak resident memory (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}
