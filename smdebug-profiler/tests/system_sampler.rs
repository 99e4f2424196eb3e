//! The system sampler against real load: busy threads, fsync'd writes, loopback traffic,
//! file rotation and a machine that may have no GPU.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smdebug_format::system::SystemSample;
use smdebug_format::system::vocab;
use smdebug_profiler::ProfilerError;
use smdebug_profiler::system::{NodeId, SamplerConfig, SystemSampler};
use smdebug_read::profile::{ProfilerReader, SystemQuery, parse_system_lines};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_storage::testing::wait_until;

/// The tests of this file run one at a time: they measure this process and this host, and
/// one test's load (spinning threads, a 64 MiB transfer) must not land in another's window.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn fast_config() -> SamplerConfig {
    SamplerConfig::default()
        .interval(Duration::from_millis(100))
        .publish_interval(Duration::from_millis(200))
        .node(NodeId::algo(1))
}

/// Waits until the sampler writing into `dir` has published samples taken at `n` different
/// times at or after `since_us`, and returns the time of the call's end (a window's end).
fn wait_for_samples(dir: &Path, since_us: u64, n: usize) -> u64 {
    wait_until(
        Duration::from_secs(60),
        &format!("{n} samples published after {since_us} µs"),
        || {
            let samples = ProfilerReader::open(dir)
                .unwrap()
                .system_samples(&SystemQuery::default())
                .unwrap();
            let times: BTreeSet<u64> = samples
                .iter()
                .map(|s| (s.timestamp * 1e6) as u64)
                .filter(|&t| t >= since_us)
                .collect();
            times.len() >= n
        },
    );
    now_us()
}

fn values(samples: &[SystemSample], name: &str, dimension: &str) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.name == name && s.dimension == dimension)
        .map(|s| s.value)
        .collect()
}

fn mean(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "no samples in the window");
    values.iter().sum::<f64>() / values.len() as f64
}

/// Bytes moved in a window: each rate record times the interval it covers.
fn integrated(samples: &[SystemSample], name: &str, interval: Duration) -> f64 {
    values(samples, name, "").iter().sum::<f64>() * interval.as_secs_f64()
        + samples
            .iter()
            .filter(|s| s.name == name && s.dimension == vocab::NETWORK_ALGORITHM)
            .map(|s| s.value * interval.as_secs_f64())
            .sum::<f64>()
}

#[test]
fn interval_outside_100ms_to_60s_is_rejected() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        Duration::from_millis(99),
        Duration::from_secs(61),
        Duration::ZERO,
    ] {
        let err = SystemSampler::start_local(SamplerConfig::default().interval(bad), dir.path())
            .err()
            .expect("an invalid interval must not start a sampler");
        assert!(matches!(err, ProfilerError::InvalidInterval { interval } if interval == bad));
    }
    for good in [Duration::from_millis(100), Duration::from_secs(60)] {
        SamplerConfig::default()
            .interval(good)
            .publish_interval(Duration::from_secs(60))
            .validate()
            .unwrap();
    }
    let rotation = SamplerConfig::default()
        .rotation(Duration::from_secs(7))
        .validate();
    assert!(matches!(
        rotation,
        Err(ProfilerError::InvalidConfig {
            setting: "rotation",
            ..
        })
    ));
    let publish = SamplerConfig::default()
        .publish_interval(Duration::from_secs(120))
        .validate();
    assert!(matches!(
        publish,
        Err(ProfilerError::InvalidConfig {
            setting: "publish_interval",
            ..
        })
    ));
}

