//! The README's training loop: a line fitted by gradient descent, with capture, framework
//! spans, system sampling, live rules and the profiling report from one session.
//!
//! ```sh
//! cargo run -p smdebug --example quickstart
//! ```

use smdebug::prelude::*;

/// Mean squared error of `y = w x + b` over `batch`, with its gradients.
fn mse(batch: &[(f64, f64)], w: f64, b: f64) -> (f64, f64, f64) {
    let n = batch.len() as f64;
    batch.iter().fold((0.0, 0.0, 0.0), |(l, gw, gb), (x, y)| {
        let e = w * x + b - y;
        (l + e * e / n, gw + 2.0 * e * x / n, gb + 2.0 * e / n)
    })
}

fn main() -> Result<(), smdebug::Error> {
    let data: Vec<(f64, f64)> = (0..64)
        .map(|i| f64::from(i) / 32.0 - 1.0)
        .map(|x| (x, 2.0 * x + 1.0))
        .collect();
    let (mut w, mut b) = (0.0, 0.0);

    let mut session = Session::builder("target/quickstart-run") // or s3://bucket/run
        .overwrite(true) // replace the run an earlier start left there
        .save(SaveConfig::every(10)) // tensors every 10th step
        .rules(["LossNotDecreasing", "ExplodingTensor", "ProfilerReport"])
        .start()?; // SageMaker's config files, when present, override these settings
    'training: for _epoch in 0..40 {
        for batch in session.data(data.chunks(8)) {
            let (loss, gw, gb) = session.forward(|| mse(batch, w, b));
            let hook = session.hook();
            hook.save_tensor("w", &TensorView::scalar(w), &["weights"]);
            hook.save_tensor("gradient/w", &TensorView::scalar(gw), &["gradients"]);
            hook.save_scalar("loss", loss, &["losses"]);
            session.optimizer(|| (w, b) = (w - 0.1 * gw, b - 0.1 * gb));
            if session.step()?.stop_requested() {
                break 'training; // a rule fired, or someone pressed Stop
            }
        }
    }
    let summary = session.finish()?; // verdicts, drops, why it stopped, where the report is
    print!("{summary}");
    Ok(())
}

/// `cargo test` runs the example whole (it is built as a test, `test = true`), in a scratch
/// directory: the README shows this loop, so it must keep working.
#[cfg(test)]
#[test]
fn the_quickstart_runs_to_its_end() {
    let scratch = tempfile::tempdir().unwrap();
    std::env::set_current_dir(scratch.path()).unwrap();
    main().unwrap();
    let run = scratch.path().join("target/quickstart-run");
    assert!(run.join("training_job_end.ts").exists());
    assert!(
        run.join("rules/ProfilerReport/profiler-output/profiler-report.html")
            .exists()
    );
    // Run again: the earlier run is replaced, not mixed in.
    main().unwrap();
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    // Tensors every 10th step, and the losses every 25th as well: LossNotDecreasing asks
    // for them often enough to judge two windows of 10 by the rules' interval of 500 steps.
    let saved = (0..320u64).filter(|s| s % 10 == 0 || s % 25 == 0).count();
    assert_eq!(trial.steps(None).unwrap().len(), saved);
}
