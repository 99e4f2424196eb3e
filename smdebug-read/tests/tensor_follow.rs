//! The `TensorFollower` on crafted runs: the `Trial`'s checks (an index file naming another
//! step's event file, a record of another step, conflicting index files), the `Trial`'s step
//! completeness, modes and folded reductions, records claiming huge shapes never decoded (peak
//! heap measured), and a live run read incrementally.
//!
//! The heap is counted by this binary's allocator; nextest runs each test in a process of its
//! own, so the counts are the test's.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_core::{DType, Mode, Tensor};
use smdebug_format::layout;
use smdebug_io::crafted::{CraftedRecord, point_index_at, scalar, write_collections, write_step};
use smdebug_read::Error;
use smdebug_read::trial::{ScalarColumns, TensorFollower, TensorIncrement, TensorProblem, Trial};
use smdebug_storage::{LocalStorage, Storage};
use smdebug_testkit::alloc;
use smdebug_testkit::runs::write_losses;
use smdebug_testkit::storage::{Intercept, Intercepted};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

fn follower(run: &Path) -> TensorFollower {
    TensorFollower::open(run.to_str().unwrap()).unwrap()
}

/// Reads what is new into `columns`.
fn poll(f: &mut TensorFollower, columns: &mut ScalarColumns) -> TensorIncrement {
    f.poll(Duration::from_secs(600), &mut |batch, more| {
        columns.add(batch, more)
    })
}

fn column(columns: &ScalarColumns, name: &str, mode: Mode) -> Vec<(u64, f64)> {
    columns
        .get(name)
        .and_then(|t| t.get(&mode))
        .map(|c| c.points().collect())
        .unwrap_or_default()
}

/// Issue 27's fourth case: the index file of step 60 names step 4's event file. The dashboard
/// plotted step 4's loss at step 60; the `Trial` refuses the run. The follower leaves the file
/// out, reports it, and shows no value at step 60.
#[test]
fn an_index_file_naming_another_steps_event_file_is_left_out_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..61);
    point_index_at(&run, 60, "worker_0", 4);
    let err = Trial::open(run.to_str().unwrap())
        .and_then(|t| t.steps(None))
        .expect_err("the Trial refuses the run");
    assert!(
        matches!(err, Error::Format(smdebug_format::Error::BadIndex { .. })),
        "{err}"
    );

    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    let loss = column(&columns, "loss", Mode::Train);
    assert_eq!(loss.len(), 60, "{loss:?}");
    assert!(loss.iter().all(|&(step, v)| v == step as f64), "{loss:?}");
    assert!(!f.steps().contains(&60));
    let [TensorProblem::IndexFile(e)] = &inc.problems[..] else {
        panic!("{:?}", inc.problems);
    };
    let text = inc.problems[0].to_string();
    assert!(
        matches!(e, Error::Format(smdebug_format::Error::BadIndex { .. })),
        "{text}"
    );
    for part in [
        layout::index_file(60, "worker_0"),
        layout::event_file(4, "worker_0"),
        "is not the event file of step 60".to_string(),
        "left out".to_string(),
    ] {
        assert!(text.contains(&part), "`{part}` missing from: {text}");
    }
    // Reported once: the file is not read again.
    assert!(poll(&mut f, &mut columns).problems.is_empty());
}

