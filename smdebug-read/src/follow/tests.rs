//! The follower on a live run, byte by byte and file by file, against one offline read.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

use super::*;
use crate::kineto::RankSummary;
use crate::profile::{CodeProfileWindow, Span};
use crate::profile::{MetricSeries, ProfileData};
use smdebug_format::code_profile::{CodeProfileSummary, code_profile_base_key};
use smdebug_format::system::system_file_key;
use smdebug_format::trace::trace_file_key;

const T0: u64 = 1_700_000_000;

fn line(node: &str, name: &str, t: f64, value: f64) -> String {
    json!({"Type": "cpu", "Name": name, "Dimension": "CPUUtilization", "Value": value,
           "NodeId": node, "Timestamp": t})
    .to_string()
        + "\n"
}

fn trace(end_us: u64, steps: std::ops::Range<u64>) -> Vec<u8> {
    let mut events = vec![json!({"name": "process_name", "ph": "M", "pid": 0,
                                 "args": {"name": "Step:ModeKeys.TRAIN"}})];
    for step in steps {
        events.push(json!({"name": "Step:ModeKeys.TRAIN", "ph": "X", "pid": 0,
            "ts": end_us - 1_000_000 + step * 1000, "dur": 500,
            "args": {"step_num": step.to_string()}}));
    }
    serde_json::to_vec(&events).unwrap()
}

fn summary(start_us: u64) -> Vec<u8> {
    serde_json::to_vec(&CodeProfileSummary::sampled_nothing("algo-1", start_us)).unwrap()
}

/// What a consumer gathers from increments.
#[derive(Default)]
struct Gathered {
    data: ProfileData,
    windows: Vec<CodeProfileWindow>,
    kineto: Vec<RankSummary>,
}

impl Gathered {
    fn add(&mut self, inc: Increment) {
        self.data.add_system_samples(&inc.samples);
        self.data.add_spans(&inc.spans);
        merge_code_windows(&mut self.windows, inc.code_windows);
        if let Some(k) = inc.kineto {
            self.kineto = k;
        }
    }

    fn metrics(&self) -> Vec<MetricSeries> {
        self.data.metrics().cloned().collect()
    }
}

