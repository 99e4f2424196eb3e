//! The Scalars tab as a TensorBoard user works it (issue 38), in Chromium at 1440×900 (driven over
//! the DevTools protocol), on two runs written by smdebug's hook, each with 50 scalars named
//! with prefixes (`grads/…`, `weights.…`, `lr/…`, and `loss`, `accuracy` without one), one run's
//! loss exploding to 1e3 over its last steps:
//!
//! - the y range leaves the explosion out (the healthy run's every value within it, 1e3 not),
//!   and takes it in again when "Ignore outliers" is turned off;
//! - a card's log switch makes that card's y axis logarithmic and no other's;
//! - each run has one colour, the same in every chart, the Compare tab and its summary's loss
//!   chart, and the mode is told by the dash; the legend leaves the faint raw lines out and writes 2.59e-4, not 0;
//! - cards are grouped by prefix, a collapsed group holds no chart, a pinned card comes first
//!   and stays first (and the group collapsed) after a reload; a widened card spans the panel;
//! - a card's CSV, and the toolbar's, hold every value of every step, as smdebug-read's `Trial`
//!   reads them from the same runs (the files Chromium saved are read back), also when the
//!   server gives fewer values an answer than they hold.
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium. Screenshots are left in
//! cargo's target directory (`target/tmp/serve_scalars/`).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::Mode;
use smdebug_read::trial::Trial;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::chromium::{self, Cdp};
use smdebug_testkit::runs::every_step_hook;

const STEPS: u64 = 400;
/// The exploding run's loss from this step on.
const EXPLODES_AT: u64 = 392;
/// `lr/value`: small enough for a legend that rounds to print 0.
const LR: f64 = 2.59e-4;

/// The 50 scalar names: 2 without a prefix, 24 `grads/`, 20 `weights.`, 4 `lr/`.
fn names() -> Vec<String> {
    let mut n = vec!["loss".to_owned(), "accuracy".to_owned()];
    n.extend((0..24).map(|i| format!("grads/layer{i:02}")));
    n.extend((0..20).map(|i| format!("weights.layer{i:02}")));
    n.extend(["lr/value", "lr/warmup", "lr/decay", "lr/scale"].map(String::from));
    n
}

/// A jagged healthy loss between 0.5 and 1.5.
fn healthy_loss(salt: u64, step: u64) -> f64 {
    let noise = ((step * 2_654_435_761 + salt * 97) % 10_007) as f64 / 10_007.0;
    0.5 + 0.6 * (1.0 - step as f64 / STEPS as f64) + 0.4 * noise
}

fn value(name: &str, exploding: bool, step: u64) -> f64 {
    match name {
        "loss" if exploding && step >= EXPLODES_AT => 1e3,
        "loss" => healthy_loss(u64::from(exploding), step),
        "accuracy" => 1.0 - healthy_loss(7, step) / 2.0,
        "lr/value" => LR,
        n => (n.len() as f64 + step as f64).sin() * 0.1 + 1.0,
    }
}

/// Whether global step `step` is an EVAL step (every 50th).
fn is_eval(step: u64) -> bool {
    step > 0 && step.is_multiple_of(50)
}

/// A run of `STEPS` steps, TRAIN but for an EVAL step every 50th, with [`names`] each step.
fn write_run(dir: &Path, exploding: bool) {
    let mut hook = every_step_hook(dir);
    for step in 0..STEPS {
        hook.set_mode(if is_eval(step) {
            Mode::Eval
        } else {
            Mode::Train
        });
        for name in names() {
            hook.save_scalar(&name, value(&name, exploding, step), &["scalars"]);
        }
        hook.step();
    }
    hook.close();
}

/// What the page's chart `key` holds (`window.SMD.chartData`), or `null`.
fn chart(cdp: &mut Cdp, key: &str) -> Value {
    let d = cdp.eval(&format!(
        "JSON.stringify((window.SMD && window.SMD.chartData && window.SMD.chartData({})) || null)",
        serde_json::to_string(key).unwrap()
    ));
    serde_json::from_str(d.as_str().unwrap()).unwrap()
}

/// The values of line `label` of a chart (gaps left out).
fn line(d: &Value, label: &str) -> Vec<f64> {
    let i = d["labels"]
        .as_array()
        .unwrap()
        .iter()
        .position(|l| l == label)
        .unwrap_or_else(|| panic!("no line {label:?} in {}", d["labels"]));
    d["y"][i]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect()
}