#[test]
fn records_use_smdebug_vocabulary_for_every_core_and_device_class() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let sampler = SystemSampler::start_local(fast_config(), dir.path()).unwrap();
    wait_for_samples(dir.path(), 0, 3);
    let report = sampler.stop().unwrap();
    assert!(report.samples >= 3, "{report:?}");
    assert_eq!(report.write_errors, 0, "{report:?}");

    let samples = ProfilerReader::open(dir.path())
        .unwrap()
        .system_samples(&SystemQuery::default())
        .unwrap();
    let cores = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    for core in 0..cores {
        let name = format!("cpu{core}");
        for dimension in [vocab::CPU_UTILIZATION, vocab::IO_WAIT_PERCENTAGE] {
            let v = values(&samples, &name, dimension);
            assert!(!v.is_empty(), "no {name}/{dimension}");
            assert!(v.iter().all(|x| (0.0..=100.0).contains(x)), "{name}: {v:?}");
        }
    }
    assert!(!values(&samples, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION).is_empty());
    let memory = values(&samples, vocab::MEMORY_USED_PERCENT, "");
    assert!(memory.iter().all(|m| *m > 0.0 && *m <= 100.0), "{memory:?}");
    let total = values(&samples, vocab::MEMORY_TOTAL_BYTES, "");
    let used = values(&samples, vocab::MEMORY_USED_BYTES, "");
    assert!(total[0] > used[0] && used[0] > 0.0);
    for name in [
        vocab::READ_BYTES_PER_SECOND,
        vocab::WRITE_BYTES_PER_SECOND,
        vocab::IOPS,
    ] {
        assert!(!values(&samples, name, "").is_empty(), "no {name}");
    }
    for name in [
        vocab::RECEIVE_BYTES_PER_SECOND,
        vocab::TRANSMIT_BYTES_PER_SECOND,
    ] {
        assert!(
            !values(&samples, name, vocab::NETWORK_ALGORITHM).is_empty(),
            "no {name}"
        );
    }
    assert!(samples.iter().all(|s| s.node_id == "algo-1"));
    let types: std::collections::BTreeSet<&str> =
        samples.iter().map(|s| s.metric_type.as_str()).collect();
    for t in ["cpu", "memory", "i/o", "network"] {
        assert!(types.contains(t), "{types:?}");
    }
}

#[test]
fn cpu_figures_rise_when_a_busy_loop_runs() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let own_pid = std::process::id();
    let sampler = SystemSampler::start_local(fast_config().watch_pid(own_pid), dir.path()).unwrap();

    // Each window lasts until the sampler has published 8 samples taken in it.
    wait_for_samples(dir.path(), 0, 1);
    let idle_start = now_us();
    let idle_end = wait_for_samples(dir.path(), idle_start, 8);

    let spinning = Arc::new(AtomicBool::new(true));
    let threads = thread::available_parallelism().map_or(2, |n| n.get());
    // The busy window opens once every spinner runs.
    let running = Arc::new(Barrier::new(threads + 1));
    let spinners: Vec<_> = (0..threads)
        .map(|_| {
            let spinning = Arc::clone(&spinning);
            let running = Arc::clone(&running);
            thread::spawn(move || {
                running.wait();
                let mut x = 0u64;
                while spinning.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                x
            })
        })
        .collect();
    running.wait();
    let busy_start = now_us();
    let busy_end = wait_for_samples(dir.path(), busy_start, 8);
    spinning.store(false, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().unwrap();
    }
    sampler.stop().unwrap();

    let reader = ProfilerReader::open(dir.path()).unwrap();
    let window = |start, end| {
        reader
            .system_samples(&SystemQuery::default().time_range(start, end))
            .unwrap()
    };
    let idle = window(idle_start, idle_end);
    let busy = window(busy_start, busy_end);
    let own = format!("pid{own_pid}");

    // Our own process: near zero while sleeping, up to `threads` cores while spinning (less
    // when other programs compete for the cores, hence the modest margin).
    let idle_process = mean(&values(&idle, &own, vocab::PROCESS_CPU_UTILIZATION));
    let busy_process = mean(&values(&busy, &own, vocab::PROCESS_CPU_UTILIZATION));
    assert!(
        busy_process > idle_process + 20.0,
        "process CPU idle {idle_process:.1} % vs busy {busy_process:.1} % ({threads} spinners)"
    );
    let busy_total = mean(&values(&busy, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION));
    let idle_total = mean(&values(&idle, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION));
    // Other programs may keep the host busy in the idle window too, so only the busy
    // window has a bound.
    assert!(
        busy_total > 50.0,
        "host CPU idle {idle_total:.1} % vs busy {busy_total:.1} %"
    );
    let rss = values(&busy, &own, vocab::PROCESS_RSS_BYTES);
    assert!(rss.iter().all(|r| *r > 1_000_000.0), "{rss:?}");
}

