//! Never lose a step: generated runs written by 1–4 workers at full speed (the real writer,
//! pauses at random), followed while they are written by 1–3 followers at once (the dashboard's
//! `TensorFollower` with random budgets, the `Trial` the rules and `smdebug_rs` refresh), each
//! polling at random intervals. When the run has ended, each follower's view must be what a
//! fresh read of the finished run gives: steps with their modes, workers, names, and every
//! scalar value bit for bit. On local disk and on S3 (moto's server, started here); and with the
//! followers of a run reading its files through one `TensorSource`, as a `Session`'s rules and
//! dashboard do.
//!
//! Every case is generated from a seed; a failing case prints it, and `FOLLOW_STRESS_SEED=<n>`
//! runs that case alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use smdebug_core::{EndReason, Hook, Mode, Record, SaveConfig, Sink, TensorView};
use smdebug_io::writer::Writer;
use smdebug_read::trial::{
    ScalarColumns, TensorFollower, TensorSource, TensorSubscription, Trial, TrialOptions,
    WALL_TOLERANCE_S,
};
use smdebug_storage::testing::{MotoServer, s3_options, wait_until};
use smdebug_storage::{Storage, open_storage, open_storage_with};

/// No follower may take longer than this to see a finished run's end (a hang, not a timing).
const GIVE_UP: Duration = Duration::from_secs(60);

/// One generated run: who writes what, and who follows it how.
struct Case {
    seed: u64,
    workers: usize,
    steps: u64,
    /// The mode of each global step (the same for every worker).
    modes: Vec<Mode>,
    /// Per step, whether each worker also saves a 3-element tensor (not a scalar).
    vectors: Vec<bool>,
    followers: Vec<FollowerKind>,
    /// Per worker: the chance of a pause after a step, and its longest pause in µs.
    pauses: Vec<(f64, u64)>,
    /// The followers read the run's files through one `TensorSource`.
    shared: bool,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} workers, {} steps, pauses {:?}, followers {:?}{}",
            self.workers,
            self.steps,
            self.pauses,
            self.followers,
            if self.shared {
                ", sharing a source"
            } else {
                ""
            }
        )
    }
}

#[derive(Clone, Copy, Debug)]
enum FollowerKind {
    /// The dashboard's: `poll` with this budget in µs (`u64::MAX`: no limit), every
    /// `interval` µs at most.
    Tensor { budget_us: u64, interval_us: u64 },
    /// The rules' and `smdebug_rs`'s: a `Trial` refreshed every `interval` µs at most.
    Trial { interval_us: u64 },
}

impl Case {
    fn generate(seed: u64, max_steps: u64, max_workers: usize) -> Case {
        let mut rng = fastrand::Rng::with_seed(seed);
        let workers = rng.usize(1..=max_workers);
        let steps = rng.u64(5..=max_steps);
        let mut mode = Mode::Train;
        let modes = (0..steps)
            .map(|_| {
                if rng.u8(..10) == 0 {
                    mode = if mode == Mode::Train {
                        Mode::Eval
                    } else {
                        Mode::Train
                    };
                }
                mode
            })
            .collect();
        let vectors = (0..steps).map(|_| rng.u8(..8) == 0).collect();
        let followers = (0..rng.usize(1..=3))
            .map(|_| {
                let interval_us = [0, 100, 1000, 5000][rng.usize(..4)];
                if rng.bool() {
                    let budget_us = [0, 200, 2000, u64::MAX][rng.usize(..4)];
                    FollowerKind::Tensor {
                        budget_us,
                        interval_us,
                    }
                } else {
                    FollowerKind::Trial { interval_us }
                }
            })
            .collect();
        let pauses = (0..workers)
            .map(|_| ([0.0, 0.02, 0.2][rng.usize(..3)], rng.u64(1..3000)))
            .collect();
        Case {
            seed,
            workers,
            steps,
            modes,
            vectors,
            followers,
            pauses,
            shared: false,
        }
    }

    /// The case with its followers reading through one source: at least two of them, one of
    /// each kind.
    fn sharing(mut self) -> Case {
        self.shared = true;
        let kinds = [
            FollowerKind::Tensor {
                budget_us: 200,
                interval_us: 100,
            },
            FollowerKind::Trial { interval_us: 1000 },
        ];
        for kind in kinds {
            if !self
                .followers
                .iter()
                .any(|f| std::mem::discriminant(f) == std::mem::discriminant(&kind))
            {
                self.followers.push(kind);
            }
        }
        self
    }
}

