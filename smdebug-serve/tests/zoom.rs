//! The Scalars tab's charts against the run's files (issue 36): a zoomed window's values are
//! the files' values, every one, at their steps; a chart drawn from the summary's buckets shows
//! each slice's true lowest and highest value; the headline chart and a scalar's one-cell view
//! are values of the files. Checked through the real server against smdebug-read's `Trial`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use smdebug_core::Mode;
use smdebug_read::trial::Trial;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::runs::every_step_hook;
use support::{get_json, wait_for};

const STEPS: u64 = 6_000;

/// A value with spikes and dips in places no slice boundary predicts.
fn value(i: usize, step: u64) -> f64 {
    let noise = ((step * 2_654_435_761 + i as u64 * 97) % 10_007) as f64 / 10_007.0;
    let spike = match step % 1_237 {
        0 => 50.0,
        611 => -40.0,
        _ => 0.0,
    };
    1.0 / (1.0 + step as f64 / 500.0) + noise * 0.1 + spike
}

fn write_run(dir: &std::path::Path) {
    let mut hook = every_step_hook(dir);
    let names = ["loss", "metric_a"];
    let mut step = 0;
    while step < STEPS {
        hook.set_mode(Mode::Train);
        for (i, name) in names.iter().enumerate() {
            hook.save_scalar(name, value(i, step), &["metrics"]);
        }
        hook.step();
        step += 1;
        if step % 10 == 0 {
            hook.set_mode(Mode::Eval);
            hook.save_scalar("loss", value(5, step), &["metrics"]);
            hook.step();
            step += 1;
        }
    }
    hook.close();
}

/// Whether global step `step` is an EVAL step of [`write_run`]'s.
fn is_eval(step: u64) -> bool {
    step > 0 && step.is_multiple_of(10)
}

/// `(global step, value)` of every value of `name` in `mode`, read from the run's files by
/// smdebug-read's `Trial`.
fn files_values(trial: &Trial, name: &str, mode: Mode) -> BTreeMap<u64, f64> {
    let tensor = trial.tensor(name).unwrap();
    tensor
        .steps(None)
        .unwrap()
        .into_iter()
        .filter(|&step| is_eval(step) == (mode == Mode::Eval))
        .map(|step| {
            let v = tensor.value(step, None, None).unwrap();
            (step, v.iter().copied().next().unwrap())
        })
        .collect()
}

/// One mode of one scalar from `/scalars`: `(steps, values, width)`.
fn series(page: &Value, name: &str, mode: &str) -> (Vec<u64>, Vec<f64>) {
    let s = page["scalars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {page}"));
    let m = s["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == mode)
        .unwrap();
    let steps = m["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    let values = m["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    (steps, values)
}

#[test]
fn zoomed_windows_are_the_files_values_and_buckets_their_true_extremes() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path());
    let location = dir.path().to_str().unwrap().to_owned();
    let trial = Trial::open(&location).unwrap();
    let mut files: BTreeMap<(&str, &str), BTreeMap<u64, f64>> = BTreeMap::new();
    for (name, mode) in [
        ("loss", Mode::Train),
        ("metric_a", Mode::Train),
        ("loss", Mode::Eval),
    ] {
        files.insert((name, mode.name()), files_values(&trial, name, mode));
    }
    let written: usize = files.values().map(BTreeMap::len).sum();
    assert!(files[&("loss", "TRAIN")].len() > 5_000);

    let mut options = ServeOptions::new(vec![location]);
    options.read_only = true;
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(300), "the whole run read", || {
        let r = &get_json(&format!("{url}/api/runs"))["runs"][0];
        (r["complete"] == true
            && r["index_pending"] == 0
            && r["scalar_values"].as_u64() == Some(written as u64))
        .then_some(())
    });
    let api = format!("{url}/api/runs/0");

    // A zoomed window: every value of the files in it, exactly, at its step.
    for (from, to) in [(1_000, 1_300), (1_230, 1_250), (4_321, 5_100)] {
        let page = get_json(&format!("{api}/scalars?from={from}&to={to}"));
        for ((name, mode), values) in &files {
            let (steps, got) = series(&page, name, mode);
            let want: Vec<(u64, f64)> = values.range(from..=to).map(|(s, v)| (*s, *v)).collect();
            let got: Vec<(u64, f64)> = steps.into_iter().zip(got).collect();
            assert_eq!(got, want, "{name} {mode} in {from}..={to}");
        }
    }

    // Charts drawn from the buckets (a budget the buckets' width fits, and the whole run):
    // every point is a value of the files at its step, and each slice's true lowest and
    // highest value are among them.
    for (query, points) in [("points=200", 200usize), ("points=60&from=0&to=7000", 60)] {
        let page = get_json(&format!("{api}/scalars?{query}"));
        for ((name, mode), values) in &files {
            let s = page["scalars"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == *name)
                .unwrap();
            let m = s["modes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mode"] == *mode)
                .unwrap();
            assert_eq!(m["total"].as_u64(), Some(values.len() as u64));
            let (steps, got) = series(&page, name, mode);
            assert!(got.len() <= points, "{}", got.len());
            for (step, v) in steps.iter().zip(&got) {
                assert_eq!(values.get(step), Some(v), "{name} {mode} at {step}");
            }
            // The whole range's lowest and highest (the spikes) are shown.
            let lo = values.values().copied().fold(f64::INFINITY, f64::min);
            let hi = values.values().copied().fold(f64::NEG_INFINITY, f64::max);
            assert!(got.contains(&lo) && got.contains(&hi), "{name} {mode}");
            assert_eq!(steps.first(), values.keys().next(), "{name} {mode}");
            assert_eq!(steps.last(), values.keys().last(), "{name} {mode}");
        }
    }

    // The headline loss chart, from the buckets, with its slices' width: each slice's true
    // lowest and highest value of the files are shown.
    let h = get_json(&format!("{api}/headlines?points=200"));
    let chart = &h["loss"];
    let width = chart["width"].as_u64().unwrap();
    assert!(width > 1, "{chart}");
    let values = &files[&("loss", "TRAIN")];
    let steps: Vec<u64> = chart["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    let shown: Vec<f64> = chart["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let mut slices: BTreeMap<u64, Vec<(u64, f64)>> = BTreeMap::new();
    for (s, v) in values {
        slices.entry(s / width).or_default().push((*s, *v));
    }
    for (slice, inside) in &slices {
        let lo = inside.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = inside.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        let here: Vec<f64> = steps
            .iter()
            .zip(&shown)
            .filter(|(s, _)| **s / width == *slice)
            .map(|(_, v)| *v)
            .collect();
        assert!(
            here.contains(&lo) && here.contains(&hi),
            "slice {slice} of width {width}: lowest {lo}, highest {hi}, shown {here:?}"
        );
        assert!(here.iter().all(|v| (lo..=hi).contains(v)));
    }

    // A scalar's one-cell view at a step read again from the files, and at its last step.
    let cell = get_json(&format!("{api}/tensor2d?name=metric_a&step=2345"));
    assert_eq!(
        cell["cells"][0][0].as_f64(),
        files[&("metric_a", "TRAIN")].get(&2345).copied()
    );
    server.shutdown();
}
