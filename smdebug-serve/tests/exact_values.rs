//! What the Scalars tab's downloads and the Tensors tab's histograms are made of, against a run
//! written by smdebug's hook and read independently through smdebug-read's `Trial`:
//! `/scalars/values` holds every value of the scalars its filter matches at every step of every mode exactly as the
//! files hold it (NaN included), not the downsampled points the charts draw; and
//! `/tensor_histograms` counts each shown step's values into bins spanning the finite values of
//! those steps, as counting the `Trial`'s values into the same bins gives.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use smdebug_core::{Mode, TensorView};
use smdebug_read::trial::Trial;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::runs::every_step_hook;
use support::{client, get_json, wait_for};

/// Global steps written: more than one index folder (1,000 steps each) and more than a chart's
/// points.
const STEPS: u64 = 2_500;

fn is_eval(step: u64) -> bool {
    step > 0 && step.is_multiple_of(25)
}

/// A jagged loss with digits a downsampled or rounded copy would not keep; NaN at step 777.
fn loss(step: u64) -> f64 {
    if step == 777 {
        return f64::NAN;
    }
    1.0 / (1.0 + step as f64 / 300.0) + ((step * 2_654_435_761) % 10_007) as f64 * 1.37e-7
}

/// `layer/weight` at a step: 8 × 16 values spreading as training goes, one NaN and one +Inf
/// every 100th step.
fn weight(step: u64) -> Vec<f32> {
    (0..128)
        .map(|i| {
            if step.is_multiple_of(100) && i == 5 {
                f32::NAN
            } else if step.is_multiple_of(100) && i == 6 {
                f32::INFINITY
            } else {
                ((i as f32 - 64.0) / 64.0) * (1.0 + step as f32 / 500.0) + (i % 7) as f32 * 0.01
            }
        })
        .collect()
}

fn write_run(dir: &Path) {
    let mut hook = every_step_hook(dir);
    let mut step = 0;
    while step < STEPS {
        let mode = if is_eval(step) {
            Mode::Eval
        } else {
            Mode::Train
        };
        hook.set_mode(mode);
        hook.save_scalar("loss", loss(step), &["losses"]);
        if mode == Mode::Train {
            let w = weight(step);
            hook.save_tensor(
                "layer/weight",
                &TensorView::from_slice(&w, &[8, 16]).unwrap(),
                &["weights"],
            );
        }
        hook.step();
        step += 1;
    }
    hook.close();
}

fn serve(dir: &Path) -> (Server, String, String) {
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    write_run(&run);
    let location = run.to_str().unwrap().to_owned();
    let server = Server::start(ServeOptions::new(vec![location.clone()])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(120), "the run loaded", || {
        let v = get_json(&format!("{url}/api/runs"));
        let r = &v["runs"][0];
        (r["complete"] == true && r["steps"] == STEPS && r["index_pending"] == 0).then_some(())
    });
    (server, url, location)
}

