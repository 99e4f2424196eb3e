//! Smoothing and downsampling on real values: a run written by the project's hook and writer,
//! its event files read back here with smdebug-io's TFRecord reader (not through the server's
//! follower), TensorBoard's debiased exponential moving average computed here over the summary's
//! buckets' means and the values of a zoomed window, and the server's smoothed line checked
//! against it at every point it sends, and against the average of every value at its end. The
//! summary's loss chart keeps a one-step spike and is bucketed as the Scalars tab's; in Chromium,
//! the loss chart of a live run holds at every moment what loading the run up to its then last
//! step gives, never points appended at full density.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::Mode;
use smdebug_format::record::{PayloadCrcPolicy, RecordIter};
use smdebug_format::tensor::decode_tensor_event;
use smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::chromium;
use smdebug_testkit::runs::every_step_hook;
use support::{get_json, wait_for};

/// The step whose TRAIN loss is a spike.
const SPIKE_STEP: u64 = 4_321;
const SPIKE: f64 = 50.0;

/// A decaying loss with rare large positive noise (a few steps in a hundred far above the
/// rest), the way a real loss jumps on a hard batch: each bucket's highest value is such a jump,
/// so an average of downsampled points is far above the average of all values.
fn loss_at(step: u64) -> f64 {
    if step == SPIKE_STEP {
        return SPIKE;
    }
    let mut x = step
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    x ^= x >> 33;
    let u = (x % 1_000_000) as f64 / 1e6;
    2.0 * (-(step as f64) / 1_500.0).exp() + 0.02 + 0.6 * u.powi(12)
}

/// Writes `steps` steps of `loss` through the hook and writer: TRAIN, with an EVAL step every
/// 50. Returns the values written.
fn write_run(dir: &Path, steps: u64) -> usize {
    let mut hook = every_step_hook(dir);
    for step in 0..steps {
        hook.set_mode(if step % 50 == 49 {
            Mode::Eval
        } else {
            Mode::Train
        });
        assert!(hook.save_scalar("loss", loss_at(step), &["losses"]));
        hook.step();
    }
    hook.close();
    steps as usize
}

/// Every `loss` value in the run's event files, per mode, in step order: each file under
/// `events/` read record by record and each record decoded as a tensor event.
fn losses_in_event_files(run: &Path) -> BTreeMap<Mode, Vec<(u64, f64)>> {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    files(&run.join("events"), &mut paths);
    let mut by_mode: BTreeMap<Mode, Vec<(u64, f64)>> = BTreeMap::new();
    for path in paths {
        let bytes = std::fs::read(&path).unwrap();
        for record in RecordIter::new(&bytes, 0, PayloadCrcPolicy::AcceptBoth) {
            let record = record.unwrap();
            let event = decode_tensor_event(record.payload, DEFAULT_MAX_TENSOR_BYTES).unwrap();
            if event.name == "loss" {
                let value = event.tensor.view().get_f64(0);
                by_mode
                    .entry(event.mode)
                    .or_default()
                    .push((event.step, value));
            }
        }
    }
    for values in by_mode.values_mut() {
        values.sort_by_key(|p| p.0);
    }
    by_mode
}

/// TensorBoard's smoothing as its documentation states it: `last = last·w + (1 − w)·v`, then
/// `last / (1 − w^n)` after the n-th value. Keyed by step.
fn ema(values: &[(u64, f64)], w: f64) -> BTreeMap<u64, f64> {
    let mut last = 0.0;
    values
        .iter()
        .enumerate()
        .map(|(i, &(step, v))| {
            last = last * w + (1.0 - w) * v;
            (step, last / (1.0 - w.powi(i as i32 + 1)))
        })
        .collect()
}

/// The dashboard's smoothing as it is documented (`smdebug_serve::downsample::draw`): the same
/// moving average over the summary's buckets (of `width` steps, each taken as its count of its
/// mean), but over the steps `read` value by value (a bucket reaching into them left out). Keyed
/// by the step of each bucket's last value and of each value read.
fn bucket_ema(
    values: &[(u64, f64)],
    w: f64,
    width: u64,
    read: Option<(u64, u64)>,
) -> BTreeMap<u64, f64> {
    let inside = |s: u64| read.is_some_and(|(lo, hi)| lo <= s && s <= hi);
    let mut buckets: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    for &(s, v) in values {
        buckets.entry(s / width).or_default().push((s, v));
    }
    let (mut last, mut decay) = (0.0, 1.0);
    let mut take = |v: f64, n: i32| {
        let wn = w.powi(n);
        last = last * wn + (1.0 - wn) * v;
        decay *= wn;
        last / (1.0 - decay)
    };
    let mut out = BTreeMap::new();
    for bucket in buckets.values() {
        if bucket.iter().any(|p| inside(p.0)) {
            for &(s, v) in bucket.iter().filter(|p| inside(p.0)) {
                out.insert(s, take(v, 1));
            }
        } else {
            let mean = bucket.iter().map(|p| p.1).sum::<f64>() / bucket.len() as f64;
            out.insert(bucket.last().unwrap().0, take(mean, bucket.len() as i32));
        }
    }
    out
}