/// Appends `bytes` to `key` in place, as SageMaker's monitor does.
fn append(dir: &std::path::Path, key: &str, bytes: &[u8]) {
    use std::io::Write;
    let path = dir.join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_live_run_read_poll_by_poll_gives_what_one_offline_read_gives() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut live = ProfilerFollower::new(Arc::clone(&storage));
    let mut gathered = Gathered::default();
    let mut written_system = 0u64;

    // Three windows per node, rotated; two nodes; each file grows line by line, torn lines
    // included, and a bad line in the middle of one.
    for window in 0..3u64 {
        let start = T0 + window * 60;
        for node in ["algo-1", "algo-2"] {
            let key = system_file_key(start, node);
            for i in 0..20u64 {
                // Out of order within the window: odd seconds first, then even ones.
                let second = if i < 10 { 2 * i + 1 } else { 2 * (i - 10) };
                let text = line(node, "cpu0", (start + second) as f64, i as f64)
                    + &line(node, "total", (start + second) as f64 + 0.5, 1.0);
                let (head, tail) = text.as_bytes().split_at(text.len() / 3);
                append(dir.path(), &key, head);
                gathered.add(live.poll());
                append(dir.path(), &key, tail);
                if window == 1 && i == 5 && node == "algo-2" {
                    append(dir.path(), &key, b"{\"Type\": \"cpu\", not json\n");
                }
                if i % 3 == 0 {
                    gathered.add(live.poll());
                }
            }
            written_system += std::fs::metadata(dir.path().join(&key)).unwrap().len();
        }
        // A trace file per window, written once; and a code-profile window.
        let end_us = (start + 60) * 1_000_000;
        storage
            .put(
                &trace_file_key(end_us, 0, "algo-1"),
                Bytes::from(trace(end_us, window * 10..window * 10 + 10)),
            )
            .unwrap();
        let base = code_profile_base_key(start * 1_000_000, end_us, 0, "algo-1");
        storage
            .put(
                &format!("{base}.json"),
                Bytes::from(summary(start * 1_000_000)),
            )
            .unwrap();
        gathered.add(live.poll());
    }
    // A republished file: the whole file written again with one more line (the sampler's way).
    let key = system_file_key(T0 + 120, "algo-1");
    let mut text = std::fs::read(dir.path().join(&key)).unwrap();
    let more = line("algo-1", "cpu0", (T0 + 150) as f64, 99.0);
    text.extend_from_slice(more.as_bytes());
    storage.put(&key, Bytes::from(text)).unwrap();
    written_system += more.len() as u64;
    gathered.add(live.poll());
    // A line appended to a sealed file (an older window) is seen at the next re-check.
    let old = system_file_key(T0, "algo-2");
    let late = line("algo-2", "cpu0", (T0 + 30) as f64, 7.0);
    append(dir.path(), &old, late.as_bytes());
    written_system += late.len() as u64;
    for _ in 0..system::RECHECK_SEALED_EVERY {
        gathered.add(live.poll());
    }
    // Nothing new: nothing fetched.
    let fetched = live.fetches();
    assert!(live.poll().is_empty());
    assert_eq!(live.fetches(), fetched);

    let mut offline = ProfilerFollower::new(Arc::clone(&storage));
    let mut once = Gathered::default();
    once.add(offline.read_to_end());

    assert_eq!(gathered.metrics(), once.metrics());
    assert_eq!(
        gathered.data.spans().to_spans(),
        once.data.spans().to_spans()
    );
    assert_eq!(gathered.windows, once.windows);
    assert_eq!(gathered.data.sample_count(), 2 * 3 * 40 + 2);
    assert_eq!(once.data.spans().len(), 30);
    assert_eq!(once.windows.len(), 3);
    let cpu0 = &once.metrics()[0];
    assert!(cpu0.points.iter().is_sorted_by_key(|p| p.0));
    // The bad line is one problem, named by file and line, met once by each follower.
    assert_eq!(live.problems(), offline.problems());
    let problems = live.problems().list();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(matches!(
        &problems[0],
        DataProblem::BadLines { count: 1, .. }
    ));
    assert_eq!(problems[0].area(), DataArea::System);
    // Live, each byte of a growing system file was fetched once (a republished file is read
    // on from where the last read stopped), but for torn lines fetched again.
    let traces_and_code: u64 = walk(dir.path())
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("/system/"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let system_fetched = live.bytes_read() - traces_and_code + code_bytes(dir.path());
    assert!(
        system_fetched < written_system + written_system / 2,
        "{system_fetched} bytes fetched for {written_system} written"
    );
    assert_eq!(
        offline.bytes_read(),
        written_system + traces_and_code - code_bytes(dir.path())
    );
}

/// Code-profile summaries are read through `code_profile_summary`, not counted in bytes.
fn code_bytes(dir: &std::path::Path) -> u64 {
    walk(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/framework/code/"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_file_rewritten_shorter_is_read_again_without_handing_out_samples_twice() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let key = system_file_key(T0, "algo-1");
    let lines: Vec<String> = (0..6)
        // Padded: the rewrite below is shorter.
        .map(|i| {
            line("algo-1", "cpu0", (T0 + i) as f64, i as f64).replace(',', &format!(",{:20}", ""))
        })
        .collect();
    storage.put(&key, Bytes::from(lines[..4].concat())).unwrap();
    let mut follower = ProfilerFollower::new(Arc::clone(&storage));
    assert_eq!(follower.poll().samples.len(), 4);
    // Rewritten with shorter lines: fewer bytes, more records.
    let short: String = (0..6)
        .map(|i| format!("{{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":\"CPUUtilization\",\"Value\":{i},\"NodeId\":\"algo-1\",\"Timestamp\":{}}}\n", T0 + i))
        .collect();
    assert!(short.len() < lines[..4].concat().len());
    storage.put(&key, Bytes::from(short)).unwrap();
    let again = follower.poll();
    assert_eq!(
        again.samples.iter().map(|s| s.value).collect::<Vec<_>>(),
        [4.0, 5.0]
    );
}

#[test]
fn out_of_order_samples_are_merged_not_inserted_one_by_one() {
    // Every line of the file in reverse time order, two series interleaved.
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let key = system_file_key(T0, "algo-1");
    let n = 20_000u64;
    let text: String = (0..n)
        .rev()
        .map(|i| {
            let name = if i % 2 == 0 { "cpu0" } else { "cpu1" };
            line("algo-1", name, T0 as f64 + i as f64 * 0.1, i as f64)
        })
        .collect();
    // Read in four pieces, as a follower meets a growing file.
    let mut data = ProfileData::default();
    let mut follower = ProfilerFollower::new(Arc::clone(&storage));
    for part in 1..=4 {
        let cut = text.len() * part / 4;
        let cut = text[..cut]
            .rfind('\n')
            .map_or(0, |i| i + 1)
            .max(if part == 4 { text.len() } else { 0 });
        storage
            .put(&key, Bytes::from(text[..cut].to_owned()))
            .unwrap();
        data.add_system_samples(&follower.poll().samples);
    }
    let metrics: Vec<&MetricSeries> = data.metrics().collect();
    assert_eq!(metrics.len(), 2);
    for (series, parity) in metrics.iter().zip([0u64, 1]) {
        let expected: Vec<(u64, f64)> = (0..n)
            .filter(|i| i % 2 == parity)
            .map(|i| ((T0 * 10 + i) * 100_000, i as f64))
            .collect();
        assert_eq!(series.points.to_vec(), expected);
    }
}

#[test]
fn kineto_traces_are_summarized_once_and_again_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let good = dir.path().join("rank-1.json");
    let missing = dir.path().join("rank-2.json");
    let events = |dur: u64| {
        json!({"traceEvents": [{"name": "k", "cat": "kernel", "ph": "X", "ts": 0, "dur": dur,
                                "pid": 0, "tid": 7, "args": {"device": 0}}]})
        .to_string()
    };
    std::fs::write(&good, events(10)).unwrap();
    let mut follower =
        ProfilerFollower::new(storage).kineto_traces(vec![good.clone(), missing.clone()]);
    let first = follower.poll();
    let ranks = first.kineto.expect("summaries");
    assert_eq!(ranks.len(), 1);
    assert_eq!(ranks[0].rank, 1);
    assert_eq!(first.problems.len(), 1);
    assert_eq!(first.problems[0].area(), DataArea::Traces);
    assert!(first.problems[0].to_string().contains("rank-2.json"));
    // Unchanged: not summarized again.
    assert!(follower.poll().kineto.is_none());
    std::fs::write(&good, events(2000)).unwrap();
    std::fs::write(&missing, events(30)).unwrap();
    let again = follower.poll().kineto.expect("summaries again");
    assert_eq!(again.len(), 2);
    assert_eq!(again[0].gpu_busy_us, 2000.0);
}

#[test]
fn spans_keep_their_args_unless_the_follower_is_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let end_us = T0 * 1_000_000 + 5_000_000;
    let key = trace_file_key(end_us, 0, "algo-1");
    let events = json!([
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "DataLoaderIter"}},
        {"name": "DataLoaderIter::GetNext", "ph": "X", "pid": 1, "ts": end_us - 2000,
         "dur": 500, "args": {"step_num": "3", "worker_id": 2, "num_workers": 4}},
    ]);
    storage
        .put(&key, Bytes::from(serde_json::to_vec(&events).unwrap()))
        .unwrap();
    let with = ProfilerFollower::new(Arc::clone(&storage)).read_to_end();
    let without = ProfilerFollower::new(Arc::clone(&storage))
        .span_args(false)
        .read_to_end();
    assert_eq!((with.spans.len(), without.spans.len()), (1, 1));
    let (a, b) = (&with.spans[0], &without.spans[0]);
    assert_eq!(
        a.args["worker_id"], 2,
        "the rules read a loader's worker_id"
    );
    assert_eq!(a.args["num_workers"], 4);
    assert!(b.args.is_empty());
    // The same span otherwise.
    let stripped = Span {
        args: Default::default(),
        ..a.clone()
    };
    assert_eq!(&stripped, b);
    assert_eq!(b.step, Some(3));
}