/// The colour of line `label`.
fn colour(d: &Value, label: &str) -> String {
    let i = d["labels"]
        .as_array()
        .unwrap()
        .iter()
        .position(|l| l == label)
        .unwrap();
    d["colours"][i].as_str().unwrap().to_owned()
}

/// `#1f77b4` as the DOM writes it: `rgb(31, 119, 180)`.
fn rgb(hex: &str) -> String {
    let n = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    format!("rgb({}, {}, {})", n >> 16, (n >> 8) & 255, n & 255)
}

fn y_scale(d: &Value) -> (f64, f64) {
    (
        d["yScale"][0].as_f64().unwrap(),
        d["yScale"][1].as_f64().unwrap(),
    )
}

/// What the window shows (1440×900), as a PNG file at `path`.
fn viewport(cdp: &mut Cdp, path: &Path) {
    std::fs::write(path, cdp.png(false)).unwrap();
}

fn click(cdp: &mut Cdp, selector: &str) {
    let found = cdp.eval(&format!(
        "(() => {{ const b = document.querySelector({}); if (!b) return false; b.click(); return true; }})()",
        serde_json::to_string(selector).unwrap()
    ));
    assert_eq!(found, true, "nothing to click at {selector}");
}

/// The chart keys of group section `group`, in order.
fn cards(cdp: &mut Cdp, group: &str) -> Vec<String> {
    let v = cdp.eval(&format!(
        "[...document.querySelectorAll('#scalar-charts > section[data-group={}] .chart')].map(c => c.dataset.chart)",
        serde_json::to_string(group).unwrap()
    ));
    v.as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

/// The download Chromium saved as `name` in `dir`, once it is complete.
fn downloaded(cdp: &mut Cdp, dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    cdp.wait(Duration::from_secs(60), name, |_| {
        path.exists() && !dir.join(format!("{name}.crdownload")).exists()
    });
    std::fs::read_to_string(&path).unwrap()
}

/// Rows of a CSV download by (run, scalar, mode) → step → value; checks the header.
type Rows = BTreeMap<(String, String, String), BTreeMap<u64, f64>>;
fn parse_csv(text: &str) -> Rows {
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("run,scalar,mode,step,value,wall_time"),
        "{text:.200}"
    );
    let mut rows = Rows::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 6, "{l}");
        assert!(f[5].parse::<f64>().is_ok_and(|t| t > 1e9), "{l}");
        let prev = rows
            .entry((f[0].into(), f[1].into(), f[2].into()))
            .or_default()
            .insert(f[3].parse().unwrap(), f[4].parse().unwrap());
        assert!(prev.is_none(), "a step twice: {l}");
    }
    rows
}

/// Every value of `names` in the runs `runs` as the `Trial` reads them, by (run, scalar, mode).
fn trial_rows(runs: &[(String, PathBuf)], names: &[&str]) -> Rows {
    let mut rows = Rows::new();
    for (run, path) in runs {
        let trial = Trial::open(path.to_str().unwrap()).unwrap();
        for name in names {
            let tensor = trial.tensor(name).unwrap();
            for step in tensor.steps(None).unwrap() {
                let mode = if is_eval(step) {
                    Mode::Eval
                } else {
                    Mode::Train
                };
                let v = tensor.value(step, None, None).unwrap();
                rows.entry((run.clone(), (*name).to_owned(), mode.name().to_owned()))
                    .or_default()
                    .insert(step, v.iter().copied().next().unwrap());
            }
        }
    }
    rows
}

