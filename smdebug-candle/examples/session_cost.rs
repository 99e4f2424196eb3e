//! What a whole smdebug session costs a candle training loop, measured side by side: the
//! `candle_cnn` network (18.4k parameters, batch 32 of 28×28 digits by default, 30-50 ms a step
//! on two cores) trained for the same steps on the same batches, with and without a session:
//!
//! | variant | the session |
//! | --- | --- |
//! | no session | none: the bare loop |
//! | everything on | weights, gradients and the loss every 100th step; phase and data-loading spans every step; system metrics every 100 ms; VanishingGradient, ExplodingTensor, LossNotDecreasing and StepOutlier in the process; the report at the end |
//! | windows closed | the same, with every profiling window closed (no spans, no code profile) |
//! | detailed window | everything on, with a 100-step detailed window (a span per layer) |
//! | code profile | everything on, with the code profile sampling the whole measured stretch |
//! | capture only | windows closed, no system sampler, no rules: the capture alone |
//!
//! Every run is a fresh process, as a training job runs its one session: a round ("quad") is
//! the bare loop, the variant twice, the bare loop again (ABBA, so that drift over the quad
//! cancels). A variant's cost is the median over quads of its mean median step against the
//! same quad's bare mean; how far apart the quad's two bare processes land is the noise it
//! stands against. (Sessions run one after another in one process get slower round by round;
//! a job never does that, so the figures do not either.) Each variant's mean over quads is
//! printed with its 95 % interval twice: from the processes' median steps, and from their mean
//! steps (the loop's whole time over its steps, what the job pays). When a process's speed
//! switches between two levels for stretches of hundreds of steps, as at a 5 ms step here, its
//! median jumps with the share of steps at each level, where its mean moves in proportion.
//!
//! Each step is timed alone, from asking for its batch to the end of `session.step()`.
//! Starting and finishing the session (the report included) are timed apart. The session's
//! own cost is also counted directly: the time the loop's thread spends inside the session's
//! calls between the framework's work (the next batch, the saves, the step boundary; the
//! forward, backward and optimizer scopes add two clock reads each, not counted), and the CPU
//! time of the session's threads (writer, sampler, span writer, rules, stop watcher, config
//! follower, code profiler), per step and as a share of the bare loop's median step. Each of
//! those threads is also counted alone: its CPU time (`/proc/self/task/*/schedstat`, in
//! nanoseconds) and how often it went to sleep and woke again (its voluntary context
//! switches, `/proc/self/task/*/status`), a step; these counts hardly move with the machine's
//! load, where the percentages do.
//!
//! `--batch N` sets the batch (32 by default): the step's length follows it, so that one
//! command measures a ~30 ms loop and a ~5 ms one the same way; the table prints the bare step
//! it got.
//!
//! `--only <variant>` runs one variant in this process and prints its figures on one line
//! (what the quads run); besides the table's variants it takes `idle session`, `steps only`
//! and `wrapped layers`, which make fewer of the session's calls, to find where a difference
//! comes from, and `burn`: no session, but a thread that wakes and spins as often and as long
//! as `SMDEBUG_BURN=PERIOD_US:SPIN_US` says (26000:300 by default, about the session's threads
//! at a 5 ms step), to tell what taking that much CPU costs the loop apart from the session's
//! work (`--variants burn` runs it in quads; the children inherit the variable).
//!
//! Each session writes its run in the system's temporary folder (`TMPDIR`, else `/tmp`), and
//! deletes it when its process ends. The tensor writer's CPU time follows that folder's file
//! system: making a file on an ext4 volume where many files were deleted shortly before costs
//! several times what it costs on a fresh one (BENCHMARKS.md), so say which one was measured.
//!
//! `--paired` compares within processes instead: each of `--rounds` processes a variant trains
//! the bare loop and the variant one after the other on the same batches, the variant first in
//! every other process, and `no session` is paired with itself as the noise floor. At a 5 ms
//! step two fresh processes of the same program land 10 % and more apart (bare against bare,
//! median), more than the session's cost; two halves of one process share what sets that apart.
//!
//! ```sh
//! cargo run --release -p smdebug-candle --example session_cost -- [--rounds 4] [--steps 150] [--batch 32] [--variants "everything on,capture only"] [--paired]
//! ```

