//! Shared by the API and browser tests: a small real training job (the hook and writer, the
//! span recorder, optionally the system sampler) writing a run while it is served, and an HTTP
//! client for the server.

#![allow(dead_code)]

pub mod profile_run;
pub mod schema;

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use smdebug_core::{Hook, Mode, SaveConfig, StopCause, TensorView};
use smdebug_io::writer::Writer;
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_storage::Storage;
#[allow(unused_imports)] // each test binary uses part of this module
pub use smdebug_storage::testing::{wait_for, wait_until};

/// A custom span whose name is markup: the page must show it as text.
pub const HOSTILE_NAME: &str = "<img src=x onerror=\"document.title='pwned'\">&amp;";

/// How a demo job runs.
#[derive(Clone)]
pub struct JobConfig {
    pub steps: u64,
    pub step_time: Duration,
    /// Run the real system sampler (100 ms samples, republished every 200 ms).
    pub sampler: bool,
    /// Wait this long before the first step (the page can open on a run that does not exist).
    pub start_delay: Duration,
    /// Train steps whose backward pass sleeps 40 step times (step-duration outliers whatever
    /// the machine's load).
    pub slow_steps: Vec<u64>,
}

/// The job's thread; `stop` ends it early (as a finished job would).
pub struct Job {
    pub handle: Option<JoinHandle<Option<StopCause>>>,
    pub cancel: Arc<AtomicBool>,
}

