//! What a whole smdebug session costs a candle training loop, measured side by side: the
//! `candle_cnn` network (18.4k parameters, batch 32 of 28×28 digits, about 40 ms a step on two
//! cores) trained for the same steps on the same batches, in alternating rounds:
//!
//! | variant | the session |
//! | --- | --- |
//! | no session | none: the bare loop |
//! | everything on | weights, gradients and the loss every 100th step; phase and data-loading spans every step; system metrics every 100 ms; VanishingGradient, ExplodingTensor, LossNotDecreasing and StepOutlier in the process; the report at the end |
//! | windows closed | the same, with every profiling window closed (no spans, no code profile) |
//! | detailed window | everything on, with a 100-step detailed window (a span per layer) |
//! | code profile | everything on, with the code profile sampling the whole measured stretch |
//! | capture only | windows closed, no system sampler, no rules: the capture alone |
//! | no session again | the bare loop once more, last in the round: the noise floor |
//!
//! Each step is timed alone, from asking for its batch to the end of `session.step()`; a
//! variant's figure is the median step. Starting and finishing the session (the report
//! included) are timed apart, outside the steps. On a shared machine the side-by-side medians
//! move by a few percent between runs of the same loop (the table's last line says by how
//! much), so the session's own cost is also counted directly: the time the loop's thread
//! spends inside the session's calls between the framework's work (the next batch, the saves,
//! the step boundary; the forward, backward and optimizer scopes add two clock reads each,
//! not counted), and the CPU time of the session's threads (writer, sampler, span writer,
//! rules, stop watcher, config follower, code profiler), per step and as a share of the bare
//! loop's median step.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example session_cost -- [--rounds 5] [--steps 150]
//! ```

use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use smdebug::prelude::*;
use smdebug::profiler::system::SamplerConfig;
use smdebug_examples::digits::AugmentedDigits;
use smdebug_examples::overhead::{median, number_arg};

#[path = "common/cnn.rs"]
#[allow(dead_code)] // accuracy: this example measures time only
mod cnn;
use cnn::{BATCH, Cnn, SIDE};

type BoxError = Box<dyn std::error::Error>;

/// The variants of a round, in the order they run. The bare loop runs again last: how far
/// apart its two runs in one round are is the noise the other differences stand against.
const VARIANTS: [&str; 7] = [
    "no session",
    "everything on",
    "windows closed",
    "detailed window",
    "code profile",
    "capture only",
    "no session again",
];

/// What one variant's run measured.
struct Timing {
    /// Seconds per step, one entry per step.
    steps: Vec<f64>,
    /// Seconds to start the session (0 without one).
    start: f64,
    /// Seconds to finish it, the report included (0 without one).
    finish: f64,
    /// Seconds the loop's thread spent inside the session's calls between the framework's work
    /// (the next batch, saving, the step boundary), summed over the steps.
    in_loop: f64,
    /// CPU seconds of the session's own threads (named `smdebug-…`) while it ran.
    background: f64,
}

/// CPU seconds used so far by this process's threads whose name starts with `smdebug-`
/// (`/proc/self/task/*/stat`, in the kernel's 100 Hz user ticks).
fn session_threads_cpu() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let mut ticks = 0u64;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("smdebug-") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state is field 3 of the line; utime and stime are fields 14 and 15.
        for i in [11, 12] {
            ticks += fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ticks as f64 / 100.0
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = number_arg(&args, "--rounds", 5)?;
    let steps: usize = number_arg(&args, "--steps", 150)?;
    let mut data = AugmentedDigits::load(SIDE)?;
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| cnn::tensors(data.batch(BATCH)))
        .collect::<Result<_, _>>()?;
    let scratch = std::env::temp_dir().join(format!("smdebug-session-cost-{}", std::process::id()));
    train(&batches[..20], None)?; // warm-up: allocator, thread pools, page cache
    let mut medians: Vec<[f64; 7]> = Vec::new();
    let mut edges: Vec<[(f64, f64); 7]> = Vec::new();
    let mut own: Vec<[(f64, f64); 7]> = Vec::new();
    for round in 0..rounds {
        let mut row = [0.0; 7];
        let mut edge = [(0.0, 0.0); 7];
        let mut spent = [(0.0, 0.0); 7];
        for (v, name) in VARIANTS.iter().enumerate() {
            let session = match v {
                0 | 6 => None,
                _ => {
                    let dir = scratch.join(format!("{round}-{}", name.replace(' ', "-")));
                    Some(builder(dir.to_str().ok_or("non-UTF-8 temp dir")?, v, steps))
                }
            };
            let t = train(&batches, session)?;
            row[v] = median(&t.steps);
            edge[v] = (t.start, t.finish);
            let n = t.steps.len() as f64;
            spent[v] = (t.in_loop / n, t.background / n);
        }
        println!(
            "round {round}: {}",
            row.iter()
                .zip(VARIANTS)
                .map(|(s, n)| format!("{n} {:.2} ms", s * 1e3))
                .collect::<Vec<_>>()
                .join(", ")
        );
        medians.push(row);
        edges.push(edge);
        own.push(spent);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    print_table(steps, &medians, &edges, &own);
    Ok(())
}

