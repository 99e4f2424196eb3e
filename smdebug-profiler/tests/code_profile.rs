//! Code profiles of real workloads: a deliberately hot function sampled in-process, its files
//! read back (summary, flame graph, pprof protobuf decoded), no timer outside a window, one
//! window at a time, a failing store, and a drop that never hangs.

#![cfg(all(feature = "code-profile", target_os = "linux"))]

use std::io::Read as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use smdebug_core::Mode;
use smdebug_format::code_profile::WindowStep;
use smdebug_profiler::ProfilerError;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_profiler::system::NodeId;
use smdebug_read::profile::ProfilerReader;
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::{poll, wait_until};
use smdebug_testkit::storage::{Intercepted, WriteGate};

/// The sampler is process-wide: tests that open windows take turns (cargo test runs them on
/// threads of one process; nextest runs each in its own).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// CPU time this process has used, from /proc/self/stat (utime + stime, in clock ticks).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / per_second
}

/// A deliberately hot function: integer mixing the optimizer cannot remove.
#[inline(never)]
fn code_profile_hot_function(rounds: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// Runs the hot function until the process has used `cpu_seconds` more CPU time.
fn burn(cpu_seconds: f64) -> u64 {
    let until = process_cpu_seconds() + cpu_seconds;
    let mut acc = 0u64;
    while process_cpu_seconds() < until {
        acc = acc.wrapping_add(code_profile_hot_function(2_000_000, acc));
    }
    acc
}

/// Whether a `SIGPROF` interval timer is armed in this process.
fn profiling_timer_armed() -> bool {
    let mut value = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: `value` is a valid itimerval to write into.
    let rc = unsafe { libc::getitimer(libc::ITIMER_PROF, &mut value) };
    assert_eq!(rc, 0);
    value.it_interval.tv_sec != 0
        || value.it_interval.tv_usec != 0
        || value.it_value.tv_sec != 0
        || value.it_value.tv_usec != 0
}

fn config() -> CodeProfileConfig {
    CodeProfileConfig::default()
        .node(NodeId::new("testnode").unwrap())
        .worker(3)
}

// pprof's profile.proto, only the fields this test reads: an independent decoder of the file.
#[derive(Clone, PartialEq, prost::Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "12")]
    period: i64,
}
#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
}

