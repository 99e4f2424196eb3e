//! Zooming a scalar chart in the page, in Chromium at 1440×900 (driven over the DevTools
//! protocol like `browser.rs`), on a run written by the real hook (issue 36): the whole run is
//! drawn downsampled (fewer points than steps), and a drag across a narrow window of the
//! Scalars tab's `loss` chart, and of the summary's loss chart (TRAIN and EVAL), makes the page ask the server
//! for that window, so that the chart then holds every value of it exactly as the run's files
//! hold them (checked against smdebug-read's `Trial`). A double-click gives the whole run back.
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium. Screenshots are left in
//! cargo's target directory (`target/tmp/serve_zoom/`).

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::Mode;
use smdebug_read::trial::Trial;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::chromium;
use smdebug_testkit::chromium::Cdp;
use smdebug_testkit::runs::every_step_hook;

/// Global steps written (and an EVAL step after the last): more than a chart's points.
const STEPS: u64 = 6_000;

/// A jagged value: neighbouring steps differ, so no downsampled line holds them all.
fn value(salt: u64, step: u64) -> f64 {
    let noise = ((step * 2_654_435_761 + salt * 97) % 10_007) as f64 / 10_007.0;
    1.0 / (1.0 + step as f64 / 500.0) + noise * 0.1
}

/// Whether global step `step` is one of [`write_run`]'s EVAL steps.
fn is_eval(step: u64) -> bool {
    step > 0 && step.is_multiple_of(10)
}

/// The run, written by smdebug's hook and writer: `loss` every step (TRAIN, and EVAL every
/// tenth), and `accuracy` every TRAIN step.
fn write_run(dir: &Path) {
    let mut hook = every_step_hook(dir);
    let mut step = 0;
    while step < STEPS {
        hook.set_mode(Mode::Train);
        hook.save_scalar("loss", value(0, step), &["losses"]);
        hook.save_scalar("accuracy", 1.0 - value(1, step) / 2.0, &["metrics"]);
        hook.step();
        step += 1;
        if is_eval(step) {
            hook.set_mode(Mode::Eval);
            hook.save_scalar("loss", value(2, step), &["losses"]);
            hook.step();
            step += 1;
        }
    }
    hook.close();
}

/// What the page's chart `key` holds: `(x values, [(label, values)], x scale)`.
type Held = (
    Vec<Option<f64>>,
    Vec<(String, Vec<Option<f64>>)>,
    (f64, f64),
);

fn chart(cdp: &mut Cdp, key: &str) -> Option<Held> {
    let d = cdp.eval(&format!(
        "JSON.stringify((window.SMD && window.SMD.chartData && window.SMD.chartData({})) || null)",
        serde_json::to_string(key).unwrap()
    ));
    let d: Value = serde_json::from_str(d.as_str()?).ok()?;
    if d.is_null() {
        return None;
    }
    let nums = |v: &Value| -> Vec<Option<f64>> {
        v.as_array().unwrap().iter().map(Value::as_f64).collect()
    };
    let lines = d["labels"]
        .as_array()
        .unwrap()
        .iter()
        .zip(d["y"].as_array().unwrap())
        .map(|(label, y)| (label.as_str().unwrap().to_owned(), nums(y)))
        .collect();
    let scale = (d["scale"][0].as_f64()?, d["scale"][1].as_f64()?);
    Some((nums(&d["x"]), lines, scale))
}

/// The points of line `label` (its x and value; gaps left out).
fn line(held: &Held, label: &str) -> BTreeMap<u64, f64> {
    let (xs, lines, _) = held;
    let (_, ys) = lines.iter().find(|(l, _)| l == label).unwrap_or_else(|| {
        panic!(
            "no line {label:?} in {:?}",
            lines.iter().map(|l| &l.0).collect::<Vec<_>>()
        )
    });
    xs.iter()
        .zip(ys)
        .filter_map(|(x, y)| Some((x.as_ref()?.round() as u64, (*y)?)))
        .collect()
}

/// Drags the mouse across chart `key` from step `from` to step `to` (its x scale is linear).
fn drag(cdp: &mut Cdp, key: &str, from: f64, to: f64) {
    let (_, _, (lo, hi)) = chart(cdp, key).unwrap();
    let rect = cdp.eval(&format!(
        "(() => {{ const o = document.querySelector('[data-chart={}] .u-over'); \
         o.scrollIntoView(); const r = o.getBoundingClientRect(); \
         return [r.left, r.top, r.width, r.height]; }})()",
        serde_json::to_string(key).unwrap()
    ));
    let r: Vec<f64> = rect
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let px = |step: f64| r[0] + (step - lo) / (hi - lo) * r[2];
    let (x0, x1, y) = (px(from), px(to), r[1] + r[3] / 2.0);
    cdp.drag(y, x0, x1);
}

/// A double-click on chart `key` (uPlot's "everything again").
fn double_click(cdp: &mut Cdp, key: &str) {
    let at = cdp.eval(&format!(
        "(() => {{ const r = document.querySelector('[data-chart={}] .u-over').getBoundingClientRect(); \
         return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
        serde_json::to_string(key).unwrap()
    ));
    let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
    for count in [1, 2] {
        for kind in ["mousePressed", "mouseReleased"] {
            cdp.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": count,
                       "buttons": if kind == "mouseReleased" { 0 } else { 1 }}),
            );
        }
    }
}