/// A value of `name` at `step` that differs from step to step and name to name, NaN and
/// infinities included now and then.
fn value(seed: u64, name: &str, step: u64) -> f64 {
    let mut rng = fastrand::Rng::with_seed(
        seed ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ name.len() as u64,
    );
    match rng.u8(..50) {
        0 => f64::NAN,
        1 => f64::NEG_INFINITY,
        _ => (rng.f64() - 0.5) * 10f64.powi(rng.i32(-6..6)),
    }
}

/// The writer, without the end marker: a worker that ends writes it (each `Hook` closes its
/// run), and the run here ends when every worker has; it is written once, after them all.
struct NoEnd(Writer);

impl Sink for NoEnd {
    fn send(&mut self, record: Record) {
        if !matches!(record, Record::Close(_)) {
            self.0.send(record);
        }
    }
}

/// Writes worker `rank`'s steps at full speed, pausing now and then as the case says.
fn write_worker(case: &Case, storage: Arc<dyn Storage>, rank: usize) {
    let writer = Writer::builder(storage)
        .worker_rank(rank)
        .tensorboard(false)
        .build()
        .unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .worker(rank, case.workers)
        .build(NoEnd(writer))
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(case.seed.wrapping_add(rank as u64 + 1));
    let (pause_chance, pause_us) = case.pauses[rank];
    for step in 0..case.steps {
        hook.set_mode(case.modes[step as usize]);
        // Every worker saves the same shared value; the others are its own.
        hook.save_scalar("shared", value(case.seed, "shared", step), &["losses"]);
        for name in [format!("w{rank}/loss"), format!("w{rank}/acc")] {
            hook.save_scalar(&name, value(case.seed, &name, step), &["losses"]);
        }
        if case.vectors[step as usize] {
            let data = [1.0f32, step as f32, rank as f32];
            let view = TensorView::from_slice(&data, &[3]).unwrap();
            hook.save_tensor(&format!("w{rank}/vec"), &view, &["weights"]);
        }
        hook.step();
        if rng.f64() < pause_chance {
            // workload: a random pause of the writer, to vary how it and the follower interleave.
            std::thread::sleep(Duration::from_micros(rng.u64(..pause_us)));
        } else if rng.u8(..4) == 0 {
            std::thread::yield_now();
        }
    }
    // Dropping the hook drops the writer, which writes what is queued before it returns.
}

/// What a reader knows of a run, in a form two readers can be compared by.
#[derive(Debug, PartialEq)]
struct View {
    /// Global step -> its mode and step within the mode.
    steps: BTreeMap<u64, (Mode, u64)>,
    workers: BTreeSet<String>,
    names: BTreeSet<String>,
    /// (name, mode) -> (step, value bits).
    values: BTreeMap<(String, Mode), Vec<(u64, u64)>>,
    /// (name, mode) -> each value's wall time, as the columns give it back.
    walls: BTreeMap<(String, Mode), Vec<f64>>,
}

impl View {
    /// Whether `self` and `other` agree: everything bit for bit, but wall times when several
    /// workers wrote the run. The columns keep one wall time per step, the first handed in,
    /// and a value's own only when it is more than `WALL_TOLERANCE_S` from it: which worker's
    /// comes first depends on the order files are read in, so those agree within it.
    fn agrees(&self, other: &View, workers: usize) -> bool {
        let walls = self.walls.len() == other.walls.len()
            && self
                .walls
                .iter()
                .all(|(key, a)| walls_agree(a, other.walls.get(key), workers));
        walls
            && (&self.steps, &self.workers, &self.names, &self.values)
                == (&other.steps, &other.workers, &other.names, &other.values)
    }
}

/// Whether wall times `a` and `b` agree: bit for bit when one worker wrote the run, else
/// within twice the columns' tolerance (each within it of its record's).
fn walls_agree(a: &[f64], b: Option<&Vec<f64>>, workers: usize) -> bool {
    let Some(b) = b else { return false };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.to_bits() == y.to_bits() || (workers > 1 && (x - y).abs() <= 2.0 * WALL_TOLERANCE_S)
        })
}

