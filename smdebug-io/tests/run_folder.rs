//! What a new job may do with the folder (or object-store prefix) a person named: a folder
//! holding anything that is not a run's is refused and left exactly as it was; a folder holding
//! only a run is replaced when asked, its own files only; a killed job's unfinished run is
//! refused or replaced, never continued; a second live writer of a worker is refused, and
//! readers flag a run whose files came from two jobs. On local disk and on S3 (moto).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_core::{
    EndReason, Hook, Mode, Record, SaveConfig, Sink, StepKey, Tensor, TensorRecord,
};
use smdebug_format::jobs::JobIdentity;
use smdebug_format::layout;
use smdebug_io::Error;
use smdebug_io::jobs::{JobClaim, identity_here};
use smdebug_io::run_folder::{self, ClaimRequest, FolderState, Refusal};
use smdebug_io::writer::Writer;
use smdebug_read::Trial;
use smdebug_read::TrialOptions;
use smdebug_storage::testing::{CountingStorage, MotoServer, wait_until};
use smdebug_storage::{Storage, open_storage, open_storage_with};
use smdebug_testkit::files::{OUTSIDE_TEXT, project_folder, snapshot};

/// Writes `steps` steps of a loss and a weight (of `width` values) as worker `rank`, ending
/// the run when `end`.
fn write_steps(storage: Arc<dyn Storage>, rank: usize, steps: u64, width: usize, end: bool) {
    let mut writer = Writer::builder(storage).worker_rank(rank).build().unwrap();
    let record = |name: &str, step: u64, tensor: Tensor| {
        Record::Tensor(TensorRecord {
            name: name.into(),
            key: StepKey {
                step,
                mode: Mode::Train,
                mode_step: step,
            },
            tensor,
            to_events: true,
            tb_histogram: false,
            tb_scalar: false,
        })
    };
    for step in 0..steps {
        let loss = Tensor::from_vec(&[1.0f32 / (step as f32 + 1.0)], vec![]).unwrap();
        writer.send(record("loss", step, loss));
        let weight = Tensor::from_vec(&vec![0.5f32; width], vec![width]).unwrap();
        writer.send(record("fc1.weight", step, weight));
        writer.send(Record::EndStep { step });
    }
    if end {
        writer.send(Record::Close(EndReason::Completed));
    }
    drop(writer);
}

/// A finished run with every folder and marker a session writes, each with a file in it.
fn finished_run(storage: Arc<dyn Storage>) {
    write_steps(storage.clone(), 0, 3, 4, true);
    for (key, body) in [
        ("progress/worker_0.json", "{}"),
        ("system/incremental/2026112820/1795000000.algo-1.json", "{}"),
        (
            "framework/pevents/2026112820/1795000000000000_0-algo-1_pythontimeline.json",
            "[]",
        ),
        ("rules/rule_job_summary.json", "{}"),
        (
            "rules/ProfilerReport/profiler-output/profiler-report.html",
            "<p>",
        ),
        ("report/profiler-report.html", "<p>"),
        ("stop_request.json", "{}"),
    ] {
        storage.put(key, body.as_bytes().to_vec().into()).unwrap();
    }
    let mut claim = JobClaim::start(
        storage,
        identity_here("old-job".into(), "worker_0".into(), 0, 1),
    )
    .unwrap();
    claim.finish().unwrap();
}

fn request(overwrite: bool) -> ClaimRequest {
    ClaimRequest {
        job: None,
        overwrite,
        ..ClaimRequest::new(0, 1)
    }
}

fn refusal(result: Result<JobClaim, Error>) -> Refusal {
    match result {
        Err(Error::Refused { refusal, .. }) => *refusal,
        Err(e) => panic!("refused with another error: {e}"),
        Ok(claim) => panic!("claimed: {claim:?}"),
    }
}

