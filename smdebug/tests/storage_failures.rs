//! Sessions on storage that fails: a missing bucket, an ill-formed location, a read-only or
//! full disk, an S3 server that goes away mid-run. `start` refuses what cannot be written with
//! the storage's own reason; `finish` returns within the storage timeout (not the rules' 120 s)
//! with an error naming what was not stored; and every figure of the summary equals what is
//! actually in the store, counted object by object.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug_storage::Storage;
use smdebug_storage::testing::{MotoServer, s3_options, wait_until};

/// The storage timeout the sessions here are given.
const STORAGE_TIMEOUT: Duration = Duration::from_secs(5);

/// A generous bound proving `finish` does not wait out the rules' 120 s.
const NO_HANG: Duration = Duration::from_secs(40);

/// A session on `location` that saves a loss and a 32 KiB tensor at every step, publishes spans
/// in small files as they come, and follows the run with a rule (which, without an end marker,
/// would wait out its timeout).
fn session(location: &str) -> SessionBuilder {
    Session::builder(location)
        .without_config_files()
        .save(SaveConfig::every(1))
        .spans(
            SpanConfig::default()
                .max_file_bytes(4 << 10)
                .close_interval(Duration::from_secs(3600)),
        )
        .rule("LossNotDecreasing")
        .rules_poll_interval(Duration::from_millis(50))
        .report(ReportTarget::Off)
        .progress_interval(Duration::from_secs(3600))
        .storage_timeout(STORAGE_TIMEOUT)
}

/// One training step: a forward span, a loss and a weight tensor saved, the step ended.
fn train_step(session: &mut Session, step: usize, weights: &[f32]) {
    let loss = session.forward(|| 1.0 / (step as f64 + 1.0));
    let hook = session.hook();
    hook.save_scalar("loss", loss, &["losses"]);
    hook.save_tensor(
        "fc.weight",
        &TensorView::from_slice(weights, &[weights.len()]).unwrap(),
        &["weights"],
    );
    // A step whose capture failed still advances; the loop goes on.
    let _ = session.step();
}

/// What a store holds of a run, counted object by object.
#[derive(Debug, Default, PartialEq)]
struct Stored {
    steps: u64,
    records: u64,
    spans: u64,
    system_records: u64,
    end_marker: bool,
}

/// Waits until the server behind the proxy holds `steps` steps of the run `s3://bucket/run`.
fn wait_for_stored_steps(moto: &MotoServer, steps: u64) {
    let store = smdebug_storage::open_storage_with("s3://bucket/run", &moto.options()).unwrap();
    wait_until(
        Duration::from_secs(60),
        &format!("{steps} steps stored"),
        || count_stored(store.as_ref()).steps >= steps,
    );
}

fn count_stored(storage: &dyn Storage) -> Stored {
    let mut stored = Stored::default();
    for key in storage.list("index").unwrap() {
        let index: Value = serde_json::from_slice(&storage.get(&key).unwrap()).unwrap();
        stored.steps += 1;
        stored.records += index["tensor_payload"].as_array().unwrap().len() as u64;
    }
    for key in storage.list("framework/pevents").unwrap() {
        let events: Value = serde_json::from_slice(&storage.get(&key).unwrap()).unwrap();
        stored.spans += events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .count() as u64;
    }
    for key in storage
        .list(smdebug::format::system::SYSTEM_PREFIX)
        .unwrap()
    {
        let text = storage.get(&key).unwrap();
        stored.system_records += text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count() as u64;
    }
    stored.end_marker = storage.size("training_job_end.ts").unwrap().is_some();
    stored
}

/// What the readers report of the stored run: the `Trial` (which `smdebug info` prints) counts
/// the stored steps and no end; the progress file (the dashboard's writer tiles) never claims
/// more than is stored.
fn check_readers(storage: &Arc<dyn Storage>, stored: &Stored) {
    let trial = smdebug_read::trial::Trial::from_storage(
        storage.describe(),
        storage.clone(),
        smdebug_read::trial::TrialOptions::default(),
    )
    .unwrap();
    let info = trial.info().unwrap();
    assert_eq!(
        info.num_steps as u64, stored.steps,
        "the reader's steps are the stored steps: {info:?}"
    );
    assert_eq!(info.end_reason, None, "no end was stored");
    if let Some(p) = smdebug_io::progress::read_progress(storage.as_ref(), "worker_0").unwrap() {
        assert!(
            p.records_written <= stored.records && p.spans_written <= stored.spans,
            "the progress file claims no more than is stored: {p:?} {stored:?}"
        );
    }
}

