//! The profiler rules on recorded data: the real system sampler (100 ms) and the real span
//! recorder run while the test does real work — an initialization pause, a training stage, a
//! CPU-bound data-loading stage that keeps every core busy, and an evaluation stage with a few
//! deliberately slow steps. This machine has no GPU, so GPU series are merged into the
//! sampler's own files in its format, at the sampler's timestamps, shaped per test (idle during
//! the CPU-bound stage, two GPUs with different loads, memory that grows).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_format::system::SystemSample;
use smdebug_profiler::spans::{SpanConfig, SpanRecorder};
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_read::profile::{ProfilerReader, SystemQuery};
use smdebug_rules::{ActionConfig, RuleInput, RuleRunner, RuleSpec, RuleStatus, Status, Summary};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::wait_for;
use smdebug_testkit::files::copy_tree;
use tempfile::TempDir;

const NODE: &str = "algo-1";

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Stage boundaries, microseconds since the epoch.
#[derive(Clone, Copy, Debug)]
struct Stage {
    start: u64,
    end: u64,
}

impl Stage {
    fn contains(&self, t: u64) -> bool {
        (self.start..=self.end).contains(&t)
    }
}

struct Recording {
    /// The run's folder; tests read copies of it ([`run_copy`]).
    dir: PathBuf,
    init: Stage,
    train: Stage,
    loading: Stage,
    eval: Stage,
    train_steps: u64,
    eval_steps: u64,
    slow_eval_steps: Vec<u64>,
}

fn cores_in_proc_stat() -> usize {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
}

/// Time a stage or a phase of the recording takes. The rules read real system samples, which
/// need real time to pass.
fn spend(ms: u64) {
    // workload: the time the recording's stage or phase takes.
    sleep(Duration::from_millis(ms));
}

fn stage_while(until: u64, mut body: impl FnMut()) {
    while now_us() < until {
        body();
    }
}

/// The shared run, recorded once per build of this test binary: cargo-nextest runs each test
/// in a process of its own, so a process records it (about 9 s of real time) only when no
/// earlier process of the same build did, into `CARGO_TARGET_TMPDIR`. A recording is made in a
/// folder of its own and renamed into place once whole, so processes that record at the same
/// time each use their own, and a process killed while recording leaves nothing that is used.
/// The folder is named after this binary's size and modification time: a rebuilt test (a
/// changed sampler or span writer) records afresh.
fn recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(recorded_once_per_build)
}

fn recorded_once_per_build() -> Recording {
    let exe = std::fs::metadata(std::env::current_exe().unwrap()).unwrap();
    let built = exe
        .modified()
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profiler_rules_recording");
    std::fs::create_dir_all(&root).unwrap();
    let key = format!("{built}-{}", exe.len());
    let done = root.join(&key);
    let read_back = |dir: &Path| {
        let text = std::fs::read_to_string(dir.join("stages.txt")).ok()?;
        Some(Recording::parse(dir.join("run"), &text))
    };
    if let Some(recording) = read_back(&done) {
        return recording;
    }
    // Recordings of earlier builds are of no use any more (folders being recorded start with
    // a dot).
    for old in std::fs::read_dir(&root).unwrap().flatten() {
        let name = old.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && name != key {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    let making = tempfile::tempdir_in(&root).unwrap();
    let run = making.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let recording = record(run);
    std::fs::write(making.path().join("stages.txt"), recording.text()).unwrap();
    match std::fs::rename(making.path(), &done) {
        Ok(()) => {
            let _ = making.keep();
            Recording {
                dir: done.join("run"),
                ..recording
            }
        }
        // Another process got there first: its recording is used, and this one's folder is
        // removed.
        Err(_) => read_back(&done).unwrap(),
    }
}

impl Recording {
    /// The stages and steps as `text` reads them back: one number a line.
    fn text(&self) -> String {
        let stages = [self.init, self.train, self.loading, self.eval];
        let mut numbers: Vec<u64> = stages.iter().flat_map(|s| [s.start, s.end]).collect();
        numbers.extend([self.train_steps, self.eval_steps]);
        numbers.extend(&self.slow_eval_steps);
        numbers.iter().map(|n| format!("{n}\n")).collect()
    }

    fn parse(dir: PathBuf, text: &str) -> Recording {
        let n: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
        let stage = |i: usize| Stage {
            start: n[2 * i],
            end: n[2 * i + 1],
        };
        Recording {
            dir,
            init: stage(0),
            train: stage(1),
            loading: stage(2),
            eval: stage(3),
            train_steps: n[8],
            eval_steps: n[9],
            slow_eval_steps: n[10..].to_vec(),
        }
    }
}

fn record(dir: PathBuf) -> Recording {
    let sampler = SystemSampler::start_local(
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .publish_interval(Duration::from_millis(500))
            .node(NodeId::algo(1))
            .gpu(false),
        &dir,
    )
    .unwrap();
    let (spans, writer) = SpanRecorder::start_local(
        SpanConfig::default()
            .node(NodeId::algo(1))
            .worker(0)
            .close_interval(Duration::from_millis(500)),
        &dir,
    )
    .unwrap();
    // Every `spend` of this recording is time a stage or a phase takes, which the rules must
    // find (the stages' bounds are read from the clock, not assumed).
    // Initialization: only the sampler runs.
    let init_start = now_us();
    spend(1500);
    let train_start = now_us();
    let mut step = 0;
    stage_while(train_start + 2_500_000, || {
        let _step = spans.step(Mode::Train, step);
        {
            let _f = spans.forward();
            spend(10);
        }
        {
            let _b = spans.backward();
            spend(10);
        }
        step += 1;
    });
    // CPU-bound data loading: busy threads on every core while the loop waits for batches.
    let loading_start = now_us();
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..cores_in_proc_stat().max(2))
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            })
        })
        .collect();
    stage_while(loading_start + 3_000_000, || {
        {
            let _load = spans.data_loading().arg("num_workers", 1);
            spend(30);
        }
        let _step = spans.step(Mode::Train, step);
        spend(20);
        step += 1;
    });
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    // Evaluation: 60 steps, four of them deliberately slow.
    let eval_start = now_us();
    let slow = vec![15, 30, 45, 58];
    for i in 0..60u64 {
        let _step = spans.step(Mode::Eval, i);
        spend(if slow.contains(&i) { 300 } else { 10 });
    }
    let eval_end = now_us();
    // The sampler samples on after the last step (the stage that ends the run).
    spend(200);
    writer.finish().unwrap();
    sampler.stop().unwrap();
    Recording {
        dir,
        init: Stage {
            start: init_start,
            end: train_start,
        },
        train: Stage {
            start: train_start,
            end: loading_start,
        },
        loading: Stage {
            start: loading_start,
            end: eval_start,
        },
        eval: Stage {
            start: eval_start,
            end: eval_end,
        },
        train_steps: step,
        eval_steps: 60,
        slow_eval_steps: slow,
    }
}

/// A copy of the shared recording in a fresh run directory.
fn run_copy() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&recording().dir, dir.path());
    dir
}