#[test]
fn a_held_kind_of_data_is_left_for_a_later_poll() {
    let (_dir, storage) = shared_run();
    let mut follower = ProfilerFollower::new(Arc::clone(&storage));
    follower.hold(DataArea::Spans, true);
    let first = follower.poll();
    assert_eq!(
        (first.samples.len(), first.spans.len(), first.more),
        (10, 0, true)
    );
    follower.hold(DataArea::Spans, false);
    follower.hold(DataArea::System, true);
    let second = follower.poll();
    assert_eq!(
        (second.samples.len(), second.spans.len(), second.more),
        (0, 3, true)
    );
    follower.hold(DataArea::System, false);
    let third = follower.poll();
    assert_eq!(
        (third.samples.len(), third.spans.len(), third.more),
        (0, 0, false)
    );
}

/// Writes a trace file of `steps` ending at `end_us`, as the span writer publishes one.
fn put_trace(storage: &dyn Storage, end_us: u64, steps: std::ops::Range<u64>) {
    storage
        .put(
            &trace_file_key(end_us, 0, "algo-1"),
            Bytes::from(trace(end_us, steps)),
        )
        .unwrap();
}

/// A run with one system file of ten samples and one trace file of three steps.
fn shared_run() -> (tempfile::TempDir, Arc<dyn Storage>) {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let text: String = (0..10)
        .map(|i| line("algo-1", "cpu0", T0 as f64 + f64::from(i), 1.0))
        .collect();
    storage
        .put(&system_file_key(T0, "algo-1"), Bytes::from(text))
        .unwrap();
    let end_us = T0 * 1_000_000 + 5_000_000;
    put_trace(storage.as_ref(), end_us, 0..3);
    (dir, storage)
}

