//! Special files in a run: only regular files inside the run are read. A FIFO in place of an
//! index file is an error naming it (never a hang), a link to `/dev/zero` or out of the run is
//! refused naming it, and a link inside the run reads like the file it points at.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use smdebug_format::layout;
use smdebug_read::Trial;
use smdebug_storage::open_storage;
use smdebug_testkit::files::copy_tree;

/// A copy of Python smdebug's golden run `pysmdebug_multi`.
fn golden_copy() -> (tempfile::TempDir, PathBuf) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden/pysmdebug_multi");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&src, &run);
    (dir, run)
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

/// `f()` on a thread, failing the test (instead of hanging it) when it takes over 30 s.
fn within_30s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("hung on a special file")
}

/// The first index file of the run, relative.
fn first_index(run: &Path) -> String {
    let store = open_storage(run.to_str().unwrap()).unwrap();
    store.list("index").unwrap().into_iter().next().unwrap()
}

#[test]
fn a_fifo_in_place_of_an_index_file_is_an_error_naming_it_not_a_hang() {
    let (_dir, run) = golden_copy();
    let index = first_index(&run);
    std::fs::remove_file(run.join(&index)).unwrap();
    mkfifo(&run.join(&index));
    let location = run.to_str().unwrap().to_string();
    let err = within_30s(move || Trial::open(&location).err())
        .expect("a run with a FIFO for an index file opened");
    let text = err.to_string();
    assert!(text.contains(&index), "{text}");
    assert!(text.contains("FIFO"), "{text}");
    // Storage itself: a whole read and a range read.
    let location = run.to_str().unwrap().to_string();
    let (get, range) = within_30s(move || {
        let store = open_storage(&location).unwrap();
        (
            store.get(&index).unwrap_err().to_string(),
            store.get_range(&index, 0..10).unwrap_err().to_string(),
        )
    });
    assert!(
        get.contains("FIFO") && range.contains("FIFO"),
        "{get} / {range}"
    );
}

#[test]
fn links_out_of_the_run_and_devices_are_refused_links_inside_it_read() {
    let (dir, run) = golden_copy();
    let store = open_storage(run.to_str().unwrap()).unwrap();
    let index = first_index(&run);
    let original = store.get(&index).unwrap();
    // A link to a file inside the run reads as that file.
    let copy = run.join("index/copy.json");
    std::fs::write(&copy, &original).unwrap();
    std::fs::remove_file(run.join(&index)).unwrap();
    std::os::unix::fs::symlink(&copy, run.join(&index)).unwrap();
    assert_eq!(store.get(&index).unwrap(), original);
    // A link out of the run: refused, naming the file and where it points.
    let outside = dir.path().join("outside.json");
    std::fs::write(&outside, &original).unwrap();
    std::fs::remove_file(run.join(&index)).unwrap();
    std::os::unix::fs::symlink(&outside, run.join(&index)).unwrap();
    let err = store.get(&index).unwrap_err().to_string();
    assert!(
        err.contains(&index) && err.contains("outside the run"),
        "{err}"
    );
    assert!(Trial::open(run.to_str().unwrap()).is_err());
    // A link to /dev/zero: refused before anything is read.
    let event = layout::event_file(0, "worker_0");
    let zero = run.join("events/zero.tfevents");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let location = run.to_str().unwrap().to_string();
    let err = within_30s(move || {
        let store = open_storage(&location).unwrap();
        store.get("events/zero.tfevents").unwrap_err().to_string()
    });
    assert!(err.contains("events/zero.tfevents"), "{err}");
    assert!(err.contains("outside the run"), "{err}");
    std::fs::remove_file(&zero).unwrap();
    // A folder of the run that is a link out of it: what is under it is refused too.
    let elsewhere = dir.path().join("elsewhere");
    copy_tree(&run.join("events"), &elsewhere);
    std::fs::remove_dir_all(run.join("events")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, run.join("events")).unwrap();
    let err = store.get_range(&event, 0..8).unwrap_err().to_string();
    assert!(err.contains("outside the run"), "{err}");
}
