//! Special files where the profiler reader expects system-metrics files: a link to /dev/zero
//! or a FIFO is refused with an error naming it, quickly, without reading it (the link used to
//! be read until allocation failed).

#![cfg(unix)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use smdebug_profiler::reader::{ProfilerReader, SystemQuery};

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
