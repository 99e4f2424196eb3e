//! The run's progress file (`progress/<worker>.json`) written by a real session, and what the
//! dashboard makes of it: the ETA from the planned steps and the step rate, and the writer's
//! drops (a writer with a one-record queue, made to drop).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::serve::{ServeOptions, Server};
use smdebug_io::progress::read_progress;
use smdebug_storage::testing::wait_for;

fn get(url: &str) -> Value {
    let r = reqwest::blocking::get(url).unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.json().unwrap()
}

/// How long a test waits for what the session and the dashboard should show.
const WAIT: Duration = Duration::from_secs(60);

fn builder(run: &Path) -> SessionBuilder {
    Session::builder(run)
        .without_config_files()
        .no_system()
        .save(SaveConfig::every(1))
}

fn progress(run: &Path) -> Option<smdebug_format::progress::Progress> {
    let store = smdebug_storage::open_storage(run.to_str().unwrap()).unwrap();
    read_progress(store.as_ref(), "worker_0").unwrap()
}

#[test]
fn the_session_keeps_its_progress_file_current_and_writes_the_final_counts() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut session = builder(&run)
        .planned_steps(40)
        .progress_interval(Duration::ZERO)
        .start()
        .unwrap();
    // The plan is there before the first step.
    let first = wait_for(WAIT, "the first progress file", || progress(&run));
    assert_eq!(first.planned_steps, Some(40));
    assert_eq!(first.last_step, None);
    assert!(!first.finished);
    for step in 0..30u64 {
        session
            .hook()
            .save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
        session.step().unwrap();
        if step == 9 {
            // Written off the training thread while the loop runs.
            let live = wait_for(WAIT, "step 9 in the progress file", || {
                progress(&run).filter(|p| p.last_step >= Some(9))
            });
            assert_eq!(live.planned_steps, Some(40));
            assert!(!live.finished && live.steps >= 10, "{live:?}");
        }
    }
    let summary = session.finish().unwrap();
    assert!(summary.problems.is_empty(), "{summary}");
    let last = progress(&run).unwrap();
    assert!(last.finished, "{last:?}");
    assert_eq!(last.last_step, Some(29));
    assert_eq!(last.steps, 30);
    assert_eq!(last.planned_steps, Some(40));
    assert_eq!(last.records_written, summary.records_written);
    assert_eq!(last.records_written, 30);
    assert_eq!(last.records_dropped, 0);
    assert_eq!(last.steps_with_drops, 0);
    assert_eq!(last.spans_written, summary.spans_written);
    assert!(last.spans_written >= 30, "{last:?}");
    assert_eq!(last.spans_dropped, summary.spans_dropped);
    assert!(last.wall_time > 1.7e9);
}

#[test]
fn a_loop_that_steps_the_hook_itself_moves_the_progress_file_through_its_step_spans() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut session = builder(&run)
        .planned_steps(100)
        .progress_interval(Duration::ZERO)
        .start()
        .unwrap();
    // The examples' loops call the hook's own step(), not the session's.
    for step in 0..12u64 {
        let hook = session.hook();
        hook.save_scalar("loss", step as f64, &["losses"]);
        hook.step();
    }
    let live = wait_for(WAIT, "step 11 in the progress file", || {
        progress(&run).filter(|p| p.last_step == Some(11))
    });
    assert_eq!(live.steps, 12);
    assert_eq!(live.planned_steps, Some(100));
    assert!(!live.finished);
    // The plan changed while the job runs (an early-stopping schedule).
    session.set_planned_steps(60);
    session.finish().unwrap();
    let last = progress(&run).unwrap();
    assert!(last.finished && last.steps == 12 && last.last_step == Some(11));
    assert_eq!(last.planned_steps, Some(60));
}