/// An index file whose `event_file_name` is empty names no event file: the follower reads the
/// other steps, reports the step's tensor as a value it could not read (naming the index file),
/// and reads nothing from the step's usual event file on the index's behalf. The `Trial`
/// opens the run too, and lists step 60.
#[test]
fn an_index_naming_no_event_file_is_a_problem_of_its_values_only() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..61);
    let rel = layout::index_file(60, "worker_0");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join(&rel)).unwrap()).unwrap();
    index["meta"]["event_file_name"] = serde_json::json!("");
    std::fs::write(run.join(&rel), serde_json::to_vec(&index).unwrap()).unwrap();
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert!(trial.steps(None).unwrap().contains(&60));

    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    let loss = column(&columns, "loss", Mode::Train);
    assert_eq!(loss.len(), 60, "{loss:?}");
    assert!(loss.iter().all(|&(step, v)| v == step as f64 && step != 60));
    let [
        TensorProblem::Value {
            step,
            tensor,
            error,
        },
    ] = &inc.problems[..]
    else {
        panic!("{:?}", inc.problems);
    };
    assert_eq!((*step, tensor.as_str()), (60, "loss"));
    assert!(matches!(error, Error::BadIndexEntry { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains(&rel) && text.contains("event_file_name"),
        "{text}"
    );
}

/// The index names its own event file, but the file holds step 40's record (the same length):
/// the record's step is checked against the index's, as the `Trial` checks it.
#[test]
fn a_record_of_another_step_is_left_out_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..61);
    std::fs::copy(
        run.join(layout::event_file(40, "worker_0")),
        run.join(layout::event_file(60, "worker_0")),
    )
    .unwrap();
    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    let loss = column(&columns, "loss", Mode::Train);
    assert!(!loss.iter().any(|p| p.0 == 60), "{loss:?}");
    assert_eq!(loss.len(), 60);
    assert!(f.steps().contains(&60), "the step itself is listed");
    let [
        TensorProblem::Value {
            step: 60,
            tensor,
            error: Error::Format(smdebug_format::Error::WrongTensor { .. }),
        },
    ] = &inc.problems[..]
    else {
        panic!("{:?}", inc.problems);
    };
    assert_eq!(tensor, "loss");
}

/// Event files read straight from the run's folder (a follower made over local storage with
/// `TensorFollower::new`, as the dashboard makes it, reads them so) are checked as storage
/// reads them: a missing file, one shorter than its index, a FIFO in its place and a record
/// whose checksum fails each leave that step's value out with a problem naming the file, and
/// every other value is the file's.
#[test]
fn bad_event_files_on_local_disk_are_reported_and_the_rest_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..40);
    let event = |step: u64| run.join(layout::event_file(step, "worker_0"));
    std::fs::remove_file(event(10)).unwrap();
    let short = std::fs::read(event(20)).unwrap();
    std::fs::write(event(20), &short[..short.len() - 3]).unwrap();
    let mut corrupt = std::fs::read(event(30)).unwrap();
    let last = corrupt.len() - 6;
    corrupt[last] ^= 0x40; // in the payload: its checksum fails
    std::fs::write(event(30), &corrupt).unwrap();
    let mut bad = vec![10, 20, 30];
    #[cfg(unix)]
    {
        std::fs::remove_file(event(35)).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(event(35))
            .status()
            .unwrap();
        assert!(made.success());
        bad.push(35);
    }

    let storage = std::sync::Arc::new(smdebug_storage::LocalStorage::new(&run).unwrap());
    let mut f = TensorFollower::new(storage);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    let loss = column(&columns, "loss", Mode::Train);
    let expected: Vec<(u64, f64)> = (0..40u64)
        .filter(|s| !bad.contains(s))
        .map(|s| (s, s as f64))
        .collect();
    assert_eq!(loss, expected);
    let mut reported: Vec<u64> = inc
        .problems
        .iter()
        .map(|p| match p {
            TensorProblem::Value { step, tensor, .. } if tensor == "loss" => {
                let text = p.to_string();
                let file = layout::event_file(*step, "worker_0");
                assert!(text.contains(&file), "{file} not named in: {text}");
                *step
            }
            other => panic!("{other}"),
        })
        .collect();
    reported.sort_unstable();
    assert_eq!(reported, bad, "{:?}", inc.problems);
    assert_eq!(f.steps().len(), 40, "every step is listed");
}