/// One GPU reading: (name, utilization %, memory used %).
type Gpu = (&'static str, f64, f64);

/// Adds GPU records to every system file of the run, one set per sampler timestamp (taken from
/// the `total` CPU record), as the sampler writes them when NVML finds GPUs.
fn merge_gpus(run: &Path, gpus: impl Fn(u64, usize) -> Vec<Gpu>) {
    let store = LocalStorage::new(run).unwrap();
    let mut index = 0;
    for key in store.list("system").unwrap() {
        let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
        let mut out = text.clone();
        for line in text.lines() {
            let s: SystemSample = serde_json::from_str(line).unwrap();
            if s.metric_type != "cpu" || s.name != "total" || s.dimension != "CPUUtilization" {
                continue;
            }
            for (name, util, memory) in gpus(s.timestamp_us(), index) {
                for (dimension, value) in
                    [("GPUUtilization", util), ("GPUMemoryUtilization", memory)]
                {
                    let g = SystemSample {
                        metric_type: "gpu".into(),
                        name: name.into(),
                        dimension: dimension.into(),
                        value,
                        node_id: s.node_id.clone(),
                        timestamp: s.timestamp,
                    };
                    out.push_str(&serde_json::to_string(&g).unwrap());
                    out.push('\n');
                }
            }
            index += 1;
        }
        store.put(&key, out.as_bytes().to_vec().into()).unwrap();
    }
}

/// Replaces the value of matching system records for timestamps inside `stage`.
fn override_values(run: &Path, dimension: &str, stage: Stage, value: f64) {
    let store = LocalStorage::new(run).unwrap();
    for key in store.list("system").unwrap() {
        let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            let mut s: SystemSample = serde_json::from_str(line).unwrap();
            if s.dimension == dimension && stage.contains(s.timestamp_us()) {
                s.value = value;
            }
            out.push_str(&serde_json::to_string(&s).unwrap());
            out.push('\n');
        }
        store.put(&key, out.as_bytes().to_vec().into()).unwrap();
    }
}

fn evaluate(run: &Path, specs: &[&str]) -> Summary {
    let mut builder = RuleRunner::builder(run).write_into_run(false);
    for spec in specs {
        builder = builder.spec(RuleSpec::parse(spec).unwrap());
    }
    builder.build().unwrap().run_offline().unwrap()
}

fn only(summary: &Summary) -> &RuleStatus {
    assert_eq!(summary.rules.len(), 1);
    &summary.rules[0]
}

fn assert_fired_in(status: &RuleStatus, stage: Stage) {
    assert_eq!(status.status, Status::IssuesFound, "{status:#?}");
    assert_eq!(status.kind, RuleInput::Profiler);
    let t = status.first_fired_time_us.expect("a firing time");
    assert!(
        stage.contains(t),
        "{} fired at {t}, outside the injected period {stage:?}: {}",
        status.rule,
        status.message
    );
}

fn assert_quiet(status: &RuleStatus) {
    assert_eq!(status.status, Status::NoIssuesFound, "{status:#?}");
    assert!(status.datapoints > 0, "{status:#?}");
    assert_eq!(status.first_fired_time_us, None);
}

/// GPU busy (80-89 %) except idle (2 %) during `idle`; memory at 40 %.
fn busy_gpu_idle_during(idle: Option<Stage>) -> impl Fn(u64, usize) -> Vec<Gpu> {
    move |t, i| {
        let util = if idle.is_some_and(|s| s.contains(t)) {
            2.0
        } else {
            80.0 + (i % 10) as f64
        };
        vec![("gpu0", util, 40.0)]
    }
}

#[test]
fn cpu_bottleneck_fires_during_the_cpu_bound_loading_stage() {
    let rec = recording();
    let run = run_copy();
    merge_gpus(run.path(), busy_gpu_idle_during(Some(rec.loading)));
    let summary = evaluate(run.path(), &["CPUBottleneck:patience=3,threshold=30"]);
    let status = only(&summary);
    assert_fired_in(status, rec.loading);
    assert!(status.message.contains("GPU idle"), "{}", status.message);
    assert!(
        status.details.to_value()["nodes"][NODE]["bottlenecks"]
            .as_u64()
            .unwrap()
            >= 5
    );
    // The loop spent 30 ms of every 50 ms of the stage in data loading, the rest in step spans
    // (left out): the details name data loading as what ran while the GPU waited.
    let details = status.details.to_value();
    let phases = details["nodes"][NODE]["phases_during_bottlenecks"]
        .as_object()
        .unwrap();
    let top = phases.iter().max_by_key(|(_, n)| n.as_u64().unwrap_or(0));
    assert_eq!(
        top.map(|(p, _)| p.as_str()),
        Some("DataLoaderIter"),
        "{phases:?}"
    );
}

/// A sampler every 100 ms beside a loop of 50 ms iterations (30 ms loading, 20 ms step) wakes
/// at the same point of every other iteration: here always in the step part. Each snapshot's
/// readings average over the 100 ms since the one before, so the loading that filled 60 % of
/// that time is what ran while the GPU waited, in one window or many.
#[test]
fn cpu_bottleneck_names_the_phase_that_filled_each_sample_not_the_instant_it_woke_in() {
    let t0: u64 = 1_700_000_000_000_000;
    let mut samples = Vec::new();
    for i in 0..40u64 {
        let t = t0 + i * 100_000 + 40_000;
        let sample = |metric_type: &str, name: &str, dimension: &str, value: f64| SystemSample {
            metric_type: metric_type.into(),
            name: name.into(),
            dimension: dimension.into(),
            value,
            node_id: NODE.into(),
            timestamp: t as f64 / 1e6,
        };
        samples.push(sample("cpu", "total", "CPUUtilization", 97.0));
        samples.push(sample("gpu", "gpu0", "GPUUtilization", 1.0));
        samples.push(sample("gpu", "gpu0", "GPUMemoryUtilization", 30.0));
    }
    let span =
        |phase: &str, start_us: u64, end_us: u64, step: Option<u64>| smdebug_read::profile::Span {
            phase: phase.into(),
            name: phase.into(),
            start_us,
            end_us,
            node: NODE.into(),
            worker: Some(0),
            step,
            mode: step.map(|_| Mode::Train),
            args: Default::default(),
        };
    let mut spans = Vec::new();
    for k in 0..80u64 {
        let start = t0 + k * 50_000;
        spans.push(span("DataLoaderIter", start, start + 30_000, None));
        spans.push(span(
            "Step:ModeKeys.TRAIN",
            start + 30_000,
            start + 50_000,
            Some(k),
        ));
    }
    spans.sort_by_key(|s| (s.end_us, s.start_us));
    let mut steps = smdebug_rules::StepTimeline::default();
    steps.extend(&spans);
    let end = t0 + 4_000_000;
    let details = |windows: u64| {
        let mut rule = smdebug_rules::build_rule(
            &RuleSpec::parse("CPUBottleneck:patience=0,threshold=30").unwrap(),
        )
        .unwrap();
        let cut = (end - t0) / windows;
        for w in 0..windows {
            let (from, until) = (t0 + w * cut, t0 + (w + 1) * cut);
            let ss: Vec<_> = samples
                .iter()
                .filter(|s| (from..until).contains(&s.timestamp_us()))
                .cloned()
                .collect();
            let ps: Vec<_> = spans
                .iter()
                .filter(|s| (from..until).contains(&s.end_us))
                .cloned()
                .collect();
            rule.as_profiler()
                .unwrap()
                .invoke_on_window(&smdebug_rules::ProfilerWindow {
                    samples: &ss,
                    spans: &ps,
                    start_us: Some(t0),
                    now_us: until,
                    final_window: w + 1 == windows,
                    steps: &steps,
                })
                .unwrap();
        }
        rule.details()
    };
    let whole = details(1);
    let phases = &whole["nodes"][NODE]["phases_during_bottlenecks"];
    // Every one of the 40 snapshots overlapped loading, the first one (which covers only its
    // own instant) aside.
    assert_eq!(phases["DataLoaderIter"], 39, "{whole:#}");
    assert_eq!(phases.as_object().unwrap().len(), 1, "{phases}");
    let first = &whole["nodes"][NODE]["bottleneck_samples"][1];
    assert_eq!(first["since_us"], t0 + 40_000, "{first}");
    for windows in [7, 40] {
        assert_eq!(details(windows), whole, "{windows} windows");
    }
}

