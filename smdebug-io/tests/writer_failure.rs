//! The writer when storage fails or is slow: capture is disabled with one clear error, the
//! training side never blocks (drop policy) and counts what it dropped, and dropping the writer
//! flushes.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use smdebug_core::{EndReason, Mode, Record, Sink, StepKey, Tensor, TensorRecord};
use smdebug_format::layout;
use smdebug_io::Error;
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_storage::testing::wait_until;
use smdebug_storage::{Storage, StorageOptions, open_storage, open_storage_with};
use smdebug_testkit::storage::{Intercepted, WriteGate};

fn tensor(name: &str, step: u64, values: usize) -> Record {
    Record::Tensor(TensorRecord {
        name: name.to_string(),
        key: StepKey {
            step,
            mode: Mode::Train,
            mode_step: step,
        },
        tensor: Tensor::from_vec(&vec![1.0f32; values], vec![values]).unwrap(),
        to_events: true,
        tb_histogram: false,
        tb_scalar: false,
    })
}

/// Local storage whose `events` folder is replaced by a plain file: every event-file write fails
/// (even for root, which ignores read-only permissions).
fn broken_local_run() -> (tempfile::TempDir, Arc<dyn Storage>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("events"), b"not a folder").unwrap();
    let store = open_storage(dir.path().to_str().unwrap()).unwrap();
    (dir, store)
}

#[test]
fn a_failing_disk_disables_capture_with_one_error_and_sending_never_blocks() {
    let (dir, store) = broken_local_run();
    let mut writer = Writer::builder(store).queue_capacity(8).build().unwrap();
    let status = writer.status();
    writer.send(tensor("w", 0, 16));
    writer.send(Record::EndStep { step: 0 });
    // Wait for the failure, then keep "training": every send returns at once.
    wait_until(Duration::from_secs(30), "the failure to be noticed", || {
        status.is_disabled()
    });
    let error = status.error().unwrap();
    assert!(
        error.contains("events/000000000000/000000000000_worker_0.tfevents"),
        "{error}"
    );
    assert!(error.contains("local disk"), "{error}");
    let started = Instant::now();
    for step in 1..2000 {
        writer.send(tensor("w", step, 16));
        writer.send(Record::EndStep { step });
    }
    writer.send(Record::Close(EndReason::Completed));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "sending took {:?}",
        started.elapsed()
    );
    // flush reports the disabled state; the error stays the first one.
    match writer.flush(Duration::from_secs(10)) {
        Err(Error::CaptureDisabled(msg)) => assert_eq!(msg, error),
        other => panic!("{other:?}"),
    }
    assert_eq!(status.error().unwrap(), error);
    assert_eq!(
        status.dropped() + status.discarded(),
        2000,
        "every tensor is accounted for"
    );
    assert_eq!(status.steps_written(), 0);
    drop(writer);
    // Nothing was published: no index file without its event file, no end marker.
    assert!(!dir.path().join("index").exists());
    assert!(!dir.path().join(layout::END_MARKER).exists());
}

/// Run in a child process by the test below, which reads its stderr. The writer logs through
/// the `log` facade; the child installs a logger that writes to stderr, as an application does.
#[test]
fn child_failing_writer_scenario() {
    if std::env::var_os("SMDEBUG_IO_CHILD_SCENARIO").is_none() {
        return;
    }
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .target(env_logger::Target::Stderr)
        .init();
    let (_dir, store) = broken_local_run();
    let mut writer = Writer::builder(store).build().unwrap();
    for step in 0..50 {
        writer.send(tensor("w", step, 4));
        writer.send(Record::EndStep { step });
    }
    writer.send(Record::Close(EndReason::Completed));
    let _ = writer.flush(Duration::from_secs(10));
}

#[test]
fn the_storage_error_is_logged_to_stderr_exactly_once() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_failing_writer_scenario",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SMDEBUG_IO_CHILD_SCENARIO", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("smdebug: capture disabled"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("events/000000000000"), "{}", lines[0]);
}

#[test]
fn an_unreachable_object_store_disables_capture_without_blocking_training() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let opts = StorageOptions {
        from_env: false,
        max_retries: 1,
        ..Default::default()
    }
    .with("aws_endpoint", format!("http://127.0.0.1:{port}"))
    .with("aws_allow_http", "true")
    .with("aws_access_key_id", "x")
    .with("aws_secret_access_key", "x")
    .with("aws_region", "us-east-1");
    let store = open_storage_with("s3://down/run", &opts).unwrap();
    let mut writer = Writer::builder(store).queue_capacity(4).build().unwrap();
    let status = writer.status();
    let started = Instant::now();
    for step in 0..500 {
        writer.send(tensor("w", step, 1000));
        writer.send(Record::EndStep { step });
    }
    let sending = started.elapsed();
    assert!(sending < Duration::from_secs(2), "sending took {sending:?}");
    let _ = writer.flush(Duration::from_secs(30));
    assert!(status.is_disabled());
    let err = status.error().unwrap();
    assert!(
        err.contains("s3://down/run") && err.contains("put"),
        "{err}"
    );
    assert_eq!(status.steps_written(), 0);
    assert_eq!(
        status.dropped() + status.discarded(),
        500,
        "every tensor is accounted for"
    );
}