#[test]
fn a_window_over_a_hot_function_names_it_and_writes_readable_files() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(run.path()).unwrap());
    let profiler = CodeProfiler::start(config(), Arc::clone(&storage)).unwrap();
    profiler.begin(Some((Mode::Train, 10))).unwrap();
    wait_until(Duration::from_secs(60), "the timer is installed", || {
        profiler.is_sampling()
    });
    burn(1.0);
    profiler.end(Some((Mode::Train, 14))).unwrap();
    let report = profiler.finish().unwrap();
    assert_eq!((report.windows, report.written, report.failed), (1, 1, 0));
    assert_eq!(report.files, 3);

    let reader = ProfilerReader::new(Arc::clone(&storage));
    let profiles = reader.code_profiles().unwrap();
    assert!(profiles.warnings.is_empty(), "{:?}", profiles.warnings);
    assert_eq!(profiles.windows.len(), 1);
    let window = &profiles.windows[0];
    let summary = &window.summary;
    assert_eq!(report.samples, summary.samples);
    assert_eq!((summary.node_id.as_str(), summary.worker), ("testnode", 3));
    assert_eq!(
        summary.start_step,
        Some(WindowStep {
            mode: Mode::Train,
            step: 10
        })
    );
    assert_eq!(summary.end_step.map(|s| s.step), Some(14));
    assert_eq!(summary.frequency_hz, 99);

    // The timer counts the process's CPU time: about 99 samples per CPU second.
    let cpu = summary.process_cpu_seconds.unwrap();
    assert!(cpu >= 1.0, "the window used {cpu} CPU seconds");
    let expected = cpu * f64::from(summary.frequency_hz);
    let samples = summary.samples as f64;
    assert!(
        samples > 0.25 * expected && samples < 1.5 * expected + 10.0,
        "{samples} samples for {cpu} CPU seconds at 99 Hz"
    );

    // The hot function leads the total list. (Its self samples may all land in the iterator
    // functions inlined into it, which a debug build names as leaves of their own.)
    let hot = |name: &str| name.contains("code_profile_hot_function");
    assert!(!summary.top_self.is_empty());
    let total = summary
        .top_total
        .iter()
        .find(|f| hot(&f.function))
        .expect("the hot function is in the total list");
    assert!(total.share > 0.5, "{total:?}");
    assert!(
        summary
            .top_total
            .windows(2)
            .all(|w| w[0].samples >= w[1].samples)
    );
    assert!(summary.threads.iter().map(|t| t.samples).sum::<u64>() == summary.samples);

    // The files are where the layout says.
    let hour = chrono::DateTime::from_timestamp(
        (summary.start_time_since_epoch_in_micros / 1_000_000) as i64,
        0,
    )
    .unwrap()
    .format("%Y%m%d%H")
    .to_string();
    let base = format!(
        "framework/code/{hour}/{}-{}_3-testnode",
        summary.start_time_since_epoch_in_micros, summary.end_time_since_epoch_in_micros
    );
    for extension in ["json", "svg", "pb.gz"] {
        assert!(
            run.path().join(format!("{base}.{extension}")).is_file(),
            "{base}.{extension}"
        );
    }
    assert_eq!(window.file.base_key, base);
    assert_eq!(
        summary.files.flamegraph.as_deref(),
        Some(&*format!("{base}.svg"))
    );

    let svg = reader
        .code_profile_flamegraph(&window.file)
        .unwrap()
        .unwrap();
    let svg = std::str::from_utf8(&svg).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"));
    assert!(svg.contains("code_profile_hot_function"));

    // The pprof profile: gzip, then a Profile whose samples add up to the summary's.
    let gz = reader.code_profile_pprof(&window.file).unwrap().unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .unwrap();
    let profile = <Profile as prost::Message>::decode(&raw[..]).unwrap();
    let string = |i: i64| profile.string_table[i as usize].as_str();
    assert_eq!(profile.string_table[0], "");
    assert_eq!(string(profile.sample_type[0].r#type), "samples");
    assert_eq!(string(profile.sample_type[1].unit), "nanoseconds");
    assert_eq!(profile.period, 1_000_000_000 / 99);
    let counted: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(counted as u64, summary.samples);
    let hot_ids: Vec<u64> = profile
        .function
        .iter()
        .filter(|f| hot(string(f.name)))
        .map(|f| f.id)
        .collect();
    assert!(!hot_ids.is_empty());
    let hot_samples: i64 = profile
        .sample
        .iter()
        .filter(|s| {
            s.location_id.iter().any(|id| {
                let location = profile.location.iter().find(|l| l.id == *id).unwrap();
                location
                    .line
                    .iter()
                    .any(|l| hot_ids.contains(&l.function_id))
            })
        })
        .map(|s| s.value[0])
        .sum();
    assert_eq!(hot_samples as u64, total.samples);
}

#[test]
fn outside_a_window_no_sampling_timer_is_installed() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    let profiler =
        CodeProfiler::start(config(), Arc::new(LocalStorage::new(run.path()).unwrap())).unwrap();
    burn(0.05);
    // Readying the sampler leaves no timer behind either.
    assert!(profiler.wait_ready(Duration::from_secs(60)));
    assert!(!profiler.is_sampling() && !profiler.in_window());
    assert!(!profiling_timer_armed());

    profiler.begin(None).unwrap();
    assert!(profiler.in_window());
    wait_until(Duration::from_secs(60), "the timer is installed", || {
        profiler.is_sampling()
    });
    assert!(profiling_timer_armed());
    burn(0.05);
    profiler.end(None).unwrap();
    profiler.flush().unwrap();
    assert!(!profiler.is_sampling());
    assert!(!profiling_timer_armed());

    // A window closed by time has no steps.
    let reader = ProfilerReader::open(run.path()).unwrap();
    let profiles = reader.code_profiles().unwrap();
    assert_eq!(profiles.windows.len(), 1);
    assert!(profiles.windows[0].summary.start_step.is_none());
    assert!(profiles.windows[0].summary.end_step.is_none());
    profiler.finish().unwrap();
    assert!(!profiling_timer_armed());
}

#[test]
fn one_window_samples_at_a_time_in_a_process() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(run.path()).unwrap());
    let first = CodeProfiler::start(config(), Arc::clone(&storage)).unwrap();
    let second = CodeProfiler::start(config().worker(4), Arc::clone(&storage)).unwrap();
    assert!(matches!(
        first.end(None),
        Err(ProfilerError::CodeProfileNoWindow)
    ));
    first.begin(Some((Mode::Train, 0))).unwrap();
    assert!(matches!(
        first.begin(Some((Mode::Train, 1))),
        Err(ProfilerError::CodeProfileBusy)
    ));
    assert!(matches!(
        second.begin(Some((Mode::Train, 1))),
        Err(ProfilerError::CodeProfileBusy)
    ));
    burn(0.05);
    first.end(Some((Mode::Train, 0))).unwrap();
    assert!(matches!(
        first.end(None),
        Err(ProfilerError::CodeProfileNoWindow)
    ));
    // Once the first window ended, the other profiler opens one.
    second.begin(Some((Mode::Eval, 0))).unwrap();
    burn(0.05);
    second.end(Some((Mode::Eval, 0))).unwrap();
    let a = first.finish().unwrap();
    let b = second.finish().unwrap();
    assert_eq!((a.written, b.written), (1, 1));
    // Each control thread samples when it gets to it, so under load the second profiler's
    // window may be sampled first; what holds is that the two never overlap.
    let windows = ProfilerReader::new(storage)
        .code_profiles()
        .unwrap()
        .windows;
    let mut workers: Vec<u32> = windows.iter().map(|w| w.summary.worker).collect();
    workers.sort_unstable();
    assert_eq!(workers, [3, 4]);
    assert!(
        windows[0].file.end_us <= windows[1].file.start_us,
        "the windows overlap: {:?} and {:?}",
        windows[0].file,
        windows[1].file
    );
}