/// A `TensorFollower`'s view: its steps as handed out (each once), names, workers and columns.
fn follower_view(f: &TensorFollower, steps: &[(u64, Mode, u64)], columns: &ScalarColumns) -> View {
    let mut by_step = BTreeMap::new();
    for &(step, mode, mode_step) in steps {
        assert!(
            by_step.insert(step, (mode, mode_step)).is_none(),
            "step {step} handed out twice"
        );
    }
    assert_eq!(
        by_step.keys().copied().collect::<Vec<_>>(),
        f.steps(),
        "the steps handed out and the follower's steps"
    );
    let (mut values, mut walls) = (BTreeMap::new(), BTreeMap::new());
    for (name, track) in columns.iter() {
        for (mode, column) in track {
            let key = (name.clone(), *mode);
            let points = column.points().map(|(step, v)| (step, v.to_bits()));
            values.insert(key.clone(), points.collect());
            // A step's value of a name every worker writes is the first handed in, and so is
            // its wall time: whose it is depends on the order files are read in.
            if name != "shared" {
                let at = column
                    .points()
                    .map(|(step, _)| columns.wall_time_at(column, step));
                walls.insert(key, at.map(Option::unwrap).collect());
            }
        }
    }
    View {
        steps: by_step,
        workers: f.progress().step_workers().clone(),
        names: f.names().clone(),
        values,
        walls,
    }
}

/// A `Trial`'s view: its steps (all of them, complete or not), workers, names, and each
/// scalar's value of each worker at each step (read through the `Trial`).
fn trial_view(t: &Trial) -> View {
    let mut steps = BTreeMap::new();
    for step in t.all_global_steps(None).unwrap() {
        steps.insert(step, t.step_mode(step).unwrap().unwrap());
    }
    let mut values = BTreeMap::new();
    for name in t.tensor_names().unwrap() {
        let tensor = t.tensor(&name).unwrap();
        for step in tensor.all_steps(None).unwrap() {
            let mode = steps[&step].0;
            for worker in tensor.workers(step, None).unwrap() {
                let v = tensor.value(step, None, Some(&worker)).unwrap();
                let bits = v.iter().map(|x| x.to_bits());
                let key = (format!("{name}@{worker}"), mode);
                let points: &mut Vec<_> = values.entry(key).or_default();
                points.extend(bits.map(|b| (step, b)));
            }
        }
    }
    View {
        steps,
        workers: t.step_workers().unwrap().into_iter().collect(),
        names: t.tensor_names().unwrap().into_iter().collect(),
        values,
        walls: BTreeMap::new(),
    }
}

/// A follower as the dashboard opens one: on local disk by its path (index files read from the
/// folder directly), else on the storage.
fn open_follower(open: &(dyn Fn() -> Arc<dyn Storage> + Sync), location: &str) -> TensorFollower {
    if location.starts_with("s3://") {
        TensorFollower::new(open())
    } else {
        TensorFollower::open(location).unwrap()
    }
}

/// A `Trial` as the rules open one: on local disk by its path, else on the storage.
fn open_trial(
    open: &(dyn Fn() -> Arc<dyn Storage> + Sync),
    location: &str,
    options: TrialOptions,
) -> smdebug_read::Result<Trial> {
    if location.starts_with("s3://") {
        Trial::from_storage(location, open(), options)
    } else {
        Trial::open_with(location, options)
    }
}

/// Follows the run until it has ended and everything before the end is read.
fn follow(
    kind: FollowerKind,
    open: &(dyn Fn() -> Arc<dyn Storage> + Sync),
    location: &str,
    seed: u64,
    share: Option<TensorSubscription>,
    start: &Barrier,
) -> View {
    let mut rng = fastrand::Rng::with_seed(seed);
    start.wait();
    let began = Instant::now();
    let mut pause = |interval_us: u64| {
        assert!(
            began.elapsed() < GIVE_UP,
            "seed {seed}: the follower did not see the run end"
        );
        if interval_us > 0 {
            // workload: a random pause between the follower's looks, to vary the interleaving.
            std::thread::sleep(Duration::from_micros(rng.u64(..=interval_us)));
        }
    };
    match kind {
        FollowerKind::Tensor {
            budget_us,
            interval_us,
        } => {
            let mut f = open_follower(open, location);
            if let Some(share) = share {
                f = f.share(share);
            }
            let budget = Duration::from_micros(budget_us);
            let (mut steps, mut columns) = (Vec::new(), ScalarColumns::default());
            loop {
                let inc = f.poll(budget, &mut |batch, more| columns.add(batch, more));
                assert!(
                    inc.problems.is_empty(),
                    "seed {seed}: problems {:?}",
                    inc.problems
                );
                steps.extend(inc.steps.iter().map(|s| (s.step, s.mode, s.mode_step)));
                if f.end().is_some() && inc.pending == 0 {
                    break;
                }
                pause(interval_us);
            }
            follower_view(&f, &steps, &columns)
        }
        FollowerKind::Trial { interval_us } => {
            let options = TrialOptions {
                auto_refresh: false,
                tensor_source: share,
                ..TrialOptions::default()
            };
            let trial = loop {
                match open_trial(open, location, options.clone()) {
                    Ok(t) => break t,
                    Err(smdebug_read::Error::NoSuchRun { .. }) => {}
                    Err(e) => panic!("seed {seed}: {e}"),
                }
                pause(interval_us);
            };
            while !trial.is_complete().unwrap() {
                pause(interval_us);
                trial.refresh().unwrap();
            }
            trial_view(&trial)
        }
    }
}