/// The summary's buckets' width for `values`: the narrowest power of two that cuts them into at
/// most 1,024 buckets (`smdebug_analysis::scalars::BUCKETS`).
fn buckets_width(values: &[(u64, f64)]) -> u64 {
    let mut width = 1;
    loop {
        let mut indexes: Vec<u64> = values.iter().map(|p| p.0 / width).collect();
        indexes.dedup();
        if indexes.len() <= smdebug_analysis::scalars::BUCKETS {
            return width;
        }
        width *= 2;
    }
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn mode<'a>(page: &'a Value, name: &str) -> &'a Value {
    page["scalars"][0]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == name)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn the_smoothed_line_is_the_average_over_the_buckets_and_the_values_read_and_the_summary_keeps_a_spike()
 {
    let dir = tempfile::tempdir().unwrap();
    let steps = 6_000;
    let written = write_run(dir.path(), steps);
    let server = Server::start(ServeOptions::new([dir.path()])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(120), "every value", || {
        let r = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (r["complete"] == true && r["scalar_values"] == written).then_some(())
    });
    let files = losses_in_event_files(dir.path());
    assert_eq!(files[&Mode::Train].len(), 5_880);
    assert_eq!(files[&Mode::Eval].len(), 120);

    let w = 0.99;
    let points = 400;
    let page = get_json(&format!(
        "{url}/api/runs/0/scalars?regex=^loss$&points={points}&smoothing={w}"
    ));
    assert_eq!(page["smoothing"], w);
    for (name, m) in [("TRAIN", Mode::Train), ("EVAL", Mode::Eval)] {
        let series = mode(&page, name);
        let every = ema(&files[&m], w);
        let width = buckets_width(&files[&m]);
        let expected = bucket_ema(&files[&m], w, width, None);
        let smoothed = &series["smoothed"];
        let (xs, ys) = (numbers(&smoothed["steps"]), numbers(&smoothed["values"]));
        assert_eq!(xs.len(), ys.len());
        assert_eq!(numbers(&smoothed["wall_times"]).len(), xs.len());
        assert!(xs.len() <= points, "{} points", xs.len());
        // Every point sent is the average over the buckets up to its step (every value's own
        // average where a bucket is one value: the EVAL series).
        for (x, y) in xs.iter().zip(&ys) {
            let want = expected[&(*x as u64)];
            assert!(close(*y, want), "{name} step {x}: {y} against {want}");
            if width == 1 {
                assert!(close(*y, every[&(*x as u64)]), "{name} step {x}");
            }
        }
        // The line ends at the last value's step, near the average of every value.
        let (last_step, last) = every.iter().next_back().unwrap();
        assert_eq!(*xs.last().unwrap() as u64, *last_step);
        let end = ys[ys.len() - 1];
        eprintln!(
            "{name} smoothed at {w} over buckets of {width}: last {end:.4} (the event files' \
             average of every value {last:.4})"
        );
        assert!(
            (end - last).abs() < 0.05 * last.abs(),
            "{name}: {end} against {last}"
        );
        // The raw line: each value one the files hold at its step.
        let raw: BTreeMap<u64, f64> = files[&m].iter().copied().collect();
        for (x, y) in numbers(&series["steps"])
            .iter()
            .zip(numbers(&series["values"]))
        {
            assert_eq!(raw[&(*x as u64)], y);
        }
        // Not vacuous: smoothing the downsampled raw points (what the page used to do) ends
        // far from the average of all values.
        let downsampled: Vec<(u64, f64)> = numbers(&series["steps"])
            .iter()
            .zip(numbers(&series["values"]))
            .map(|(x, y)| (*x as u64, y))
            .collect();
        if downsampled.len() < files[&m].len() {
            let old = *ema(&downsampled, w).values().next_back().unwrap();
            assert!(
                (old - last).abs() > 0.25 * last,
                "{name}: {old} against {last}"
            );
        }
    }

    // A zoomed window, every value of it read from the files: the average there goes on from
    // the buckets' before it, value by value.
    let zoom = get_json(&format!(
        "{url}/api/runs/0/scalars?regex=^loss$&from=2000&to=2600&points=1000&smoothing={w}"
    ));
    let train = mode(&zoom, "TRAIN");
    let width = buckets_width(&files[&Mode::Train]);
    let expected = bucket_ema(&files[&Mode::Train], w, width, Some((2_000, 2_600)));
    let xs = numbers(&train["smoothed"]["steps"]);
    let ys = numbers(&train["smoothed"]["values"]);
    assert_eq!((xs[0], xs[xs.len() - 1]), (2_000.0, 2_600.0));
    assert_eq!(
        numbers(&train["steps"]).len(),
        589,
        "every TRAIN value in the window"
    );
    assert_eq!(xs.len(), 589);
    for (x, y) in xs.iter().zip(&ys) {
        assert!(close(*y, expected[&(*x as u64)]), "step {x}");
    }
    assert!(
        (ys[0] - loss_at(2_000)).abs() > 1e-3,
        "the average restarted at the window"
    );

    // No smoothing asked: no smoothed line; a weight off the slider: refused.
    let plain = get_json(&format!(
        "{url}/api/runs/0/scalars?regex=^loss$&points={points}"
    ));
    assert_eq!(mode(&plain, "TRAIN")["smoothed"], Value::Null);
    assert_eq!(plain["smoothing"], 0.0);
    for bad in ["1", "-0.5", "NaN", "x"] {
        let r = support::client()
            .get(format!("{url}/api/runs/0/scalars?smoothing={bad}"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 400, "smoothing={bad}");
    }

    // The summary's loss chart: the Scalars tab's buckets, the one-step spike among them, and
    // the last value at the end.
    let headlines = get_json(&format!("{url}/api/runs/0/headlines?points=300"));
    let loss = &headlines["loss"];
    assert_eq!(
        (&loss["name"], &loss["mode"]),
        (&json!("loss"), &json!("TRAIN"))
    );
    assert_eq!(loss["total"], 5_880);
    let steps_kept = numbers(&loss["steps"]);
    let values_kept = numbers(&loss["values"]);
    assert!(steps_kept.len() <= 300, "{}", steps_kept.len());
    let at = steps_kept.iter().position(|s| *s as u64 == SPIKE_STEP);
    assert_eq!(
        at.map(|i| values_kept[i]),
        Some(SPIKE),
        "the spike is drawn"
    );
    let (last_step, last_value) = *files[&Mode::Train].last().unwrap();
    assert_eq!(loss["last_step"], last_step);
    assert_eq!(*steps_kept.last().unwrap() as u64, last_step);
    assert_eq!(loss["last_value"], last_value);
    let tab = get_json(&format!("{url}/api/runs/0/scalars?regex=^loss$&points=300"));
    assert_eq!(mode(&tab, "TRAIN")["steps"], loss["steps"]);
    assert_eq!(mode(&tab, "TRAIN")["values"], loss["values"]);
    assert_eq!(headlines["accuracy"], Value::Null);
    server.shutdown();
}

#[test]
fn a_live_runs_loss_chart_is_bucketed_as_a_loaded_one_in_chromium() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("live");
    std::fs::create_dir_all(&run).unwrap();
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    // The job: 5,000 TRAIN steps with a spike, a few milliseconds apart, while the page is open.
    let steps = 5_000u64;
    let job_run = run.clone();
    let job = std::thread::spawn(move || {
        let mut hook = every_step_hook(&job_run);
        for step in 0..steps {
            hook.save_scalar("loss", loss_at(step), &["losses"]);
            hook.step();
            // workload: a training step's time; the page follows a run being written.
            std::thread::sleep(Duration::from_millis(3));
        }
        hook.close();
    });
    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    // What the loss chart holds, each time it changes, until the run has ended and the chart
    // has its last step.
    let mut drawn: Vec<Value> = Vec::new();
    cdp.wait(Duration::from_secs(180), "the run to end", |c| {
        let s = c.status();
        let h = &s["headlines"];
        if !h["loss"].is_null()
            && drawn
                .last()
                .is_none_or(|d| d["loss"]["total"] != h["loss"]["total"])
        {
            drawn.push(h.clone());
        }
        s["ended"] == true && h["loss"]["last_step"] == steps - 1
    });
    job.join().unwrap();
    let budget = drawn[0]["points"].as_u64().unwrap();
    assert!(
        budget < steps,
        "the chart's budget {budget} would hold every value"
    );
    let live: Vec<&Value> = drawn
        .iter()
        .filter(|d| d["loss"]["total"].as_u64() < Some(steps))
        .collect();
    assert!(
        live.len() >= 3,
        "the chart was drawn only {} times while live",
        live.len()
    );
    assert!(
        live.iter()
            .any(|d| d["loss"]["total"].as_u64().unwrap() > budget),
        "the run never had more values than the chart's budget while live"
    );
    // Each drawing is what loading the run up to its then last step gives: the same buckets
    // over all values so far, however it was updated.
    for d in &drawn {
        let last = d["loss"]["last_step"].as_u64().unwrap();
        let points = d["points"].as_u64().unwrap();
        let loaded = get_json(&format!(
            "{url}/api/runs/0/scalars?regex=^loss$&to={last}&points={points}"
        ));
        assert_eq!(
            d["loss"]["steps"], loaded["scalars"][0]["modes"][0]["steps"],
            "drawn with {} values",
            d["loss"]["total"]
        );
    }
    // After the first drawings, the page took only the last buckets again.
    let tails = drawn[drawn.len() - 1]["tails"].as_u64().unwrap();
    assert!(tails >= 3, "{tails} updates by the last buckets");
    let last = &drawn[drawn.len() - 1]["loss"]["steps"];
    assert!(
        last.as_array().unwrap().iter().any(|s| *s == SPIKE_STEP),
        "the spike is in the chart"
    );
    server.shutdown();
}