/// Issue 27's second case: a 50-byte record claiming `[2^28]` float32 (1 GiB) in each of 114
/// steps. It is never decoded (its header is checked against one number first), and after the
/// first step never read again: the peak heap and the time stay within 10x of the same run
/// without it (generous bounds: a decode costs 1 GiB).
#[test]
fn a_huge_fill_record_in_every_step_is_never_decoded() {
    const STEPS: u64 = 114;
    let dir = tempfile::tempdir().unwrap();
    let (clean, hostile) = (dir.path().join("clean"), dir.path().join("hostile"));
    for s in 0..STEPS {
        let loss = scalar("loss", s as f32);
        write_step(&clean, s, "worker_0", Mode::Train, s, &[loss]);
        let records = [
            scalar("loss", s as f32),
            CraftedRecord::Fill {
                name: "mask".into(),
                dtype: DType::F32,
                dims: vec![1 << 28],
            },
        ];
        write_step(&hostile, s, "worker_0", Mode::Train, s, &records);
    }
    let read = |run: &Path| {
        let started = Instant::now();
        let ((f, columns, inc), peak) = alloc::peak_during(|| {
            let mut f = follower(run);
            let mut columns = ScalarColumns::default();
            let inc = f.read_to_end(&mut |batch, more| columns.add(batch, more));
            (f, columns, inc)
        });
        (f, columns, inc, peak, started.elapsed())
    };
    let (_, clean_columns, _, clean_peak, clean_time) = read(&clean);
    let (f, columns, inc, peak, time) = read(&hostile);
    eprintln!(
        "clean: {clean_peak} bytes at peak, {clean_time:?}; with the fill records: {peak} bytes, \
         {time:?}"
    );
    assert!(inc.problems.is_empty(), "{:?}", inc.problems);
    assert_eq!(
        f.names().iter().collect::<Vec<_>>(),
        ["loss", "mask"],
        "listed"
    );
    assert!(columns.get("mask").is_none(), "not a number: no column");
    assert_eq!(
        column(&columns, "loss", Mode::Train),
        column(&clean_columns, "loss", Mode::Train)
    );
    assert_eq!(columns.values(), STEPS as usize);
    assert!(
        peak < 10 * clean_peak.max(1 << 20),
        "peak heap {peak} bytes against {clean_peak} without the fill records"
    );
    assert!(
        time < 10 * clean_time + Duration::from_secs(5),
        "{time:?} against {clean_time:?}"
    );
}

/// Completeness is the `Trial`'s: the collections file declares two workers, a step is complete
/// once both wrote it; workers disagreeing on a step's mode is a conflict, the second file left
/// out. A live run grows: each poll reads only the index files that are new.
#[test]
fn steps_complete_when_every_declared_worker_wrote_them_and_polls_read_only_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_collections(&run, "worker_0", 2);
    for s in 0..4 {
        write_step(
            &run,
            s,
            "worker_0",
            Mode::Train,
            s,
            &[scalar("loss", s as f32)],
        );
        if s < 3 {
            let other = scalar("loss", 100.0 + s as f32);
            write_step(&run, s, "worker_1", Mode::Train, s, &[other]);
        }
    }
    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    assert!(inc.problems.is_empty(), "{:?}", inc.problems);
    assert_eq!(inc.steps.len(), 4);
    assert_eq!(f.progress().last_complete(), Some(2));
    assert!(!f.progress().is_complete(3));
    assert_eq!(inc.values, 7, "every index file's value");
    // The first worker's value of each step is kept.
    assert_eq!(
        column(&columns, "loss", Mode::Train),
        [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
    );
    // The same as the Trial's.
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 1, 2]);
    assert_eq!(trial.last_complete_step().unwrap(), Some(2));

    // Worker 1 catches up on step 3 and both write step 4; worker 1 calls step 5 EVAL.
    write_step(
        &run,
        3,
        "worker_1",
        Mode::Train,
        3,
        &[scalar("loss", 103.0)],
    );
    write_step(&run, 4, "worker_0", Mode::Train, 4, &[scalar("loss", 4.0)]);
    write_step(
        &run,
        4,
        "worker_1",
        Mode::Train,
        4,
        &[scalar("loss", 104.0)],
    );
    write_step(&run, 5, "worker_0", Mode::Train, 5, &[scalar("loss", 5.0)]);
    write_step(&run, 5, "worker_1", Mode::Eval, 0, &[scalar("loss", 105.0)]);
    // A step already taken in, damaged now: not read again.
    std::fs::write(run.join(layout::event_file(1, "worker_0")), b"damaged").unwrap();
    let inc = poll(&mut f, &mut columns);
    assert_eq!(inc.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(
        inc.values, 4,
        "worker 1's step 3, both step 4s, worker 0's step 5"
    );
    let [TensorProblem::ConflictingIndex(e)] = &inc.problems[..] else {
        panic!("{:?}", inc.problems);
    };
    let text = e.to_string();
    assert!(
        text.contains(&layout::index_file(5, "worker_1")) && text.contains("EVAL step 0"),
        "{text}"
    );
    assert_eq!(f.progress().last_complete(), Some(4));
    assert!(column(&columns, "loss", Mode::Eval).is_empty());

    // Nothing new: nothing read. Then the end marker: every step complete.
    let inc = poll(&mut f, &mut columns);
    assert!(inc.steps.is_empty() && inc.values == 0 && inc.problems.is_empty());
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    poll(&mut f, &mut columns);
    assert!(f.end().is_some() && f.progress().is_complete(5));
}