use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, SGD, VarBuilder, VarMap};
use smdebug::prelude::*;
use smdebug::profiler::system::SamplerConfig;
use smdebug_examples::digits::AugmentedDigits;
use smdebug_examples::overhead::{mean_ci95, median, number_arg};

#[path = "common/cnn.rs"]
#[allow(dead_code)] // accuracy: this example measures time only
mod cnn;
use cnn::{BATCH, Cnn, SIDE};

use std::collections::BTreeMap;

type BoxError = Box<dyn std::error::Error>;

/// The variants the table compares with the bare loop, each run in a fresh process (as a
/// training job runs its one session): `no session`, then the variant twice, then `no session`
/// again. The two bare runs of a quad tell how far apart two identical processes land.
const VARIANTS: [&str; 6] = [
    "no session",
    "everything on",
    "windows closed",
    "detailed window",
    "code profile",
    "capture only",
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
    /// CPU time and wake-ups of each of the session's own threads (named `smdebug-…`) while
    /// it ran, by name.
    threads: BTreeMap<String, ThreadUse>,
}

/// What one of the session's threads (or all of them with one name) used.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadUse {
    /// CPU seconds.
    cpu: f64,
    /// Times it went to sleep and was woken (voluntary context switches).
    wakeups: f64,
    /// Times the scheduler took the core from it (involuntary context switches).
    preempted: f64,
}

impl ThreadUse {
    fn add(&mut self, other: ThreadUse) {
        self.cpu += other.cpu;
        self.wakeups += other.wakeups;
        self.preempted += other.preempted;
    }

    fn per(self, n: f64) -> ThreadUse {
        ThreadUse {
            cpu: self.cpu / n,
            wakeups: self.wakeups / n,
            preempted: self.preempted / n,
        }
    }
}

/// CPU time and context switches so far of this process's threads whose name starts with
/// `smdebug-`, summed by name: CPU from `/proc/self/task/*/schedstat` (nanoseconds; the
/// kernel's 100 Hz ticks of `stat` without it), switches from `/proc/self/task/*/status`.
fn session_threads() -> BTreeMap<String, ThreadUse> {
    let mut by_name = BTreeMap::<String, ThreadUse>::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if !comm.starts_with("smdebug-") {
            continue;
        }
        let cpu = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map_or_else(|| stat_ticks(&task.path()) / 100.0, |ns| ns as f64 / 1e9);
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        by_name.entry(comm.to_owned()).or_default().add(ThreadUse {
            cpu,
            wakeups: field("voluntary_ctxt_switches:"),
            preempted: field("nonvoluntary_ctxt_switches:"),
        });
    }
    by_name
}