fn counts(increments: &[Arc<Increment>]) -> (usize, usize) {
    increments
        .iter()
        .fold((0, 0), |(a, b), i| (a + i.samples.len(), b + i.spans.len()))
}

#[test]
fn subscribers_of_one_source_see_every_increment_read_once_then_let_go() {
    let (_dir, storage) = shared_run();
    let source = ProfilerSource::new(Arc::clone(&storage));
    let (mut rules, mut dashboard) = (source.subscribe(), source.subscribe());
    assert_eq!(source.subscribers(), 2);
    let first = rules.poll();
    assert_eq!(counts(&first), (10, 3));
    let fetched = source.fetches();
    assert_eq!(fetched, 2, "one system file and one trace file");
    // The dashboard takes the same increments, without a read of its own; the same values.
    let second = dashboard.poll();
    assert_eq!(counts(&second), (10, 3));
    assert!(Arc::ptr_eq(&first[0], &second[0]), "shared, not copied");
    assert_eq!(source.fetches(), fetched);
    // Every subscriber took it: the source let it go, so the subscribers hold the only handles.
    drop(first);
    assert_eq!(Arc::strong_count(&second[0]), 1);
    // New data: the subscriber that polls first reads it, the other takes it.
    let more = T0 * 1_000_000 + 9_000_000;
    put_trace(storage.as_ref(), more, 3..5);
    assert_eq!(counts(&dashboard.poll()), (0, 2));
    assert_eq!(counts(&rules.poll()), (0, 2));
    assert_eq!(source.fetches(), fetched + 1);
    // Nothing new: nothing handed out.
    assert!(rules.poll().is_empty() && dashboard.poll().is_empty());
}