/// Modes and reductions as the `Trial` has them: a reduction is listed under its tensor and is
/// no scalar of its own; a tensor of more than one number is listed and has no column; each
/// mode has its column, numbered by global step.
#[test]
fn modes_are_kept_per_step_and_reductions_are_folded_into_their_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let w = || {
        let values: Vec<u8> = [1f32, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        CraftedRecord::Tensor(
            "w".into(),
            Tensor::from_bytes(DType::F32, vec![2, 2], values).unwrap(),
        )
    };
    let steps = [
        (0, Mode::Train, 0),
        (1, Mode::Train, 1),
        (2, Mode::Eval, 0),
        (3, Mode::Train, 2),
    ];
    for (s, mode, mode_step) in steps {
        let records = [
            scalar("loss", s as f32),
            scalar("smdebug/reductions/mean/w", 2.5),
            w(),
        ];
        write_step(&run, s, "worker_0", mode, mode_step, &records);
    }
    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    assert!(inc.problems.is_empty(), "{:?}", inc.problems);
    assert_eq!(inc.names, ["loss", "w"]);
    let got: Vec<(u64, Mode, u64)> = inc
        .steps
        .iter()
        .map(|s| (s.step, s.mode, s.mode_step))
        .collect();
    assert_eq!(got, steps);
    assert_eq!(
        column(&columns, "loss", Mode::Train),
        [(0, 0.0), (1, 1.0), (3, 3.0)]
    );
    assert_eq!(column(&columns, "loss", Mode::Eval), [(2, 2.0)]);
    assert!(columns.get("w").is_none() && columns.get("smdebug/reductions/mean/w").is_none());
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.tensor_names().unwrap(),
        f.names().iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(trial.steps(Some(Mode::Train)).unwrap(), [0, 1, 2]);
    assert_eq!(trial.global_steps(Some(Mode::Eval)).unwrap(), [2]);
}

/// Issue 24's first case: the collections file names `worker_0` and declares one worker,
/// `algo-1` writes the steps. Every step is complete (the `Trial`'s rules), so the next listing
/// resumes after the last one instead of reading the run from its start again.
#[test]
fn completeness_follows_the_declared_worker_count_not_the_names() {
    let stage = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/scenarios/issue_workers_from_the_collections_file/stage_0");
    let mut f = follower(&stage);
    let mut columns = ScalarColumns::default();
    let inc = poll(&mut f, &mut columns);
    assert_eq!(inc.steps.len(), 4);
    assert!(
        inc.values > 0 && inc.problems.is_empty(),
        "{:?}",
        inc.problems
    );
    assert_eq!(f.progress().last_complete(), Some(3));
    assert_eq!(f.progress().workers(), ["worker_0"]);
    assert_eq!(f.progress().resume_step(), 4);
    let again = poll(&mut f, &mut columns);
    assert!(again.steps.is_empty() && again.values == 0 && again.pending == 0);
}