/// A task's user and system time in the kernel's 100 Hz ticks (`stat`'s utime and stime).
fn stat_ticks(task: &std::path::Path) -> f64 {
    let stat = std::fs::read_to_string(task.join("stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of the line; utime and stime are fields 14 and 15.
    [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum()
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quads: usize = number_arg(&args, "--rounds", 4)?;
    let steps: usize = number_arg(&args, "--steps", 150)?;
    let batch: usize = number_arg(&args, "--batch", BATCH)?;
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let name = args.get(i + 1).ok_or("--only needs a variant's name")?;
        return only(name, steps, batch);
    }
    if let Some(i) = args.iter().position(|a| a == "--only-paired") {
        let name = args
            .get(i + 1)
            .ok_or("--only-paired needs a variant's name")?;
        let first: u8 = number_arg(&args, "--variant-first", 0)?;
        return only_paired(name, steps, batch, first == 1);
    }
    let variants: Vec<String> = match args.iter().position(|a| a == "--variants") {
        Some(i) => args
            .get(i + 1)
            .ok_or("--variants needs a comma-separated list")?
            .split(',')
            .map(str::to_owned)
            .collect(),
        None => VARIANTS[1..].iter().map(|v| v.to_string()).collect(),
    };
    if args.iter().any(|a| a == "--paired") {
        return paired(quads, steps, batch, &variants);
    }
    let mut quads_of: Vec<Vec<Quad>> = vec![Vec::new(); variants.len()];
    for q in 0..quads {
        for (v, name) in variants.iter().enumerate() {
            let bare = child("no session", steps, batch)?;
            let first = child(name, steps, batch)?;
            let second = child(name, steps, batch)?;
            let bare_again = child("no session", steps, batch)?;
            println!(
                "quad {q} (median step, mean): no session {:.2}, {:.2} ms; {name} {:.2}, {:.2} and {:.2}, {:.2} ms; no session {:.2}, {:.2} ms",
                bare.step * 1e3,
                bare.mean_step * 1e3,
                first.step * 1e3,
                first.mean_step * 1e3,
                second.step * 1e3,
                second.mean_step * 1e3,
                bare_again.step * 1e3,
                bare_again.mean_step * 1e3
            );
            quads_of[v].push(Quad {
                bare: [bare, bare_again],
                variant: [first, second],
            });
        }
    }
    print_table(steps, batch, &variants, &quads_of);
    print_threads(&variants, &quads_of);
    Ok(())
}

/// What one process measured: its median step and the session's own costs.
#[derive(Clone)]
struct Measured {
    /// Median seconds per step.
    step: f64,
    /// Mean seconds per step: the loop's whole time over its steps, what the job pays.
    mean_step: f64,
    /// Seconds to start and to finish the session.
    start: f64,
    finish: f64,
    /// Seconds per step on the loop's thread inside the session's calls.
    in_loop: f64,
    /// CPU seconds per step of the session's threads.
    threads: f64,
    /// Each of the session's threads, a step.
    each: BTreeMap<String, ThreadUse>,
}

/// Two bare processes around two of a variant.
#[derive(Clone)]
struct Quad {
    bare: [Measured; 2],
    variant: [Measured; 2],
}

/// Runs this example again with `mode` (`--only NAME`, ...), `--steps` and `--batch`, in a
/// fresh process: its whole output, and the numbers of its line that starts with `prefix`.
fn run_child(
    name: &str,
    mode: &[&str],
    steps: usize,
    batch: usize,
    prefix: &str,
) -> Result<(String, Vec<f64>), BoxError> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .args(mode)
        .args(["--steps", &steps.to_string()])
        .args(["--batch", &batch.to_string()])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "the {name:?} process failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .ok_or_else(|| format!("the {name:?} process printed no figures: {stdout}"))?;
    let f: Vec<f64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    Ok((stdout, f))
}

/// Runs this example again as `--only name`, in a fresh process, and reads what it measured.
fn child(name: &str, steps: usize, batch: usize) -> Result<Measured, BoxError> {
    let (stdout, f) = run_child(name, &["--only", name], steps, batch, "measured ")?;
    let [step, mean_step, start, finish, in_loop] = f[..] else {
        return Err(format!("the {name:?} process printed {f:?}").into());
    };
    let mut each = BTreeMap::new();
    for line in stdout.lines().filter_map(|l| l.strip_prefix("thread ")) {
        let mut words = line.split_whitespace();
        let thread = words.next().unwrap_or_default().to_owned();
        let f: Vec<f64> = words.map(str::parse).collect::<Result<_, _>>()?;
        let [cpu, wakeups, preempted] = f[..] else {
            return Err(format!("the {name:?} process printed thread {line:?}").into());
        };
        each.insert(
            thread,
            ThreadUse {
                cpu,
                wakeups,
                preempted,
            },
        );
    }
    Ok(Measured {
        step,
        mean_step,
        start,
        finish,
        in_loop,
        threads: each.values().map(|t| t.cpu).sum(),
        each,
    })
}

/// Runs variant `name` once, in this process, after a warm-up, with batches of `batch`, and
/// prints what it measured: one line `measured <median step> <mean step> <start> <finish> <in loop>`
/// (seconds; the last a step), then a line `thread <name> <CPU seconds> <wake-ups>
/// <preemptions>` a step for each of the session's threads. Besides
/// the table's variants: `idle session` (a capture-only session started, the loop making none
/// of its calls), `steps only` (only `session.step()`), `wrapped layers` (that and the hook's
/// layer wrappers).
fn only(name: &str, steps: usize, batch: usize) -> Result<(), BoxError> {
    let batches = warmed_up(steps, batch)?;
    let t = run_variant(name, &batches)?;
    let n = t.steps.len() as f64;
    println!(
        "measured {} {} {} {} {}",
        median(&t.steps),
        t.steps.iter().sum::<f64>() / n,
        t.start,
        t.finish,
        t.in_loop / n,
    );
    for (thread, used) in &t.threads {
        let used = used.per(n);
        println!(
            "thread {thread} {} {} {}",
            used.cpu, used.wakeups, used.preempted
        );
    }
    Ok(())
}

/// `steps` batches of `batch` digits, after a warm-up of the network on 20 of them (the
/// allocator, the thread pools, the page cache).
fn warmed_up(steps: usize, batch: usize) -> Result<Vec<(Tensor, Tensor)>, BoxError> {
    let mut data = AugmentedDigits::load(SIDE)?;
    let batches: Vec<(Tensor, Tensor)> = (0..steps)
        .map(|_| cnn::tensors(data.batch(batch)))
        .collect::<Result<_, _>>()?;
    train(&batches[..20], None, Calls::ALL)?;
    Ok(batches)
}

/// Trains a fresh network on `batches` as variant `name` does (no session for `no session`),
/// its session writing into a scratch folder removed afterwards.
fn run_variant(name: &str, batches: &[(Tensor, Tensor)]) -> Result<Timing, BoxError> {
    let calls = Calls::of(name);
    if name == "burn" {
        return burn_beside(|| train(batches, None, calls));
    }
    let v = match ABLATIONS.iter().any(|(n, _)| *n == name) {
        true => 5, // the capture-only builder
        false => VARIANTS
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| format!("no variant named {name:?}"))?,
    };
    let scratch = std::env::temp_dir().join(format!("smdebug-session-cost-{}", std::process::id()));
    let session = match v {
        0 => None,
        _ => Some(builder(
            scratch.to_str().ok_or("non-UTF-8 temp dir")?,
            v,
            batches.len(),
        )),
    };
    let t = train(batches, session, calls);
    let _ = std::fs::remove_dir_all(&scratch);
    t
}