#[test]
fn the_dashboard_shows_an_eta_from_the_planned_steps_while_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let planned = 100_000u64;
    let mut session = builder(&run)
        .planned_steps(planned)
        .progress_interval(Duration::from_millis(50))
        .spans(SpanConfig::default().close_interval(Duration::from_millis(200)))
        .dashboard(ServeOptions::default())
        .start()
        .unwrap();
    let root = session
        .dashboard_url()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let mut overview = Value::Null;
    let started = Instant::now();
    for step in 0..planned {
        session.hook().save_scalar("loss", 1.0, &["losses"]);
        session.step().unwrap();
        // workload: a training step's time, so that an ETA can be estimated.
        std::thread::sleep(Duration::from_millis(2));
        if step % 20 == 19 {
            overview = get(&format!("{root}/api/runs/0/overview"));
            if overview["progress"]["eta_s"].is_number() {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no ETA: {overview}"
        );
    }
    let p = &overview["progress"];
    assert_eq!(p["planned_steps"], planned, "{p}");
    let rate = p["step_rate"].as_f64().unwrap();
    let done = p["steps_done"].as_u64().unwrap();
    let eta = p["eta_s"].as_f64().unwrap();
    // The steps left at the rate shown.
    let want = (planned - done) as f64 / rate;
    assert!((eta - want).abs() <= 1e-9 * want, "{p}");
    assert!(p["eta_note"].is_null());
    // No drops: the writer kept up, and the tile knows it (the run records it).
    assert_eq!(p["drops"]["records_dropped"], 0, "{p}");
    session.finish().unwrap();
}

#[test]
fn a_writer_made_to_drop_shows_its_drops_in_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // A one-record queue that drops what does not fit: 40 tensors of 64 KiB a step outrun it.
    let mut session = builder(&run)
        .writer_queue(1)
        .overflow(smdebug_io::OverflowPolicy::Drop)
        .planned_steps(20)
        .start()
        .unwrap();
    let values = vec![0.5f32; 16_384];
    for _ in 0..20 {
        for i in 0..40 {
            let view = TensorView::from_slice(&values, &[values.len()]).unwrap();
            session
                .hook()
                .save_tensor(&format!("layer{i}.weight"), &view, &["weights"]);
        }
        session.step().unwrap();
    }
    let summary = session.finish().unwrap();
    assert!(summary.records_dropped > 0, "nothing dropped: {summary}");

    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let root = server.url().trim_end_matches('/').to_string();
    let p = wait_for(WAIT, "the final progress in the overview", || {
        let o = get(&format!("{root}/api/runs/0/overview"));
        let p = o["progress"].clone();
        (p["drops"]["finished"] == true).then_some(p)
    });
    let d = &p["drops"];
    assert_eq!(d["records_dropped"], summary.records_dropped, "{p}");
    assert_eq!(d["records_written"], summary.records_written, "{p}");
    let dropped = summary.records_dropped as f64;
    let share = dropped / (dropped + summary.records_written as f64);
    assert!(
        (d["records_share"].as_f64().unwrap() - share).abs() < 1e-12,
        "{p}"
    );
    let steps_with_drops = d["steps_with_drops"].as_u64().unwrap();
    assert!((1..=20).contains(&steps_with_drops), "{p}");
    assert_eq!(
        d["steps_share"].as_f64().unwrap(),
        steps_with_drops as f64 / 20.0
    );
    assert_eq!(d["spans_dropped"], summary.spans_dropped);
    assert_eq!(d["workers"], 1);
    // The run has ended: no ETA, and it says why.
    assert_eq!(p["planned_steps"], 20);
    assert!(p["eta_s"].is_null());
    assert_eq!(p["eta_note"], "the run has ended");
    assert!(p["drops_note"].is_null());
    server.shutdown();
}

#[test]
fn a_progress_file_that_cannot_be_written_is_a_problem_of_the_summary_not_of_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // A folder where the progress file goes: every write of the progress file fails. (A file
    // in place of the progress folder would not do: a folder holding what a run does not own
    // is refused at start.)
    std::fs::create_dir_all(run.join("progress/worker_0.json")).unwrap();
    let mut session = builder(&run)
        .planned_steps(5)
        .progress_interval(Duration::ZERO)
        .start()
        .unwrap();
    for step in 0..5u64 {
        session.hook().save_scalar("loss", step as f64, &["losses"]);
        assert_eq!(session.step().unwrap().step, step);
    }
    let summary = session.finish().unwrap();
    assert_eq!(summary.steps, 5);
    assert_eq!(summary.records_written, 5, "{summary}");
    let problem = summary
        .problems
        .iter()
        .find(|p| p.starts_with("progress file: "))
        .unwrap_or_else(|| panic!("no progress problem: {summary}"));
    assert!(problem.contains("progress/worker_0.json"), "{problem}");
}