/// Each scalar value keeps its event record's wall time: a run written by the real writer
/// (its own clock, a few milliseconds apart), followed into columns, each value's wall time
/// compared with its record's as the event file holds it; and what the columns cost a value.
#[test]
fn each_value_keeps_its_records_wall_time() {
    use smdebug_core::{Hook, SaveConfig};
    use smdebug_format::read_tensor_file;
    use smdebug_format::record::PayloadCrcPolicy;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let store = smdebug_storage::open_storage(run.to_str().unwrap()).unwrap();
    let writer = smdebug_io::Writer::builder(store).build().unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    hook.set_mode(Mode::Train);
    for step in 0..40u64 {
        if step == 30 {
            hook.set_mode(Mode::Eval);
        }
        hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
        hook.save_scalar("accuracy", step as f64 / 40.0, &["metrics"]);
        hook.step();
        // workload: a training step's time; the follower reads while steps come.
        std::thread::sleep(Duration::from_millis(3));
    }
    hook.close();
    drop(hook);

    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    poll(&mut f, &mut columns);
    assert_eq!(columns.values(), 80);
    let mut first = f64::INFINITY;
    let mut checked = 0;
    for step in 0..40u64 {
        let path = layout::event_file(step, "worker_0");
        let bytes = std::fs::read(run.join(&path)).unwrap();
        for event in read_tensor_file(&bytes, &path, PayloadCrcPolicy::AcceptBoth).unwrap() {
            assert_eq!(event.mode, if step < 30 { Mode::Train } else { Mode::Eval });
            let column = &columns.get(&event.name).unwrap()[&event.mode];
            let held = columns.wall_time_at(column, step).unwrap();
            // The step's wall time: the first record's of the step, saved within 4 ms.
            assert!(
                (held - event.wall_time).abs() <= smdebug_read::trial::WALL_TOLERANCE_S,
                "{} at {step}: {held} held, {} in the record",
                event.name,
                event.wall_time
            );
            first = first.min(event.wall_time);
            checked += 1;
        }
    }
    assert_eq!(checked, 80);
    assert_eq!(columns.first_wall_time(), Some(first));
    let per_value = columns.heap_bytes() as f64 / columns.values() as f64;
    eprintln!("scalar columns: {per_value} bytes a value");
    assert!(per_value <= 20.0 * 1.5, "{per_value} bytes a value");
}

/// A backlog longer than one poll starts (2,048 index files read ahead) is read over several
/// polls when the budget is spent at once: each poll takes in every file it started (none read
/// twice, none skipped) and says how many are left, the values go out at most 2,048 files' worth
/// at a time, and they are what one read to the end gives. (The files after the ones being
/// taken in are read meanwhile: a poll that stops starting files still takes in those read.)
#[test]
fn a_long_backlog_under_a_spent_budget_goes_on_over_polls_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..5000);
    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let (mut pending, mut handed) = (Vec::new(), Vec::new());
    loop {
        let inc = f.poll(Duration::ZERO, &mut |batch, more| {
            handed.push((batch.iter().map(|c| c.2.len()).sum::<usize>(), more));
            columns.add(batch, more)
        });
        assert!(inc.problems.is_empty(), "{:?}", inc.problems);
        pending.push(inc.pending);
        if inc.pending == 0 {
            break;
        }
        assert!(pending.len() < 40, "no end to the backlog: {pending:?}");
    }
    assert!(pending.len() >= 2, "one poll read it all: {pending:?}");
    assert!(pending.windows(2).all(|w| w[0] > w[1]), "{pending:?}");
    assert!(handed.iter().all(|h| h.0 <= 2048), "{handed:?}");
    assert_eq!(handed.iter().map(|h| h.0).sum::<usize>(), 5000);
    assert_eq!(handed.last().unwrap().1, 0, "{handed:?}");
    let expected: Vec<(u64, f64)> = (0..5000).map(|s| (s, s as f64)).collect();
    assert_eq!(column(&columns, "loss", Mode::Train), expected);

    let mut whole = ScalarColumns::default();
    follower(&run).read_to_end(&mut |batch, more| whole.add(batch, more));
    assert_eq!(column(&whole, "loss", Mode::Train), expected);
}