#[test]
fn a_project_folder_is_refused_and_nothing_in_it_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let (project, outside) = project_folder(dir.path());
    let location = project.to_str().unwrap();
    // A run written into it before (a demo started there): the folder is still the person's.
    finished_run(open_storage(location).unwrap());
    let before = snapshot(&project);
    for overwrite in [false, true] {
        let storage = open_storage(location).unwrap();
        match refusal(run_folder::claim(storage, &request(overwrite))) {
            Refusal::Foreign(f) => {
                let named = f.entries.join(" ");
                for entry in ["README.md", "src/", "link (a symbolic link)"] {
                    assert!(named.contains(entry), "{entry} is named: {named}");
                }
            }
            other => panic!("not refused as foreign: {other:?}"),
        }
    }
    let err = run_folder::claim(open_storage(location).unwrap(), &request(true)).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("not a run's") && message.contains("nothing was deleted"),
        "{message}"
    );
    assert_eq!(
        snapshot(&project),
        before,
        "not one file of the folder changed"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), OUTSIDE_TEXT);
}

#[test]
fn a_home_like_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/app")).unwrap();
    std::fs::write(home.join(".bashrc"), "export A=1\n").unwrap();
    std::fs::write(home.join(".config/app/settings"), "x").unwrap();
    // Even a folder whose only other entry is hidden is not a run's.
    let before = snapshot(&home);
    let err = run_folder::claim(
        open_storage(home.to_str().unwrap()).unwrap(),
        &request(true),
    );
    assert!(matches!(refusal(err), Refusal::Foreign(_)));
    assert_eq!(snapshot(&home), before);
}

#[test]
fn a_link_or_fifo_inside_the_runs_folders_makes_it_foreign_and_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let location = run.to_str().unwrap();
    finished_run(open_storage(location).unwrap());
    // A link in place of a folder of the run, pointing at a folder of someone else's.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("thesis.tex"), "chapter 1").unwrap();
    std::os::unix::fs::symlink(&theirs, run.join("events/000000000099")).unwrap();
    let before = snapshot(dir.path());
    match refusal(run_folder::claim(
        open_storage(location).unwrap(),
        &request(true),
    )) {
        Refusal::Foreign(f) => assert_eq!(
            f.entries,
            vec!["events/000000000099 (a symbolic link)".to_string()]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    std::fs::remove_file(run.join("events/000000000099")).unwrap();
    rustix_mkfifo(&run.join("index/fifo"));
    assert!(matches!(
        refusal(run_folder::claim(open_storage(location).unwrap(), &request(true))),
        Refusal::Foreign(f) if f.entries == ["index/fifo (a FIFO)"]
    ));
}

fn rustix_mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn a_folder_holding_only_a_finished_run_is_replaced_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let location = run.to_str().unwrap();
    std::fs::write(dir.path().join("beside.txt"), "a sibling").unwrap();
    finished_run(open_storage(location).unwrap());
    // An interrupted write of the end marker leaves a hidden temporary file: the run's.
    std::fs::write(run.join(".training_job_end_ts.77-0.tmp"), "").unwrap();
    let before = snapshot(dir.path());
    match refusal(run_folder::claim(
        open_storage(location).unwrap(),
        &request(false),
    )) {
        Refusal::Ended(extent) => {
            assert_eq!(extent.steps, Some((0, 2)));
            let text = extent.to_string();
            assert!(text.contains("3 steps (0 to 2) of worker_0"), "{text}");
            assert!(text.contains("job old-job"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before, "refused: nothing deleted");

    let claim = run_folder::claim(open_storage(location).unwrap(), &request(true)).unwrap();
    let after = snapshot(dir.path());
    let left: Vec<String> = after
        .keys()
        .map(|p| p.display().to_string())
        .filter(|p| !p.starts_with("run/jobs"))
        .collect();
    assert_eq!(left, ["beside.txt", "run"], "only the run's own files went");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("beside.txt")).unwrap(),
        "a sibling"
    );
    let id = claim.identity();
    assert!(
        run.join(id.key()).is_file(),
        "the new job's identity is there"
    );
    drop(claim);
}

#[test]
fn an_empty_folder_and_a_missing_one_take_a_run() {
    let (missing, empty) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for run in [missing.path().join("missing"), empty.path().to_path_buf()] {
        let storage = open_storage(run.to_str().unwrap()).unwrap();
        assert_eq!(
            run_folder::inspect(storage.as_ref()).unwrap(),
            FolderState::Empty
        );
        let mut claim = run_folder::claim(storage, &request(false)).unwrap();
        claim.finish().unwrap();
    }
}

/// The child process of the killed-job tests: claims the run named by `RUN_FOLDER_CHILD` and
/// writes a step every few milliseconds until it is killed (or 60 s pass).
#[test]
#[ignore = "run as a child process by the killed-job tests"]
fn child_writer() {
    let Ok(location) = std::env::var("RUN_FOLDER_CHILD") else {
        return;
    };
    let storage = open_storage(&location).unwrap();
    let _claim = run_folder::claim(storage.clone(), &request(false)).unwrap();
    let writer = Writer::builder(storage).build().unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let mut step = 0u64;
    while Instant::now() < until {
        hook.save_scalar("loss", step as f64, &["losses"]);
        hook.step();
        step += 1;
        // workload: a training step's time.
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn start_child(location: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_writer", "--exact", "--ignored", "--nocapture"])
        .env("RUN_FOLDER_CHILD", location)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until the child's run has `steps` index files.
fn wait_for_steps(storage: &dyn Storage, steps: usize) {
    wait_until(
        Duration::from_secs(30),
        &format!("the child to write {steps} steps"),
        || storage.list("index").unwrap().len() >= steps,
    );
}

fn kill_9(mut child: Child) {
    let status = Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();
}

#[test]
fn a_killed_jobs_run_is_refused_or_replaced_never_continued() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let location = run.to_str().unwrap();
    let child = start_child(location);
    let storage = open_storage(location).unwrap();
    wait_for_steps(storage.as_ref(), 40);
    kill_9(child);
    let old_steps = storage.list("index").unwrap().len();
    assert!(storage.size(layout::END_MARKER).unwrap().is_none());

    // Without being told to replace it: refused, naming what is there.
    let err = run_folder::claim(storage.clone(), &request(false)).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("unfinished run"), "{message}");
    assert!(
        message.contains(&format!("{old_steps} steps (0 to {})", old_steps - 1)),
        "{message}"
    );
    assert_eq!(
        storage.list("index").unwrap().len(),
        old_steps,
        "nothing deleted"
    );

    // Told to: the new job starts from empty, and the run reads as the new job's only.
    let mut claim = run_folder::claim(storage.clone(), &request(true)).unwrap();
    write_steps(storage.clone(), 0, 5, 4, true);
    claim.finish().unwrap();
    let trial = Trial::open(location).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 1, 2, 3, 4]);
    assert!(trial.is_complete().unwrap());
    assert!(
        trial.warnings().unwrap().is_empty(),
        "{:?}",
        trial.warnings()
    );
    assert_eq!(trial.jobs().unwrap().len(), 1);
}

