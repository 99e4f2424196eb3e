//! The smallest training side of smdebug for Rust, kept as a crate so that CI proves it stays
//! small: a training loop with the one `smdebug` dependency and its default features — a
//! session capturing tensors to local disk, sampling the host, timing the loop's phases and
//! honouring stop requests — with no HTTP, TLS, mail or chart stack compiled (`tests/lean.rs`
//! checks the dependency tree with `cargo tree`). BENCHMARKS.md measures its crate count and
//! cold build time.
//!
//! The model is a straight line fitted by gradient descent, enough to give the hook weights,
//! gradients and a loss to save.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let outcome = smdebug_lean_training::train(dir.path(), 20, |_| {}).unwrap();
//! assert_eq!(outcome.steps, 20);
//! assert!(outcome.stopped.is_none());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use smdebug::prelude::*;

/// How a [`train`] call ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Steps trained.
    pub steps: u64,
    /// The stop request that ended training early, if one did: its reason, and the rule and
    /// step when a rule asked.
    pub stopped: Option<StopCause>,
    /// The loss at the last step.
    pub loss: f64,
}

/// Fits `y = 2x + 1` for up to `steps` steps, saving the weights and their gradients every
/// step and the loss (collection `losses`) into the run at `location` (a directory, or an
/// object-store URL when smdebug-io's backend for it is compiled in). A stop request written
/// into the run (`smdebug::io::stop::request_stop`, as a rule runner does) ends the loop at its
/// next step. `after_step` is called with the step number after every step.
pub fn train(
    location: impl smdebug::storage::IntoLocation,
    steps: u64,
    mut after_step: impl FnMut(u64),
) -> smdebug::Result<Outcome> {
    let mut session = Session::builder(location)
        .save(SaveConfig::every(1))
        .start()?;
    session.set_mode(Mode::Train)?;

    let xs: Vec<f64> = (0..16).map(|i| f64::from(i) / 8.0 - 1.0).collect();
    let (mut w, mut b) = (0.0f64, 0.0f64);
    let mut outcome = Outcome {
        steps: 0,
        stopped: None,
        loss: f64::NAN,
    };
    for step in 0..steps {
        if let Some(cause) = session.stop_requested() {
            outcome.stopped = Some(cause);
            break;
        }
        let n = xs.len() as f64;
        let (loss, gw, gb) = session.backward(|| {
            let (mut loss, mut gw, mut gb) = (0.0, 0.0, 0.0);
            for &x in &xs {
                let err = w * x + b - (2.0 * x + 1.0);
                loss += err * err / n;
                gw += 2.0 * err * x / n;
                gb += 2.0 * err / n;
            }
            (loss, gw, gb)
        });
        let hook = session.hook();
        hook.save_tensor("w", &TensorView::scalar(w), &["weights"]);
        hook.save_tensor("b", &TensorView::scalar(b), &["biases"]);
        hook.save_tensor("grad/w", &TensorView::scalar(gw), &["gradients"]);
        hook.save_tensor("grad/b", &TensorView::scalar(gb), &["gradients"]);
        hook.save_scalar("loss", loss, &["losses"]);
        session.optimizer(|| {
            w -= 0.1 * gw;
            b -= 0.1 * gb;
        });
        outcome.loss = loss;
        outcome.steps = step + 1;
        session.step()?;
        after_step(step);
    }
    session.finish()?;
    Ok(outcome)
}