#[test]
fn cpu_bottleneck_stays_quiet_while_the_gpu_is_busy() {
    let run = run_copy();
    merge_gpus(run.path(), busy_gpu_idle_during(None));
    let summary = evaluate(run.path(), &["CPUBottleneck:patience=3,threshold=30"]);
    assert_quiet(only(&summary));
}

#[test]
fn io_bottleneck_fires_when_io_wait_is_high_while_the_gpu_idles() {
    let rec = recording();
    let run = run_copy();
    merge_gpus(run.path(), busy_gpu_idle_during(Some(rec.loading)));
    // No disk here makes the kernel report high I/O wait on demand: the sampler's own
    // I/O-wait records are set to 70 % during the loading stage.
    override_values(run.path(), "I/OWaitPercentage", rec.loading, 70.0);
    let status = evaluate(run.path(), &["IOBottleneck:patience=3,threshold=30"]).rules[0].clone();
    assert_fired_in(&status, rec.loading);
    assert!(status.message.contains("I/O wait"), "{}", status.message);
}

#[test]
fn io_bottleneck_stays_quiet_with_the_machines_real_io_wait() {
    let rec = recording();
    let run = run_copy();
    merge_gpus(run.path(), busy_gpu_idle_during(Some(rec.loading)));
    let summary = evaluate(run.path(), &["IOBottleneck:patience=3,threshold=30"]);
    assert_quiet(only(&summary));
}

#[test]
fn low_gpu_utilization_fires_when_the_gpu_drops_and_not_while_it_is_busy() {
    let rec = recording();
    let run = run_copy();
    let loading = rec.loading;
    merge_gpus(run.path(), move |t, _| {
        vec![("gpu0", if loading.contains(t) { 15.0 } else { 90.0 }, 50.0)]
    });
    let status = evaluate(run.path(), &["LowGPUUtilization:patience=3,window=5"]).rules[0].clone();
    assert_fired_in(&status, rec.loading);
    assert!(
        status.message.contains("gpu0")
            && status
                .message
                .contains("underused or fluctuating 1 time(s)"),
        "{}",
        status.message
    );

    let busy = run_copy();
    merge_gpus(busy.path(), busy_gpu_idle_during(None));
    assert_quiet(only(&evaluate(
        busy.path(),
        &["LowGPUUtilization:patience=3,window=5"],
    )));
}

#[test]
fn batch_size_fires_when_gpu_and_its_memory_idle_in_the_light_training_stage() {
    let rec = recording();
    let run = run_copy();
    let train = rec.train;
    merge_gpus(run.path(), move |t, _| {
        if train.contains(t) {
            vec![("gpu0", 20.0, 15.0)]
        } else {
            vec![("gpu0", 90.0, 85.0)]
        }
    });
    // The light stage's CPU records are set to 30 %: the machines these tests run on are
    // shared with compilers that keep every core busy, so the recorded CPU cannot be relied on
    // to be low. The next test shows that a busy CPU (the real one) keeps the rule quiet.
    override_values(run.path(), "CPUUtilization", train, 30.0);
    let status = evaluate(run.path(), &["BatchSize:patience=3,window=5"]).rules[0].clone();
    let cpu = status.details.to_value()["nodes"][NODE]["cpu"].clone();
    assert_fired_in(&status, rec.train);
    assert!(
        status.message.contains("room for a larger batch"),
        "{} {cpu}",
        status.message
    );
}

#[test]
fn batch_size_stays_quiet_when_the_cpu_is_busy_though_the_gpu_idles() {
    let rec = recording();
    let run = run_copy();
    let loading = rec.loading;
    // GPU and its memory idle only while every core is busy loading data.
    merge_gpus(run.path(), move |t, _| {
        if loading.contains(t) {
            vec![("gpu0", 20.0, 15.0)]
        } else {
            vec![("gpu0", 90.0, 85.0)]
        }
    });
    assert_quiet(only(&evaluate(
        run.path(),
        &["BatchSize:patience=3,window=5"],
    )));
}

#[test]
fn gpu_memory_increase_fires_when_memory_grows_and_not_when_flat() {
    let rec = recording();
    let run = run_copy();
    let loading = rec.loading;
    merge_gpus(run.path(), move |t, _| {
        let memory = if t < loading.start {
            30.0
        } else if loading.contains(t) {
            30.0 + 30.0 * (t - loading.start) as f64 / (loading.end - loading.start) as f64
        } else {
            60.0
        };
        vec![("gpu0", 85.0, memory)]
    });
    let spec = "GPUMemoryIncrease:patience=3,window=5,increase=5";
    let status = evaluate(run.path(), &[spec]).rules[0].clone();
    assert_fired_in(&status, rec.loading);
    assert!(status.message.contains("rose above"), "{}", status.message);

    let flat = run_copy();
    merge_gpus(flat.path(), |_, i| {
        vec![("gpu0", 85.0, 30.0 + (i % 3) as f64)]
    });
    assert_quiet(only(&evaluate(flat.path(), &[spec])));
}

#[test]
fn load_balancing_fires_for_two_gpus_with_different_loads_and_not_for_even_ones() {
    let rec = recording();
    let run = run_copy();
    let loading = rec.loading;
    merge_gpus(run.path(), move |t, i| {
        let other = if t >= loading.start {
            (i % 5) as f64
        } else {
            85.0 + (i * 3 % 10) as f64
        };
        vec![
            ("gpu0", 85.0 + (i * 7 % 10) as f64, 50.0),
            ("gpu1", other, 50.0),
        ]
    });
    let spec = "LoadBalancing:patience=0,threshold=0.3";
    let status = evaluate(run.path(), &[spec]).rules[0].clone();
    assert_eq!(status.status, Status::IssuesFound, "{status:#?}");
    let t = status.first_fired_time_us.unwrap();
    assert!(
        t >= loading.start,
        "fired at {t} before gpu1 went idle at {}",
        loading.start
    );
    assert!(
        status.message.contains("gpu0 and gpu1"),
        "{}",
        status.message
    );

    let even = run_copy();
    merge_gpus(even.path(), |_, i| {
        vec![
            ("gpu0", 85.0 + (i * 7 % 10) as f64, 50.0),
            ("gpu1", 85.0 + (i * 3 % 10) as f64, 50.0),
        ]
    });
    assert_quiet(only(&evaluate(even.path(), &[spec])));
}

