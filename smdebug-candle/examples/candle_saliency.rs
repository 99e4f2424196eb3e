//! Why did the model get these digits wrong? Trains a small CNN on the 8×8 digits with candle in
//! an smdebug session, then, for every held-out digit it misclassifies, captures the gradient of
//! the predicted class's score with respect to the input pixels (a saliency map) through the
//! hook, reads the maps back with `Trial` and draws each as a PNG beside its image.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example candle_saliency -- [--out DIR]
//! ```
//!
//! The network (`common/deploy.rs`): conv 3×3 (1→16) → ReLU → conv 3×3 (16→32) → ReLU →
//! max-pool 2 → linear (512→10), 9.9k parameters, weights from a seeded generator, AdamW, 4
//! epochs of batch 32 on the 1,438 training digits (80/20 split, seed 7).
//!
//! In the run (`DIR/run`, default `DIR` = `target/smdebug-candle/saliency`) the collection
//! `saliency` holds, at PREDICT step *i* for each misclassified held-out digit *i*:
//! `saliency/gradient` (d score_pred / d input, shape `[1, 8, 8]` like the input),
//! `saliency/image` (the input), and the scalars `saliency/label` and `saliency/predicted`.
//! The pictures are `DIR/saliency/digit<i>_label<L>_pred<P>.png`: the digit on the left (ink
//! black), its saliency map on the right on a blue–white–red scale from −max|g| to +max|g|: red
//! where more ink would raise the score of the wrongly predicted class, blue where it would lower
//! it.

// Shared with the tests, which use parts the example does not.
#[allow(dead_code)]
#[path = "common/deploy.rs"]
mod deploy;
#[allow(dead_code)]
#[path = "common/saliency.rs"]
mod saliency;

use std::time::Instant;

fn main() -> Result<(), deploy::BoxError> {
    let out = deploy::out_dir("saliency")?;
    let start = Instant::now();
    let outcome = saliency::run(&out)?;
    println!(
        "{} of {} held-out digits misclassified (accuracy {:.3}); their saliency maps, read back from {}:",
        outcome.misclassified.len(),
        outcome.held_out,
        outcome.trained.test_accuracy,
        outcome.run.display()
    );
    for p in &outcome.pictures {
        println!(
            "  digit {:3}: a {} taken for a {}, max |d score/d pixel| {:.4}  {}",
            p.index,
            p.label,
            p.predicted,
            p.max_abs,
            p.path.display()
        );
    }
    println!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