/// What a fresh read of the finished run gives: the follower's kind of view.
fn fresh_view(kind: FollowerKind, storage: Arc<dyn Storage>, location: &str) -> View {
    match kind {
        FollowerKind::Tensor { .. } => {
            let mut f = open_follower(&|| Arc::clone(&storage), location);
            let mut columns = ScalarColumns::default();
            let inc = f.read_to_end(&mut |batch, more| columns.add(batch, more));
            assert!(inc.problems.is_empty(), "{:?}", inc.problems);
            let steps: Vec<_> = inc
                .steps
                .iter()
                .map(|s| (s.step, s.mode, s.mode_step))
                .collect();
            follower_view(&f, &steps, &columns)
        }
        FollowerKind::Trial { .. } => {
            let options = TrialOptions {
                auto_refresh: false,
                ..TrialOptions::default()
            };
            trial_view(&open_trial(&|| Arc::clone(&storage), location, options).unwrap())
        }
    }
}

/// Writes the case's run while its followers follow it; then compares each follower's view
/// with a fresh read. `Err` describes the first difference.
fn run_case(
    case: &Case,
    open: &(dyn Fn() -> Arc<dyn Storage> + Sync),
    location: &str,
) -> Result<(), String> {
    let start = Barrier::new(case.workers + case.followers.len());
    let failed = AtomicBool::new(false);
    // Every follower subscribes before any reads.
    let source = case.shared.then(|| TensorSource::new(open()));
    let views: Vec<std::thread::Result<View>> = std::thread::scope(|s| {
        let followers: Vec<_> = case
            .followers
            .iter()
            .enumerate()
            .map(|(i, &kind)| {
                let start = &start;
                let share = source.as_ref().map(TensorSource::subscribe);
                s.spawn(move || {
                    follow(
                        kind,
                        open,
                        location,
                        case.seed.wrapping_mul(31) + i as u64,
                        share,
                        start,
                    )
                })
            })
            .collect();
        let writers: Vec<_> = (0..case.workers)
            .map(|rank| {
                let (start, failed) = (&start, &failed);
                s.spawn(move || {
                    start.wait();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        write_worker(case, open(), rank)
                    }));
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert!(
            !failed.load(Ordering::Relaxed),
            "seed {}: a writer failed",
            case.seed
        );
        // Every worker has written every step: the run ends.
        let mut end = Writer::builder(open()).tensorboard(false).build().unwrap();
        end.send(Record::Close(EndReason::Completed));
        drop(end);
        followers.into_iter().map(|f| f.join()).collect()
    });
    if let Some(source) = &source {
        // The followers read through it, and nothing is held once they are gone.
        // (A trial's reads ahead of its values may end on a pool thread after it is dropped.)
        assert!(source.reads() > 0, "seed {}: nothing read", case.seed);
        wait_until(GIVE_UP, "every subscription to be dropped", || {
            source.subscribers() == 0
        });
        assert_eq!(source.held(), (0, 0, 0), "seed {}", case.seed);
    }
    let mut out = Ok(());
    for (i, (view, kind)) in views.into_iter().zip(&case.followers).enumerate() {
        let view = match view {
            Ok(v) => v,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                out = out.and(Err(format!("follower {i} ({kind:?}) failed: {msg}")));
                continue;
            }
        };
        let fresh = fresh_view(*kind, open(), location);
        assert_eq!(
            fresh.steps.len() as u64,
            case.steps,
            "seed {}: the fresh read has every step written",
            case.seed
        );
        if !view.agrees(&fresh, case.workers) {
            out = out.and(Err(describe_difference(
                i,
                *kind,
                &view,
                &fresh,
                case.workers,
            )));
        }
    }
    out
}