#[test]
fn disk_write_bytes_rise_when_a_file_is_written_and_fsynced() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // The target directory is on a real disk; a temporary directory could be tmpfs.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let config = fast_config();
    let sampler = SystemSampler::start_local(config.clone(), dir.path()).unwrap();
    wait_for_samples(dir.path(), 0, 1);
    let start = now_us();
    let payload = vec![0x5au8; 1 << 20];
    let written: usize = 32 << 20;
    {
        let mut file = std::fs::File::create(scratch.path().join("payload.bin")).unwrap();
        for _ in 0..written / payload.len() {
            file.write_all(&payload).unwrap();
        }
        file.sync_all().unwrap();
    }
    // Two samples after the writes: the one whose interval holds their end, and one more.
    let written_at = now_us();
    let end = wait_for_samples(dir.path(), written_at, 2);
    sampler.stop().unwrap();

    let samples = ProfilerReader::open(dir.path())
        .unwrap()
        .system_samples(
            &SystemQuery::default()
                .metric_type(vocab::TYPE_IO)
                .time_range(start, end + 200_000),
        )
        .unwrap();
    let bytes = integrated(
        &samples,
        vocab::WRITE_BYTES_PER_SECOND,
        config.sampling_interval(),
    );
    assert!(
        bytes > written as f64 / 2.0,
        "{written} bytes fsync'd but only {bytes:.0} bytes of disk writes seen"
    );
}

#[test]
fn network_bytes_rise_on_loopback_traffic() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = fast_config();
    let sampler = SystemSampler::start_local(config.clone(), dir.path()).unwrap();
    wait_for_samples(dir.path(), 0, 1);
    let start = now_us();

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let sent: usize = 64 << 20;
    let receiver = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            match stream.read(&mut buffer).unwrap() {
                0 => break total,
                n => total += n,
            }
        }
    });
    {
        let mut stream = TcpStream::connect(address).unwrap();
        let chunk = vec![7u8; 1 << 16];
        for _ in 0..sent / chunk.len() {
            stream.write_all(&chunk).unwrap();
        }
    }
    assert_eq!(receiver.join().unwrap(), sent);
    let sent_at = now_us();
    let end = wait_for_samples(dir.path(), sent_at, 2);
    sampler.stop().unwrap();

    let samples = ProfilerReader::open(dir.path())
        .unwrap()
        .system_samples(
            &SystemQuery::default()
                .metric_type(vocab::TYPE_NETWORK)
                .time_range(start, end + 200_000),
        )
        .unwrap();
    let interval = config.sampling_interval();
    let received = integrated(&samples, vocab::RECEIVE_BYTES_PER_SECOND, interval);
    let transmitted = integrated(&samples, vocab::TRANSMIT_BYTES_PER_SECOND, interval);
    assert!(
        received > sent as f64 / 2.0,
        "sent {sent}, saw {received:.0} received"
    );
    assert!(
        transmitted > sent as f64 / 2.0,
        "sent {sent}, saw {transmitted:.0} transmitted"
    );
}