/// The session of variant `v` (1 to 4) writing into `dir`.
fn builder(
    dir: &str,
    v: usize,
    steps: usize,
) -> smdebug::SessionBuilder<smdebug_candle::CandleHook> {
    let b = Session::builder(dir)
        .candle()
        .without_config_files()
        .save(SaveConfig::every(100));
    if v == 5 {
        return b
            .profiling(smdebug::capture::timeline::TimelineConfig::off())
            .no_system();
    }
    let b = b
        .system(SamplerConfig::default().interval(Duration::from_millis(100)))
        .rules([
            "VanishingGradient",
            "ExplodingTensor",
            "LossNotDecreasing",
            "StepOutlier",
        ]);
    match v {
        2 => b.profiling(smdebug::capture::timeline::TimelineConfig::off()),
        3 => b.detailed_profiling(Window::steps(0, 100)),
        4 => b.code_profiling(Window::steps(0, steps as u64)),
        _ => b,
    }
}

/// Trains a fresh network on `batches`, in `session` when there is one.
fn train(
    batches: &[(Tensor, Tensor)],
    session: Option<smdebug::SessionBuilder<smdebug_candle::CandleHook>>,
) -> Result<Timing, BoxError> {
    let vm = VarMap::new();
    let (conv1, conv2, fc) =
        Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?.into_layers();
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    let mut steps = Vec::with_capacity(batches.len());
    let Some(builder) = session else {
        for (x, y) in batches {
            let began = Instant::now();
            let logits = cnn::forward(&conv1, &conv2, &fc, x)?;
            let loss = candle_nn::loss::cross_entropy(&logits, y)?;
            let grads = loss.backward()?;
            sgd.step(&grads)?;
            steps.push(began.elapsed().as_secs_f64());
        }
        return Ok(Timing {
            steps,
            start: 0.0,
            finish: 0.0,
            in_loop: 0.0,
            background: 0.0,
        });
    };
    let began = Instant::now();
    let mut session = builder.start()?;
    let start = began.elapsed().as_secs_f64();
    let hook = session.hook();
    let (conv1, conv2, fc) = (
        hook.wrap("conv1", conv1),
        hook.wrap("conv2", conv2),
        hook.wrap("fc", fc),
    );
    let mut in_loop = 0.0;
    let mut began = Instant::now();
    let mut data = session.data(batches);
    loop {
        let t = Instant::now();
        let Some((x, y)) = data.next() else { break };
        in_loop += t.elapsed().as_secs_f64();
        let logits = session.forward(|| cnn::forward(&conv1, &conv2, &fc, x))?;
        let loss = candle_nn::loss::cross_entropy(&logits, y)?;
        let hook = session.hook();
        let grads = hook.backward(&loss)?;
        let t = Instant::now();
        hook.save_parameters(&vm)?;
        hook.save_gradients(&vm, &grads)?;
        hook.save_loss("loss", &loss)?;
        in_loop += t.elapsed().as_secs_f64();
        session.optimizer(|| sgd.step(&grads))?;
        let t = Instant::now();
        let stop = session.step()?.stop_requested();
        in_loop += t.elapsed().as_secs_f64();
        steps.push(began.elapsed().as_secs_f64());
        began = Instant::now();
        if stop {
            return Err("a rule stopped the measured run; its figures would not compare".into());
        }
    }
    let background = session_threads_cpu();
    let closing = Instant::now();
    let summary = session.finish()?;
    let finish = closing.elapsed().as_secs_f64();
    if !summary.problems.is_empty() || summary.records_dropped > 0 {
        return Err(format!("the measured session was not clean:\n{summary}").into());
    }
    Ok(Timing {
        steps,
        start,
        finish,
        in_loop,
        background,
    })
}

/// The median step of each variant over the rounds, its cost over the same round's bare loop
/// (the median of the rounds' differences), and the sessions' start and finish times.
fn print_table(
    steps: usize,
    medians: &[[f64; 7]],
    edges: &[[(f64, f64); 7]],
    own: &[[(f64, f64); 7]],
) {
    println!(
        "\nmedian step over {} rounds of {steps} steps, batch {BATCH}, 28x28 CNN (18.4k parameters), candle CPU:",
        medians.len()
    );
    println!(
        "{:<16} {:>10} {:>12} {:>10} {:>11} {:>12} {:>13} {:>11}",
        "variant",
        "step",
        "over bare",
        "start",
        "finish",
        "in the loop",
        "own threads",
        "of a step"
    );
    let bare = median(&medians.iter().map(|r| r[0]).collect::<Vec<_>>());
    for (v, name) in VARIANTS.iter().enumerate() {
        let step = median(&medians.iter().map(|r| r[v]).collect::<Vec<_>>());
        let over = median(
            &medians
                .iter()
                .map(|r| (r[v] / r[0] - 1.0) * 100.0)
                .collect::<Vec<_>>(),
        );
        let start = median(&edges.iter().map(|e| e[v].0).collect::<Vec<_>>());
        let finish = median(&edges.iter().map(|e| e[v].1).collect::<Vec<_>>());
        let in_loop = median(&own.iter().map(|o| o[v].0).collect::<Vec<_>>());
        let threads = median(&own.iter().map(|o| o[v].1).collect::<Vec<_>>());
        println!(
            "{name:<16} {:>7.2} ms {:>+10.2} % {:>7.0} ms {:>8.0} ms {:>9.1} µs {:>10.1} µs {:>9.2} %",
            step * 1e3,
            over,
            start * 1e3,
            finish * 1e3,
            in_loop * 1e6,
            threads * 1e6,
            (in_loop + threads) / bare * 100.0
        );
    }
    let apart: Vec<f64> = medians
        .iter()
        .map(|r| ((r[6] / r[0] - 1.0) * 100.0).abs())
        .collect();
    println!(
        "noise: the bare loop's two runs in a round differ by {:.2} % (median), {:.2} % at most",
        median(&apart),
        apart.iter().fold(0.0f64, |m, x| m.max(*x))
    );
}