/// The recording is this CPU-only machine's: every rule about GPUs had nothing to check, and
/// says so with a status of its own (not a green NoIssuesFound); `ProfilerReport` names them,
/// and the rules that had data keep their verdicts.
#[test]
fn gpu_rules_on_a_cpu_only_run_have_no_data_and_say_there_are_no_gpu_metrics() {
    let run = run_copy();
    let summary = evaluate(
        run.path(),
        &[
            "CPUBottleneck:patience=3",
            "IOBottleneck:patience=3",
            "LowGPUUtilization:patience=3,window=5",
            "BatchSize:patience=3,window=5",
            "GPUMemoryIncrease:patience=3,window=5",
            "LoadBalancing:patience=0",
            "OverallSystemUsage",
        ],
    );
    let (gpu, others) = summary.rules.split_at(6);
    for status in gpu {
        assert_eq!(status.status, Status::NoData, "{status:#?}");
        assert_eq!(status.datapoints, 0, "{status:#?}");
        assert!(status.message.contains("no GPU metrics"), "{status:#?}");
    }
    assert_eq!(others[0].status, Status::NoIssuesFound, "{:#?}", others[0]);
    assert!(others[0].datapoints > 0);
    assert_eq!(summary.no_data().count(), 6);
}

/// `ProfilerReport` sums up its rules honestly: on this CPU-only run with slow EVAL steps and one
/// data-loading worker, StepOutlier and Dataloader find issues, so the report does too (it said
/// NoIssuesFound before), and its message names them and the GPU rules that had nothing to
/// check. With neither condition, the report passes on what its rules could check.
#[test]
fn profiler_report_reports_the_issues_and_the_missing_data_of_its_rules() {
    let run = run_copy();
    let summary = evaluate(run.path(), &["ProfilerReport:StepOutlier_n_outliers=2"]);
    let report = summary.rule("ProfilerReport").unwrap();
    assert_eq!(report.status, Status::IssuesFound, "{report:#?}");
    let fired: Vec<(&str, u64)> = summary
        .rules
        .iter()
        .filter(|r| r.fired_count > 0 && r.rule != "ProfilerReport")
        .map(|r| (r.rule.as_str(), r.fired_count))
        .collect();
    assert_eq!(
        fired.iter().map(|f| f.0).collect::<Vec<_>>(),
        ["Dataloader", "StepOutlier"]
    );
    assert_eq!(report.fired_count, fired.iter().map(|f| f.1).sum::<u64>());
    for needle in [
        "of 11 profiler rules, 2 found issues (Dataloader, StepOutlier)",
        "6 had no data to check (BatchSize, CPUBottleneck, IOBottleneck, GPUMemoryIncrease, \
         LoadBalancing, LowGPUUtilization)",
    ] {
        assert!(
            report.message.contains(needle),
            "{needle}: {}",
            report.message
        );
    }

    // As many data-loading workers as cores, and outliers allowed.
    let cores = cores_in_proc_stat();
    let store = LocalStorage::new(run.path()).unwrap();
    for key in store.list("framework").unwrap() {
        let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
        let text = text.replace("\"num_workers\":1", &format!("\"num_workers\":{cores}"));
        store.put(&key, text.as_bytes().to_vec().into()).unwrap();
    }
    let summary = evaluate(
        run.path(),
        &["ProfilerReport:StepOutlier_n_outliers=100000"],
    );
    let report = summary.rule("ProfilerReport").unwrap();
    assert_eq!(report.status, Status::NoIssuesFound, "{report:#?}");
    assert!(
        report.message.contains("6 had no data to check")
            && report.message.contains("5 checked and found no issues"),
        "{}",
        report.message
    );
}