/// Zooms chart `key` by a drag from step `from` to step `to` and checks that it then holds every
/// value of `raw` (files' values `files`) in the window the page asked for (its status field
/// `zooms`, under `loss`); returns that window.
fn zoom_is_exact(
    cdp: &mut Cdp,
    key: &str,
    zooms: &str,
    raw: &str,
    files: &BTreeMap<u64, f64>,
    (from, to): (f64, f64),
) -> (u64, u64) {
    let whole = chart(cdp, key).unwrap();
    let before = line(&whole, raw);
    let held_before = before.range(from as u64..=to as u64).count();
    let in_window = files.range(from as u64..=to as u64).count();
    // The whole run is drawn downsampled: the window's steps are not all there yet.
    assert!(
        held_before < in_window,
        "{key}: the whole-run chart already holds {held_before} of the window's {in_window} values"
    );
    drag(cdp, key, from, to);
    let mut window = (0, 0);
    cdp.wait(
        Duration::from_secs(30),
        &format!("the zoomed window of {key}"),
        |c| {
            let s = c.status();
            let Some(w) = s[zooms]["loss"].as_array() else {
                return false;
            };
            window = (w[0].as_u64().unwrap(), w[1].as_u64().unwrap());
            chart(c, key).is_some_and(|held| {
                let l = line(&held, raw);
                files
                    .range(window.0..=window.1)
                    .all(|(s, _)| l.contains_key(s))
            })
        },
    );
    let (lo, hi) = window;
    // The drag's steps, to a pixel's worth.
    assert!(
        lo.abs_diff(from as u64) < 10 && hi.abs_diff(to as u64) < 10,
        "{key}: a drag over {from}..{to} asked for {lo}..={hi}"
    );
    // Every point the chart holds is the files' value at its step, and no step is missing.
    let held = chart(cdp, key).unwrap();
    let expected: BTreeMap<u64, f64> = files.range(lo..=hi).map(|(s, v)| (*s, *v)).collect();
    assert_eq!(
        line(&held, raw),
        expected,
        "{key}: the zoomed chart's points are not the files' values"
    );
    assert!(expected.len() > held_before, "{key}");
    window
}

#[test]
fn a_zoomed_scalar_chart_holds_the_files_values_at_every_step_of_its_window() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    write_run(&run);
    let location = run.to_str().unwrap().to_owned();
    let trial = Trial::open(&location).unwrap();
    let tensor = trial.tensor("loss").unwrap();
    let files = |mode: Mode| -> BTreeMap<u64, f64> {
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
    };
    let (train, eval) = (files(Mode::Train), files(Mode::Eval));
    let steps = (train.len() + eval.len()) as u64;
    assert!(steps >= STEPS, "{steps}");

    let server = Server::start(ServeOptions::new(vec![location])).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    support::wait_for(Duration::from_secs(60), "the whole run served", || {
        let v = support::get_json(&format!("{api}/api/runs"));
        (v["runs"][0]["steps"].as_u64() == Some(steps) && v["runs"][0]["complete"] == true)
            .then_some(())
    });

    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_zoom");
    std::fs::create_dir_all(&artifacts).unwrap();

    // The Scalars tab: `loss` has a TRAIN and an EVAL line, each raw and smoothed.
    cdp.navigate(&format!("{}#/run/0/scalars", server.url()));
    let key = "scalar:loss";
    cdp.wait(Duration::from_secs(60), "the loss chart", |c| {
        chart(c, key).is_some_and(|held| line(&held, "TRAIN raw").len() > 100)
    });
    let (lo, hi) = zoom_is_exact(
        &mut cdp,
        key,
        "scalar_zooms",
        "TRAIN raw",
        &train,
        (3_000.0, 3_080.0),
    );
    // The EVAL line of the window: its values too.
    let held = chart(&mut cdp, key).unwrap();
    let expected: BTreeMap<u64, f64> = eval.range(lo..=hi).map(|(s, v)| (*s, *v)).collect();
    assert!(!expected.is_empty());
    assert_eq!(line(&held, "EVAL raw"), expected);
    let title = cdp.eval("document.querySelector('[data-chart=\"scalar:loss\"] h4').textContent");
    assert!(
        title
            .as_str()
            .unwrap()
            .contains(&format!("steps {lo}–{hi}")),
        "{title}"
    );
    cdp.screenshot(&artifacts.join("scalars-zoomed.png"));

    // A double-click: the whole run again, downsampled.
    double_click(&mut cdp, key);
    cdp.wait(Duration::from_secs(30), "the whole run again", |c| {
        chart(c, key).is_some_and(|held| {
            let l = line(&held, "TRAIN raw");
            l.keys().next() == train.keys().next() && l.keys().last() == train.keys().last()
        })
    });
    assert_eq!(cdp.status()["scalar_zooms"], json!({}));

    // The summary's loss chart (TRAIN, unsmoothed) zooms the same way.
    cdp.eval("location.hash = '#/run/0/summary'");
    let key = "headline:loss";
    cdp.wait(Duration::from_secs(60), "the summary's loss chart", |c| {
        chart(c, key).is_some_and(|held| line(&held, "TRAIN").len() > 100)
    });
    // TRAIN and EVAL together on the summary (the EVAL line was not there).
    let whole = chart(&mut cdp, key).unwrap();
    assert!(
        line(&whole, "EVAL").len() > 100,
        "no EVAL line on the summary's loss chart"
    );
    let (lo, hi) = zoom_is_exact(
        &mut cdp,
        key,
        "headline_zooms",
        "TRAIN",
        &train,
        (1_200.0, 1_260.0),
    );
    // The zoomed window's EVAL values beside the TRAIN ones, as the files hold them.
    let held = chart(&mut cdp, key).unwrap();
    let expected: BTreeMap<u64, f64> = eval.range(lo..=hi).map(|(s, v)| (*s, *v)).collect();
    assert!(!expected.is_empty());
    assert_eq!(line(&held, "EVAL"), expected);
    cdp.screenshot(&artifacts.join("summary-loss-zoomed.png"));

    cdp.pump(Duration::from_millis(300));
    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["csp"], json!([]), "{s}");
}