/// `burn`: runs `train` (the bare loop) beside a thread that takes CPU the way the session's
/// threads do, without their work: it sleeps `PERIOD` µs, then spins `SPIN` µs, over and over
/// (`SMDEBUG_BURN=PERIOD:SPIN`; by default `26000:300`, about what the session's threads take at
/// a 5 ms step: 0.19 wake-ups and 60 µs of CPU a step). It tells what that much CPU, taken that
/// often, costs the loop on this machine, apart from anything the session's work does.
fn burn_beside(train: impl FnOnce() -> Result<Timing, BoxError>) -> Result<Timing, BoxError> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let spec = std::env::var("SMDEBUG_BURN").unwrap_or_else(|_| "26000:300".into());
    let (period, spin) = spec
        .split_once(':')
        .ok_or("SMDEBUG_BURN is PERIOD_US:SPIN_US")?;
    let (period, spin) = (
        Duration::from_micros(period.parse()?),
        Duration::from_micros(spin.parse()?),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let burner = std::thread::Builder::new()
        .name("smdebug-burn".into())
        .spawn(move || {
            let mut x = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                let started = Instant::now();
                while started.elapsed() < spin {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            }
        })?;
    let mut timing = train();
    if let Ok(t) = &mut timing {
        t.threads = session_threads(); // the burner's CPU and wake-ups, as a session's threads
    }
    stop.store(true, Ordering::Relaxed);
    let _ = burner.join();
    timing
}

