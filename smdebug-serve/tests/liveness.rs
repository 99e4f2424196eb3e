//! Fresh or flagged, through the API and the push stream: a job in a child process killed with
//! SIGKILL is "crashed" (its identity file names this host and a process id that is gone),
//! pushed without a request, with the steps a fresh read of the files gives; a run written on
//! another host whose heartbeat stopped is "stalled since" its last progress; the stream
//! pushes at least every heartbeat while nothing changes.

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use smdebug_format::progress::Progress;
use smdebug_io::jobs::{identity_here, now_s};
use smdebug_io::progress::write_progress;
use smdebug_read::trial::Trial;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use support::{events, get_json, spawn_child_job, wait_for};

/// The child process of the tests below (returns at once when run as a test).
#[test]
fn child_job() {
    support::child_job_main();
}

/// The next pushed state of run 0 that `f` accepts, within `limit`.
fn pushed(
    rx: &std::sync::mpsc::Receiver<Value>,
    limit: Duration,
    what: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let end = std::time::Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let push = rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no push with {what} within {limit:?}: {e}"));
        if f(&push["runs"][0]) {
            return push;
        }
    }
}

#[test]
fn a_job_killed_is_pushed_as_crashed_with_the_steps_a_fresh_read_gives() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut child = spawn_child_job(&run, "child_job");
    let location = run.to_str().unwrap().to_owned();
    let server = Server::start(ServeOptions::new(vec![location.clone()])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let rx = events(&url);

    // Live, its process running on this host.
    let live = pushed(&rx, Duration::from_secs(60), "a live run", |r| {
        r["phase"] == "live"
            && r["steps"].as_u64() > Some(10)
            && r["processes"][0]["state"] == "running"
    });
    let process = &live["runs"][0]["processes"][0];
    assert_eq!(process["pid"].as_u64(), Some(u64::from(child.id())));
    assert_eq!(process["host"], smdebug_io::jobs::host_name().as_str());
    assert!(live["server_time"].as_f64().unwrap() > 0.0);
    let heartbeat = live["heartbeat_s"].as_f64().unwrap();
    assert_eq!(heartbeat, 2.0);

    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no finish, no end marker
    child.wait().unwrap();

    // Pushed, not asked for: the stream says crashed, naming the process.
    let crashed = pushed(&rx, Duration::from_secs(30), "crashed", |r| {
        r["phase"] == "crashed"
    });
    let r = &crashed["runs"][0];
    let note = r["phase_note"].as_str().unwrap();
    assert!(
        note.contains(&format!("process {pid}")) && note.contains("no end marker"),
        "{note}"
    );
    assert_eq!(r["processes"][0]["state"], "gone");
    assert!(!r["complete"].as_bool().unwrap());

    // Once everything written is read, the dashboard's steps are a fresh read's.
    let api = wait_for(Duration::from_secs(30), "the backlog read", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["index_pending"] == 0).then_some(v)
    });
    let trial = Trial::open(&location).unwrap();
    let steps = trial.steps(None).unwrap();
    let api_run = &api["runs"][0];
    assert_eq!(api_run["phase"], "crashed");
    assert_eq!(api_run["steps"].as_u64(), Some(steps.len() as u64));
    assert_eq!(api_run["last_step"].as_u64(), steps.last().copied());
    // The next pushes say the same (and keep coming: the heartbeat, nothing having changed).
    let a = pushed(&rx, Duration::from_secs(10), "a push", |_| true);
    let b = pushed(&rx, Duration::from_secs(10), "another push", |_| true);
    for p in [&a, &b] {
        assert_eq!(p["runs"][0]["phase"], "crashed");
        assert_eq!(p["runs"][0]["steps"].as_u64(), Some(steps.len() as u64));
    }
    let gap = b["server_time"].as_f64().unwrap() - a["server_time"].as_f64().unwrap();
    assert!(gap > 0.0, "{gap}");
    // The steps done are the files': the most of the progress file's count (the loop's steps,
    // which may run ahead of the tensors stored when the job is killed) and the saved steps.
    let overview = get_json(&format!("{url}/api/runs/0/overview"));
    let progress = &overview["progress"];
    assert_eq!(progress["eta_s"], Value::Null);
    assert_eq!(progress["eta_note"], "no ETA: the run crashed");
    let store = smdebug_storage::open_storage(&location).unwrap();
    let files = smdebug_io::progress::read_run_progress(store.as_ref()).unwrap();
    let counted = files.progress.iter().map(|p| p.steps).max().unwrap();
    assert_eq!(
        progress["steps_done"].as_u64(),
        Some(counted.max(steps.last().unwrap() + 1)),
        "{progress}"
    );
}

