//! `code_profile_cost [ROUNDS] [STEPS]`: what a code-profile window costs a real training step
//! while it samples. The digits MLP (64-256-256-10, batch 128: forward, loss, backward, SGD)
//! runs STEPS steps with no window open, then STEPS steps inside a window sampling at the
//! default 99 Hz, in alternating order, ROUNDS times (defaults 10 and 400). Each block's median
//! step time is printed per round with the sampled block's cost over the unsampled one, then
//! the medians over rounds. Between blocks the window's files are written (`flush`), so the
//! writer's symbolizing does not overlap a measured block.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_core::Mode;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::mlp::{Activation, Mlp, Rng};
use smdebug_examples::overhead::median;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_storage::LocalStorage;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let steps: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(400);

    let data = Digits::load(&digits::default_path())?;
    let mut rng = Rng::new(3);
    let order = rng.permutation(data.len());
    let batches: Vec<_> = order.chunks(128).map(|b| data.batch(b)).collect();
    let mut model = Mlp::new(&[64, 256, 256, 10], Activation::Relu, 1.0, 0.0, &mut rng);
    let mut loop_ = Steps {
        batches,
        next: 0,
        steps,
    };
    let run = tempfile::tempdir()?;
    let profiler = CodeProfiler::start(
        CodeProfileConfig::default(),
        Arc::new(LocalStorage::new(run.path())?),
    )?;
    // Warm-up: caches, and the sampler's first window (its tables and the debug information).
    loop_.median_step(&mut model);
    profiler.begin(None)?;
    loop_.median_step(&mut model);
    profiler.end(None)?;
    profiler.flush()?;

    println!(
        "digits MLP 64-256-256-10, batch 128: median step time of {steps} steps, {rounds} rounds"
    );
    println!(
        "round  {:>12}  {:>14}  {:>9}",
        "no window", "sampling 99 Hz", "cost"
    );
    let mut rows = Vec::new();
    for round in 0..rounds {
        let (plain, sampled) = if round % 2 == 0 {
            let plain = loop_.median_step(&mut model);
            (plain, sampled(&mut loop_, &mut model, &profiler, round)?)
        } else {
            let sampled = sampled(&mut loop_, &mut model, &profiler, round)?;
            (loop_.median_step(&mut model), sampled)
        };
        let cost = (sampled / plain - 1.0) * 100.0;
        println!(
            "{round:<5}  {:>9.1} µs  {:>11.1} µs  {cost:>+8.2}%",
            plain * 1e6,
            sampled * 1e6
        );
        rows.push((plain, sampled, cost));
    }
    let col = |f: fn(&(f64, f64, f64)) -> f64| median(&rows.iter().map(f).collect::<Vec<_>>());
    println!(
        "med.   {:>9.1} µs  {:>11.1} µs  {:>+8.2}%",
        col(|r| r.0) * 1e6,
        col(|r| r.1) * 1e6,
        col(|r| r.2)
    );
    let report = profiler.finish()?;
    println!(
        "{} windows written (the warm-up's included), {} samples at {} Hz",
        report.written,
        report.samples,
        smdebug_profiler::code::DEFAULT_FREQUENCY_HZ
    );
    Ok(())
}

type Batch = (ndarray::Array2<f32>, ndarray::Array1<usize>);

/// The training loop over the digits, a block of steps at a time.
struct Steps {
    batches: Vec<Batch>,
    next: usize,
    steps: usize,
}

impl Steps {
    /// Runs a block of steps; the median step time, seconds.
    fn median_step(&mut self, model: &mut Mlp) -> f64 {
        let mut times = Vec::with_capacity(self.steps);
        for _ in 0..self.steps {
            let (x, y) = &self.batches[self.next % self.batches.len()];
            self.next += 1;
            let t = Instant::now();
            let fwd = model.forward(x);
            let (loss, _) = Mlp::loss_and_accuracy(&fwd, y);
            let grads = model.backward(&fwd, y);
            model.sgd(&grads, 0.01);
            times.push(t.elapsed().as_secs_f64());
            std::hint::black_box(loss);
        }
        median(&times)
    }
}

/// A block of steps inside a window, measured once the timer is installed; the window's files
/// are written before it returns.
fn sampled(
    steps: &mut Steps,
    model: &mut Mlp,
    profiler: &CodeProfiler,
    round: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    profiler.begin(Some((Mode::Train, round as u64)))?;
    while !profiler.is_sampling() {
        if let Some(e) = profiler.report().last_error {
            return Err(e.into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let t = steps.median_step(model);
    profiler.end(Some((Mode::Train, round as u64)))?;
    profiler.flush()?;
    Ok(t)
}
