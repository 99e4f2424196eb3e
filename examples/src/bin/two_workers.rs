//! A data-parallel training job of several processes writing one run: each worker trains the
//! digits MLP on its own shard, gradients are averaged across workers at every step (so all
//! workers hold the same model), and every worker records through its own session into
//! `worker_<rank>` files of the same run directory or object-store prefix: tensors, framework
//! spans (every worker), system metrics (one process per host) and, on rank 0, the rules over
//! every worker's data with the profiling report.
//!
//! ```sh
//! # launches 2 worker processes (RANK=0,1 WORLD_SIZE=2), waits, then reads the run back
//! cargo run --release -p smdebug-examples --bin two_workers -- [--out DIR|URL] [--workers N] [--epochs N]
//! ```
//!
//! Started with `RANK`/`WORLD_SIZE`/`MASTER_ADDR`/`MASTER_PORT` in the environment (as the
//! launcher above, `torchrun` or a cluster scheduler does), the program is one worker. The
//! launcher gives its workers one `SMDEBUG_JOB_ID`, by which their sessions agree on the job.
//! Object stores take their settings from the usual environment (`AWS_ENDPOINT`,
//! `AWS_ACCESS_KEY_ID`, … for `s3://`).

#![forbid(unsafe_code)]

use std::net::TcpListener;
use std::process::{Command, ExitCode};
use std::time::Duration;

use ndarray::{Array1, Array2};
use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug_examples::allreduce::AllReduce;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::mlp::{Activation, Gradients, Mlp, Rng};
use smdebug_examples::{TensorNames, record_train_step};
use smdebug_read::trial::StepState;