#[test]
fn a_run_of_another_host_that_stopped_beating_is_stalled_since_its_last_progress() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let storage = Arc::new(LocalStorage::new(&run).unwrap());
    // A job of 30 steps whose files stay as a crash left them: no end marker (its finishing
    // progress file replaced by one of step 29, written five minutes ago).
    let job = support::start_job(
        storage.clone(),
        Some(&run),
        support::JobConfig {
            steps: 30,
            step_time: Duration::from_millis(2),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    );
    job.join();
    let _ = std::fs::remove_file(run.join(smdebug_format::layout::END_MARKER));
    let last = now_s() - 300.0;
    let mut p = Progress::new("worker_0");
    p.planned_steps = Some(100);
    p.steps = 33;
    p.last_step = Some(32);
    p.wall_time = last;
    write_progress(storage.as_ref(), &p).unwrap();
    // Its writer, on another host, beat for the last time 4 minutes ago.
    let mut id = identity_here("job".into(), "worker_0".into(), 0, 1);
    id.host = "trainer-elsewhere".into();
    id.pid = 4242;
    id.started = last - 60.0;
    id.heartbeat = last + 60.0;
    let key = id.key();
    smdebug_storage::Storage::put(
        storage.as_ref(),
        &key,
        serde_json::to_vec(&id).unwrap().into(),
    )
    .unwrap();

    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let r = wait_for(Duration::from_secs(30), "the run read", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["steps"].as_u64() == Some(33) && v["runs"][0]["processes"][0].is_object())
            .then_some(v["runs"][0].clone())
    });
    assert_eq!(r["phase"], "stalled", "{r}");
    assert_eq!(r["stalled_since"].as_f64(), Some(last), "{r}");
    assert_eq!(r["processes"][0]["state"], "silent");
    let note = r["phase_note"].as_str().unwrap();
    assert!(
        note.contains("trainer-elsewhere") && note.contains("cannot be looked up from this host"),
        "{note}"
    );
    let overview = get_json(&format!("{url}/api/runs/0/overview"));
    assert_eq!(
        overview["progress"]["eta_note"],
        "no ETA: the run is not advancing (stalled)"
    );

    // The same process beating again (a fresh heartbeat): no longer silent, but nothing has
    // advanced for five minutes, more than a minute: stalled all the same, since the same time.
    id.heartbeat = now_s();
    smdebug_storage::Storage::put(
        storage.as_ref(),
        &key,
        serde_json::to_vec(&id).unwrap().into(),
    )
    .unwrap();
    let r = wait_for(Duration::from_secs(30), "the heartbeat read", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["processes"][0]["state"] == "beating").then_some(v["runs"][0].clone())
    });
    assert_eq!(r["phase"], "stalled", "{r}");
    assert_eq!(r["stalled_since"].as_f64(), Some(last));
    assert!(
        r["phase_note"]
            .as_str()
            .unwrap()
            .contains("worker_0 on host trainer-elsewhere still beats"),
        "{r}"
    );
    // Its end marker arrives: ended, however old.
    smdebug_storage::Storage::put(
        storage.as_ref(),
        smdebug_format::layout::END_MARKER,
        "completed".into(),
    )
    .unwrap();
    wait_for(Duration::from_secs(30), "ended", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["phase"] == "ended").then_some(())
    });
}