/// `--paired`: one process trains the bare loop and variant `name`, one after the other on the
/// same batches (the variant first when `variant_first`), and prints `paired <bare median step>
/// <variant median step>` (seconds). Two processes of the same program land several percent
/// apart at short steps (their memory placed differently); within one process the two halves
/// share that placement, and alternating the order between processes cancels what the order
/// itself does (a process that ran a session before, or one still warming up).
fn only_paired(
    name: &str,
    steps: usize,
    batch: usize,
    variant_first: bool,
) -> Result<(), BoxError> {
    let batches = warmed_up(steps, batch)?;
    let (bare, variant) = if variant_first {
        let variant = run_variant(name, &batches)?;
        (run_variant("no session", &batches)?, variant)
    } else {
        let bare = run_variant("no session", &batches)?;
        (bare, run_variant(name, &batches)?)
    };
    println!("paired {} {}", median(&bare.steps), median(&variant.steps));
    Ok(())
}

/// `--paired`: `rounds` processes of each variant, each training the bare loop and the variant
/// ([`only_paired`]), the variant first in every other round; `no session` paired with itself
/// first, as the noise two halves of one process stand against. A variant's cost is the median
/// over its processes of its median step against the same process's bare one.
fn paired(rounds: usize, steps: usize, batch: usize, variants: &[String]) -> Result<(), BoxError> {
    let names: Vec<&str> = std::iter::once("no session")
        .chain(variants.iter().map(String::as_str))
        .collect();
    let mut over: Vec<Vec<(bool, f64, f64)>> = vec![Vec::new(); names.len()];
    for r in 0..rounds {
        let variant_first = r % 2 == 1;
        for (i, name) in names.iter().enumerate() {
            let first = u8::from(variant_first).to_string();
            let mode = ["--only-paired", name, "--variant-first", &first];
            let (_, f) = run_child(name, &mode, steps, batch, "paired ")?;
            let [bare, variant] = f[..] else {
                return Err(format!("the paired {name:?} process printed {f:?}").into());
            };
            println!(
                "round {r} ({} first): no session {:.3} ms, {name} {:.3} ms: {:+.2} %",
                if variant_first { "variant" } else { "bare" },
                bare * 1e3,
                variant * 1e3,
                (variant / bare - 1.0) * 100.0
            );
            over[i].push((variant_first, bare, variant));
        }
    }
    println!(
        "\nmedian step, {rounds} processes a variant, each the bare loop and the variant ({steps} \
         steps each, batch {batch}), the variant first in every other one:"
    );
    println!(
        "{:<16} {:>10} {:>11} {:>13} {:>13} {:>11}",
        "variant", "bare step", "over bare", "bare first", "variant first", "|apart|"
    );
    let mut intervals = Vec::new();
    for (name, runs) in names.iter().zip(&over) {
        let over_bare = |(_, b, v): &(bool, f64, f64)| (v / b - 1.0) * 100.0;
        let all: Vec<f64> = runs.iter().map(over_bare).collect();
        let (vf, bf): (Vec<_>, Vec<_>) = runs.iter().partition(|(first, _, _)| *first);
        let pct = |runs: Vec<&(bool, f64, f64)>| {
            median(&runs.into_iter().map(over_bare).collect::<Vec<_>>())
        };
        let apart = median(&all.iter().map(|p| p.abs()).collect::<Vec<_>>());
        intervals.push(interval(name, "processes", &all));
        println!(
            "{name:<16} {:>7.3} ms {:>+9.2} % {:>+11.2} % {:>+11.2} % {:>9.2} %",
            median(&runs.iter().map(|r| r.1).collect::<Vec<_>>()) * 1e3,
            median(&all),
            pct(bf),
            pct(vf),
            apart
        );
    }
    for line in intervals {
        println!("{line}");
    }
    Ok(())
}

/// The session of variant `v` (1 to 5) writing into `dir`.
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

/// Which of the session's calls a loop makes: everything, or fewer, to find where a
/// difference comes from (`--only`, one variant per process).
#[derive(Clone, Copy)]
struct Calls {
    /// Layers wrapped by the hook (per-layer probes).
    wrap: bool,
    /// Forward, backward and optimizer scopes, the data iterator and the saves.
    scopes: bool,
    /// `session.step()` at each step's end.
    step: bool,
}

impl Calls {
    const ALL: Calls = Calls {
        wrap: true,
        scopes: true,
        step: true,
    };

    /// The calls of variant `name`: an ablation's, or all of them for the table's variants.
    fn of(name: &str) -> Calls {
        ABLATIONS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Calls::ALL, |(_, calls)| *calls)
    }
}