/// The summary of a `finish` that failed because storage did; panics on anything else.
fn lost(result: Result<SessionSummary, Error>) -> (SessionSummary, String) {
    match result {
        Err(e @ Error::Lost(_)) => (e.summary().unwrap().clone(), e.to_string()),
        Err(e) => panic!("finish failed otherwise than with Lost: {e}"),
        Ok(s) => panic!("finish reported success on failed storage:\n{s}"),
    }
}

/// Checks the figures of a session whose storage failed against what `storage` holds.
fn check_figures(
    storage: &Arc<dyn Storage>,
    summary: &SessionSummary,
    message: &str,
    stored: &Stored,
) {
    assert_eq!(
        summary.records_written, stored.records,
        "records written = records in stored index files\n{summary}"
    );
    assert_eq!(
        summary.spans_written, stored.spans,
        "spans written = spans in stored trace files\n{summary}"
    );
    assert_eq!(
        summary.system_records, stored.system_records,
        "system records written = lines in stored system files\n{summary}"
    );
    assert!(!stored.end_marker, "the end marker cannot have been stored");
    assert!(!summary.end_marker_written, "{summary}");
    check_readers(storage, stored);
    assert!(
        summary.records_lost > 0 && summary.steps_lost > 0,
        "the steps after the failure are counted as lost\n{summary}"
    );
    assert!(
        message.contains("tensor records of") && message.contains("end marker"),
        "the error names what was lost: {message}"
    );
    assert!(
        message.contains(&format!(
            "{} tensor records of {} steps",
            summary.records_lost, summary.steps_lost
        )),
        "{message}"
    );
}

#[test]
fn a_missing_bucket_fails_start_naming_it() {
    let moto = MotoServer::start();
    moto.create_bucket("real-bucket");
    let started = Instant::now();
    let err = session("s3://no-such-bucket/run")
        .storage_options(moto.options())
        .start()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no such bucket") && text.contains("no-such-bucket"),
        "the error says the bucket does not exist: {text}"
    );
    assert!(matches!(err, Error::NotWritable { .. }), "{err:?}");
    assert!(
        started.elapsed() < NO_HANG,
        "refused in {:?}",
        started.elapsed()
    );
    // The bucket that exists takes the run.
    let mut s = session("s3://real-bucket/run")
        .storage_options(moto.options())
        .no_system()
        .start()
        .unwrap();
    train_step(&mut s, 0, &[1.0; 8]);
    let summary = s.finish().unwrap();
    assert_eq!(summary.records_written, 2, "{summary}");
    assert!(summary.end_marker_written);
}

#[test]
fn ill_formed_locations_are_refused_never_taken_as_local_folders() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::env::current_dir().unwrap();
    for location in ["s3:/bucket/x", "s3:bucket/x", "foo://x/run", "gs:/b/x"] {
        let err = session(location).start().unwrap_err();
        assert!(
            err.to_string().contains(location),
            "{location}: the error names the location: {err}"
        );
    }
    for leftover in ["s3:", "gs:", "foo:"] {
        assert!(
            !cwd.join(leftover).exists(),
            "a local folder `{leftover}` was created"
        );
    }
    let err = session("s3:/bucket/x").start().unwrap_err().to_string();
    assert!(err.contains("s3://bucket/x"), "says how to write it: {err}");
    let err = session("foo://x/run").start().unwrap_err().to_string();
    assert!(err.contains("unknown scheme"), "{err}");
    // A local folder whose name ends in `:` is still reachable, as a path.
    let local = dir.path().join("s3:").join("run");
    let s = session(local.to_str().unwrap())
        .no_system()
        .start()
        .unwrap();
    s.finish().unwrap();
    assert!(local.join("training_job_end.ts").exists());
}

#[test]
fn a_path_is_a_local_folder_whatever_its_characters() {
    // Text `s3://bucket/run` is an object store; a `PathBuf` spelled so is folders on disk
    // (`s3:`, `bucket`, `run`), never parsed as a URL.
    let dir = tempfile::tempdir().unwrap();
    let looks_like_a_url = dir.path().join("s3://bucket/run");
    let mut s = Session::builder(&looks_like_a_url)
        .no_system()
        .start()
        .unwrap();
    assert!(s.location().is_local(), "{}", s.location());
    train_step(&mut s, 0, &[1.0; 8]);
    s.finish().unwrap();
    let on_disk = dir.path().join("s3:").join("bucket").join("run");
    assert!(on_disk.join("training_job_end.ts").exists());
    let relative = PathBuf::from("s3://bucket/run");
    assert_eq!(
        smdebug::storage::IntoLocation::into_location(relative.clone()).unwrap(),
        smdebug::storage::Location::Local(relative)
    );
    assert!(
        !smdebug::storage::Location::parse("s3://bucket/run")
            .unwrap()
            .is_local()
    );
}