/// A run whose end marker comes while a long backlog is being read over several polls, with
/// steps written after the backlog was listed: they are listed before the run counts as ended.
/// (The follower took the marker as the end of the listing it was still reading and never
/// listed again: the dashboard, reading on a budget, lost a live run's last steps.)
#[test]
fn a_run_that_ends_while_a_backlog_is_read_is_listed_once_more_before_it_counts_as_ended() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_losses(&run, 0..3000);
    let mut f = follower(&run);
    let mut columns = ScalarColumns::default();
    let first = f.poll(Duration::ZERO, &mut |batch, more| columns.add(batch, more));
    assert!(first.pending > 0, "the backlog outlasts one poll");
    write_losses(&run, 3000..3010);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    for _ in 0..40 {
        let inc = f.poll(Duration::ZERO, &mut |batch, more| columns.add(batch, more));
        assert!(inc.problems.is_empty(), "{:?}", inc.problems);
        if f.end().is_some() {
            break;
        }
    }
    assert!(f.end().is_some(), "the run ended");
    assert_eq!(f.steps().len(), 3010, "every step before the marker");
    let expected: Vec<(u64, f64)> = (0..3010).map(|s| (s, s as f64)).collect();
    assert_eq!(column(&columns, "loss", Mode::Train), expected);
}

/// Leaves each path in `hidden` out of the first index listing that would hold it: as a folder
/// read while files are renamed into it can leave out a new file and hold a later one, or an
/// object store's listing pages.
#[derive(Debug)]
struct LateListing {
    /// Shared with the test, which may hide paths from the next listing.
    hidden: Arc<std::sync::Mutex<Vec<String>>>,
}

impl LateListing {
    fn filter(&self, prefix: &str, listed: Vec<String>) -> Vec<String> {
        if !prefix.starts_with(layout::INDEX_DIR) {
            return listed;
        }
        let mut hidden = self.hidden.lock().unwrap();
        let out = listed
            .into_iter()
            .filter(|p| !hidden.contains(p))
            .collect::<Vec<_>>();
        // Listed once without them: they are there from now on.
        hidden.clear();
        out
    }
}

impl Intercept for LateListing {
    fn list(&self, inner: &dyn Storage, prefix: &str) -> smdebug_storage::Result<Vec<String>> {
        Ok(self.filter(prefix, inner.list(prefix)?))
    }
    fn list_after(
        &self,
        inner: &dyn Storage,
        prefix: &str,
        offset: &str,
    ) -> smdebug_storage::Result<Vec<String>> {
        Ok(self.filter(prefix, inner.list_after(prefix, offset)?))
    }
}

/// Issue 35: a listing held worker_0's step 8 but not its step 7, written just before it. Step 8
/// made every step up to it complete, and the next listing started after it: step 7 was never
/// read, by the dashboard's follower nor by the `Trial` (the rules, `smdebug_rs`). Now a step
/// is complete only once a listing started after its files were read has been read too.
#[test]
fn an_index_file_left_out_of_a_listing_that_holds_a_later_one_is_read_at_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_collections(&run, "worker_0", 1);
    write_losses(&run, 0..10);
    let late = || {
        let hidden = vec![layout::index_file(7, "worker_0")];
        let late = LateListing {
            hidden: Arc::new(std::sync::Mutex::new(hidden)),
        };
        Intercepted::new(Arc::new(LocalStorage::new(&run).unwrap()), late) as Arc<dyn Storage>
    };
    let mut f = TensorFollower::new(late());
    let mut columns = ScalarColumns::default();
    let mut steps = Vec::new();
    for _ in 0..2 {
        let inc = poll(&mut f, &mut columns);
        steps.extend(inc.steps.iter().map(|s| s.step));
    }
    assert_eq!(f.steps(), (0..10).collect::<Vec<_>>());
    assert_eq!(
        steps,
        [0, 1, 2, 3, 4, 5, 6, 8, 9, 7],
        "step 7 came with the second listing"
    );
    let expected: Vec<(u64, f64)> = (0..10).map(|s| (s, s as f64)).collect();
    assert_eq!(column(&columns, "loss", Mode::Train), expected);
    assert_eq!(f.progress().last_complete(), Some(9));

    let options = smdebug_read::trial::TrialOptions {
        auto_refresh: false,
        ..Default::default()
    };
    let trial = Trial::from_storage("late", late(), options).unwrap();
    assert_eq!(trial.steps(None).unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(trial.last_complete_step().unwrap(), Some(9));
}

