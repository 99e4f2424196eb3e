//! A session writes into a folder a person named: it never costs them a file, and never passes
//! off two jobs as one. A project folder (the demo's `--out` pointed at one, twice), a home-like
//! folder and a SageMaker `LocalPath` naming another folder are refused untouched; a folder
//! holding only a run is replaced with `overwrite(true)`, the run's files only; a job killed
//! with SIGKILL leaves a run that the next job refuses or replaces, never continues; a second
//! session of the same worker is refused while the first runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smdebug::io::sagemaker::ConfigSources;
use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug_storage::testing::wait_until;
use smdebug_testkit::files::{OUTSIDE_TEXT, project_folder, snapshot};

/// The demo's session: capture, sampling, spans, rules with the report into `report/`,
/// TensorBoard files, replacing an earlier run.
fn demo_like(run: &Path) -> SessionBuilder {
    Session::builder(run)
        .without_config_files()
        .overwrite(true)
        .save(SaveConfig::every(1))
        .tensorboard(true)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(200)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(200)))
        .rules(["LossNotDecreasing", "ProfilerReport"])
        .rules_poll_interval(Duration::from_millis(20))
        .report(ReportTarget::File(
            run.join("report").join("profiler-report.html"),
        ))
}

fn train(session: &mut Session, steps: u64) {
    session.set_mode(Mode::Train).unwrap();
    for step in session.data(0..steps) {
        let loss = session.forward(|| 1.0 / (step as f64 + 1.0));
        session.hook().save_scalar("loss", loss, &["losses"]);
        session.step().unwrap();
    }
}

#[test]
fn the_demo_twice_into_a_project_folder_is_refused_and_costs_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (project, outside) = project_folder(dir.path());
    let before = snapshot(&project);
    for _ in 0..2 {
        let err = demo_like(&project).start().unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("not a run's")
                && message.contains("README.md")
                && message.contains("src/")
                && message.contains("link (a symbolic link)"),
            "{message}"
        );
    }
    assert_eq!(
        snapshot(&project),
        before,
        "every file, folder and link as it was"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), OUTSIDE_TEXT);
}

#[test]
fn a_folder_holding_only_a_finished_run_is_replaced_and_nothing_else_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::write(dir.path().join("beside-the-run.txt"), "mine").unwrap();
    for steps in [12, 5] {
        let mut session = demo_like(&run).start().unwrap();
        train(&mut session, steps);
        let summary = session.finish().unwrap();
        assert!(summary.problems.is_empty(), "{summary}");
        assert!(run.join("report/profiler-report.html").is_file());
        // What the demo leaves is all the run's: the next start replaces it.
        let trial = Trial::open(run.to_str().unwrap()).unwrap();
        assert_eq!(trial.steps(None).unwrap(), (0..steps).collect::<Vec<_>>());
        assert!(
            trial.warnings().unwrap().is_empty(),
            "{:?}",
            trial.warnings()
        );
        assert_eq!(trial.jobs().unwrap().len(), 1, "one process wrote it");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("beside-the-run.txt")).unwrap(),
        "mine"
    );
    // Without overwrite an ended run is refused, naming what it holds.
    let err = Session::builder(&run)
        .without_config_files()
        .no_system()
        .start()
        .unwrap_err();
    assert!(
        matches!(&err, smdebug::Error::RunExists { extent, .. } if extent.contains("5 steps (0 to 4)")),
        "{err}"
    );
}

#[test]
fn a_sagemaker_local_path_naming_a_folder_of_other_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    for f in ["a.csv", "b.csv", "c.csv"] {
        std::fs::write(theirs.join(f), "1,2,3\n").unwrap();
    }
    let profiler_file = dir.path().join("profilerconfig.json");
    std::fs::write(
        &profiler_file,
        serde_json::json!({"ProfilingParameters": {"LocalPath": theirs.to_str().unwrap()}})
            .to_string(),
    )
    .unwrap();
    let before = snapshot(&theirs);
    let err = Session::builder(dir.path().join("run"))
        .config_files(ConfigSources::new(
            dir.path().join("no-hook.json"),
            &profiler_file,
        ))
        .overwrite(true)
        .no_system()
        .start()
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("a.csv") && message.contains("not a run's"),
        "{message}"
    );
    assert_eq!(snapshot(&theirs), before);
}

/// The child of the killed-job test: a session on `SESSION_CHILD_RUN` stepping until killed.
#[test]
#[ignore = "run as a child process by a_job_killed_with_sigkill_is_never_continued"]
fn child_session() {
    let Ok(run) = std::env::var("SESSION_CHILD_RUN") else {
        return;
    };
    let mut session = Session::builder(&run)
        .without_config_files()
        .no_system()
        .save(SaveConfig::every(1))
        .start()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let mut step = 0u64;
    while Instant::now() < until {
        session.hook().save_scalar("loss", step as f64, &["losses"]);
        session.step().unwrap();
        step += 1;
        // workload: a training step's time.
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_job_killed_with_sigkill_is_never_continued() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_session", "--exact", "--ignored", "--nocapture"])
        .env("SESSION_CHILD_RUN", &run)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Index files written whole (a write cut by the kill leaves a hidden temporary file).
    let steps_on_disk = || {
        std::fs::read_dir(run.join("index/000000000"))
            .map(|d| {
                d.filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    smdebug_format::layout::parse_index_file(&name.to_string_lossy()).is_some()
                })
                .count()
            })
            .unwrap_or(0)
    };
    wait_until(
        Duration::from_secs(60),
        "the child to write 60 steps",
        || steps_on_disk() >= 60,
    );
    // While it runs, no second session of its worker starts, replacing or not.
    let second = Session::builder(&run)
        .without_config_files()
        .no_system()
        .overwrite(true)
        .start()
        .unwrap_err()
        .to_string();
    assert!(
        second.contains("still writes the run") && second.contains(&format!("pid {}", child.id())),
        "{second}"
    );
    let status = Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();
    let killed_steps = steps_on_disk();
    assert!(!run.join("training_job_end.ts").exists());

    let rerun = || {
        Session::builder(&run)
            .without_config_files()
            .no_system()
            .save(SaveConfig::every(1))
    };
    let message = rerun().start().unwrap_err().to_string();
    assert!(
        message.contains("unfinished run")
            && message.contains(&format!("{killed_steps} steps (0 to {})", killed_steps - 1)),
        "{message}"
    );
    let mut session = rerun().overwrite(true).start().unwrap();
    train(&mut session, 7);
    session.finish().unwrap();
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), (0..7).collect::<Vec<_>>());
    assert!(trial.is_complete().unwrap());
    assert!(
        trial.warnings().unwrap().is_empty(),
        "{:?}",
        trial.warnings()
    );
}

#[test]
fn a_second_session_of_the_same_worker_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let builder = || {
        Session::builder(&run)
            .without_config_files()
            .no_system()
            .save(SaveConfig::every(1))
    };
    let mut first = builder().start().unwrap();
    train(&mut first, 3);
    for overwrite in [false, true] {
        let err = builder()
            .overwrite(overwrite)
            .start()
            .unwrap_err()
            .to_string();
        assert!(err.contains("still writes the run"), "{err}");
    }
    train(&mut first, 2);
    first.finish().unwrap();
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), (0..5).collect::<Vec<_>>());
    assert!(
        trial.warnings().unwrap().is_empty(),
        "{:?}",
        trial.warnings()
    );
}