#[test]
fn machine_without_gpu_degrades_to_host_metrics() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let sampler = SystemSampler::start_local(fast_config(), dir.path()).unwrap();
    wait_for_samples(dir.path(), 0, 2);
    let report = sampler.stop().unwrap();
    let samples = ProfilerReader::open(dir.path())
        .unwrap()
        .system_samples(&SystemQuery::default())
        .unwrap();
    let gpu_records = samples
        .iter()
        .filter(|s| s.metric_type == vocab::TYPE_GPU)
        .count();
    assert!(
        report.samples >= 2 && report.write_errors == 0,
        "{report:?}"
    );
    if report.gpus == 0 {
        assert_eq!(gpu_records, 0);
    } else {
        // On a machine with GPUs every device reports its utilization.
        let devices: std::collections::BTreeSet<&str> = samples
            .iter()
            .filter(|s| s.dimension == vocab::GPU_UTILIZATION)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(devices.len(), report.gpus as usize);
    }

    // Switched off, no GPU is even looked for.
    let off = tempfile::tempdir().unwrap();
    let report = SystemSampler::start_local(fast_config().gpu(false), off.path())
        .unwrap()
        .stop()
        .unwrap();
    assert_eq!(report.gpus, 0);
}

#[test]
fn files_rotate_by_time_and_each_is_complete_and_readable_while_growing() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let sampler = SystemSampler::start(
        fast_config().rotation(Duration::from_secs(1)),
        Arc::clone(&store) as Arc<dyn Storage>,
    )
    .unwrap();
    // While the sampler runs, the published files already hold whole records.
    wait_for_samples(dir.path(), 0, 1);
    let reader = ProfilerReader::open(dir.path()).unwrap();
    let early = reader.system_samples(&SystemQuery::default()).unwrap();
    assert!(!early.is_empty());
    wait_until(Duration::from_secs(60), "three one-second files", || {
        reader.system_files().unwrap().len() >= 3
    });
    let report = sampler.stop().unwrap();

    let files = reader.system_files().unwrap();
    assert!(files.len() >= 3, "{} files", files.len());
    assert_eq!(report.files as usize, files.len());
    let mut total = 0;
    for file in &files {
        let bytes = store.get(&file.key).unwrap();
        assert!(bytes.ends_with(b"\n"), "{} ends mid-line", file.key);
        let samples = parse_system_lines(&file.key, &bytes).unwrap();
        assert!(!samples.is_empty());
        // Every record lies in its file's one-second window.
        for sample in &samples {
            assert_eq!(sample.timestamp as u64, file.start_s, "{}", file.key);
        }
        assert_eq!(file.node, "algo-1");
        let hour_folder = file.key.split('/').nth(2).unwrap();
        assert_eq!(hour_folder.len(), 10, "{}", file.key);
        total += samples.len();
    }
    assert_eq!(total as u64, report.records);
    let all = reader.system_samples(&SystemQuery::default()).unwrap();
    assert_eq!(all.len(), total);
    assert!(all.len() > early.len());
}

#[test]
fn sampler_cost_is_measured_at_100ms_and_500ms() {
    let _serial = serial();
    for interval in [Duration::from_millis(100), Duration::from_millis(500)] {
        let dir = tempfile::tempdir().unwrap();
        let sampler = SystemSampler::start_local(
            SamplerConfig::default()
                .interval(interval)
                .node(NodeId::algo(1)),
            dir.path(),
        )
        .unwrap();
        // workload: the window the sampler's cost is measured over.
        thread::sleep(Duration::from_secs(3));
        let report = sampler.stop().unwrap();
        let cpu = report
            .thread_cpu_time
            .expect("the sampler thread's CPU time is readable on Linux");
        let per_sample = cpu / u32::try_from(report.samples).unwrap().max(1);
        println!(
            "sampler cost at {interval:?}: {cpu:?} CPU over {:?} wall ({:.3} % of one core), \
             {} samples, {per_sample:?} per sample, {} records",
            report.wall_time,
            report.cpu_share().unwrap() * 100.0,
            report.samples,
            report.records,
        );
        assert!(cpu > Duration::ZERO);
        assert!(report.samples >= 2);
    }
}