impl Job {
    /// Waits for the job; returns the stop request it honoured, if any.
    pub fn join(mut self) -> Option<StopCause> {
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn spin(d: Duration) {
    let end = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < end {
        for i in 0..1000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
    }
    std::hint::black_box(x);
}

/// Starts a job writing the run in `storage` (a local folder or an object store): train steps
/// with data loading, forward, backward and optimizer spans, a loss and an accuracy, an 8×8
/// "attention" tensor and a 64-value "fc.weight" a step, an eval step every 10, and it honours
/// stop requests through smdebug-io's StopWatcher.
pub fn start_job(storage: Arc<dyn Storage>, local: Option<&Path>, config: JobConfig) -> Job {
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&cancel);
    let local = local.map(Path::to_path_buf);
    let handle = thread::spawn(move || {
        // workload: a job that starts late (the dashboard is up before the run exists).
        thread::sleep(config.start_delay);
        let sampler = match (&local, config.sampler) {
            (Some(dir), true) => Some(
                SystemSampler::start_local(
                    SamplerConfig::default()
                        .interval(Duration::from_millis(100))
                        .publish_interval(Duration::from_millis(100))
                        .node(NodeId::algo(1))
                        .gpu(false),
                    dir,
                )
                .unwrap(),
            ),
            _ => None,
        };
        let (spans, span_writer) = SpanRecorder::start(
            SpanConfig::default()
                .node(NodeId::algo(1))
                .worker(0)
                .close_interval(Duration::from_millis(150)),
            Arc::clone(&storage),
        )
        .unwrap();
        let signal = smdebug_core::StopSignal::default();
        let watcher = smdebug_io::stop::StopWatcher::with_storage(
            Arc::clone(&storage),
            signal.clone(),
            Duration::from_millis(100),
        )
        .unwrap();
        // Every step on disk: tests count the steps the dashboard shows.
        let writer = Writer::builder(Arc::clone(&storage))
            .overflow(smdebug_io::writer::OverflowPolicy::Block)
            .build()
            .unwrap();
        let status = writer.status();
        // The progress file smdebug's Session keeps (the dashboard's ETA and drops tiles):
        // every global step planned, TRAIN and EVAL.
        let mut progress = smdebug_format::progress::Progress::new("worker_0");
        progress.planned_steps = Some(config.steps + config.steps / 10);
        let mut write_progress = |step: u64, steps: u64, finished: bool| {
            progress.last_step = Some(step);
            progress.steps = steps;
            progress.records_written = status.records_written();
            progress.records_dropped = status.dropped();
            progress.spans_written = spans.written();
            progress.spans_dropped = spans.dropped();
            progress.finished = finished;
            progress.wall_time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let _ = smdebug_io::progress::write_progress(storage.as_ref(), &progress);
        };
        let mut hook = Hook::builder()
            .save_config(SaveConfig::every(1))
            .stop_signal(signal.clone())
            .build(writer)
            .unwrap();
        let mut honoured = None;
        for step in 0..config.steps {
            if stop.load(Ordering::Acquire) {
                break;
            }
            if let Some(cause) = hook.stop_requested() {
                honoured = Some(cause);
                break;
            }
            hook.set_mode(Mode::Train);
            let t = config.step_time.as_secs_f64();
            {
                let _step = spans.step(Mode::Train, step);
                {
                    let _load = spans.data_loading();
                    // workload: the phases take their share of a step.
                    thread::sleep(Duration::from_secs_f64(t * 0.2));
                }
                {
                    let _f = spans.forward();
                    spin(Duration::from_secs_f64(t * 0.3));
                }
                {
                    let _b = spans.backward();
                    if config.slow_steps.contains(&step) {
                        // workload: forty steps' time: far enough out that a loaded machine's jitter on
                        // the other steps (tens of ms) does not hide it from StepOutlier's 3σ.
                        thread::sleep(Duration::from_secs_f64(t * 40.0));
                    } else {
                        spin(Duration::from_secs_f64(t * 0.4));
                    }
                }
                let _o = spans.optimizer();
                spin(Duration::from_secs_f64(t * 0.1));
            }
            hook.save_scalar("loss", 2.0 / (step + 1) as f64, &["losses"]);
            hook.save_scalar("accuracy", 1.0 - 1.0 / (step + 2) as f64, &["metrics"]);
            let attention: Vec<f32> = (0..64)
                .map(|i| ((i / 8) as f32 - (i % 8) as f32).abs() + step as f32 * 0.01)
                .collect();
            hook.save_tensor(
                "attention",
                &TensorView::from_slice(&attention, &[8, 8]).unwrap(),
                &["weights"],
            );
            let weight: Vec<f32> = (0..64)
                .map(|i| (i as f32 - 32.0) / (32.0 + step as f32))
                .collect();
            hook.save_tensor(
                "fc.weight",
                &TensorView::from_slice(&weight, &[64]).unwrap(),
                &["weights"],
            );
            hook.step();
            if step % 10 == 9 {
                hook.set_mode(Mode::Eval);
                {
                    let _eval = spans.step(Mode::Eval, step / 10);
                    spin(Duration::from_secs_f64(t * 0.5));
                }
                hook.save_scalar("loss", 2.5 / (step + 1) as f64, &["losses"]);
                hook.step();
            }
            if step == 3 {
                let _custom = spans.custom(HOSTILE_NAME);
                // workload: the custom span lasts a while.
                thread::sleep(Duration::from_millis(5));
            }
            if step % 10 == 9 {
                let global = hook.global_step();
                write_progress(global - 1, global, false);
            }
        }
        hook.close();
        let global = hook.global_step();
        write_progress(global.saturating_sub(1), global, true);
        span_writer.finish().unwrap();
        if let Some(s) = sampler {
            s.stop().unwrap();
        }
        watcher.stop();
        honoured
    });
    Job {
        handle: Some(handle),
        cancel,
    }
}

/// A blocking HTTP client for the server under test.
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .build()
        .unwrap()
}