/// A live run followed from its first steps: a listing leaves out worker_0's step 13, written
/// just before step 14, which it holds. A reader that shows what it is handed (the dashboard's
/// live chart) never shows step 14 or later without step 13: a step found after the first
/// listing is handed out once the listing after the one that found it has been read, with the
/// steps that listing found left out. (The live chart held step 4,865 without 4,863-4,864
/// for a poll: drawn from one listing's files before the next found the rest.)
#[test]
fn a_step_is_handed_out_only_with_every_earlier_step_of_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    write_collections(&run, "worker_0", 1);
    write_losses(&run, 0..10);
    let hidden = Arc::new(std::sync::Mutex::new(Vec::new()));
    let late = LateListing {
        hidden: Arc::clone(&hidden),
    };
    let storage =
        Intercepted::new(Arc::new(LocalStorage::new(&run).unwrap()), late) as Arc<dyn Storage>;
    let mut f = TensorFollower::new(storage);
    let mut columns = ScalarColumns::default();
    // What the reader shows after each hand-out, and the steps handed out by each poll.
    let mut shown: Vec<Vec<(u64, f64)>> = Vec::new();
    let mut polls: Vec<Vec<u64>> = Vec::new();
    let mut poll_once = |f: &mut TensorFollower| {
        let inc = f.poll(Duration::from_secs(600), &mut |batch, more| {
            columns.add(batch, more);
            shown.push(column(&columns, "loss", Mode::Train));
        });
        assert!(inc.problems.is_empty(), "{:?}", inc.problems);
        polls.push(inc.steps.iter().map(|s| s.step).collect());
    };
    poll_once(&mut f);
    // Steps 10 to 19 are written; the next listing leaves out step 13.
    write_losses(&run, 10..20);
    *hidden.lock().unwrap() = vec![layout::index_file(13, "worker_0")];
    poll_once(&mut f);
    poll_once(&mut f);
    assert_eq!(f.steps(), (0..20).collect::<Vec<_>>());
    for drawn in &shown {
        let expected: Vec<(u64, f64)> = (0..drawn.len() as u64).map(|s| (s, s as f64)).collect();
        assert_eq!(drawn, &expected, "a hand-out left an earlier step out");
    }
    assert_eq!(shown.last().unwrap().len(), 20, "{shown:?}");
    assert_eq!(polls[0], (0..10).collect::<Vec<_>>());
    // The second poll's first listing found 10-12 and 14-19; its second found 13 and handed it
    // out with them.
    assert_eq!(polls[1], [10, 11, 12, 14, 15, 16, 17, 18, 19, 13]);
    assert!(polls[2].is_empty(), "{polls:?}");
}

