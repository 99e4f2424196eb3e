//! How fast the writer publishes small steps: the ceiling on every-step capture of a small model.
//!
//! ```sh
//! cargo run --release -p smdebug-io --example publish_rate -- DIR [STEPS]
//! ```
//!
//! Each step holds what the adapters' MLP examples record: the four parameters of a 64-32-10 MLP,
//! their gradients and a loss (9 tensors, 19 KiB). The writer runs in block mode, so the time per
//! step is the writer's (one event file, one index file and one step folder per step, smdebug's
//! layout) whenever it is slower than the loop that feeds it. Closing is included.

use std::time::Instant;

use smdebug_core::{DType, Hook, SaveConfig, TensorView};
use smdebug_io::writer::{OverflowPolicy, Writer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: publish_rate DIR [STEPS]")?;
    let steps: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3000);
    let _ = std::fs::remove_dir_all(&dir);
    let writer = Writer::builder(smdebug_storage::open_storage(&dir)?)
        .overflow(OverflowPolicy::Block)
        .build()?;
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)?;
    let shapes: [&[usize]; 4] = [&[64, 32], &[32], &[32, 10], &[10]];
    let names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    let data = vec![0u8; 64 * 32 * 4];
    let start = Instant::now();
    for _ in 0..steps {
        for prefix in ["", "gradient/"] {
            for (name, shape) in names.iter().zip(shapes) {
                let n: usize = shape.iter().product();
                let view = TensorView::from_bytes(DType::F32, shape, &data[..n * 4])?;
                hook.save_tensor(&format!("{prefix}{name}"), &view, &["weights"]);
            }
        }
        hook.save_scalar("loss", 1.0, &["losses"]);
        hook.step();
    }
    hook.close();
    let per_step = start.elapsed().as_secs_f64() / f64::from(steps);
    println!(
        "{steps} steps into {dir}: {:.1} µs per step ({:.0} steps/s)",
        per_step * 1e6,
        1.0 / per_step
    );
    Ok(())
}