/// A run of 30 steps whose files stay as a crash left them (no end marker), its progress file
/// saying its last step ended `ago` seconds ago; the folder.
fn stopped_run(dir: &std::path::Path, ago: f64) -> (std::path::PathBuf, f64) {
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let storage = Arc::new(LocalStorage::new(&run).unwrap());
    let job = support::start_job(
        storage.clone(),
        Some(&run),
        support::JobConfig {
            steps: 30,
            step_time: Duration::from_millis(2),
            sampler: false,
            start_delay: Duration::ZERO,
            slow_steps: Vec::new(),
        },
    );
    job.join();
    std::fs::remove_file(run.join(smdebug_format::layout::END_MARKER)).unwrap();
    let last = now_s() - ago;
    let mut p = Progress::new("worker_0");
    p.planned_steps = Some(100);
    p.steps = 33;
    p.last_step = Some(32);
    p.wall_time = last;
    write_progress(storage.as_ref(), &p).unwrap();
    (run, last)
}

#[test]
fn a_run_that_stops_writing_is_pushed_as_stalled_once_a_minute_has_passed() {
    let dir = tempfile::tempdir().unwrap();
    // Its last step ended 55 s ago: live when the page opens, stalled 5 s later with no file
    // changing, and the stream says so by itself.
    let (run, last) = stopped_run(dir.path(), 55.0);
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let rx = events(&url);
    let first = pushed(&rx, Duration::from_secs(30), "the run read", |r| {
        r["steps"].as_u64() == Some(33)
    });
    let before = first["runs"][0]["phase"].clone();
    let stalled = pushed(&rx, Duration::from_secs(30), "stalled", |r| {
        r["phase"] == "stalled"
    });
    let r = &stalled["runs"][0];
    // Unless the machine took the whole five seconds to read 33 steps, it was live first.
    eprintln!("phase when read: {before}");
    assert!(stalled["server_time"].as_f64().unwrap() - last > 60.0);
    assert_eq!(r["stalled_since"].as_f64(), Some(last));
    assert_eq!(r["stalled_after_s"].as_f64(), Some(60.0));
    let note = r["phase_note"].as_str().unwrap();
    assert!(
        note.contains("no identity files") && note.contains("nothing new for more than 60 s"),
        "{note}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_process_of_this_host_that_runs_but_does_not_advance_is_stalled_not_crashed() {
    let dir = tempfile::tempdir().unwrap();
    let (run, last) = stopped_run(dir.path(), 300.0);
    // Its writer: a process of this host that still runs (hung), beating.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    let mut id = identity_here("job".into(), "worker_0".into(), 0, 1);
    id.pid = sleeper.id();
    let storage = LocalStorage::new(&run).unwrap();
    smdebug_storage::Storage::put(&storage, &id.key(), serde_json::to_vec(&id).unwrap().into())
        .unwrap();
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let r = wait_for(Duration::from_secs(30), "the run read", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["processes"][0]["state"] == "running").then_some(v["runs"][0].clone())
    });
    assert_eq!(r["phase"], "stalled", "{r}");
    assert_eq!(r["stalled_since"].as_f64(), Some(last));
    let note = r["phase_note"].as_str().unwrap();
    assert!(
        note.contains(&format!("process {} still runs on this host", sleeper.id())),
        "{note}"
    );
    // It is killed: crashed, its identity file not marked finished.
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let r = wait_for(Duration::from_secs(30), "crashed", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["phase"] == "crashed").then_some(v["runs"][0].clone())
    });
    assert_eq!(r["processes"][0]["state"], "gone");
    // Had it marked its file finished before it exited, it would not be crashed: stalled,
    // with no end marker stored.
    id.finished = true;
    smdebug_storage::Storage::put(&storage, &id.key(), serde_json::to_vec(&id).unwrap().into())
        .unwrap();
    let r = wait_for(Duration::from_secs(30), "finished", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["processes"][0]["state"] == "finished").then_some(v["runs"][0].clone())
    });
    assert_eq!(r["phase"], "stalled", "{r}");
    assert!(
        r["phase_note"]
            .as_str()
            .unwrap()
            .contains("marked themselves finished, but no end marker was stored"),
        "{r}"
    );
}
