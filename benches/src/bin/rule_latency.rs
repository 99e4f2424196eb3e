//! `rule_latency [STEPS]`: how long after a training step is written a rule following the live
//! run reports it. A loop writes a step every 20 ms to a local run and puts a NaN into the
//! gradient every 20th step; an ExplodingTensor runner follows the run (default settings) and
//! the time from the loop's `hook.step()` to the runner's status showing that step fired is
//! measured for every injected step.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_io::writer::Writer;
use smdebug_rules::{RuleRunner, RuleSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(400);
    let dir = tempfile::tempdir()?;
    let run = dir.path().join("run");
    let run = run.to_str().ok_or("path")?.to_string();

    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(&run)?)?;
    hook.set_mode(Mode::Train);
    // Step 0 exists before the runner opens the run.
    let g = vec![0.5f32; 1024];
    hook.save_tensor(
        "gradient/fc1.weight",
        &TensorView::from_slice(&g, &[1024])?,
        &["gradients"],
    );
    hook.step();

    let handle = RuleRunner::builder(&run)
        .write_into_run(false)
        // The writer publishes asynchronously: give the run a moment to appear.
        .open_timeout(Duration::from_secs(10))
        .spec(RuleSpec::parse("ExplodingTensor")?)
        .build()?
        .spawn()?;

    let mut latencies = Vec::new();
    for step in 1..steps {
        let mut g = vec![0.5f32; 1024];
        let inject = step % 20 == 0;
        if inject {
            g[7] = f32::NAN;
        }
        hook.save_tensor(
            "gradient/fc1.weight",
            &TensorView::from_slice(&g, &[1024])?,
            &["gradients"],
        );
        hook.step();
        let written = Instant::now();
        if inject {
            loop {
                let seen = handle
                    .summary()
                    .and_then(|s| s.rules.first().and_then(|r| r.last_fired_step))
                    .is_some_and(|s| s >= step);
                if seen {
                    latencies.push(written.elapsed());
                    break;
                }
                if written.elapsed() > Duration::from_secs(30) {
                    return Err(format!("step {step} was not reported within 30 s").into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    hook.close();
    drop(hook);
    handle.join()?;
    latencies.sort();
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    println!(
        "step written -> rule status changed, {} samples: min {:.1} ms, p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        latencies.len(),
        ms(&latencies[0]),
        ms(&latencies[latencies.len() / 2]),
        ms(&latencies[latencies.len() * 95 / 100]),
        ms(latencies.last().expect("samples"))
    );
    Ok(())
}
