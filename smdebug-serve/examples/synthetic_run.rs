//! Writes the synthetic 1-hour run (MINUTES long, 60 by default) the dashboard's scale figures (BENCHMARKS.md) are measured
//! on, with the real writers:
//!
//! - system metrics of one node with 16 cores and 8 GPUs sampled every 100 ms (36,000 samples
//!   of 55 records: per-core and total CPU utilization and I/O wait, per-GPU utilization and
//!   memory, memory, network, disk), one file a minute as the sampler writes them;
//! - 100,000 training steps with their data-loading, forward, backward and optimizer spans
//!   (500,000 spans through `SpanRecorder::record`), one trace file a minute;
//! - 50 scalar tensors a step (5 million values: a loss, an accuracy, 48 metrics) through the
//!   hook and writer, in the smdebug format (one event and one index file a step) and, with the
//!   hook's TensorBoard export, in `tensorboard/TRAIN/` for the side-by-side comparison.
//!
//! Scalars rather than large tensors keep it to ~2 GB and ~2 minutes; the dashboard's load is
//! in the number of steps, values and files, not in tensor bytes.
//!
//! ```sh
//! cargo run --release -p smdebug-serve --example synthetic_run -- /tmp/synthetic-run [STEPS] [MINUTES]
//! ```

mod synthetic;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or("usage: synthetic_run OUT_DIR [STEPS] [MINUTES]")?;
    let steps: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let minutes: u64 = args.next().map_or(Ok(60), |s| s.parse())?;
    synthetic::write(&out, steps, minutes)
}
