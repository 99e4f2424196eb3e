//! Special files where the profiler reader expects system-metrics files: a link to /dev/zero
//! or a FIFO is refused with an error naming it, quickly, without reading it (the link used to
//! be read until allocation failed). The follower (what the dashboard, the report and the
//! rules read through) names them as problems too, and reads a file with a line of a gigabyte
//! in bounded pieces, the line skipped and named.

#![cfg(unix)]

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use smdebug_read::follow::{DataProblem, ProfilerFollower};
use smdebug_read::profile::{
    MAX_SYSTEM_LINE_BYTES as MAX_LINE_BYTES, ProfilerReader, SYSTEM_READ_CHUNK as READ_CHUNK,
    SystemQuery,
};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::CountingStorage;

const LINE: &str = r#"{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 12.5, "Timestamp": 1764192000.5, "NodeId": "algo-1"}"#;

/// A run with one good system file of node algo-1 and `bad` as algo-2's file.
fn run_with(dir: &Path, bad: impl FnOnce(&Path)) -> String {
    let folder = dir.join("run/system/incremental/2026112621");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("1764192000.algo-1.json"), format!("{LINE}\n")).unwrap();
    bad(&folder.join("1764192000.algo-2.json"));
    dir.join("run").to_str().unwrap().to_string()
}

/// The samples of the run, or the error, on a thread: fails the test after 30 s instead of
/// hanging it.
fn samples(run: String) -> Result<usize, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let read = ProfilerReader::open(&run)
            .and_then(|r| r.system_samples(&SystemQuery::default()))
            .map(|s| s.len())
            .map_err(|e| e.to_string());
        let _ = tx.send(read);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the reader hung on a special file")
}

#[test]
fn a_link_to_dev_zero_as_a_system_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with(dir.path(), |p| {
        std::os::unix::fs::symlink("/dev/zero", p).unwrap()
    });
    let err = samples(run).expect_err("/dev/zero read as a system file");
    assert!(err.contains("1764192000.algo-2.json"), "{err}");
    assert!(err.contains("outside the run"), "{err}");
}

#[test]
fn a_fifo_as_a_system_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with(dir.path(), |p| {
        let made = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(made.success());
    });
    let err = samples(run).expect_err("a FIFO read as a system file");
    assert!(
        err.contains("1764192000.algo-2.json") && err.contains("FIFO"),
        "{err}"
    );
}

#[test]
fn a_link_to_a_system_file_inside_the_run_reads() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with(dir.path(), |p| {
        let target = p.with_file_name("1764192000.algo-1.json");
        std::os::unix::fs::symlink(target, p).unwrap()
    });
    assert_eq!(samples(run), Ok(2));
}

/// Two polls of a follower over the run, on a thread (fails the test after 30 s instead of
/// hanging it): the samples read and the problems named.
fn follow(run: String) -> (usize, Vec<DataProblem>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());
        let mut follower = ProfilerFollower::new(storage);
        let mut samples = follower.read_to_end().samples.len();
        samples += follower.poll().samples.len();
        let _ = tx.send((samples, follower.problems().list().to_vec()));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the follower hung on a special file")
}

fn mkfifo(p: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(made.success());
}

#[test]
fn the_follower_names_a_fifo_or_a_device_as_a_system_file_and_reads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = run_with(dir.path(), mkfifo);
    let other = tempfile::tempdir().unwrap();
    let zero = run_with(other.path(), |p| {
        std::os::unix::fs::symlink("/dev/zero", p).unwrap()
    });
    for (run, kind) in [(fifo, "FIFO"), (zero, "outside the run")] {
        let (samples, problems) = follow(run);
        // The good file's one sample is read.
        assert_eq!(samples, 1, "{problems:?}");
        let named = problems.iter().any(|p| {
            let text = p.to_string();
            matches!(p, DataProblem::Unreadable { key, .. } if key.ends_with("1764192000.algo-2.json"))
                && text.contains(kind)
        });
        assert!(named, "{kind}: {problems:?}");
    }
}

#[test]
fn a_gigabyte_line_without_a_newline_is_read_in_bounded_pieces_skipped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("system/incremental/2026112621");
    std::fs::create_dir_all(&folder).unwrap();
    // algo-1: a good line, then a sparse gigabyte of zero bytes without a newline.
    let big = folder.join("1764192000.algo-1.json");
    std::fs::write(&big, format!("{LINE}\n")).unwrap();
    let file = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
    file.set_len(1 << 30).unwrap();
    drop(file);
    // algo-2: a line of twice the limit, then a good line (its timestamp a second later).
    let later = LINE.replace("1764192000.5", "1764192001.5");
    let long = format!(
        "{}\n{}\n",
        "x".repeat(2 * MAX_LINE_BYTES),
        later.replace("algo-1", "algo-2")
    );
    std::fs::write(folder.join("1764192000.algo-2.json"), long).unwrap();

    let counting = Arc::new(CountingStorage::new(Arc::new(
        LocalStorage::new(dir.path()).unwrap(),
    )));
    let storage: Arc<dyn Storage> = counting.clone();
    let mut follower = ProfilerFollower::new(storage);
    let first = follower.read_to_end();
    assert_eq!(first.samples.len(), 2, "{:?}", follower.problems());
    // Never more than a chunk held at once (the default limits, not a test setting).
    let calls = counting.calls();
    assert!(calls.largest_read <= READ_CHUNK, "{calls:?}");
    assert!(
        calls.bytes >= 1 << 30,
        "the gigabyte is read through: {calls:?}"
    );
    let problems = follower.problems().list();
    for (key, line) in [("algo-1", 2), ("algo-2", 1)] {
        assert!(
            problems.iter().any(|p| matches!(p,
                DataProblem::BadLines { key: k, first_line, first_message, .. }
                    if k.ends_with(&format!("1764192000.{key}.json")) && *first_line == line
                        && first_message.contains("longer than"))),
            "{key}: {problems:?}"
        );
    }
    // Nothing changed: the next poll reads nothing again.
    let before = counting.calls();
    assert_eq!(follower.poll().samples.len(), 0);
    let after = counting.calls();
    assert_eq!((after.gets, after.ranges), (before.gets, before.ranges));
    // The line ends and a record follows: read from where the skipping stopped.
    let mut f = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
    std::io::Write::write_all(
        &mut f,
        format!("\n{}\n", LINE.replace("12.5", "13.5")).as_bytes(),
    )
    .unwrap();
    let next = follower.poll();
    assert_eq!(next.samples.len(), 1, "{:?}", follower.problems());
    assert!(counting.calls().bytes - after.bytes < 4096);
}

#[test]
fn the_strict_reader_refuses_a_gigabyte_line_naming_it_in_bounded_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with(dir.path(), |p| {
        std::fs::write(p, format!("{}\n", LINE.replace("algo-1", "algo-2"))).unwrap();
        let file = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        file.set_len(1 << 30).unwrap();
    });
    let counting = Arc::new(CountingStorage::new(Arc::new(
        LocalStorage::new(&run).unwrap(),
    )));
    let reader = ProfilerReader::new(counting.clone());
    let err = reader
        .system_samples(&SystemQuery::default())
        .expect_err("a gigabyte line read as a record")
        .to_string();
    assert!(
        err.contains("1764192000.algo-2.json")
            && err.contains("line 2")
            && err.contains("longer than"),
        "{err}"
    );
    let calls = counting.calls();
    assert!(calls.largest_read <= READ_CHUNK, "{calls:?}");
    assert!(calls.bytes <= 2 * READ_CHUNK, "{calls:?}");
}