/// A subscriber behind the others takes what they read and then reads on itself: what its
/// poll hands out holds every file there was when it polled. (It took only what the others had
/// read, so a rule runner's last look after the run ended missed the trace file written after
/// the dashboard's last poll: StepOutlier counted 299 of 456 steps in a session.)
#[test]
fn a_subscriber_behind_the_others_also_reads_what_came_since() {
    let (_dir, storage) = shared_run();
    let source = ProfilerSource::new(Arc::clone(&storage));
    let (mut rules, mut dashboard) = (source.subscribe(), source.subscribe());
    assert_eq!(counts(&dashboard.poll()), (10, 3));
    let more = T0 * 1_000_000 + 9_000_000;
    put_trace(storage.as_ref(), more, 3..5);
    let taken = rules.poll();
    assert_eq!(counts(&taken), (10, 5), "the first read and the new file");
    assert_eq!(source.fetches(), 3, "each file fetched once");
    assert_eq!(counts(&dashboard.poll()), (0, 2));
    assert!(rules.poll().is_empty() && dashboard.poll().is_empty());
}

#[test]
fn a_subscriber_that_goes_away_holds_nothing_back_and_a_late_one_reads_on_its_own() {
    let (_dir, storage) = shared_run();
    let source = ProfilerSource::new(Arc::clone(&storage));
    let mut rules = source.subscribe();
    let idle = source.subscribe();
    let first = rules.poll();
    assert_eq!(counts(&first), (10, 3));
    // The idle subscriber has not taken it: the source keeps it for it.
    assert_eq!(Arc::strong_count(&first[0]), 2);
    drop(idle);
    assert_eq!(Arc::strong_count(&first[0]), 1);
    // A subscriber coming after the source let data go reads the run itself, from the start.
    let mut late = source.subscribe();
    assert_eq!(counts(&late.poll()), (10, 3));
    assert_eq!(
        source.fetches(),
        2,
        "the late subscriber's reads are its own"
    );
    assert_eq!(source.subscribers(), 1);
}

#[test]
fn a_backlog_comes_in_bounded_pieces_each_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    // Five system files of 30,000 samples (a piece ends after the file that fills it).
    let per_file = 30_000u64;
    for f in 0..5u64 {
        let start = T0 + f * 60;
        let text: String = (0..per_file)
            .map(|i| line("algo-1", "cpu0", start as f64 + i as f64 / 1000.0, 1.0))
            .collect();
        storage
            .put(&system_file_key(start, "algo-1"), Bytes::from(text))
            .unwrap();
    }
    let end_us = T0 * 1_000_000 + 10_000_000;
    put_trace(storage.as_ref(), end_us, 0..3);
    let source = ProfilerSource::new(Arc::clone(&storage));
    let mut sub = source.subscribe();
    let mut pieces = Vec::new();
    loop {
        let got = sub.poll();
        let more = got.last().is_some_and(|i| i.more);
        pieces.push(counts(&got));
        if !more {
            break;
        }
    }
    assert!(pieces.len() >= 3, "{pieces:?}");
    assert!(
        pieces
            .iter()
            .all(|(s, _)| *s < ITEMS_PER_READ + per_file as usize),
        "{pieces:?}"
    );
    let total = pieces.iter().fold((0, 0), |(a, b), (s, p)| (a + s, b + p));
    assert_eq!(total, (5 * per_file as usize, 3));
}

/// Each trace file read is named with the place of its spans in the increment, also in one
/// increment gathered from several polls (`read_to_end`).
#[test]
fn an_increment_says_which_spans_each_trace_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()).unwrap());
    let mut expected = Vec::new();
    for (i, steps) in [0..3u64, 3..4, 4..9].into_iter().enumerate() {
        let end_us = (T0 + 10 * i as u64) * 1_000_000;
        let key = trace_file_key(end_us, 0, "algo-1");
        storage
            .put(&key, Bytes::from(trace(end_us, steps.clone())))
            .unwrap();
        expected.push((key, steps));
    }
    // One file a poll.
    let all = ProfilerFollower::new(Arc::clone(&storage))
        .items_per_poll(1)
        .read_to_end();
    assert_eq!(all.traces.len(), 3);
    for (read, (key, steps)) in all.traces.iter().zip(&expected) {
        assert_eq!(&read.file.key, key);
        let got: Vec<u64> = all.spans[read.spans.clone()]
            .iter()
            .filter_map(|s| s.step)
            .collect();
        assert_eq!(got, steps.clone().collect::<Vec<u64>>());
    }
}