/// `read_steps` reads the steps of a window alone, across index folders (one per 1,000 steps),
/// and gives what a follower of the whole run gives for them: the same values at the same
/// steps with the same wall times; an index file of the window that names another step's event
/// file is left out and reported as the whole run's follower leaves it out.
#[test]
fn a_window_read_alone_is_what_the_whole_runs_follower_gives_for_it() {
    let dir = tempfile::tempdir().unwrap();
    write_collections(dir.path(), "worker_0", 1);
    write_losses(dir.path(), 0..2_500);
    // Step 1,005's index file names step 4's event file.
    point_index_at(dir.path(), 1_005, "worker_0", 4);
    let mut whole = follower(dir.path());
    let mut batches = Vec::new();
    whole.read_to_end(&mut |batch, _| batches.extend(batch));
    let all: Vec<(u64, f64, f64)> = batches
        .into_iter()
        .filter(|(name, mode, _)| name == "loss" && *mode == Mode::Train)
        .flat_map(|(_, _, column)| column)
        .collect();
    assert_eq!(all.len(), 2_499);
    let storage: std::sync::Arc<dyn smdebug_storage::Storage> =
        std::sync::Arc::new(smdebug_storage::LocalStorage::new(dir.path()).unwrap());
    let (batch, inc) = TensorFollower::read_steps(storage, 990, 2_010).unwrap();
    assert_eq!(batch.len(), 1, "one column: loss in TRAIN");
    let (name, mode, window) = &batch[0];
    assert_eq!((name.as_str(), *mode), ("loss", Mode::Train));
    let expected: Vec<(u64, f64, f64)> = all
        .iter()
        .filter(|v| (990..=2_010).contains(&v.0))
        .copied()
        .collect();
    assert_eq!(window, &expected);
    assert_eq!(window.len(), 1_020);
    assert!(
        inc.problems
            .iter()
            .any(|p| matches!(p, TensorProblem::IndexFile(_)) && p.to_string().contains("1005")),
        "{:?}",
        inc.problems
    );
}

/// Polls of a live run list the collections folder only until each worker the run declares has
/// its collections file read: a run of two workers whose second file comes late is listed
/// until it comes (its steps are incomplete until then), and not once after, while steps keep
/// coming. The `Trial` the same, through its refreshes.
#[test]
fn the_collections_folder_is_listed_until_every_declared_worker_has_its_file() {
    use smdebug_storage::testing::CountingStorage;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
    let counting = Arc::new(CountingStorage::new(Arc::clone(&local)));
    let mut f = TensorFollower::new(Arc::clone(&counting) as Arc<dyn Storage>);
    let mut columns = ScalarColumns::default();
    let step = |s: u64, worker: &str| {
        write_step(&run, s, worker, Mode::Train, s, &[scalar("loss", s as f32)]);
    };
    let listings = || counting.listings_of(layout::COLLECTIONS_DIR);
    write_collections(&run, "worker_0", 2);
    step(0, "worker_0");
    let trial = Trial::from_storage(
        run.to_str().unwrap(),
        Arc::clone(&counting) as Arc<dyn Storage>,
        Default::default(),
    )
    .unwrap();
    let mut listed = 0;
    for s in 0..3 {
        if s > 0 {
            step(s, "worker_0");
        }
        poll(&mut f, &mut columns);
        trial.refresh().unwrap();
        assert!(
            listings() > listed,
            "step {s}: listed while a worker is unknown"
        );
        listed = listings();
    }
    assert!(
        f.progress().last_complete().is_none(),
        "worker_1 wrote nothing"
    );
    write_collections(&run, "worker_1", 2);
    for s in 0..3 {
        step(s, "worker_1");
    }
    poll(&mut f, &mut columns);
    trial.refresh().unwrap();
    assert_eq!(f.progress().workers(), ["worker_0", "worker_1"]);
    assert_eq!(trial.workers().unwrap(), ["worker_0", "worker_1"]);
    let known = listings();
    for s in 3..8 {
        step(s, "worker_0");
        step(s, "worker_1");
        let inc = poll(&mut f, &mut columns);
        trial.refresh().unwrap();
        assert!(inc.problems.is_empty(), "{:?}", inc.problems);
    }
    assert_eq!(
        listings(),
        known,
        "listed again with every worker's file read"
    );
    assert_eq!(f.progress().last_complete(), Some(7));
    assert_eq!(trial.steps(None).unwrap(), (0..8).collect::<Vec<_>>());
}