/// The ablations: a capture-only session (the `capture only` builder) whose loop makes fewer
/// of its calls.
const ABLATIONS: [(&str, Calls); 3] = [
    (
        "idle session",
        Calls {
            wrap: false,
            scopes: false,
            step: false,
        },
    ),
    (
        "steps only",
        Calls {
            wrap: false,
            scopes: false,
            step: true,
        },
    ),
    (
        "wrapped layers",
        Calls {
            wrap: true,
            scopes: false,
            step: true,
        },
    ),
];

/// Trains a fresh network on `batches`, in `session` when there is one, making `calls`.
fn train(
    batches: &[(Tensor, Tensor)],
    session: Option<smdebug::SessionBuilder<smdebug_candle::CandleHook>>,
    calls: Calls,
) -> Result<Timing, BoxError> {
    let vm = VarMap::new();
    let (conv1, conv2, fc) =
        Cnn::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu))?.into_layers();
    let mut sgd = SGD::new(vm.all_vars(), 0.05)?;
    let mut steps = Vec::with_capacity(batches.len());
    let session = match session {
        Some(builder) => {
            let began = Instant::now();
            let session = builder.start()?;
            Some((session, began.elapsed().as_secs_f64()))
        }
        None => None,
    };
    let (mut session, start) = match session {
        Some(session) if calls.scopes => session,
        mut session => {
            let hook = session.as_mut().map(|(s, _)| s.hook());
            let layers = match hook {
                Some(hook) if calls.wrap => Layers::Wrapped(
                    hook.wrap("conv1", conv1),
                    hook.wrap("conv2", conv2),
                    hook.wrap("fc", fc),
                ),
                _ => Layers::Bare(conv1, conv2, fc),
            };
            for (x, y) in batches {
                let began = Instant::now();
                let logits = layers.forward(x)?;
                let loss = candle_nn::loss::cross_entropy(&logits, y)?;
                let grads = loss.backward()?;
                sgd.step(&grads)?;
                if let Some((s, _)) = session.as_mut().filter(|_| calls.step) {
                    s.step()?;
                }
                steps.push(began.elapsed().as_secs_f64());
            }
            let (start, finish) = match session {
                Some((s, start)) => {
                    let closing = Instant::now();
                    s.finish()?;
                    (start, closing.elapsed().as_secs_f64())
                }
                None => (0.0, 0.0),
            };
            return Ok(Timing {
                steps,
                start,
                finish,
                in_loop: 0.0,
                threads: BTreeMap::new(),
            });
        }
    };
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
    let threads = session_threads();
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
        threads,
    })
}

/// The network's three layers, bare or wrapped by the hook.
enum Layers {
    Bare(candle_nn::Conv2d, candle_nn::Conv2d, candle_nn::Linear),
    Wrapped(
        smdebug_candle::Recorded<candle_nn::Conv2d>,
        smdebug_candle::Recorded<candle_nn::Conv2d>,
        smdebug_candle::Recorded<candle_nn::Linear>,
    ),
}

impl Layers {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Layers::Bare(a, b, c) => cnn::forward(a, b, c, x),
            Layers::Wrapped(a, b, c) => cnn::forward(a, b, c, x),
        }
    }
}