#[test]
fn dataloader_fires_for_one_worker_on_several_cores() {
    let rec = recording();
    let run = run_copy();
    // Written into the run (the rule's log is read below), unlike `evaluate`'s.
    let status = RuleRunner::builder(run.path())
        .spec(RuleSpec::parse("Dataloader").unwrap())
        .build()
        .unwrap()
        .run_offline()
        .unwrap()
        .rules[0]
        .clone();
    let cores = status.details.to_value()["nodes"][NODE]["cores"]
        .as_u64()
        .unwrap();
    assert!(cores >= 2, "this test needs a machine with 2 cores or more");
    assert_fired_in(&status, rec.loading);
    assert!(
        status.message.contains(&format!(
            "1 data-loading workers (num_workers argument) on {cores} cores"
        )),
        "{}",
        status.message
    );
    // The share the firing says (in the rule's log, and live) is of the loads seen when it
    // fired, which it counts; the details and the final message give the whole run's.
    let loads = status.details.to_value()["nodes"][NODE]["data_loading_spans"]
        .as_u64()
        .unwrap();
    let log = std::fs::read_to_string(run.path().join("rules/Dataloader/log")).unwrap();
    let fired = log
        .lines()
        .find(|l| l.contains("-> IssuesFound"))
        .unwrap_or_else(|| panic!("no firing in the log:\n{log}"));
    let counted: u64 = fired
        .split("up to then (")
        .nth(1)
        .and_then(|rest| rest.split(" loads), ").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no load count in {fired}"));
    assert!(
        (1..=loads).contains(&counted),
        "{counted} of {loads}: {fired}"
    );
    let load = &status.details.to_value()["nodes"][NODE]["load_time_s"];
    assert!(load["p50"].as_f64().unwrap() >= 0.029, "{load}");
    assert!(
        status.details.to_value()["nodes"][NODE]["training_loop_share_loading"]
            .as_f64()
            .unwrap()
            > 0.1
    );
}

#[test]
fn dataloader_stays_quiet_with_as_many_workers_as_cores() {
    let run = run_copy();
    let cores = cores_in_proc_stat();
    // The recorded data-loading spans, with the worker count set to the core count.
    let store = LocalStorage::new(run.path()).unwrap();
    for key in store.list("framework").unwrap() {
        let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
        let text = text.replace("\"num_workers\":1", &format!("\"num_workers\":{cores}"));
        store.put(&key, text.as_bytes().to_vec().into()).unwrap();
    }
    let status = evaluate(run.path(), &["Dataloader"]).rules[0].clone();
    assert_quiet(&status);
    assert_eq!(
        status.details.to_value()["nodes"][NODE]["workers"],
        cores as u64
    );
}

/// `pin_memory` on the data-loading spans, as our timeline writes it (a boolean) or as Python
/// spells it (`"False"`): the Dataloader rule records whether the loader pins memory, false
/// once any span says false, and nothing when no span says.
#[test]
fn dataloader_records_whether_the_loader_pins_memory() {
    let pinned = |replacement: Option<&str>| {
        let run = run_copy();
        if let Some(replacement) = replacement {
            let store = LocalStorage::new(run.path()).unwrap();
            for key in store.list("framework").unwrap() {
                let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
                let text = text.replace("\"num_workers\":1", replacement);
                store.put(&key, text.as_bytes().to_vec().into()).unwrap();
            }
        }
        let status = evaluate(run.path(), &["Dataloader"]).rules[0].clone();
        status.details.to_value()["nodes"][NODE]
            .get("pin_memory")
            .cloned()
    };
    assert_eq!(pinned(None), None);
    let python = "\"num_workers\":1,\"pin_memory\":\"False\"";
    assert_eq!(pinned(Some(python)), Some(serde_json::json!(false)));
    let ours = "\"num_workers\":1,\"pin_memory\":true";
    assert_eq!(pinned(Some(ours)), Some(serde_json::json!(true)));
}

#[test]
fn max_initialization_time_fires_when_the_first_step_comes_late() {
    let rec = recording();
    let run = run_copy();
    // 0.02 min = 1.2 s; the first step came about 1.5 s after the sampler's first sample.
    let status = evaluate(run.path(), &["MaxInitializationTime:threshold=0.02"]).rules[0].clone();
    assert_fired_in(&status, rec.init);
    assert!(
        status.message.contains("first step started"),
        "{}",
        status.message
    );
    // The evidence names the first step as its span numbers it: TRAIN step 0, not a bare step.
    let first = &status.evidence[0];
    assert_eq!(
        (first.tensor.as_str(), first.mode, first.step),
        ("first step", Some(Mode::Train), 0),
        "{first:?}"
    );
    let quiet = evaluate(run.path(), &["MaxInitializationTime:threshold=0.05"]);
    assert_quiet(only(&quiet));
    assert!(
        quiet.rules[0].details.to_value()["initialization_s"]
            .as_f64()
            .unwrap()
            > 1.2
    );
}

#[test]
fn step_outlier_fires_on_the_slow_eval_steps_and_judges_every_train_step() {
    let rec = recording();
    let run = run_copy();
    // Every mode on its own; the TRAIN steps of the CPU-bound stage are slowed too, so the
    // EVAL steps are looked at alone here.
    let status = evaluate(run.path(), &["StepOutlier:n_outliers=2,mode=EVAL"]).rules[0].clone();
    assert_fired_in(&status, rec.eval);
    // The third slow step is the one that makes more than two.
    assert_eq!(status.first_fired_step, Some(rec.slow_eval_steps[2]));
    assert!(status.message.contains("EVAL"), "{}", status.message);
    // The slowest slow step named (the status ends with the four found; whichever slept
    // longest), its duration at least the 300 ms it slept (a loaded machine wakes it later).
    assert!(
        rec.slow_eval_steps.iter().any(|s| {
            let at = format!("the slowest, EVAL step {s}, took ");
            status.message.find(&at).is_some_and(|i| {
                let took = &status.message[i + at.len()..];
                let number: String = took
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let value = number.parse::<f64>().unwrap_or(f64::NAN);
                let unit = took[number.len()..].split(',').next().unwrap_or_default();
                match unit {
                    " ms" => value >= 300.0,
                    " s" => value >= 0.3,
                    _ => false,
                }
            })
        }),
        "{}",
        status.message
    );
    let eval = &status.details.to_value()["nodes"][NODE]["EVAL"];
    assert_eq!(eval["steps"], rec.eval_steps);
    assert_eq!(eval["outliers"], 4);

    // Every TRAIN step judged. (Whether they were even enough to stay quiet depends on how
    // loaded the machine was while they slept: the quiet case is shown on crafted steps.)
    let train = evaluate(run.path(), &["StepOutlier:mode=TRAIN"]);
    assert_eq!(
        train.rules[0].details.to_value()["nodes"][NODE]["TRAIN"]["steps"],
        rec.train_steps
    );
}

/// Step spans of crafted durations: 200 TRAIN steps of 20 ms with up to 0.4 ms of jitter stay
/// quiet; the same with twelve steps of 60 ms fires at the eleventh, naming it.
#[test]
fn step_outlier_stays_quiet_on_even_steps_and_fires_past_n_outliers() {
    let t0: u64 = 1_700_000_000_000_000;
    let run = |slow: &[u64]| {
        let mut spans = Vec::new();
        let mut at = t0;
        for step in 0..200u64 {
            let us = if slow.contains(&step) {
                60_000
            } else {
                20_000 + (step * 7919 % 400)
            };
            spans.push(smdebug_read::profile::Span {
                phase: "Step:ModeKeys.TRAIN".into(),
                name: "Step:ModeKeys.TRAIN".into(),
                start_us: at,
                end_us: at + us,
                node: NODE.into(),
                worker: Some(0),
                step: Some(step),
                mode: Some(Mode::Train),
                args: Default::default(),
            });
            at += us + 1_000;
        }
        let mut steps = smdebug_rules::StepTimeline::default();
        steps.extend(&spans);
        let mut rule =
            smdebug_rules::build_rule(&RuleSpec::parse("StepOutlier:mode=TRAIN").unwrap()).unwrap();
        let results = rule
            .as_profiler()
            .unwrap()
            .invoke_on_window(&smdebug_rules::ProfilerWindow {
                samples: &[],
                spans: &spans,
                start_us: Some(t0),
                now_us: at,
                final_window: true,
                steps: &steps,
            })
            .unwrap();
        results
            .into_iter()
            .filter(|r| r.fired)
            .map(|r| (r.step, r.message))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(&[]), []);
    let slow: Vec<u64> = (0..12).map(|i| 50 + i * 10).collect();
    let fired = run(&slow);
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0].0, slow[10], "{fired:?}");
    assert!(fired[0].1.contains("took 60 ms"), "{}", fired[0].1);
}