struct Args {
    out: String,
    workers: usize,
    epochs: usize,
    save_interval: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: "target/smdebug-demo/two_workers".into(),
        workers: 2,
        epochs: 3,
        save_interval: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, v: String| -> Result<usize, String> {
            v.parse().map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "--out" => args.out = value("--out")?,
            "--workers" => args.workers = number("--workers", value("--workers")?)?,
            "--epochs" => args.epochs = number("--epochs", value("--epochs")?)?,
            "--save-interval" => {
                args.save_interval = number("--save-interval", value("--save-interval")?)? as u64
            }
            "-h" | "--help" => {
                println!(
                    "two_workers [--out DIR|URL] [--workers N] [--epochs N] [--save-interval N]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if args.workers == 0 || args.save_interval == 0 {
        return Err("--workers and --save-interval must be at least 1".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    // The libraries report through `log` (a storage error that disables capture is an error);
    // show errors on stderr unless RUST_LOG asks for more.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let result = parse_args().map_err(Into::into).and_then(|args| {
        if std::env::var_os("RANK").is_some() {
            worker(&args)
        } else {
            launch(&args)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("two_workers: {e}");
            ExitCode::FAILURE
        }
    }
}

type AnyError = Box<dyn std::error::Error>;

/// Starts one process per worker, waits for all, then reads the run back.
fn launch(args: &Args) -> Result<(), AnyError> {
    let location = smdebug_examples::overhead::prepared_location(&args.out)?.to_string();
    // A free port for rank 0 to listen on (released here, taken by rank 0 a moment later).
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let exe = std::env::current_exe()?;
    // One id for every process of this job: written into the run's identity files, it tells
    // the workers of this job from those of an earlier one.
    let job = smdebug_io::jobs::random_id();
    println!("launching {} workers writing into {location}", args.workers);
    let children = (0..args.workers)
        .map(|rank| {
            Command::new(&exe)
                .args(std::env::args().skip(1))
                .args(["--out", &location])
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", args.workers.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env(smdebug_io::jobs::JOB_ID_ENV, &job)
                .spawn()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut failed = Vec::new();
    for (rank, mut child) in children.into_iter().enumerate() {
        let status = child.wait()?;
        if !status.success() {
            failed.push(format!("worker {rank}: {status}"));
        }
    }
    if !failed.is_empty() {
        return Err(failed.join(", ").into());
    }
    summarize(&location)
}

/// Prints what the run holds: workers, steps, and whether every worker wrote every step.
fn summarize(location: &str) -> Result<(), AnyError> {
    let trial = Trial::open(location)?;
    let workers = trial.workers()?;
    let steps = trial.steps(Some(Mode::Train))?;
    let complete = steps
        .iter()
        .filter(|s| {
            matches!(
                trial.has_passed_step(**s, Some(Mode::Train)),
                Ok(StepState::Available)
            )
        })
        .count();
    println!(
        "run {location}: workers {workers:?} ({} expected), {} TRAIN steps saved, {complete} complete on every worker, end marker: {}",
        trial.num_workers()?,
        steps.len(),
        trial.is_complete()?,
    );
    if let (Some(first), Some(last)) = (steps.first(), steps.last()) {
        for step in [*first, *last] {
            let losses: Vec<String> = workers
                .iter()
                .map(|w| {
                    trial
                        .tensor("loss")
                        .and_then(|t| t.value(step, Some(Mode::Train), Some(w)))
                        .map(|v| {
                            format!("{w}: {:.4}", v.iter().next().copied().unwrap_or(f64::NAN))
                        })
                        .unwrap_or_else(|e| format!("{w}: {e}"))
                })
                .collect();
            println!("  step {step} loss per worker: {}", losses.join(", "));
        }
    }
    Ok(())
}

/// One worker: its shard of the data, gradient averaging with the others, its own session
/// (capture, spans and, on rank 0, the host's system metrics and the rules with the report).
fn worker(args: &Args) -> Result<(), AnyError> {
    let me = WorkerInfo::from_env()?;
    let addr = format!(
        "{}:{}",
        std::env::var("MASTER_ADDR").unwrap_or_else(|_| "127.0.0.1".into()),
        std::env::var("MASTER_PORT").map_err(|_| "MASTER_PORT is not set")?
    );
    let mut allreduce = AllReduce::connect(me.rank, me.world_size, &addr, Duration::from_secs(30))?;

    let every = SaveConfig::every(args.save_interval);
    let mut session = Session::builder(&args.out)
        .worker(me)
        // Rank 0 replaces the run an earlier job left there (its files only; a folder holding
        // anything else is refused); the other workers wait for it before writing.
        .overwrite(true)
        .save(SaveConfig::every(1))
        .collection(Collection::new("weights").with_save_config(every.clone()))
        .collection(Collection::new("biases").with_save_config(every.clone()))
        .collection(Collection::new("gradients").with_save_config(every.clone()))
        .collection(Collection::new("outputs").with_save_config(every))
        .writer_queue(1 << 14)
        .system(SamplerConfig::default().interval(Duration::from_millis(100)))
        .spans(SpanConfig::default().close_interval(Duration::from_secs(1)))
        // Rank 0 runs the rules over every worker's data and writes the report into the run.
        .rules(["LossNotDecreasing", "ProfilerReport"])
        .start()?;

    let data = Digits::load(&digits::default_path())?;
    let (mut train_set, _) = data.split(0.2, 1);
    // Inputs standardized to zero mean and unit variance over the training images, as a
    // careful loop feeds them (raw pixels in [0, 1] have mean 0.30, which CheckInputImages
    // rightly reports). Every worker computes the same figures from the same split.
    let mean = train_set.images.mean().unwrap_or(0.0);
    let std = train_set.images.std(0.0).max(f32::EPSILON);
    train_set.images.mapv_inplace(|p| (p - mean) / std);
    // Every worker gets an equal share (the remainder is left out) so all run the same number of
    // steps, as a distributed sampler does.
    let per_worker = train_set.len() / me.world_size;
    let shard: Vec<usize> = (0..per_worker)
        .map(|i| i * me.world_size + me.rank)
        .collect();

    let mut init_rng = Rng::new(42); // same seed everywhere: every worker starts from one model
    let mut model = Mlp::new(&[64, 32, 10], Activation::Relu, 1.0, 0.0, &mut init_rng);
    let names = TensorNames::for_model(&model);
    let mut order_rng = Rng::new(1000 + me.rank as u64);
    let batch_size = 32;
    let lr = 0.1;
    let mut flat = Vec::new();
    let mut steps = 0u64;
    session.set_mode(Mode::Train)?;
    'epochs: for _ in 0..args.epochs {
        let order = order_rng.permutation(shard.len());
        let batches = order.chunks(batch_size).map(|batch| {
            let indices: Vec<usize> = batch.iter().map(|i| shard[*i]).collect();
            let xy: (Array2<f32>, Array1<usize>) = train_set.batch(&indices);
            xy
        });
        for (x, y) in session.data(batches) {
            let fwd = session.forward(|| model.forward(&x));
            let (loss, acc) = Mlp::loss_and_accuracy(&fwd, &y);
            let mut grads = session.backward(|| model.backward(&fwd, &y));
            let stop_here = session.stop_requested().is_some();
            flatten(&grads, &mut flat);
            let stop_all = session.scope("AllReduce", || allreduce.mean(&mut flat, stop_here))?;
            unflatten(&flat, &mut grads);
            if stop_all {
                println!(
                    "worker {}: stopping at step {steps}: a worker was asked to stop",
                    me.rank
                );
                break 'epochs;
            }
            // The averaged gradients are the ones the optimizer applies, as in DDP.
            record_train_step(session.hook(), &names, &model, &fwd, &grads, loss, acc);
            session.step()?;
            session.optimizer(|| model.sgd(&grads, lr));
            steps += 1;
        }
    }
    let summary = session.finish()?;
    if !summary.problems.is_empty() {
        return Err(format!("worker {}: {}", me.rank, summary.problems.join("; ")).into());
    }
    println!(
        "worker {} of {}: {steps} steps on {} examples, {} records written, {} dropped, {} spans",
        me.rank,
        me.world_size,
        shard.len(),
        summary.records_written,
        summary.records_dropped,
        summary.spans_written,
    );
    if me.rank == 0 {
        print!("{summary}");
    }
    Ok(())
}

fn flatten(grads: &Gradients, out: &mut Vec<f32>) {
    out.clear();
    for (w, b) in grads.weight.iter().zip(&grads.bias) {
        out.extend(w.iter());
        out.extend(b.iter());
    }
}

fn unflatten(flat: &[f32], grads: &mut Gradients) {
    let mut at = 0;
    for (w, b) in grads.weight.iter_mut().zip(grads.bias.iter_mut()) {
        for x in w.iter_mut().chain(b.iter_mut()) {
            *x = flat[at];
            at += 1;
        }
    }
}