/// A number of the API: a JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
fn num(v: &Value) -> f64 {
    match v.as_str() {
        Some("NaN") => f64::NAN,
        Some("Infinity") => f64::INFINITY,
        Some("-Infinity") => f64::NEG_INFINITY,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

/// Equal as the files hold them: the same bits (NaN equals NaN).
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn every_value_holds_each_step_of_a_scalar_as_the_files_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, location) = serve(dir.path());

    // The Trial's values of `loss`, by mode.
    let trial = Trial::open(&location).unwrap();
    let tensor = trial.tensor("loss").unwrap();
    let mut files: BTreeMap<&str, BTreeMap<u64, f64>> = BTreeMap::new();
    for step in tensor.steps(None).unwrap() {
        let v = tensor.value(step, None, None).unwrap();
        let mode = if is_eval(step) { "EVAL" } else { "TRAIN" };
        files
            .entry(mode)
            .or_default()
            .insert(step, v.iter().copied().next().unwrap());
    }
    assert_eq!(files["TRAIN"].len() + files["EVAL"].len(), STEPS as usize);
    assert!(files["TRAIN"][&777].is_nan());

    let got = get_json(&format!("{url}/api/runs/0/scalars/values?regex=^loss$"));
    assert_eq!(got["scalars"].as_array().unwrap().len(), 1);
    assert_eq!(got["values"], STEPS);
    assert_eq!(got["scalars"][0]["name"], "loss");
    let modes = got["scalars"][0]["modes"].as_array().unwrap();
    assert_eq!(
        modes
            .iter()
            .map(|m| m["mode"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["EVAL", "TRAIN"]
    );
    for m in modes {
        let mode = m["mode"].as_str().unwrap();
        let steps: Vec<u64> = m["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .collect();
        let values: Vec<f64> = m["values"].as_array().unwrap().iter().map(num).collect();
        let walls = m["wall_times"].as_array().unwrap();
        assert_eq!(steps.len(), values.len());
        assert_eq!(steps.len(), walls.len());
        assert!(walls.iter().all(|w| w.as_f64().is_some_and(|t| t > 1e9)));
        let expected = &files[mode];
        assert_eq!(
            steps,
            expected.keys().copied().collect::<Vec<_>>(),
            "{mode}: not every step"
        );
        for (step, value) in steps.iter().zip(&values) {
            assert!(
                same(*value, expected[step]),
                "{mode} step {step}: served {value}, the files hold {}",
                expected[step]
            );
        }
    }
    // The chart's points of the same scalar are fewer: the download is not what is drawn.
    let drawn = get_json(&format!("{url}/api/runs/0/scalars?regex=^loss$&points=500"));
    let drawn_train = drawn["scalars"][0]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == "TRAIN")
        .unwrap()["steps"]
        .as_array()
        .unwrap()
        .len();
    assert!(drawn_train < files["TRAIN"].len(), "{drawn_train}");

    // A filter no scalar of the run matches: 404, saying so; a bad one: 400.
    let r = client()
        .get(format!("{url}/api/runs/0/scalars/values?regex=^nope$"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no scalar of this run matches \"^nope$\""),
        "{body}"
    );
    let r = client()
        .get(format!("{url}/api/runs/0/scalars/values?regex=("))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[test]
fn tensor_histograms_count_the_trials_values_into_shared_bins() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, location) = serve(dir.path());
    let (max_steps, bins) = (9, 12);
    let h = get_json(&format!(
        "{url}/api/runs/0/tensor_histograms?name=layer/weight&steps={max_steps}&bins={bins}"
    ));

    let trial = Trial::open(&location).unwrap();
    let tensor = trial.tensor("layer/weight").unwrap();
    let all_steps = tensor.steps(None).unwrap();
    assert_eq!(h["total_steps"], all_steps.len());
    assert_eq!(h["shape"], serde_json::json!([8, 16]));
    let rows = h["steps"].as_array().unwrap();
    let shown: Vec<u64> = rows.iter().map(|r| r["step"].as_u64().unwrap()).collect();
    // Evenly spread over the tensor's steps, its first and last among them, in order.
    assert_eq!(shown.len(), max_steps);
    assert_eq!(shown.first(), all_steps.first());
    assert_eq!(shown.last(), all_steps.last());
    assert!(shown.windows(2).all(|w| w[0] < w[1]));
    assert!(shown.iter().all(|s| all_steps.contains(s)));

    // The Trial's values at those steps.
    let values: Vec<Vec<f64>> = shown
        .iter()
        .map(|&s| {
            tensor
                .value(s, None, None)
                .unwrap()
                .iter()
                .copied()
                .collect()
        })
        .collect();
    let finite = values.iter().flatten().copied().filter(|x| x.is_finite());
    let lo = finite.clone().fold(f64::INFINITY, f64::min);
    let hi = finite.fold(f64::NEG_INFINITY, f64::max);
    let edges: Vec<f64> = h["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_f64().unwrap())
        .collect();
    assert_eq!(edges.len(), bins + 1);
    assert_eq!(
        (edges[0], edges[bins]),
        (lo, hi),
        "the bins span the finite values"
    );
    for (i, w) in edges.windows(2).enumerate() {
        let width = (hi - lo) / bins as f64;
        assert!(
            ((w[1] - w[0]) - width).abs() < 1e-9 * (hi - lo),
            "bin {i} is {} wide, not {width}",
            w[1] - w[0]
        );
    }

    let mut non_finite_seen = 0;
    for ((row, step), vals) in rows.iter().zip(&shown).zip(&values) {
        // Each value in the bin [e_i, e_i+1), the last bin holding its upper edge.
        let mut counts = vec![0u64; bins];
        let mut non_finite = 0;
        for &x in vals {
            if !x.is_finite() {
                non_finite += 1;
                continue;
            }
            let i = (0..bins)
                .rev()
                .find(|&i| x >= edges[i])
                .expect("a value below the lowest edge");
            counts[i] += 1;
        }
        let served: Vec<u64> = row["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        assert_eq!(served, counts, "step {step}");
        assert_eq!(row["non_finite"], non_finite, "step {step}");
        assert_eq!(served.iter().sum::<u64>() + non_finite, 128, "step {step}");
        non_finite_seen += non_finite;
    }
    // Step 0 (shown: the first) has its NaN and +Inf.
    assert!(non_finite_seen >= 2, "{non_finite_seen}");

    // A tensor the run does not have: an error, not an empty histogram.
    let r = client()
        .get(format!("{url}/api/runs/0/tensor_histograms?name=nope"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Steps numbered far apart (a job that numbers its steps by samples seen, say) are read where
/// they are: every value, none lost between index folders a trillion steps apart.
#[test]
fn every_value_of_steps_numbered_far_apart() {
    use smdebug_io::crafted::{scalar, write_step};
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let steps = [0u64, 7, 999, 1_000, 123_456_789, 2_000_000_000_000];
    for (i, &s) in steps.iter().enumerate() {
        write_step(
            &run,
            s,
            "worker_0",
            Mode::Train,
            i as u64,
            &[scalar("loss", 0.25 + i as f32)],
        );
    }
    std::fs::write(run.join(smdebug_format::layout::END_MARKER), b"").unwrap();
    let mut options = ServeOptions::new([&run]);
    options.max_download_values = 4;
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    wait_for(Duration::from_secs(60), "the run loaded", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["scalar_values"] == steps.len()).then_some(())
    });
    // More values than an answer holds: 413 and why; the steps in two answers.
    let r = client()
        .get(format!("{url}/api/runs/0/scalars/values?regex=^loss$"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Value = r.json().unwrap();
    assert_eq!(
        body["error"], "6 values of 1 scalar(s): more than 4 in one answer",
        "{body}"
    );
    let first = get_json(&format!(
        "{url}/api/runs/0/scalars/values?regex=^loss$&to=999"
    ));
    assert_eq!(
        first["scalars"][0]["modes"][0]["steps"],
        serde_json::json!([0, 7, 999])
    );
    let rest = get_json(&format!(
        "{url}/api/runs/0/scalars/values?regex=^loss$&from=1000"
    ));
    assert_eq!(rest["values"], 3);

    let mut all_steps = Vec::new();
    let mut values = Vec::new();
    for got in [first, rest] {
        let m = &got["scalars"][0]["modes"][0];
        assert_eq!(m["mode"], "TRAIN");
        all_steps.extend(
            m["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_u64().unwrap()),
        );
        values.extend(m["values"].as_array().unwrap().iter().map(num));
    }
    assert_eq!(all_steps, steps);
    assert_eq!(values, [0.25, 1.25, 2.25, 3.25, 4.25, 5.25]);
}