#[test]
fn a_plain_http_endpoint_without_allow_http_says_what_to_set() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let mut options = moto.options();
    options.options.remove("aws_allow_http");
    let err = session("s3://bucket/run")
        .storage_options(options)
        .start()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("AWS_ALLOW_HTTP") && !err.contains("builder error"),
        "the error names the setting: {err}"
    );
}

/// A TCP forwarder in front of moto. `kill` closes every connection and the listening socket,
/// so that to the session the server is gone (connections reset, then refused), while moto
/// keeps what was stored for the test to count.
struct Proxy {
    port: u16,
    /// Milliseconds each chunk of the server's answers waits before it is passed on.
    delay_ms: Arc<AtomicU64>,
    killed: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let killed = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (k, c, d) = (killed.clone(), conns.clone(), delay_ms.clone());
        let accept = std::thread::spawn(move || {
            // Blocks in accept; kill() wakes it with a connection of its own.
            while !k.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok(_) if k.load(Ordering::Acquire) => break,
                    Ok((client, _)) => {
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        let mut all = c.lock().unwrap();
                        all.push(client.try_clone().unwrap());
                        all.push(server.try_clone().unwrap());
                        let pairs = [
                            (
                                client.try_clone().unwrap(),
                                server.try_clone().unwrap(),
                                None,
                            ),
                            (server, client, Some(d.clone())),
                        ];
                        for (from, to, delay) in pairs {
                            std::thread::spawn(move || forward(from, to, delay));
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Proxy {
            port,
            delay_ms,
            killed,
            conns,
            accept: Some(accept),
        }
    }

    fn delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::Release);
    }

    fn kill(&mut self) {
        self.killed.store(true, Ordering::Release);
        if let Some(t) = self.accept.take() {
            // Wakes the accept loop, which then sees `killed`.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
            t.join().unwrap();
        }
        for s in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` until either closes, each chunk after the delay set, if any.
fn forward(mut from: TcpStream, mut to: TcpStream, delay: Option<Arc<AtomicU64>>) {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(d) = &delay {
            // workload: the proxy holds each chunk back by the delay it was given (a slow
            // network, which the test is about).
            std::thread::sleep(Duration::from_millis(d.load(Ordering::Acquire)));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[test]
fn an_s3_server_gone_mid_run_makes_finish_fail_in_bounded_time_naming_what_was_lost() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let mut proxy = Proxy::start(moto.port);
    let mut s = session("s3://bucket/run")
        .storage_options(s3_options(proxy.port))
        .no_system()
        .start()
        .unwrap();
    let weights = vec![0.5f32; 8192];
    for step in 0..10 {
        train_step(&mut s, step, &weights);
    }
    // The writers publish what the steps gave them, then the server is taken away.
    wait_for_stored_steps(&moto, 10);
    proxy.kill();
    for step in 10..30 {
        train_step(&mut s, step, &weights);
    }
    let started = Instant::now();
    let (summary, message) = lost(s.finish());
    let took = started.elapsed();
    eprintln!("finish returned in {took:?}");
    assert!(
        took < NO_HANG,
        "finish took {took:?} (bound: storage timeout {STORAGE_TIMEOUT:?} + 2 s)"
    );
    let store = smdebug_storage::open_storage_with("s3://bucket/run", &moto.options()).unwrap();
    let stored = count_stored(store.as_ref());
    check_figures(&store, &summary, &message, &stored);
    assert!(
        stored.steps >= 5,
        "steps before the kill were stored: {stored:?}"
    );
    assert!(
        summary.steps_lost >= 20,
        "the 20 steps after the kill are lost\n{summary}"
    );
    assert!(
        summary
            .problems
            .iter()
            .any(|p| p.contains("rules were stopped")),
        "{summary}"
    );
}

/// A tmpfs mounted for a test, unmounted when dropped. `None` (with the reason printed) where
/// mounting is not permitted.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(options: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs ({}): this test needs root",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}): this test needs root");
                None
            }
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_disk_that_fills_mid_run_makes_finish_fail_in_bounded_time_with_the_drops_counted() {
    let Some(disk) = Tmpfs::mount("size=1m") else {
        return;
    };
    let run = disk.path().join("run");
    let mut s = session(run.to_str().unwrap())
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(500)),
        )
        .start()
        .unwrap();
    // 32 KiB a step: the 1 MiB disk fills after about thirty steps.
    let weights = vec![0.25f32; 8192];
    for step in 0..80 {
        train_step(&mut s, step, &weights);
    }
    let started = Instant::now();
    let (summary, message) = lost(s.finish());
    let took = started.elapsed();
    eprintln!("finish returned in {took:?}");
    assert!(took < NO_HANG, "finish took {took:?}");
    let store: Arc<dyn Storage> = Arc::new(smdebug_storage::LocalStorage::new(&run).unwrap());
    let stored = count_stored(store.as_ref());
    check_figures(&store, &summary, &message, &stored);
    assert_eq!(
        stored.steps + summary.steps_lost,
        80,
        "every step is stored or counted as lost\n{summary}"
    );
    assert_eq!(summary.records_written + summary.records_lost, 160);
    assert!(
        message.contains("No space left on device"),
        "the storage's own reason: {message}"
    );
}

#[test]
fn a_read_only_folder_fails_start_with_the_storages_reason() {
    let Some(disk) = Tmpfs::mount("size=1m,ro") else {
        return;
    };
    let run = disk.path().join("run");
    let err = session(run.to_str().unwrap()).start().unwrap_err();
    assert!(matches!(err, Error::NotWritable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("Read-only file system"),
        "the storage's own reason: {err}"
    );
    assert!(!Path::new(&run).exists());
}

#[test]
fn a_slow_store_that_answers_is_waited_for_and_every_figure_is_what_it_stored() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let proxy = Proxy::start(moto.port);
    let mut s = session("s3://bucket/run")
        .storage_options(s3_options(proxy.port))
        .no_system()
        .storage_timeout(Duration::from_secs(120))
        .start()
        .unwrap();
    // Every answer from now on comes 200 ms late.
    proxy.delay(Duration::from_millis(200));
    let weights = vec![0.5f32; 1024];
    for step in 0..5 {
        train_step(&mut s, step, &weights);
    }
    let summary = s.finish().unwrap();
    let store = smdebug_storage::open_storage_with("s3://bucket/run", &moto.options()).unwrap();
    let stored = count_stored(store.as_ref());
    assert_eq!(summary.records_written, stored.records, "{summary}");
    assert_eq!(stored.records, 10);
    assert_eq!(summary.spans_written, stored.spans, "{summary}");
    assert!(stored.spans > 0 && stored.end_marker && summary.end_marker_written);
    assert_eq!((summary.records_lost, summary.steps_lost), (0, 0));
    let info = smdebug_read::trial::Trial::from_storage(
        "s3://bucket/run",
        store.clone(),
        Default::default(),
    )
    .unwrap()
    .info()
    .unwrap();
    assert_eq!(info.num_steps, 5);
    let progress = smdebug_io::progress::read_progress(store.as_ref(), "worker_0")
        .unwrap()
        .unwrap();
    assert!(progress.finished);
    assert_eq!(progress.records_written, stored.records);
    assert_eq!(progress.spans_written, stored.spans);
}

#[test]
fn a_store_slower_than_the_request_timeout_fails_start_saying_so() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let proxy = Proxy::start(moto.port);
    proxy.delay(Duration::from_secs(4));
    let mut options = s3_options(proxy.port);
    options.request_timeout = Duration::from_secs(1);
    options.retry_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let err = session("s3://bucket/run")
        .storage_options(options)
        .no_system()
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::NotWritable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("did not answer within 1 s"),
        "{err}"
    );
    assert!(started.elapsed() < NO_HANG, "{:?}", started.elapsed());
}

#[test]
fn a_store_that_stops_answering_mid_run_makes_finish_fail_within_the_storage_timeout() {
    let moto = MotoServer::start();
    moto.create_bucket("bucket");
    let proxy = Proxy::start(moto.port);
    let mut s = session("s3://bucket/run")
        .storage_options(s3_options(proxy.port))
        .no_system()
        .storage_timeout(Duration::from_secs(3))
        .start()
        .unwrap();
    let weights = vec![0.5f32; 1024];
    for step in 0..5 {
        train_step(&mut s, step, &weights);
    }
    wait_for_stored_steps(&moto, 5);
    // Frozen: requests still reach the server, its answers never come back.
    proxy.delay(Duration::from_secs(3600));
    for step in 5..10 {
        train_step(&mut s, step, &weights);
    }
    let started = Instant::now();
    let (summary, message) = lost(s.finish());
    let took = started.elapsed();
    eprintln!("finish returned in {took:?}");
    assert!(
        took < NO_HANG,
        "finish took {took:?} (bound: storage timeout 3 s + 2 s)"
    );
    assert!(!summary.end_marker_written, "{summary}");
    assert!(
        message.contains("did not answer within 3 s") && message.contains("end marker"),
        "{message}"
    );
    // Requests the store received may have been stored without an answer: what the session
    // counts as written is at most what is there, never more.
    let store = smdebug_storage::open_storage_with("s3://bucket/run", &moto.options()).unwrap();
    let stored = count_stored(store.as_ref());
    assert!(
        summary.records_written <= stored.records && summary.spans_written <= stored.spans,
        "{summary}\n{stored:?}"
    );
    assert!(
        summary.records_written >= 10,
        "the steps before the freeze: {summary}"
    );
}