#[test]
fn a_full_queue_drops_and_counts_with_the_drop_policy() {
    let mem = open_storage("memory://writer-failure/drops").unwrap();
    let gated = Intercepted::new(mem.clone(), WriteGate::default());
    let mut writer = Writer::builder(gated.clone())
        .queue_capacity(5)
        .build()
        .unwrap();
    let status = writer.status();
    // Step 0 reaches storage and the writer thread waits at the gate.
    writer.send(tensor("w", 0, 4));
    writer.send(Record::EndStep { step: 0 });
    gated.wait_for_writer();
    let started = Instant::now();
    for i in 0..105 {
        writer.send(tensor(&format!("t{i}"), 1, 4));
    }
    writer.send(Record::EndStep { step: 1 });
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "sending blocked for {:?}",
        started.elapsed()
    );
    assert_eq!(
        status.dropped(),
        100,
        "5 fit in the queue, 100 were dropped"
    );
    gated.open();
    writer.flush(Duration::from_secs(10)).unwrap();
    assert_eq!(status.steps_written(), 2);
    // The step still ends: its end marker was not dropped with its tensors.
    let idx = mem.get(&layout::index_file(1, "worker_0")).unwrap();
    let idx = smdebug_format::IndexFile::parse(&idx, "i").unwrap();
    assert_eq!(idx.tensor_payload.len(), 5);
    assert_eq!(status.dropped(), 100);
}

#[test]
fn the_byte_budget_bounds_the_queue_too() {
    let gated = Intercepted::new(
        open_storage("memory://writer-failure/bytes").unwrap(),
        WriteGate::default(),
    );
    let mut writer = Writer::builder(gated.clone())
        .queue_capacity(1000)
        .max_queued_bytes(10_000)
        .build()
        .unwrap();
    let status = writer.status();
    writer.send(tensor("w", 0, 4));
    writer.send(Record::EndStep { step: 0 });
    gated.wait_for_writer();
    for i in 0..10 {
        writer.send(tensor(&format!("t{i}"), 1, 1000)); // 4000 bytes each
    }
    assert_eq!(status.dropped(), 8, "two 4 kB tensors fit in 10 kB");
    gated.open();
}

#[test]
fn the_block_policy_waits_for_room_instead_of_dropping() {
    let gated = Intercepted::new(
        open_storage("memory://writer-failure/block").unwrap(),
        WriteGate::default(),
    );
    let mut writer = Writer::builder(gated.clone())
        .queue_capacity(2)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    let status = writer.status();
    writer.send(tensor("w", 0, 4));
    writer.send(Record::EndStep { step: 0 });
    gated.wait_for_writer();
    let opened = Arc::new(AtomicBool::new(false));
    let opener = {
        let gated = gated.clone();
        let opened = Arc::clone(&opened);
        std::thread::spawn(move || {
            // workload: a stall of the storage, long enough for the sends below to fill the
            // queue; they must then wait for it (and the test passes however long they took).
            std::thread::sleep(Duration::from_millis(300));
            opened.store(true, Ordering::SeqCst);
            gated.open();
        })
    };
    for i in 0..10 {
        writer.send(tensor(&format!("t{i}"), 1, 4));
    }
    // Ten records into a queue of two while the storage is stuck: the sends returned only
    // once it was opened.
    assert!(
        opened.load(Ordering::SeqCst),
        "the sends returned while the storage was stuck"
    );
    opener.join().unwrap();
    writer.send(Record::EndStep { step: 1 });
    writer.flush(Duration::from_secs(10)).unwrap();
    assert_eq!(status.dropped(), 0);
    assert_eq!(status.records_written(), 11);
}

#[test]
fn dropping_the_writer_flushes_what_is_queued() {
    let mem = open_storage("memory://writer-failure/drop-flushes").unwrap();
    let gated = Intercepted::new(mem.clone(), WriteGate::default());
    let mut writer = Writer::builder(gated.clone()).build().unwrap();
    let status = writer.status();
    for step in 0..20 {
        writer.send(tensor("w", step, 64));
        writer.send(Record::EndStep { step });
    }
    writer.send(Record::Close(EndReason::Completed));
    gated.wait_for_writer();
    let opener = std::thread::spawn(move || {
        // workload: a stall of the storage, which dropping the writer must wait out.
        std::thread::sleep(Duration::from_millis(100));
        gated.open();
    });
    drop(writer);
    opener.join().unwrap();
    assert_eq!(status.steps_written(), 20);
    assert_eq!(mem.list(layout::INDEX_DIR).unwrap().len(), 20);
    assert!(mem.size(layout::END_MARKER).unwrap().is_some());
}

#[test]
fn dropping_a_writer_stuck_on_storage_gives_up_after_the_shutdown_timeout() {
    let gated = Intercepted::new(
        open_storage("memory://writer-failure/stuck").unwrap(),
        WriteGate::default(),
    );
    let mut writer = Writer::builder(gated.clone())
        .shutdown_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    writer.send(tensor("w", 0, 4));
    writer.send(Record::EndStep { step: 0 });
    gated.wait_for_writer();
    let started = Instant::now();
    drop(writer);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    gated.open(); // let the thread finish
}