/// Whether the server closed `socket` (a read ends or fails) within `limit`; what it sent
/// meanwhile is read and dropped.
pub fn closed_within(socket: &mut TcpStream, limit: Duration) -> bool {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let end = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match socket.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

pub fn get_json(url: &str) -> Value {
    let r = client().get(url).send().unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.json().unwrap()
}

/// Rule statuses of the run at `location` (a finished run), evaluated offline with `specs`.
pub fn offline_rules(location: &str, specs: &[&str]) -> smdebug_rules::Summary {
    let mut builder = smdebug_rules::RuleRunner::builder(location);
    for spec in specs {
        builder = builder.spec(smdebug_rules::RuleSpec::parse(spec).unwrap());
    }
    builder.build().unwrap().run_offline().unwrap()
}

/// Writes `summary` where a rule runner writes it into the run folder `run`.
pub fn write_rules(run: &Path, summary: &smdebug_rules::Summary) {
    let file = run.join(smdebug_rules::runner::SUMMARY_FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, serde_json::to_vec(summary).unwrap()).unwrap();
}

/// The pushed `runs` events of the server at `url` (`/api/events`), parsed, as they arrive
/// (read on a thread, which ends when the receiver is dropped and the next event comes).
pub fn events(url: &str) -> std::sync::mpsc::Receiver<Value> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let url = format!("{url}/api/events");
    thread::spawn(move || {
        // No overall timeout: the stream stays open.
        let client = reqwest::blocking::Client::builder()
            .no_proxy()
            .build()
            .unwrap();
        let response = client.get(&url).send().unwrap();
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        for line in std::io::BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && tx.send(serde_json::from_str(data).unwrap()).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The variable that makes a test binary's [`child_job_main`] run a job (its value: the run
/// folder) instead of returning.
pub const CHILD_RUN_ENV: &str = "SMDEBUG_SERVE_TEST_CHILD_RUN";

/// The job of a child process (see [`spawn_child_job`]): claims the run as smdebug's Session
/// does (its identity file, `jobs/worker_0/<process>.json`, beating every 5 s: this host, this
/// process id) and trains [`start_job`]'s steps, 20 ms each, until it is killed. Returns at
/// once in a test binary started without [`CHILD_RUN_ENV`].
pub fn child_job_main() {
    let Ok(run) = std::env::var(CHILD_RUN_ENV) else {
        return;
    };
    let run = std::path::PathBuf::from(run);
    let storage: Arc<dyn Storage> = Arc::new(smdebug_storage::LocalStorage::new(&run).unwrap());
    let identity =
        smdebug_io::jobs::identity_here(smdebug_io::jobs::random_id(), "worker_0".into(), 0, 1);
    let _claim = smdebug_io::jobs::JobClaim::start(Arc::clone(&storage), identity).unwrap();
    let job = start_job(
        storage,
        Some(&run),
        JobConfig {
            steps: 1_000_000,
            step_time: Duration::from_millis(20),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    );
    job.join();
}

/// This test binary started again as a child process running only `test` (a test that calls
/// [`child_job_main`]), which writes the run in `run` until it is killed.
pub fn spawn_child_job(run: &Path, test: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_RUN_ENV, run)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The exploding run's TRAIN steps ([`write_exploding_run`]); the loss is NaN from [`NAN_FROM`] on.
pub const EXPLODING_STEPS: u64 = 40;
pub const NAN_FROM: u64 = 12;
/// Gradients saved beside the loss (NaN with it).
pub const GRADIENTS: usize = 10;

/// A run with a loss that explodes: TRAIN loss and gradients every step, an EVAL loss after
/// every fifth TRAIN step but the last; NaN from global step [`NAN_FROM`] on.
pub fn write_exploding_run(dir: &Path) {
    let mut hook = smdebug_testkit::runs::every_step_hook(dir);
    let mut step = 0u64;
    let mut train = 0u64;
    while train < EXPLODING_STEPS {
        hook.set_mode(Mode::Train);
        let bad = step >= NAN_FROM;
        let loss = if bad {
            f64::NAN
        } else {
            2.0 / (1.0 + step as f64)
        };
        hook.save_scalar("loss", loss, &["losses"]);
        for g in 0..GRADIENTS {
            let v = if bad { f64::NAN } else { 0.01 * (g + 1) as f64 };
            // Saved as scalars every step (the built-in `gradients` collection is not saved every
            // step by default).
            hook.save_scalar(&format!("gradient/fc{g}.weight"), v, &["metrics"]);
        }
        hook.step();
        step += 1;
        train += 1;
        // The last step is a TRAIN step: the rule's latest firing (its message in the summary)
        // lists what its first did, loss and gradients.
        if train.is_multiple_of(5) && train < EXPLODING_STEPS {
            hook.set_mode(Mode::Eval);
            let eval = if step >= NAN_FROM {
                f64::NAN
            } else {
                2.5 / (1.0 + step as f64)
            };
            hook.save_scalar("loss", eval, &["losses"]);
            hook.step();
            step += 1;
        }
    }
    hook.close();
}

/// Waits (up to 60 s) until the server's followers have made `more` passes after this call:
/// after a run's end, passes that read nothing, so what the server holds has settled.
pub fn wait_passes(server: &smdebug_serve::Server, more: u64) {
    let passes = server.follower_passes();
    wait_until(
        Duration::from_secs(60),
        &format!("{more} more follower passes"),
        || server.follower_passes() >= passes + more,
    );
}