#[test]
fn overall_system_usage_summarizes_every_metric_per_node() {
    let run = run_copy();
    let summary = evaluate(run.path(), &["OverallSystemUsage"]);
    let status = only(&summary);
    assert_quiet(status);
    let samples = ProfilerReader::open(run.path())
        .unwrap()
        .system_samples(
            &SystemQuery::default()
                .name("total")
                .dimension("CPUUtilization"),
        )
        .unwrap();
    let max = samples.iter().map(|s| s.value).fold(f64::MIN, f64::max);
    let usage = &status.details.to_value()["nodes"][NODE]["CPUUtilization (total)"];
    assert_eq!(usage["unit"], "%");
    let row = &usage["values"];
    assert_eq!(row["count"], samples.len() as u64);
    assert!((row["max"].as_f64().unwrap() - max).abs() < 1e-9, "{row}");
    let (p50, p95, p99) = (
        row["p50"].as_f64().unwrap(),
        row["p95"].as_f64().unwrap(),
        row["p99"].as_f64().unwrap(),
    );
    assert!(row["min"].as_f64().unwrap() <= p50 && p50 <= p95 && p95 <= p99 && p99 <= max);
    assert!(
        status.details.to_value()["nodes"][NODE]["MemoryUsedPercent"]["values"]["max"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn overall_framework_metrics_splits_the_job_by_phase_and_mode() {
    let rec = recording();
    let run = run_copy();
    let summary = evaluate(run.path(), &["OverallFrameworkMetrics"]);
    let status = only(&summary);
    assert_quiet(status);
    let d = &status.details.to_value();
    assert_eq!(d["steps_by_mode"]["TRAIN"]["count"], rec.train_steps);
    assert_eq!(d["steps_by_mode"]["EVAL"]["count"], rec.eval_steps);
    // Forward and backward each slept 10 ms per training step of the first stage.
    let forward = d["forward"]["total_s"].as_f64().unwrap();
    let backward = d["backward"]["total_s"].as_f64().unwrap();
    assert!(forward > 0.5 && backward > 0.5, "{d}");
    assert!((d["forward_percent_of_forward_backward"].as_f64().unwrap() - 50.0).abs() < 10.0);
    // The initialization pause lies outside every step.
    assert!(
        d["outside_steps"]["total_s"].as_f64().unwrap() >= 1.4,
        "{d}"
    );
    assert!(d["phases"]["DataLoaderIter"]["count"].as_u64().unwrap() > 10);
    assert_eq!(d["gpu_operators"], serde_json::Value::Null);
}

#[test]
fn feeding_in_one_window_or_many_gives_the_same_verdict() {
    let rec = recording();
    let run = run_copy();
    let loading = rec.loading;
    merge_gpus(run.path(), move |t, i| {
        let idle = loading.contains(t);
        vec![
            (
                "gpu0",
                if idle { 2.0 } else { 80.0 + (i % 10) as f64 },
                40.0 + i as f64 * 0.2,
            ),
            (
                "gpu1",
                if t >= loading.start {
                    (i % 5) as f64
                } else {
                    85.0
                },
                40.0,
            ),
        ]
    });
    let reader = ProfilerReader::open(run.path()).unwrap();
    let samples = reader.system_samples(&SystemQuery::default()).unwrap();
    let mut spans = reader.spans(&Default::default()).unwrap();
    spans.sort_by_key(|s| (s.end_us, s.start_us));
    let mut steps = smdebug_rules::StepTimeline::default();
    steps.extend(&spans);
    let start = samples[0].timestamp_us().min(spans[0].start_us);
    let end = samples
        .last()
        .unwrap()
        .timestamp_us()
        .max(spans.last().unwrap().end_us);
    let specs = [
        "CPUBottleneck:patience=3,threshold=30",
        "LowGPUUtilization:patience=3,window=5",
        "GPUMemoryIncrease:patience=3,window=5",
        "LoadBalancing:patience=0,threshold=0.3",
        "StepOutlier:n_outliers=2",
        "Dataloader",
    ];
    for spec in specs {
        let build = || smdebug_rules::build_rule(&RuleSpec::parse(spec).unwrap()).unwrap();
        let fired = |results: Vec<smdebug_rules::RuleResult>| -> Vec<(Option<u64>, String)> {
            results
                .into_iter()
                .filter(|r| r.fired)
                .map(|r| (r.time_us, r.message))
                .collect()
        };
        let mut whole = build();
        let one = fired(
            whole
                .as_profiler()
                .unwrap()
                .invoke_on_window(&smdebug_rules::ProfilerWindow {
                    samples: &samples,
                    spans: &spans,
                    start_us: Some(start),
                    now_us: end,
                    final_window: true,
                    steps: &steps,
                })
                .unwrap(),
        );
        // Windows of 300 ms of job time.
        let mut pieces = build();
        let mut many = Vec::new();
        let (mut si, mut pi) = (0, 0);
        let mut t = start;
        while t <= end {
            let until = t + 300_000;
            let s_end = si
                + samples[si..]
                    .iter()
                    .take_while(|s| s.timestamp_us() < until)
                    .count();
            let p_end = pi + spans[pi..].iter().take_while(|s| s.end_us < until).count();
            many.extend(fired(
                pieces
                    .as_profiler()
                    .unwrap()
                    .invoke_on_window(&smdebug_rules::ProfilerWindow {
                        samples: &samples[si..s_end],
                        spans: &spans[pi..p_end],
                        start_us: Some(start),
                        now_us: until.min(end),
                        final_window: until > end,
                        steps: &steps,
                    })
                    .unwrap(),
            ));
            (si, pi, t) = (s_end, p_end, until);
        }
        assert!(!one.is_empty(), "{spec} should fire on this run");
        assert_eq!(one, many, "{spec}");
        assert_eq!(whole.details(), pieces.details(), "{spec}");
    }
}

#[test]
fn a_run_with_profiler_data_but_no_tensors_is_evaluated_offline_and_followed_to_its_end() {
    let rec = recording();
    let run = run_copy();
    let location = run.path().to_str().unwrap();
    // No tensor rule could open this run; the profiler rules can.
    let summary = evaluate(
        run.path(),
        &["StepOutlier:n_outliers=2", "VanishingGradient"],
    );
    assert_eq!(summary.rules[0].status, Status::IssuesFound);
    assert_eq!(summary.rules[1].status, Status::NoData);
    assert!(
        summary.rules[1].message.contains("no tensor data"),
        "{:?}",
        summary.rules[1]
    );
    assert!(!summary.run_complete);
    // A follower ends when the end marker appears, without a single tensor step.
    std::fs::write(run.path().join("training_job_end.ts"), b"").unwrap();
    let started = Instant::now();
    let mut runner = RuleRunner::builder(location)
        .spec(RuleSpec::parse("StepOutlier:n_outliers=2,mode=EVAL").unwrap())
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let summary = runner.follow(&AtomicBool::new(false)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(summary.run_complete && summary.finished);
    assert_fired_in(&summary.rules[0], rec.eval);
    // Its step is an EVAL step span's, and the status says so.
    assert_eq!(summary.rules[0].first_fired_mode, Some(Mode::Eval));
    let step = summary.rules[0].first_fired_step.unwrap();
    assert_eq!(
        summary.rules[0].first_fired_at().map(|s| s.to_string()),
        Some(format!("EVAL step {step}"))
    );
    let written = smdebug_rules::read_summary(location).unwrap().unwrap();
    assert_eq!(
        written.rules[0].first_fired_time_us,
        summary.rules[0].first_fired_time_us
    );
}

#[test]
fn a_corrupt_metrics_line_is_skipped_and_reported() {
    let run = run_copy();
    let store = LocalStorage::new(run.path()).unwrap();
    let key = store.list("system").unwrap().remove(0);
    let text = String::from_utf8(store.get(&key).unwrap().to_vec()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{\"Type\": \"cpu\", this is not json");
    store
        .put(&key, (lines.join("\n") + "\n").into_bytes().into())
        .unwrap();
    let summary = evaluate(run.path(), &["OverallSystemUsage", "StepOutlier"]);
    for status in &summary.rules {
        assert_ne!(status.status, Status::Error, "{status:#?}");
        assert!(status.datapoints > 0);
        assert!(
            status
                .warnings
                .iter()
                .any(|w| w.contains(&key) && w.contains("line 4")),
            "{status:#?}"
        );
    }
}

#[test]
fn a_run_without_profiler_data_gives_profiler_rules_nothing_to_check() {
    let dir = tempfile::tempdir().unwrap();
    // A tensor-only run.
    let writer = smdebug_io::writer::Writer::open(dir.path().to_str().unwrap()).unwrap();
    let mut hook = smdebug_core::Hook::builder()
        .save_config(smdebug_core::SaveConfig::every(1))
        .build(writer)
        .unwrap();
    for step in 0..3 {
        let value = [1.0f32 / (step + 1) as f32];
        let view = smdebug_core::TensorView::from_slice(&value, &[1]).unwrap();
        assert!(hook.save_tensor("loss", &view, &["losses"]));
        hook.step();
    }
    hook.close();
    drop(hook);
    let summary = evaluate(
        dir.path(),
        &[
            "LowGPUUtilization",
            "StepOutlier",
            "LossNotDecreasing:num_steps=1",
        ],
    );
    for status in &summary.rules[..2] {
        assert_eq!(status.status, Status::NoData);
        assert_eq!(status.datapoints, 0);
        assert!(status.message.contains("no profiler data"), "{status:#?}");
    }
    assert_eq!(summary.rules[2].kind, RuleInput::Tensors);
    assert!(summary.rules[2].datapoints > 0);
    assert_eq!(summary.rules[2].status, Status::NoIssuesFound);
}

#[test]
fn following_a_live_run_fires_and_stops_it_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap().to_string();
    let sampler = SystemSampler::start_local(
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .publish_interval(Duration::from_millis(200))
            .node(NodeId::algo(1))
            .gpu(false),
        dir.path(),
    )
    .unwrap();
    // A GPU at 5 %, published as a second file of the same node (as a separate GPU monitor
    // would), republished whole as it grows.
    let store = LocalStorage::new(dir.path()).unwrap();
    let start = now_us();
    let gpu_key = format!(
        "system/incremental/{}/{}.algo-1-gpu.json",
        smdebug_format::system::hour_folder(start / 1_000_000),
        start / 1_000_000
    );
    let mut lines = String::new();
    let mut publish_gpu = || {
        let g = SystemSample {
            metric_type: "gpu".into(),
            name: "gpu0".into(),
            dimension: "GPUUtilization".into(),
            value: 5.0,
            node_id: NODE.into(),
            timestamp: now_us() as f64 / 1e6,
        };
        lines.push_str(&serde_json::to_string(&g).unwrap());
        lines.push('\n');
        store
            .put(&gpu_key, lines.as_bytes().to_vec().into())
            .unwrap();
    };
    publish_gpu();
    let runner = RuleRunner::builder(&location)
        .spec(
            RuleSpec::parse("LowGPUUtilization:patience=2,window=3")
                .unwrap()
                .action(ActionConfig::StopTraining),
        )
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap()
        .spawn()
        .unwrap();
    let storage = smdebug_storage::open_storage(&location).unwrap();
    // The GPU monitor publishes at each look.
    let live = wait_for(
        Duration::from_secs(30),
        "the rule to fire and ask the run to stop",
        || {
            publish_gpu();
            smdebug_io::stop::read_stop_request(storage.as_ref())
                .unwrap()
                .and(runner.summary())
                .filter(|s| s.rules[0].status == Status::IssuesFound)
        },
    );
    // Fired while the run was still being written.
    assert!(!live.run_complete && !live.finished);
    let fired = live.rules[0].first_fired_time_us.unwrap();
    assert!(fired >= start && fired <= now_us(), "{fired}");
    assert!(
        live.rules[0].message.contains("underused"),
        "{:?}",
        live.rules[0]
    );
    // The loop honours the stop request: it ends the run, and the follower with it.
    sampler.stop().unwrap();
    std::fs::write(dir.path().join("training_job_end.ts"), b"").unwrap();
    let done = runner.join().unwrap();
    assert!(done.run_complete && done.finished);
    assert_eq!(done.rules[0].status, Status::IssuesFound);
    assert!(
        done.rules[0].action_errors.is_empty(),
        "{:?}",
        done.rules[0].action_errors
    );
}

/// Python smdebug's own timeline writer (smdebug 1.0.34, `$SMDEBUG_PYTHON`, else `python3`):
/// four TRAIN steps of 8 ms with a 3 ms forward pass each.
#[test]
fn framework_rules_read_a_timeline_written_by_python_smdebug() {
    let interpreter = std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../smdebug-profiler/tests/interop_python/smdebug_readers.py"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&interpreter)
        .arg(script)
        .arg("write")
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{interpreter}` (set SMDEBUG_PYTHON): {e}"));
    assert!(
        out.status.success(),
        "{script} write failed (SMDEBUG_PYTHON needs smdebug 1.0.34): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = evaluate(dir.path(), &["OverallFrameworkMetrics", "StepOutlier"]);
    let framework = &summary.rules[0];
    assert_quiet(framework);
    let d = &framework.details.to_value();
    assert_eq!(d["steps_by_mode"]["TRAIN"]["count"], 4, "{d}");
    assert!((d["steps_by_mode"]["TRAIN"]["total_s"].as_f64().unwrap() - 0.032).abs() < 1e-5);
    assert_eq!(d["forward"]["count"], 4);
    assert!((d["forward"]["total_s"].as_f64().unwrap() - 0.012).abs() < 1e-5);
    let steps = &summary.rules[1];
    assert_quiet(steps);
    assert_eq!(steps.datapoints, 4);
    let details = steps.details.to_value();
    let train = &details["nodes"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["TRAIN"];
    assert!(
        (train["duration_s"]["mean"].as_f64().unwrap() - 0.008).abs() < 1e-5,
        "{train}"
    );
}

/// Damages the run's profiler data as a bad disk or a crashed writer would, before any finding:
/// a line that is no record inserted as the 4th line of the first system-metrics file, and a
/// framework trace file cut in half, stamped a millisecond before the first one. Returns the
/// two files' keys.
fn damage_profiler_data(run: &Path) -> (String, String) {
    let store = LocalStorage::new(run).unwrap();
    let system = store.list("system").unwrap().remove(0);
    let text = String::from_utf8(store.get(&system).unwrap().to_vec()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(
        3,
        "{\"Type\": \"cpu\", \"Name\": \"total\", \"Dimension\": \"CPUUtil\u{0}",
    );
    store
        .put(&system, (lines.join("\n") + "\n").into_bytes().into())
        .unwrap();
    let first = store.list("framework").unwrap().remove(0);
    let (folder, file) = first.rsplit_once('/').unwrap();
    let (end_us, rest) = file.split_once('_').unwrap();
    let earlier = format!("{folder}/{}_{rest}", end_us.parse::<u64>().unwrap() - 1_000);
    let bytes = store.get(&first).unwrap();
    store.put(&earlier, bytes.slice(..bytes.len() / 2)).unwrap();
    (system, earlier)
}

/// Rules survive bad records (issue 42): every profiler rule on its case of the tests above,
/// with a corrupt metrics line and a damaged trace file before its finding, gives the verdict it
/// gives on the undamaged copy (status, first firing time and step, count, message, details),
/// and lists both problems in its warnings; so does `ProfilerReport`, whose status sums up its
/// rules'.
#[test]
fn every_profiler_rule_keeps_its_verdict_past_a_corrupt_line_and_a_damaged_trace_file() {
    let rec = recording();
    let (loading, train) = (rec.loading, rec.train);
    type Prepare = Box<dyn Fn(&Path)>;
    let nothing: fn() -> Prepare = || Box::new(|_| {});
    let cases: Vec<(&str, Prepare)> = vec![
        (
            "CPUBottleneck:patience=3,threshold=30",
            Box::new(move |run| merge_gpus(run, busy_gpu_idle_during(Some(loading)))),
        ),
        (
            "IOBottleneck:patience=3,threshold=30",
            Box::new(move |run| {
                merge_gpus(run, busy_gpu_idle_during(Some(loading)));
                override_values(run, "I/OWaitPercentage", loading, 70.0);
            }),
        ),
        (
            "LowGPUUtilization:patience=3,window=5",
            Box::new(move |run| {
                merge_gpus(run, move |t, _| {
                    vec![("gpu0", if loading.contains(t) { 15.0 } else { 90.0 }, 50.0)]
                })
            }),
        ),
        (
            "BatchSize:patience=3,window=5",
            Box::new(move |run| {
                merge_gpus(run, move |t, _| {
                    if train.contains(t) {
                        vec![("gpu0", 20.0, 15.0)]
                    } else {
                        vec![("gpu0", 90.0, 85.0)]
                    }
                });
                override_values(run, "CPUUtilization", train, 30.0);
            }),
        ),
        (
            "GPUMemoryIncrease:patience=3,window=5,increase=5",
            Box::new(move |run| {
                merge_gpus(run, move |t, _| {
                    let memory = if t < loading.start {
                        30.0
                    } else if loading.contains(t) {
                        30.0 + 30.0 * (t - loading.start) as f64
                            / (loading.end - loading.start) as f64
                    } else {
                        60.0
                    };
                    vec![("gpu0", 85.0, memory)]
                })
            }),
        ),
        (
            "LoadBalancing:patience=0,threshold=0.3",
            Box::new(move |run| {
                merge_gpus(run, move |t, i| {
                    let other = if t >= loading.start {
                        (i % 5) as f64
                    } else {
                        85.0 + (i * 3 % 10) as f64
                    };
                    vec![
                        ("gpu0", 85.0 + (i * 7 % 10) as f64, 50.0),
                        ("gpu1", other, 50.0),
                    ]
                })
            }),
        ),
        ("Dataloader", nothing()),
        ("MaxInitializationTime:threshold=0.02", nothing()),
        ("StepOutlier:n_outliers=2,mode=EVAL", nothing()),
        // These two summarize and never fire: their verdict and details must not change.
        ("OverallSystemUsage", nothing()),
        ("OverallFrameworkMetrics", nothing()),
        ("ProfilerReport:StepOutlier_n_outliers=2", nothing()),
    ];
    for (spec, prepare) in &cases {
        let control = run_copy();
        prepare(control.path());
        let control = evaluate(control.path(), &[spec]);
        let damaged = run_copy();
        prepare(damaged.path());
        let (system, trace) = damage_profiler_data(damaged.path());
        let damaged = evaluate(damaged.path(), &[spec]);
        assert_eq!(control.rules.len(), damaged.rules.len());
        for (c, d) in control.rules.iter().zip(&damaged.rules) {
            let rule = &c.rule;
            assert!(c.warnings.is_empty(), "{rule}: {:?}", c.warnings);
            if !spec.starts_with("Overall") && !spec.starts_with("ProfilerReport") {
                assert_eq!(c.status, Status::IssuesFound, "{spec}: {c:#?}");
            }
            // A rule with nothing to check says that it is so of what could be read: the
            // damaged copy's data warnings name what was left out.
            let message = match c.status {
                Status::NoData => format!(
                    "{}; that is of what could be read: {} data warnings name profiler data left \
                     out, which may hold what the rule needs",
                    c.message,
                    d.warnings.len()
                ),
                _ => c.message.clone(),
            };
            assert_eq!(
                (
                    d.status,
                    d.first_fired_time_us,
                    d.first_fired_step,
                    d.fired_count,
                    &d.message
                ),
                (
                    c.status,
                    c.first_fired_time_us,
                    c.first_fired_step,
                    c.fired_count,
                    &message
                ),
                "{rule} ({spec}) on the damaged copy"
            );
            assert_eq!(d.details, c.details, "{rule} ({spec})");
            assert!(
                d.warnings
                    .iter()
                    .any(|w| w.contains(&system) && w.contains("line 4")),
                "{rule}: {:?}",
                d.warnings
            );
            assert!(
                d.warnings.iter().any(|w| w.contains(&trace)),
                "{rule}: {:?}",
                d.warnings
            );
        }
        if spec.starts_with("ProfilerReport") {
            let report = damaged.rule("ProfilerReport").unwrap();
            assert_eq!(report.status, Status::IssuesFound, "{report:#?}");
        }
    }
}

#[test]
fn debugging_and_profiler_rules_evaluated_together_keep_their_order_and_judge_as_each_alone() {
    let _ = recording();
    let run = run_copy();
    // Tensors beside the profiler data: a loss that rises, and a weight that turns NaN.
    let writer = smdebug_io::writer::Writer::open(run.path().to_str().unwrap()).unwrap();
    let mut hook = smdebug_core::Hook::builder()
        .save_config(smdebug_core::SaveConfig::every(1))
        .build(writer)
        .unwrap();
    for step in 0..40u32 {
        let loss = [1.0 + step as f32 / 10.0];
        let weight = [0.5f32, if step == 31 { f32::NAN } else { 0.25 }];
        let loss = smdebug_core::TensorView::from_slice(&loss, &[1]).unwrap();
        let weight = smdebug_core::TensorView::from_slice(&weight, &[2]).unwrap();
        assert!(hook.save_tensor("loss", &loss, &["losses"]));
        assert!(hook.save_tensor("fc.weight", &weight, &["weights"]));
        hook.step();
    }
    hook.close();
    drop(hook);
    // Debugging and profiler rules interleaved: the offline evaluation feeds the profiler
    // rules on a thread of their own while the debugging rules step over the tensors.
    let specs = [
        "StepOutlier:n_outliers=2",
        "LossNotDecreasing:num_steps=5",
        "OverallSystemUsage",
        "ExplodingTensor",
        "Dataloader",
        "VanishingGradient",
    ];
    let together = evaluate(run.path(), &specs);
    let names: Vec<&str> = together.rules.iter().map(|s| s.rule.as_str()).collect();
    let given: Vec<&str> = specs.iter().map(|s| s.split(':').next().unwrap()).collect();
    assert_eq!(names, given);
    let fired: Vec<&str> = together
        .rules
        .iter()
        .filter(|s| s.status == Status::IssuesFound)
        .map(|s| s.rule.as_str())
        .collect();
    for rule in ["StepOutlier", "LossNotDecreasing", "ExplodingTensor"] {
        assert!(fired.contains(&rule), "{rule} should fire: {together:#?}");
    }
    // A debugging rule's step is a global step: no mode.
    let exploding = together.rule("ExplodingTensor").unwrap();
    assert_eq!(exploding.first_fired_step, Some(31));
    assert_eq!(exploding.first_fired_mode, None);
    assert_eq!(
        exploding.first_fired_at().map(|s| s.to_string()).as_deref(),
        Some("step 31")
    );
    for (spec, status) in specs.iter().zip(&together.rules) {
        let alone = evaluate(run.path(), &[spec]);
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::to_value(only(&alone)).unwrap(),
            "{spec}"
        );
    }
}

/// A runner following a live run looks for new profiler data at most about once a second,
/// however often it is woken (each look lists the span, system and code-profile folders; the
/// files change every few seconds at most): at a 10 ms poll interval for 1.5 s, a handful of
/// listings of the span folder, where it made one a poll. Its rules still get the data.
#[test]
fn a_following_runner_looks_for_profiler_data_about_once_a_second() {
    use smdebug_storage::testing::CountingStorage;
    let run = run_copy();
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(run.path()).unwrap());
    let counting = Arc::new(CountingStorage::new(local));
    let started = Instant::now();
    let runner = RuleRunner::builder(run.path().to_str().unwrap())
        .storage(Arc::clone(&counting) as Arc<dyn Storage>)
        .write_into_run(false)
        .spec(RuleSpec::parse("StepOutlier:n_outliers=2").unwrap())
        .poll_interval(Duration::from_millis(10))
        .spawn()
        .unwrap();
    let seen = wait_for(
        Duration::from_secs(60),
        "the rule to see the run's steps",
        || {
            runner
                .summary()
                .filter(|s| s.rules[0].status == Status::IssuesFound)
        },
    );
    assert!(seen.rules[0].datapoints > 0, "{:?}", seen.rules[0]);
    // workload: the runner follows the live run (no end marker) for a second and a half.
    sleep(Duration::from_millis(1500));
    let summary = runner.cancel().unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(summary.rules[0].status, Status::IssuesFound);
    let looks = counting.listings_of("framework/pevents");
    assert!(
        looks >= 1 && looks as f64 <= elapsed.ceil() + 2.0,
        "{looks} listings of the span folder in {elapsed:.2} s"
    );
}