fn describe_difference(
    i: usize,
    kind: FollowerKind,
    view: &View,
    fresh: &View,
    workers: usize,
) -> String {
    let missing: Vec<_> = fresh
        .steps
        .keys()
        .filter(|s| !view.steps.contains_key(s))
        .collect();
    let mut differing = Vec::new();
    for (key, points) in &fresh.values {
        if view.values.get(key) != Some(points) {
            let have = view.values.get(key).map_or(&[][..], Vec::as_slice);
            let at: BTreeSet<u64> = have.iter().map(|p| p.0).collect();
            let lost: Vec<u64> = points
                .iter()
                .map(|p| p.0)
                .filter(|s| !at.contains(s))
                .collect();
            differing.push(format!(
                "{key:?}: {} of {} values (not at steps {:?})",
                have.len(),
                points.len(),
                &lost[..lost.len().min(10)]
            ));
        } else if let Some(walls) = fresh.walls.get(key)
            && !walls_agree(walls, view.walls.get(key), workers)
        {
            differing.push(format!("{key:?}: wall times"));
        }
    }
    format!(
        "follower {i} ({kind:?}): {} of {} steps (missing {:?}), workers {:?} vs {:?}, \
         {} of {} names, values differ in {:?}",
        view.steps.len(),
        fresh.steps.len(),
        &missing[..missing.len().min(20)],
        view.workers,
        fresh.workers,
        view.names.len(),
        fresh.names.len(),
        &differing[..differing.len().min(10)],
    )
}

/// The seeds to run: `FOLLOW_STRESS_SEED` alone when set, else `count` seeds from `base`.
fn seeds(base: u64, count: u64) -> Vec<u64> {
    match std::env::var("FOLLOW_STRESS_SEED") {
        Ok(seed) => vec![seed.parse().expect("FOLLOW_STRESS_SEED is a number")],
        Err(_) => (base..base + count).collect(),
    }
}

/// Runs every case, and fails with the seed and the difference of every case that failed.
fn run_all(
    cases: Vec<Case>,
    open_run: impl Fn(&Case) -> (Box<dyn Fn() -> Arc<dyn Storage> + Sync>, String),
) {
    let started = Instant::now();
    let mut failures = Vec::new();
    let total = cases.len();
    for case in &cases {
        let (open, location) = open_run(case);
        if let Err(e) = run_case(case, open.as_ref(), &location) {
            eprintln!("FAILED seed {} ({case:?}):\n  {e}", case.seed);
            failures.push(case.seed);
        }
    }
    eprintln!(
        "{total} runs, {} failed, in {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} runs differ from a fresh read; seeds {failures:?} \
         (run one alone with FOLLOW_STRESS_SEED=<seed>)",
        failures.len()
    );
}

/// The storage opener and location of `case`'s run in a folder of `dir`; the previous case's
/// run goes first, so the folder holds one run at a time.
fn local_run(
    dir: &std::path::Path,
    case: &Case,
) -> (Box<dyn Fn() -> Arc<dyn Storage> + Sync>, String) {
    let path = dir.join(format!("run-{}", case.seed));
    if let Some(previous) = std::fs::read_dir(dir).unwrap().next() {
        std::fs::remove_dir_all(previous.unwrap().path()).unwrap();
    }
    let location = path.to_str().unwrap().to_string();
    let at = location.clone();
    let open = move || open_storage(&at).unwrap();
    (Box::new(open), location)
}

#[test]
fn followed_runs_on_local_disk_equal_a_fresh_read() {
    let dir = tempfile::tempdir().unwrap();
    let cases = seeds(1, 100)
        .into_iter()
        .map(|seed| Case::generate(seed, 300, 4))
        .collect();
    run_all(cases, |case| local_run(dir.path(), case));
}

#[test]
fn followed_runs_sharing_one_source_equal_a_fresh_read() {
    let dir = tempfile::tempdir().unwrap();
    let cases = seeds(20_001, 16)
        .into_iter()
        .map(|seed| Case::generate(seed, 300, 4).sharing())
        .collect();
    run_all(cases, |case| local_run(dir.path(), case));
}

#[test]
fn followed_runs_on_s3_equal_a_fresh_read() {
    let moto = MotoServer::start();
    moto.create_bucket("follow-stress");
    let port = moto.port;
    let cases = seeds(10_001, 16)
        .into_iter()
        .map(|seed| Case::generate(seed, 50, 3))
        .collect();
    run_all(cases, |case| {
        let location = format!("s3://follow-stress/run-{}", case.seed);
        let at = location.clone();
        let open = move || open_storage_with(&at, &s3_options(port)).unwrap();
        (Box::new(open), location)
    });
}