#[test]
fn a_second_live_writer_of_a_worker_is_refused_even_when_told_to_replace() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let location = run.to_str().unwrap();
    let child = start_child(location);
    let storage = open_storage(location).unwrap();
    wait_for_steps(storage.as_ref(), 5);
    let pid = child.id();
    for overwrite in [false, true] {
        let err = run_folder::claim(storage.clone(), &request(overwrite)).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("still writes the run") && message.contains(&format!("pid {pid}")),
            "{message}"
        );
    }
    assert!(
        storage.list("index").unwrap().len() >= 5,
        "the live job's files stay"
    );
    kill_9(child);

    // In one process too: a second session of the same worker while the first runs.
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path().to_str().unwrap()).unwrap();
    let mut first = run_folder::claim(storage.clone(), &request(false)).unwrap();
    assert!(matches!(
        refusal(run_folder::claim(storage.clone(), &request(true))),
        Refusal::InUse { .. }
    ));
    first.finish().unwrap();
}

#[test]
fn readers_flag_a_run_whose_files_came_from_two_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    let storage = open_storage(location).unwrap();
    // Two jobs' files in one folder, as a writer that claims nothing (or an old version)
    // leaves them: 8 steps of the first with a 4-value weight, 3 of the second with 6 values.
    let mut a = JobClaim::start(
        storage.clone(),
        identity_here("job-a".into(), "worker_0".into(), 0, 1),
    )
    .unwrap();
    write_steps(storage.clone(), 0, 8, 4, false);
    a.finish().unwrap();
    let mut b = JobClaim::start(
        storage.clone(),
        identity_here("job-b".into(), "worker_0".into(), 0, 1),
    )
    .unwrap();
    write_steps(storage.clone(), 0, 3, 6, true);
    b.finish().unwrap();
    let trial = Trial::open(location).unwrap();
    let warnings = trial.warnings().unwrap();
    assert!(
        warnings[0].starts_with("the run holds the files of 2 jobs, read here as one")
            && warnings[0].contains("job-a")
            && warnings[0].contains("job-b"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].starts_with("worker_0 was written by 2 processes"),
        "{warnings:?}"
    );
    assert_eq!(trial.info().unwrap().warnings, warnings);
    assert_eq!(trial.jobs().unwrap().len(), 2);
}