#[test]
fn the_scalars_tab_ranges_colours_groups_pins_and_downloads_every_value() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for (name, exploding) in [("healthy", false), ("exploding", true)] {
        let run = dir.path().join("runs").join(name);
        std::fs::create_dir_all(&run).unwrap();
        write_run(&run, exploding);
        runs.push((name.to_owned(), run));
    }
    let mut options = ServeOptions::new(runs.iter().map(|(_, p)| p));
    // Fewer values an answer than a run's loss has: the page's downloads ask for the names in
    // halves and a name's steps in halves, and put the answers together.
    options.max_download_values = 150;
    let server = Server::start(options).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    support::wait_for(Duration::from_secs(120), "both runs served", || {
        let v = support::get_json(&format!("{api}/api/runs"));
        let list = v["runs"].as_array().unwrap();
        (list.len() == 2
            && list
                .iter()
                .all(|r| r["steps"].as_u64() == Some(STEPS) && r["complete"] == true))
        .then_some(())
    });
    let list = support::get_json(&format!("{api}/api/runs"));
    assert_eq!(list["runs"][0]["name"], "healthy");
    assert_eq!(list["runs"][1]["name"], "exploding");

    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    let downloads = dir.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let page_session = cdp.session.take();
    cdp.call(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": downloads.to_str().unwrap()}),
    );
    cdp.session = page_session;
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_scalars");
    std::fs::create_dir_all(&artifacts).unwrap();

    cdp.navigate(&format!("{}#/run/0/scalars", server.url()));
    cdp.wait(
        Duration::from_secs(60),
        "the loss chart of both runs",
        |c| {
            let d = chart(c, "scalar:loss");
            !d.is_null() && d["labels"].to_string().contains("exploding TRAIN raw")
        },
    );

    // Outliers left out of the y range: the healthy run's every value is in it, 1e3 is not.
    let d = chart(&mut cdp, "scalar:loss");
    let healthy = line(&d, "healthy TRAIN raw");
    let (lo, hi) = (
        healthy.iter().copied().fold(f64::INFINITY, f64::min),
        healthy.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    assert!(line(&d, "exploding TRAIN raw").contains(&1e3));
    let (y0, y1) = y_scale(&d);
    assert!(
        y0 <= lo && y1 >= hi && y1 < 10.0,
        "y range {y0}..{y1} with outliers ignored; the healthy run spans {lo}..{hi}"
    );
    let title = cdp.eval("document.querySelector('[data-chart=\"scalar:loss\"] h4').textContent");
    assert!(
        title
            .as_str()
            .unwrap()
            .contains("outliers outside the y range"),
        "{title}"
    );
    cdp.eval("window.scrollTo(0, 0)");
    viewport(&mut cdp, &artifacts.join("outliers-ignored.png"));
    // Turned off: the explosion is in the range.
    cdp.eval(
        "(() => { const c = document.getElementById('ignore-outliers'); c.checked = false; \
           c.dispatchEvent(new Event('input')); })()",
    );
    cdp.wait(Duration::from_secs(30), "the whole y range", |c| {
        y_scale(&chart(c, "scalar:loss")).1 >= 1e3
    });
    cdp.eval(
        "(() => { const c = document.getElementById('ignore-outliers'); c.checked = true; \
           c.dispatchEvent(new Event('input')); })()",
    );
    cdp.wait(Duration::from_secs(30), "the robust y range again", |c| {
        y_scale(&chart(c, "scalar:loss")).1 < 10.0
    });

    // One colour per run in every chart, the mode by its dash; the Compare tab's the same.
    let acc = chart(&mut cdp, "scalar:accuracy");
    let loss = chart(&mut cdp, "scalar:loss");
    let healthy_colour = colour(&loss, "healthy TRAIN");
    let exploding_colour = colour(&loss, "exploding TRAIN");
    assert_ne!(healthy_colour, exploding_colour);
    for (run, c) in [
        ("healthy", &healthy_colour),
        ("exploding", &exploding_colour),
    ] {
        for d in [&loss, &acc] {
            for mode in ["TRAIN", "EVAL"] {
                assert_eq!(&colour(d, &format!("{run} {mode}")), c);
            }
        }
    }
    assert_eq!(
        loss["labels"].as_array().unwrap().len(),
        8,
        "raw and smoothed, 2 modes, 2 runs"
    );
    // TRAIN solid, EVAL dashed, raw and smoothed alike.
    for (label, dash) in loss["labels"]
        .as_array()
        .unwrap()
        .iter()
        .zip(loss["dashes"].as_array().unwrap())
    {
        let eval = label.as_str().unwrap().contains("EVAL");
        assert_eq!(dash.is_array(), eval, "{label}: {dash}");
    }
    // The legend: the smoothed lines only (4 rows for 2 runs of 2 modes, not 8).
    let legend = cdp.eval(
        "[...document.querySelectorAll('[data-chart=\"scalar:loss\"] .u-legend .u-series')].slice(1)\
           .filter(r => !r.hidden && getComputedStyle(r).display !== 'none').map(r => r.querySelector('.u-label').textContent)",
    );
    assert_eq!(
        legend,
        json!([
            "healthy EVAL",
            "healthy TRAIN",
            "exploding EVAL",
            "exploding TRAIN"
        ])
    );
    // The legend tells the modes apart as the lines do: an EVAL line's marker is dashed.
    let markers = cdp.eval(
        "[...document.querySelectorAll('[data-chart=\"scalar:loss\"] .u-legend .u-series')].slice(1)\
           .filter(r => !r.hidden && getComputedStyle(r).display !== 'none')\
           .map(r => [r.querySelector('.u-label').textContent, getComputedStyle(r.querySelector('.u-marker')).borderTopStyle])",
    );
    for m in markers.as_array().unwrap() {
        let eval = m[0].as_str().unwrap().ends_with("EVAL");
        assert_eq!(m[1], if eval { "dashed" } else { "solid" }, "{markers}");
    }
    // The run toggles on this tab carry the run's colour.
    let toggles =
        cdp.eval("[...document.querySelectorAll('#run-toggles .sw')].map(s => s.style.background)");
    assert_eq!(
        toggles,
        json!([rgb(&healthy_colour), rgb(&exploding_colour)])
    );

    // A small value keeps its digits: the legend at the cursor writes 2.59e-4.
    let key = "scalar:lr/value";
    let at = cdp.eval(&format!(
        "(() => {{ const o = document.querySelector('[data-chart=\"{key}\"] .u-over'); o.scrollIntoView(); \
           const r = o.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
    ));
    cdp.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": at[0], "y": at[1]}),
    );
    cdp.wait(Duration::from_secs(10), "the legend's values at the cursor", |c| {
        let v = c.eval(&format!(
            "[...document.querySelectorAll('[data-chart=\"{key}\"] .u-legend .u-series:not([hidden]) .u-value')].slice(1).map(e => e.textContent)"
        ));
        v.as_array()
            .is_some_and(|a| a.iter().any(|x| x == "2.59e-4"))
    });

    // Groups by prefix, names without one first; every card in one group.
    let groups = cdp.eval(
        "[...document.querySelectorAll('#scalar-charts > section')].map(s => [s.dataset.group, s.querySelector('h3').textContent])",
    );
    assert_eq!(
        groups,
        json!([
            ["group:", "▾ Without a prefix (2)"],
            ["group:grads", "▾ grads (24)"],
            ["group:lr", "▾ lr (4)"],
            ["group:weights", "▾ weights (20)"]
        ])
    );
    assert_eq!(cards(&mut cdp, "group:").len(), 2);
    assert_eq!(cards(&mut cdp, "group:grads").len(), 24);
    assert_eq!(cards(&mut cdp, "group:weights").len(), 20);
    cdp.eval("document.querySelector('section[data-group=\"group:lr\"]').scrollIntoView()");
    viewport(&mut cdp, &artifacts.join("groups.png"));

    // Collapsing a group: its cards are gone (not drawn), the others stay.
    click(
        &mut cdp,
        "#scalar-charts > section[data-group=\"group:grads\"] h3",
    );
    cdp.wait(Duration::from_secs(30), "grads collapsed", |c| {
        cards(c, "group:grads").is_empty()
    });
    assert_eq!(
        cdp.eval("document.querySelector('section[data-group=\"group:grads\"] h3').textContent"),
        "▸ grads (24)"
    );
    assert_eq!(cards(&mut cdp, "group:weights").len(), 20);
    assert_eq!(
        cdp.eval("document.querySelectorAll('#scalar-charts .chart').length"),
        26
    );

    // A log scale on one card: that card's y axis only.
    click(&mut cdp, "[data-chart=\"scalar:loss\"] [data-act=log]");
    cdp.wait(Duration::from_secs(30), "loss on a log scale", |c| {
        chart(c, "scalar:loss:log")["yLog"] == true
    });
    assert!(chart(&mut cdp, "scalar:loss").is_null());
    assert_eq!(chart(&mut cdp, "scalar:accuracy")["yLog"], false);
    assert_eq!(chart(&mut cdp, "scalar:weights.layer07")["yLog"], false);

    // Pinning a card: it comes first, in a section of its own, and leaves its group.
    click(
        &mut cdp,
        "[data-chart=\"scalar:weights.layer07\"] [data-act=pin]",
    );
    cdp.wait(Duration::from_secs(30), "the pinned card", |c| {
        cards(c, "pinned") == ["scalar:weights.layer07"]
    });
    let first = cdp.eval("document.querySelector('#scalar-charts > section').dataset.group");
    assert_eq!(first, "pinned");
    assert_eq!(cards(&mut cdp, "group:weights").len(), 19);

    // Widening a card: it spans the panel.
    click(&mut cdp, "[data-chart=\"scalar:accuracy\"] [data-act=wide]");
    cdp.wait(Duration::from_secs(30), "the wide card", |c| {
        !chart(c, "scalar:accuracy:wide").is_null()
    });
    let widths = cdp.eval(
        "[document.querySelector('[data-chart=\"scalar:accuracy:wide\"]').getBoundingClientRect().width, \
          document.querySelector('[data-chart=\"scalar:loss:log\"]').getBoundingClientRect().width, \
          document.querySelector('section[data-group=\"group:\"] .charts').getBoundingClientRect().width]",
    );
    let (wide, narrow, panel) = (
        widths[0].as_f64().unwrap(),
        widths[1].as_f64().unwrap(),
        widths[2].as_f64().unwrap(),
    );
    assert!(
        wide > 1.8 * narrow && wide > panel - 20.0,
        "wide {wide}, narrow {narrow}, panel {panel}"
    );
    cdp.eval("window.scrollTo(0, 0)");
    viewport(&mut cdp, &artifacts.join("pinned-log-wide.png"));

    // After a reload: the pinned card first, the group collapsed, the log and wide cards kept.
    cdp.call("Page.reload", json!({}));
    cdp.wait(Duration::from_secs(60), "the page again", |c| {
        cards(c, "pinned") == ["scalar:weights.layer07"]
            && !chart(c, "scalar:loss:log").is_null()
            && !chart(c, "scalar:accuracy:wide").is_null()
    });
    assert_eq!(
        cdp.eval("document.querySelector('#scalar-charts > section').dataset.group"),
        "pinned"
    );
    assert!(cards(&mut cdp, "group:grads").is_empty());

    // A card's CSV: every value of `loss` at every step of both runs, as the Trial reads them.
    click(&mut cdp, "[data-chart=\"scalar:loss:log\"] [data-act=csv]");
    let csv = parse_csv(&downloaded(&mut cdp, &downloads, "loss.csv"));
    let expected = trial_rows(&runs, &["loss"]);
    assert_eq!(
        expected.values().map(BTreeMap::len).sum::<usize>(),
        2 * STEPS as usize
    );
    assert_eq!(csv, expected);
    assert_eq!(
        csv[&(
            "exploding".to_owned(),
            "loss".to_owned(),
            "TRAIN".to_owned()
        )][&(STEPS - 1)],
        1e3
    );

    // The toolbar's CSV: every value of the scalars the filter shows.
    cdp.eval(
        "(() => { const r = document.getElementById('scalar-regex'); r.value = '^lr/'; \
           r.dispatchEvent(new Event('input')); })()",
    );
    cdp.wait(Duration::from_secs(30), "the lr scalars alone", |c| {
        c.eval("document.querySelectorAll('#scalar-charts .chart').length") == 4
    });
    click(&mut cdp, "#download-csv");
    let csv = parse_csv(&downloaded(&mut cdp, &downloads, "scalars.csv"));
    let lr = ["lr/value", "lr/warmup", "lr/decay", "lr/scale"];
    assert_eq!(csv, trial_rows(&runs, &lr));
    assert_eq!(csv.len(), 2 * 4 * 2, "2 runs × 4 scalars × 2 modes");

    // The Compare tab draws each run in its colour.
    cdp.eval("location.hash = '#/run/0/compare'");
    cdp.wait(Duration::from_secs(30), "the compare toggles", |c| {
        c.eval("document.querySelectorAll('#compare-toggles .sw').length") == 2
    });
    let swatches = cdp.eval(
        "[...document.querySelectorAll('#compare-toggles label')].map(l => [l.dataset.run, l.querySelector('.sw').style.background])",
    );
    assert_eq!(
        swatches,
        json!([["0", rgb(&healthy_colour)], ["1", rgb(&exploding_colour)]])
    );

    // The summary of the exploding run: its loss chart in its colour, EVAL dashed.
    cdp.eval("location.hash = '#/run/1/summary'");
    cdp.wait(
        Duration::from_secs(30),
        "the exploding run's loss chart",
        |c| {
            let d = chart(c, "headline:loss");
            !d.is_null() && d["colours"] == json!([exploding_colour, exploding_colour])
        },
    );
    let d = chart(&mut cdp, "headline:loss");
    assert_eq!(d["labels"], json!(["TRAIN", "EVAL"]));
    assert!(d["dashes"][0].is_null() && d["dashes"][1].is_array(), "{d}");

    cdp.pump(Duration::from_millis(300));
    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["csp"], json!([]), "{s}");
}