/// Each variant's median step, its cost over the bare loop (the median over quads of the
/// variant's mean against the same quad's bare mean), the session's start and finish, its
/// own costs, and how far apart the bare processes of a quad landed.
fn print_table(steps: usize, batch: usize, variants: &[String], quads_of: &[Vec<Quad>]) {
    println!(
        "\nmedian step, {} quads of fresh processes (bare, variant, variant, bare) of {steps} steps, batch {batch}, 28x28 CNN (18.4k parameters), candle CPU:",
        quads_of.first().map_or(0, Vec::len)
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
    let all: Vec<&Quad> = quads_of.iter().flatten().collect();
    let bare = median(
        &all.iter()
            .flat_map(|q| q.bare.iter().map(|m| m.step))
            .collect::<Vec<_>>(),
    );
    println!("{:<16} {:>7.2} ms", "no session", bare * 1e3);
    let mut intervals = Vec::new();
    for (name, quads) in variants.iter().zip(quads_of) {
        let of = |f: fn(&Measured) -> f64| {
            median(
                &quads
                    .iter()
                    .flat_map(|q| q.variant.iter().map(f))
                    .collect::<Vec<_>>(),
            )
        };
        let per_quad = |f: fn(&Measured) -> f64| -> Vec<f64> {
            quads
                .iter()
                .map(|q| {
                    let v = (f(&q.variant[0]) + f(&q.variant[1])) / 2.0;
                    let b = (f(&q.bare[0]) + f(&q.bare[1])) / 2.0;
                    (v / b - 1.0) * 100.0
                })
                .collect()
        };
        let by_median = per_quad(|m| m.step);
        let over = median(&by_median);
        intervals.push(interval(name, "quads", &by_median));
        intervals.push(interval(
            &format!("{name} (mean steps)"),
            "quads",
            &per_quad(|m| m.mean_step),
        ));
        let (in_loop, threads) = (of(|m| m.in_loop), of(|m| m.threads));
        println!(
            "{name:<16} {:>7.2} ms {:>+10.2} % {:>7.0} ms {:>8.0} ms {:>9.1} µs {:>10.1} µs {:>9.2} %",
            of(|m| m.step) * 1e3,
            over,
            of(|m| m.start) * 1e3,
            of(|m| m.finish) * 1e3,
            in_loop * 1e6,
            threads * 1e6,
            (in_loop + threads) / bare * 100.0
        );
    }
    for (statistic, f) in [
        ("median", (|m: &Measured| m.step) as fn(&Measured) -> f64),
        ("mean", |m: &Measured| m.mean_step),
    ] {
        let apart: Vec<f64> = all
            .iter()
            .map(|q| ((f(&q.bare[1]) / f(&q.bare[0]) - 1.0) * 100.0).abs())
            .collect();
        println!(
            "noise ({statistic} steps): a quad's two bare processes differ by {:.2} % (median), {:.2} % at most",
            median(&apart),
            apart.iter().fold(0.0f64, |m, x| m.max(*x))
        );
    }
    for line in intervals {
        println!("{line}");
    }
}

/// A variant's mean cost over `of` (its quads or processes) with its 95 % confidence interval:
/// how sure the figure is.
fn interval(name: &str, of: &str, percents: &[f64]) -> String {
    let (mean, half) = mean_ci95(percents);
    format!(
        "{name}: {mean:+.2} % over bare, mean of the {of}, 95 % interval {:+.2} % to {:+.2} %",
        mean - half,
        mean + half
    )
}

/// Each of the session's threads in each variant: the median over the variant's processes of
/// its CPU time, wake-ups and preemptions a step (a thread missing from a process, ended before
/// the loop did, counts as nothing there).
fn print_threads(variants: &[String], quads_of: &[Vec<Quad>]) {
    println!(
        "\nthe session's threads, a step (median over processes): CPU µs, wake-ups, preemptions"
    );
    for (name, quads) in variants.iter().zip(quads_of) {
        let processes: Vec<&Measured> = quads.iter().flat_map(|q| q.variant.iter()).collect();
        let threads: std::collections::BTreeSet<&String> =
            processes.iter().flat_map(|m| m.each.keys()).collect();
        println!("{name}:");
        let mut total = ThreadUse::default();
        for thread in threads {
            let of = |f: fn(&ThreadUse) -> f64| {
                median(
                    &processes
                        .iter()
                        .map(|m| m.each.get(thread).map_or(0.0, f))
                        .collect::<Vec<_>>(),
                )
            };
            let used = ThreadUse {
                cpu: of(|t| t.cpu),
                wakeups: of(|t| t.wakeups),
                preempted: of(|t| t.preempted),
            };
            total.add(used);
            print_thread(thread, used);
        }
        print_thread("all (sum of medians)", total);
    }
}

fn print_thread(name: &str, used: ThreadUse) {
    println!(
        "  {name:<24} {:>9.1} µs {:>8.2} wake-ups {:>8.2} preempted",
        used.cpu * 1e6,
        used.wakeups,
        used.preempted
    );
}