#[test]
fn a_worker_of_rank_above_0_writes_nothing_before_rank_0_claimed_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("run");
    let location = location.to_str().unwrap().to_string();
    finished_run(open_storage(&location).unwrap());
    for shared in [Some("launcher-7".to_string()), None] {
        // Rank 1 starts first and waits; rank 0 replaces the old run, then claims it.
        let storage = open_storage(&location).unwrap();
        let before = storage.list("jobs").unwrap();
        let rank1_storage = Arc::new(CountingStorage::new(open_storage(&location).unwrap()));
        let rank1 = {
            let storage = Arc::clone(&rank1_storage) as Arc<dyn Storage>;
            let job = shared.clone();
            std::thread::spawn(move || {
                let req = ClaimRequest {
                    job,
                    join_poll: Duration::from_millis(10),
                    ..ClaimRequest::new(1, 2)
                };
                run_folder::claim(storage, &req)
            })
        };
        // Rank 1 looks for its chief a few times (each look lists the jobs) and waits.
        wait_until(
            Duration::from_secs(30),
            "rank 1 to look for its chief 3 times",
            || rank1_storage.calls().lists >= 3,
        );
        assert_eq!(
            storage.list("jobs").unwrap(),
            before,
            "rank 1 wrote nothing yet"
        );
        let req0 = ClaimRequest {
            job: shared.clone(),
            overwrite: true,
            ..ClaimRequest::new(0, 2)
        };
        let mut chief = run_folder::claim(storage.clone(), &req0).unwrap();
        let mut worker = rank1.join().unwrap().unwrap();
        assert_eq!(worker.identity().job, chief.identity().job, "one job");
        if let Some(job) = &shared {
            assert_eq!(&chief.identity().job, job);
        }
        assert!(
            storage.size(&worker.identity().key()).unwrap().is_some(),
            "rank 1's identity survived the replacement"
        );
        write_steps(storage.clone(), 0, 2, 4, false);
        write_steps(storage.clone(), 1, 2, 4, true);
        worker.finish().unwrap();
        chief.finish().unwrap();
        let trial = Trial::open(&location).unwrap();
        assert!(
            trial.warnings().unwrap().is_empty(),
            "{:?}",
            trial.warnings()
        );
        assert_eq!(trial.jobs().unwrap().len(), 2);
    }
    // No rank 0 at all: a clear error after the wait.
    let req = ClaimRequest {
        job: Some("nobody".into()),
        join_timeout: Duration::from_millis(200),
        ..ClaimRequest::new(1, 2)
    };
    let message = run_folder::claim(
        open_storage(dir.path().join("other").to_str().unwrap()).unwrap(),
        &req,
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("waited") && message.contains("worker_0"),
        "{message}"
    );
}