#[test]
fn a_store_that_fails_makes_finish_return_an_error() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    // `framework` is a plain file: every code-profile file fails to be stored.
    std::fs::write(run.path().join("framework"), b"not a folder").unwrap();
    let profiler =
        CodeProfiler::start(config(), Arc::new(LocalStorage::new(run.path()).unwrap())).unwrap();
    profiler.begin(Some((Mode::Train, 0))).unwrap();
    burn(0.05);
    profiler.end(Some((Mode::Train, 0))).unwrap();
    match profiler.finish() {
        Err(ProfilerError::CodeProfileFailed {
            failed,
            windows,
            written,
            last_error,
        }) => {
            assert_eq!((windows, failed, written), (1, 1, 0));
            assert!(last_error.contains("framework/code/"), "{last_error}");
        }
        other => panic!("expected CodeProfileFailed, got {other:?}"),
    }
}

#[test]
fn dropping_the_profiler_with_a_window_open_never_hangs_even_on_a_stuck_store() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    let storage = Intercepted::new(
        Arc::new(LocalStorage::new(run.path()).unwrap()),
        WriteGate::default(),
    );
    let profiler = CodeProfiler::start(
        config().finish_timeout(Duration::from_millis(200)),
        Arc::clone(&storage) as Arc<dyn Storage>,
    )
    .unwrap();
    profiler.begin(Some((Mode::Train, 5))).unwrap();
    wait_until(Duration::from_secs(60), "the timer is installed", || {
        profiler.is_sampling()
    });
    burn(0.05);
    // Dropped with its window open while the store does not answer: the drop returns after
    // the timeout, and the timer is already off.
    drop(profiler);
    assert!(!profiling_timer_armed());

    // Once the store answers, the window (ended by the drop) is written.
    storage.open();
    let reader = ProfilerReader::new(Arc::clone(&storage) as Arc<dyn Storage>);
    wait_until(Duration::from_secs(60), "the window is written", || {
        reader.code_profiles().unwrap().windows.len() == 1
    });
    let summary = &reader.code_profiles().unwrap().windows[0].summary;
    assert_eq!(summary.start_step.map(|s| s.step), Some(5));
    assert!(summary.end_step.is_none());

    // A profiler dropped right away (no window, nothing pending) also returns.
    drop(CodeProfiler::start(config(), storage).unwrap());
}

#[test]
fn a_window_is_sampled_while_it_is_open_even_when_the_last_one_is_still_being_written() {
    let _turn = one_at_a_time();
    let run = tempfile::tempdir().unwrap();
    let storage = Intercepted::new(
        Arc::new(LocalStorage::new(run.path()).unwrap()),
        WriteGate::default(),
    );
    let profiler = CodeProfiler::start(config(), Arc::clone(&storage) as Arc<dyn Storage>).unwrap();
    // The first window's files wait on a store that does not answer yet.
    profiler.begin(Some((Mode::Train, 0))).unwrap();
    wait_until(
        Duration::from_secs(60),
        "the first timer is installed",
        || profiler.is_sampling(),
    );
    burn(0.05);
    profiler.end(Some((Mode::Train, 9))).unwrap();
    wait_until(
        Duration::from_secs(60),
        "the first timer is removed",
        || !profiler.is_sampling(),
    );

    // The second window is sampled while it is open, not once the first is written.
    profiler.begin(Some((Mode::Train, 20))).unwrap();
    // Asserted once the gate is open: failing here would leave the writer held at it.
    let sampled_while_open = poll(Duration::from_secs(10), || {
        profiler.is_sampling().then_some(())
    })
    .is_some();
    burn(0.3);
    profiler.end(Some((Mode::Train, 39))).unwrap();
    storage.open();
    let report = profiler.finish().unwrap();
    assert_eq!(report.written, 2);
    assert!(
        sampled_while_open,
        "the timer was not installed within 10 s of begin"
    );

    let reader = ProfilerReader::new(Arc::clone(&storage) as Arc<dyn Storage>);
    let windows = reader.code_profiles().unwrap().windows;
    let second = windows
        .iter()
        .map(|w| &w.summary)
        .find(|s| s.start_step.map(|s| s.step) == Some(20))
        .expect("the second window's summary");
    // What the summary says of itself is what its times say: the sampler ran for most of
    // the window it was asked for, so the label is the window's steps alone.
    let asked = second.requested_end_us.unwrap() - second.requested_start_us.unwrap();
    let ran = second.end_time_since_epoch_in_micros - second.start_time_since_epoch_in_micros;
    let coverage = second.coverage().unwrap();
    assert!(
        coverage > 0.5,
        "coverage {coverage}: asked {asked} µs, ran {ran} µs"
    );
    assert!(second.samples > 0);
    if coverage >= 0.9 {
        assert_eq!(second.steps_label(), "TRAIN steps 20–39");
    } else {
        assert!(second.steps_label().contains("% of it sampled"));
    }
}
