//! Has the data a deployed model serves drifted from what it was trained on? Trains a small CNN
//! on the 8×8 digits with candle in an smdebug session, captures the trained model's inputs and
//! outputs over its training images as the baseline, then serves three copies of the held-out
//! digits, each in a session of its own with the custom rule `DataDrift`: the digits as they are,
//! a washed-out copy (every pixel `0.35 + 0.65·x`) and a copy moved one pixel to the right. The
//! rule reads the baseline from the training run with `Trial` and compares the served inputs and
//! outputs with it: it stays quiet on the first, and fires on the washed-out digits from the
//! inputs' side (the model still gets most of them right) and on the moved ones from the outputs'
//! side (their intensities are those of the training images; the predictions are not).
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_drift -- [--out DIR]
//! ```
//!
//! Runs (default `DIR` = `target/smdebug-candle/drift`): `DIR/train` (training, then the baseline
//! at PREDICT steps), `DIR/serve-heldout`, `DIR/serve-washed-out` and `DIR/serve-translated`
//! (PREDICT steps of 32 images).
//! In each, the collection `data_capture` holds `data_capture/input` (`[n, 1, 8, 8]`) and
//! `data_capture/output` (the class probabilities, `[n, 10]`) at every PREDICT step.
//!
//! The statistic and the thresholds (`common/drift.rs`): the inputs' per-image mean intensity by
//! the two-sample Kolmogorov–Smirnov test at alpha = 0.001, the outputs' predicted-class
//! histogram by the population stability index above 0.25; judged over everything served so
//! far once 128 images were served, at every step after.

// Shared with the tests, which use parts the example does not.
#[allow(dead_code)]
#[path = "common/deploy.rs"]
mod deploy;
#[allow(dead_code)]
#[path = "common/drift.rs"]
mod drift;

use std::time::Instant;

fn main() -> Result<(), deploy::BoxError> {
    let out = deploy::out_dir("drift")?;
    let start = Instant::now();
    let outcome = drift::run(&out)?;
    println!(
        "\nbaseline: {} training images in {}",
        outcome.held_out.details.baseline_samples,
        outcome.train_run.display()
    );
    for (what, served) in [
        ("held-out digits", &outcome.held_out),
        ("washed-out digits", &outcome.washed_out),
        ("digits moved one pixel right", &outcome.translated),
    ] {
        println!(
            "{what}: served accuracy {:.3}, DataDrift {} ({})",
            served.accuracy,
            served.status.status.name(),
            served.run.display()
        );
        if !served.status.message.is_empty() {
            println!("  {}", served.status.message);
        }
        for j in &served.details.judged {
            println!(
                "  step {:>2}: {:>3} images, KS D {:.3} (critical {:.3}), PSI {:.3}{}",
                j.step,
                j.samples,
                j.ks,
                j.ks_critical,
                j.psi,
                if j.fired { "  fired" } else { "" }
            );
        }
    }
    println!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