#[test]
fn on_s3_a_foreign_prefix_is_refused_and_a_run_replaced_without_touching_its_neighbours() {
    let moto = MotoServer::start();
    moto.create_bucket("work");
    let open = |url: &str| open_storage_with(url, &moto.options()).unwrap();
    // A project prefix: a person's files, and a run written into it before.
    let project = open("s3://work/project");
    for key in ["src/main.rs", "README.md"] {
        project.put(key, b"mine".to_vec().into()).unwrap();
    }
    finished_run(project.clone());
    let before = project.list("").unwrap();
    assert!(matches!(
        refusal(run_folder::claim(project.clone(), &request(true))),
        Refusal::Foreign(f) if f.entries == ["README.md", "src/main.rs"]
    ));
    assert_eq!(project.list("").unwrap(), before);

    // A prefix holding only a run, beside another whose name starts the same.
    let run = open("s3://work/runs/a");
    let neighbour = open("s3://work/runs/ab");
    finished_run(run.clone());
    neighbour.put("README.md", b"x".to_vec().into()).unwrap();
    finished_run(neighbour.clone());
    let neighbour_before = neighbour.list("").unwrap();
    assert!(matches!(
        refusal(run_folder::claim(run.clone(), &request(false))),
        Refusal::Ended(_)
    ));
    let mut claim = run_folder::claim(run.clone(), &request(true)).unwrap();
    let id = claim.identity();
    assert_eq!(run.list("").unwrap(), [id.key()]);
    assert_eq!(neighbour.list("").unwrap(), neighbour_before);
    claim.finish().unwrap();

    // A killed job's unfinished run on S3: refused, then replaced from empty.
    let killed = open("s3://work/runs/killed");
    write_steps(killed.clone(), 0, 12, 4, false);
    let dead = JobIdentity {
        pid: u32::MAX,
        ..identity_here("dead".into(), "worker_0".into(), 0, 1)
    };
    killed
        .put(&dead.key(), serde_json::to_vec(&dead).unwrap().into())
        .unwrap();
    assert!(matches!(
        refusal(run_folder::claim(killed.clone(), &request(false))),
        Refusal::Unfinished(e) if e.steps == Some((0, 11))
    ));
    let mut claim = run_folder::claim(killed.clone(), &request(true)).unwrap();
    write_steps(killed.clone(), 0, 2, 4, true);
    claim.finish().unwrap();
    let trial =
        Trial::from_storage("s3://work/runs/killed", killed, TrialOptions::default()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 1]);
    assert!(trial.warnings().unwrap().is_empty());

    // A writer on another host, beating: refused, replacing or not; once its heartbeat is
    // older than 20 s it counts as stopped and its run is replaced.
    let elsewhere = open("s3://work/runs/elsewhere");
    write_steps(elsewhere.clone(), 0, 4, 4, false);
    let mut live = identity_here("other-host-job".into(), "worker_0".into(), 0, 1);
    live.host = "another-host".into();
    let put = |id: &JobIdentity| {
        elsewhere
            .put(&id.key(), serde_json::to_vec(id).unwrap().into())
            .unwrap()
    };
    put(&live);
    for overwrite in [false, true] {
        assert!(matches!(
            refusal(run_folder::claim(elsewhere.clone(), &request(overwrite))),
            Refusal::InUse { writer, .. } if writer.contains("another-host")
        ));
    }
    live.heartbeat -= 30.0;
    put(&live);
    let mut claim = run_folder::claim(elsewhere.clone(), &request(true)).unwrap();
    assert_eq!(elsewhere.list("").unwrap(), [claim.identity().key()]);
    claim.finish().unwrap();
}

#[test]
fn a_link_put_in_place_of_a_runs_folder_after_the_look_is_not_followed_by_the_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let storage = open_storage(run.to_str().unwrap()).unwrap();
    finished_run(storage.clone());
    let FolderState::Run(extent) = run_folder::inspect(storage.as_ref()).unwrap() else {
        panic!("a run");
    };
    // Between the look and the deletion, someone puts a link to their own folder, holding
    // files of the same names, in place of one of the run's folders.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    let folder = run.join("index/000000000");
    for e in std::fs::read_dir(&folder).unwrap() {
        let e = e.unwrap();
        std::fs::write(theirs.join(e.file_name()), "theirs").unwrap();
    }
    std::fs::remove_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&theirs, &folder).unwrap();
    let before = snapshot(&theirs);
    assert_eq!(before.len(), 3);
    let err = run_folder::clear(storage.as_ref(), &extent).unwrap_err();
    assert!(err.to_string().contains("index/000000000/"), "{err}");
    assert_eq!(snapshot(&theirs), before, "nothing of theirs deleted");
}
