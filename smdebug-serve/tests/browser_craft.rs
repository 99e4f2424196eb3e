//! Chart craft, measured in the DOM of Chromium at 1440×900 (driven over the DevTools protocol
//! like `browser.rs`): every tab of three runs (a demo-like job with its system sampler, the
//! run an exploding loss stopped, and a few minutes of the synthetic run: 16 cores, 8 GPUs, 50
//! scalars) is opened in turn, and the test fails on
//!
//! - text cut off: an element that hides its overflow and holds more text than it shows,
//!   unless it ends in an ellipsis and its title holds the whole text; a page wider than the
//!   window; a chart wider than its card;
//! - an axis label outside its chart: a y-axis label wider than the room its axis was given
//!   (measured in the axis' own font), an x-axis label past the canvas' edges, a heatmap time
//!   label outside its panel;
//! - an empty legend, or a legend of "--" values;
//! - rows and lines out of natural order (cpu2 before cpu10; the heatmap, the timelines);
//! - raw metric ids as titles ("I/OWaitPercentage"); a percentage axis not from 0 to 100;
//! - the Compare tab's GPU lines sharing one colour and dash.
//!
//! A second test hunts the slowest step of the synthetic run as a person would: the slowest
//! steps table and its phases against the spans read from the trace files by the test, a sort
//! by a column in the DOM, the step's number in the step chart's tooltip, the step-duration
//! histogram's log bins, the click through to the timeline zoomed on the step, the span list
//! sorted by duration there, and the phase chart following the zoom.
//!
//! Screenshots of every tab are left in cargo's target directory (`target/tmp/serve_craft/`).
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium.

mod support;
#[path = "../examples/synthetic/mod.rs"]
mod synthetic;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::EndReason;
use smdebug_format::{end_marker_body, layout};
use smdebug_read::profile::{ProfilerReader, SpanQuery};
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_testkit::chromium::{self, Cdp};
use support::{JobConfig, start_job};

/// The tabs opened, with the panels (the page's `panel_ms` names) each draws.
const TABS: [(&str, &[&str]); 9] = [
    ("summary", &["overview", "headlines"]),
    ("scalars", &["scalars"]),
    ("rules", &["overview"]),
    ("system", &["overview", "system"]),
    ("steps", &["steps"]),
    ("tensors", &["tensors"]),
    ("code", &["code"]),
    ("kineto", &["kineto"]),
    ("compare", &["compare"]),
];

/// The parts of system metric ids (smdebug-profiler's vocabulary) that a title written for
/// people never runs into the word before them.
const RAW_ID_PARTS: [&str; 10] = [
    "Utilization",
    "Percent",
    "Wait",
    "PerSecond",
    "Bytes",
    "Throughput",
    "Used",
    "Watts",
    "Celsius",
    "Count",
];

/// The page measured: what is wrong on the shown tab, and what the checks in Rust read.
const MEASURE: &str = r##"(() => {
  const problems = [];
  const visible = (e) => !!(e.offsetParent || e.getClientRects().length);
  const what = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : "");
  // Text cut off by hidden overflow, not an ellipsis with the whole text in the title.
  const scope = [document.querySelector("header"), document.querySelector("nav"),
    ...document.querySelectorAll("main > section:not([hidden])")].filter((x) => x);
  for (const root of scope) {
    for (const e of [root, ...root.querySelectorAll("*")]) {
      if (!visible(e) || !e.textContent.trim() || e.closest(".uplot") || e.tagName === "SELECT" || e.tagName === "OPTION") continue;
      const cs = getComputedStyle(e);
      const hides = ["hidden", "clip"].includes(cs.overflowX) || ["hidden", "clip"].includes(cs.overflow);
      if (!hides || e.scrollWidth <= e.clientWidth + 1) continue;
      const ellipsis = cs.textOverflow === "ellipsis" && (e.title || "").includes(e.textContent.trim());
      if (!ellipsis) problems.push("text cut off: " + what(e) + " '" + e.textContent.slice(0, 80) + "' (" + e.scrollWidth + " > " + e.clientWidth + " px)");
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) problems.push("the page is wider than the window: " + document.documentElement.scrollWidth + " px");
  // Axis labels within their charts, measured in the axis' font.
  const ctx = document.createElement("canvas").getContext("2d");
  const charts = {};
  for (const key of window.SMD.chartKeys()) {
    const box = document.querySelector('[data-chart="' + CSS.escape(key) + '"]');
    if (!box || !visible(box)) continue;
    const c = window.SMD.chartData(key);
    charts[key] = { title: c.title, labels: c.labels, strokes: c.strokes, y: c.y_scale, x: c.x.length };
    if (box.scrollWidth > box.clientWidth + 1) problems.push(key + ": the chart is wider than its card (" + box.scrollWidth + " > " + box.clientWidth + " px)");
    for (const a of c.axes) {
      ctx.font = a.font;
      a.labels.forEach((text, i) => {
        if (!text) return;
        const w = ctx.measureText(text).width;
        if (a.side === 1 || a.side === 3) {
          // Right-aligned at the tick's end: the tick (10 px) and the gap (5 px) take room.
          if (w + 15 > a.size + 0.5) problems.push(key + ": y label '" + text + "' " + w.toFixed(1) + " px in an axis of " + a.size + " px");
        } else {
          const x = c.plot_left + a.at[i];
          if (x - w / 2 < -1 || x + w / 2 > c.canvas_width + 1) problems.push(key + ": x label '" + text + "' at " + x.toFixed(0) + " px outside 0–" + c.canvas_width);
          // Each label clear of the one before (centred on their ticks).
          const prev = a.labels.slice(0, i).map((t, j) => [t, j]).filter(([t]) => t).pop();
          if (prev) {
            const pw = ctx.measureText(prev[0]).width, px = c.plot_left + a.at[prev[1]];
            if (px + pw / 2 + 2 > x - w / 2) problems.push(key + ": x labels '" + prev[0] + "' and '" + text + "' overlap");
          }
        }
      });
    }
  }
  // Legends: each names its lines, and shows no "--".
  for (const leg of document.querySelectorAll(".u-legend")) {
    if (!visible(leg)) continue;
    const key = leg.closest("[data-chart]").dataset.chart;
    const rows = [...leg.querySelectorAll(".u-series")].filter(visible);
    if (!rows.length || rows.some((r) => !r.querySelector(".u-label") || !r.querySelector(".u-label").textContent.trim())) problems.push(key + ": an empty legend");
    for (const v of leg.querySelectorAll(".u-value")) if (visible(v) && v.textContent.trim() === "--") { problems.push(key + ": a legend of '--'"); break; }
  }
  // The heatmap's time labels within its panel.
  const panel = document.getElementById("system");
  if (visible(panel)) {
    const p = panel.getBoundingClientRect();
    for (const s of document.querySelectorAll("#heatmap-axis span")) {
      const r = s.getBoundingClientRect();
      if (r.left < p.left - 1 || r.right > p.right + 1) problems.push("heatmap time label '" + s.textContent + "' outside its panel");
    }
  }
  const status = JSON.parse(document.body.dataset.status);
  return { problems, charts, heat_rows: status.heatmap_rows || [], heat_axis: [...document.querySelectorAll("#heatmap-axis span")].map((s) => s.textContent),
    errors: status.errors, csp: status.csp };
})()"##;

/// Names compared as people count (`cpu2` before `cpu10`): the test's own reading of natural
/// order, to check the page's.
fn natural(a: &str, b: &str) -> Ordering {
    fn parts(s: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut text = String::new();
        let mut digits = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                if !digits.is_empty() {
                    out.push((std::mem::take(&mut text), digits.parse().unwrap()));
                    digits.clear();
                }
                text.push(c);
            }
        }
        out.push((
            text,
            if digits.is_empty() {
                0
            } else {
                digits.parse().unwrap()
            },
        ));
        out
    }
    parts(a).cmp(&parts(b))
}

fn naturally_sorted(names: &[String]) -> bool {
    names
        .windows(2)
        .all(|w| natural(&w[0], &w[1]) != Ordering::Greater)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A finished demo-like job: train steps with their phases, two slow ones, eval steps, loss and
/// accuracy, tensors, the system sampler; StepOutlier's and a few more rules' statuses.
fn write_demo(run: &Path) {
    std::fs::create_dir_all(run).unwrap();
    let job = start_job(
        Arc::new(LocalStorage::new(run).unwrap()),
        Some(run),
        JobConfig {
            steps: 160,
            step_time: Duration::from_millis(5),
            sampler: true,
            start_delay: Duration::ZERO,
            slow_steps: vec![50, 120],
        },
    );
    job.join();
    let summary = support::offline_rules(
        run.to_str().unwrap(),
        &["StepOutlier", "LowGPUUtilization", "LossNotDecreasing"],
    );
    support::write_rules(run, &summary);
}

/// The run ExplodingTensor stopped: its rules evaluated, its end marker as a job that honoured
/// the rule's stop request writes it (the rule's whole message).
fn write_bug(run: &Path) {
    std::fs::create_dir_all(run).unwrap();
    support::write_exploding_run(run);
    let summary = support::offline_rules(
        run.to_str().unwrap(),
        &[
            "ExplodingTensor",
            "LossNotDecreasing:num_steps=5",
            "LowGPUUtilization",
        ],
    );
    support::write_rules(run, &summary);
    let exploding = summary.rule("ExplodingTensor").unwrap();
    let line = format!(
        "ExplodingTensor fired at step {}: {}",
        exploding.first_fired_step.unwrap(),
        exploding.message
    );
    std::fs::write(
        run.join(layout::END_MARKER),
        end_marker_body(&EndReason::Stopped(line.into()), 1.0e9),
    )
    .unwrap();
}

/// Opens `tab` of run `id` and waits until its panels were drawn after the switch.
fn open_tab(cdp: &mut Cdp, id: usize, tab: &str, panels: &[&str]) {
    let since = cdp.eval("performance.now()").as_f64().unwrap();
    cdp.eval(&format!("location.hash = '#/run/{id}/{tab}'"));
    cdp.wait(
        Duration::from_secs(60),
        &format!("run {id}'s {tab} tab"),
        |c| {
            let s = c.status();
            s["tab"] == tab
                && panels
                    .iter()
                    .all(|p| s["panel_ms"][*p].as_f64().is_some_and(|at| at > since))
        },
    );
    // The charts laid out (uPlot sizes its axes on the next frame).
    cdp.pump(Duration::from_millis(300));
}

fn artifacts(name: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&out).unwrap();
    out
}

#[test]
fn every_tab_of_three_runs_fits_its_text_and_labels_at_1440x900() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runs = ["demo", "bug", "synthetic"].map(|n| dir.path().join(n));
    write_demo(&runs[0]);
    write_bug(&runs[1]);
    synthetic::write(runs[2].to_str().unwrap(), 2_000, 2).unwrap();
    let mut options = ServeOptions::new(&runs);
    // A PyTorch profiler trace for the Kineto tab: its kernel names run to hundreds of
    // characters.
    options.traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../smdebug-read/tests/data/pytorch-profiler-traces/trace_filter__sampled_rank-0.json.gz",
    )];
    let server = Server::start(options).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    support::wait_for(Duration::from_secs(120), "the three runs read", || {
        let v = support::get_json(&format!("{api}/api/runs"));
        let r = v["runs"].as_array().unwrap();
        (r.iter()
            .all(|x| x["complete"] == true && x["rules"].is_u64() || x["name"] == "synthetic")
            && r[2]["steps"] == 2_000
            && r[2]["complete"] == true
            && r[2]["spans"] == 10_000)
            .then_some(())
    });

    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    cdp.wait(Duration::from_secs(60), "the page", |c| {
        c.status()["panels"]["overview"] == true
    });
    let out = artifacts("serve_craft");
    let mut problems: Vec<String> = Vec::new();
    let mut gpu_lines = Value::Null;
    for (id, name) in ["demo", "bug", "synthetic"].iter().enumerate() {
        for (tab, panels) in TABS {
            open_tab(&mut cdp, id, tab, panels);
            let m = cdp.eval(MEASURE);
            cdp.screenshot(&out.join(format!("{name}-{tab}.png")));
            let at = format!("{name}/{tab}");
            for p in m["problems"].as_array().unwrap() {
                problems.push(format!("{at}: {}", p.as_str().unwrap()));
            }
            if m["errors"] != json!([]) || m["csp"] != json!([]) {
                problems.push(format!("{at}: script errors {} {}", m["errors"], m["csp"]));
            }
            let heat = strings(&m["heat_rows"]);
            if tab == "system" && !naturally_sorted(&heat) {
                problems.push(format!("{at}: heatmap rows out of order: {heat:?}"));
            }
            if tab == "system" && !heat.is_empty() && m["heat_axis"].as_array().unwrap().len() < 3 {
                problems.push(format!("{at}: the heatmap has no time axis"));
            }
            for (key, c) in m["charts"].as_object().unwrap() {
                let labels = strings(&c["labels"]);
                let devices: Vec<String> = labels
                    .iter()
                    .filter(|l| l.contains("cpu") || l.contains("gpu"))
                    .cloned()
                    .collect();
                if !naturally_sorted(&devices) {
                    problems.push(format!("{at}: {key}'s lines out of order: {devices:?}"));
                }
                let title = c["title"].as_str().unwrap_or("");
                // Titles of the dashboard's own charts (the scalars' are the run's names).
                let own = ["sys:", "compare:", "steps:", "phases", "headline:"]
                    .iter()
                    .any(|p| key.starts_with(p));
                // A metric id: a name part written onto the word before it
                // ("CPUUtilization", "I/OWaitPercentage", "ReceiveBytesPerSecond").
                let raw_id = RAW_ID_PARTS.iter().any(|part| {
                    title
                        .match_indices(part)
                        .any(|(at, _)| title[..at].chars().last().is_some_and(char::is_alphabetic))
                });
                if own && raw_id {
                    problems.push(format!(
                        "{at}: {key} is titled with a raw metric id: {title}"
                    ));
                }
                if own && title.contains("(%)") {
                    let y = &c["y"];
                    if y[0].as_f64() != Some(0.0) || y[1].as_f64().is_none_or(|hi| hi < 100.0) {
                        problems.push(format!("{at}: {key}'s percentage axis is {y}, not 0–100"));
                    }
                }
                if key == "compare:gpu" && name == &"synthetic" {
                    gpu_lines = c.clone();
                }
            }
        }
    }
    // The synthetic run's eight GPUs in eight colours on the Compare tab (it is the only run
    // with GPUs).
    let strokes = gpu_lines["strokes"].as_array().cloned().unwrap_or_default();
    let distinct: std::collections::BTreeSet<String> =
        strokes.iter().map(|s| s[0].to_string()).collect();
    if strokes.len() != 8 || distinct.len() != 8 {
        problems.push(format!(
            "compare: the GPU lines are not told apart: {gpu_lines}"
        ));
    }
    server.shutdown();
    assert!(
        problems.is_empty(),
        "{} problems (screenshots in {}):\n{}",
        problems.len(),
        out.display(),
        problems.join("\n")
    );
}

/// A step span read from the trace files by the test: its step, start, duration and time per
/// phase (the other spans of its node and worker within it, of its step).
#[derive(Debug)]
struct StepSpan {
    step: Option<u64>,
    start_us: u64,
    duration_us: u64,
    phases: BTreeMap<String, u64>,
}

fn steps_from_files(run: &Path) -> Vec<StepSpan> {
    let spans = ProfilerReader::open(run)
        .unwrap()
        .spans(&SpanQuery::default())
        .unwrap();
    let is_step = |p: &str| p.starts_with("Step:");
    spans
        .iter()
        .filter(|s| is_step(&s.phase))
        .map(|st| {
            let mut phases = BTreeMap::new();
            for s in spans.iter().filter(|s| {
                !is_step(&s.phase)
                    && s.node == st.node
                    && s.worker == st.worker
                    && s.start_us >= st.start_us
                    && s.end_us <= st.end_us
                    && (s.step.is_none() || st.step.is_none() || s.step == st.step)
            }) {
                *phases.entry(s.phase.clone()).or_default() += s.duration_us();
            }
            StepSpan {
                step: st.step,
                start_us: st.start_us,
                duration_us: st.duration_us(),
                phases,
            }
        })
        .collect()
}

#[test]
fn the_slowest_step_is_found_in_a_few_clicks() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("synthetic");
    // 3,000 steps: every 1000th step's backward pass is three times as long.
    synthetic::write(run.to_str().unwrap(), 3_000, 2).unwrap();
    let mut truth = steps_from_files(&run);
    assert_eq!(truth.len(), 3_000);
    truth.sort_by(|a, b| {
        b.duration_us
            .cmp(&a.duration_us)
            .then(a.start_us.cmp(&b.start_us))
    });

    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    support::wait_for(Duration::from_secs(120), "the run read", || {
        let v = support::get_json(&format!("{api}/api/runs"))["runs"][0].clone();
        (v["complete"] == true && v["spans"] == 15_000).then_some(())
    });

    // The view: the 20 slowest steps, with their phases, as the files have them.
    let st = support::get_json(&format!("{api}/api/runs/0/steps?slowest=20"));
    let slowest = st["slowest"].as_array().unwrap();
    assert_eq!(slowest.len(), 20);
    assert_eq!(st["window_steps"], 3_000);
    for (row, want) in slowest.iter().zip(&truth) {
        assert_eq!(row["step"].as_u64(), want.step, "{row}");
        assert!((row["duration"].as_f64().unwrap() - want.duration_us as f64 / 1e6).abs() < 1e-9);
        assert!((row["start"].as_f64().unwrap() - want.start_us as f64 / 1e6).abs() < 1e-6);
        let phases = row["phases"].as_object().unwrap();
        assert_eq!(
            phases.keys().collect::<Vec<_>>(),
            want.phases.keys().collect::<Vec<_>>(),
            "{row}"
        );
        for (p, us) in &want.phases {
            assert!(
                (phases[p].as_f64().unwrap() - *us as f64 / 1e6).abs() < 1e-9,
                "{row}"
            );
        }
        let other = (want.duration_us - want.phases.values().sum::<u64>()) as f64 / 1e6;
        assert!(
            (row["other"].as_f64().unwrap() - other).abs() < 1e-9,
            "{row}"
        );
    }
    // Steps 999, 1999 and 2999 are the slow ones.
    let top: Vec<u64> = slowest[..3]
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(top, [999, 1999, 2999]);
    // The histogram's bins are equal on a log axis, from the shortest step to the longest,
    // and hold every step.
    let h = &st["histogram"];
    let edges: Vec<f64> = h["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let ratio = edges[1] / edges[0];
    assert!(ratio > 1.0);
    for w in edges.windows(2) {
        assert!((w[1] / w[0] - ratio).abs() < 1e-6, "{edges:?}");
    }
    assert!((edges[0] - truth.last().unwrap().duration_us as f64 / 1e6).abs() < 1e-9);
    assert!((edges[edges.len() - 1] - truth[0].duration_us as f64 / 1e6).abs() < 1e-9);
    let counted: u64 = h["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counted, 3_000);

    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(&format!("{}#/run/0/steps", server.url()));
    cdp.wait(Duration::from_secs(60), "the steps tab", |c| {
        c.status()["panels"]["steps"] == true
    });
    cdp.pump(Duration::from_millis(300));
    let out = artifacts("serve_craft");
    cdp.screenshot(&out.join("hunt-steps.png"));
    // The table shows the slowest step first, with its phases' shares.
    let rows = "[...document.querySelectorAll('#slowest-steps tr.step-row')].map((r) => [r.dataset.step, [...r.children].map((c) => c.dataset.s || c.textContent)])";
    let table = cdp.eval(rows);
    let first = &table[0];
    assert_eq!(first[0], "999", "{table}");
    assert_eq!(table.as_array().unwrap().len(), 20, "{table}");
    let heads =
        cdp.eval("[...document.querySelectorAll('#slowest-steps th')].map((t) => t.dataset.sort)");
    assert_eq!(
        heads,
        json!([
            "step",
            "mode",
            "node",
            "start",
            "duration",
            "DataLoaderIter",
            "Forward",
            "Backward(post-forward)",
            "Optimizer",
            "other"
        ]),
        "{heads}"
    );
    let backward = first[1][7].as_str().unwrap().parse::<f64>().unwrap();
    assert!(
        (backward - truth[0].phases["Backward(post-forward)"] as f64 / 1e6).abs() < 1e-9,
        "{table}"
    );
    // Sorted by step with a click: ascending step numbers.
    cdp.eval("document.querySelector('#slowest-steps th[data-sort=\"step\"] button').click()");
    let by_step = cdp.eval(rows);
    let steps: Vec<u64> = by_step
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap().parse().unwrap())
        .collect();
    let mut sorted = steps.clone();
    sorted.sort_unstable();
    assert_eq!(steps, sorted, "{by_step}");
    assert_eq!(steps.len(), 20);

    // The step chart's tooltip says the step under the cursor.
    let centre = cdp.eval(
        "(() => { const o = document.querySelector('[data-chart^=\"steps:TRAIN\"] .u-over'); o.scrollIntoView(); \
           const r = o.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()",
    );
    cdp.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": centre[0], "y": centre[1]}),
    );
    let tip = cdp.eval(
        "document.querySelector('[data-chart^=\"steps:TRAIN\"] .tooltip .tip-extra').textContent",
    );
    let tip_step: u64 = tip
        .as_str()
        .unwrap()
        .strip_prefix("step ")
        .unwrap()
        .parse()
        .unwrap();
    assert!(tip_step < 3_000, "{tip}");

    // A click on the slowest step: the timeline zoomed on it, its spans listed.
    cdp.eval("document.querySelector('#slowest-steps tr.step-row[data-step=\"999\"]').click()");
    cdp.wait(Duration::from_secs(30), "the timeline zoomed on step 999", |c| {
        let s = c.status();
        s["tab"] == "system" && s["zoom"].is_array() && s["panels"]["system"] == true
            && c.eval("[...document.querySelectorAll('.span-list tr td:nth-child(3)')].some((td) => td.textContent === '999')") == true
    });
    let zoom = cdp.status()["zoom"].clone();
    let note = cdp.eval("document.getElementById('zoom-note').textContent");
    assert!(note.as_str().unwrap().contains("around step 999"), "{note}");
    let step = truth.iter().find(|s| s.step == Some(999)).unwrap();
    let (s0, s1) = (
        step.start_us as f64 / 1e6,
        (step.start_us + step.duration_us) as f64 / 1e6,
    );
    assert!(
        zoom[0].as_f64().unwrap() < s0 && zoom[1].as_f64().unwrap() > s1,
        "{zoom}"
    );
    assert!(
        zoom[1].as_f64().unwrap() - zoom[0].as_f64().unwrap() < 4.0 * (s1 - s0),
        "{zoom}"
    );
    // The timelines cross the window (samples every 100 ms, the window a tenth of a second):
    // the samples on either side of it are drawn.
    let cpu = cdp.eval("window.SMD.chartData('sys:cpu CPUUtilization (%)')");
    assert!(cpu["x"].as_array().unwrap().len() >= 2, "{cpu}");
    // The span list sorted by duration with a click: the longest first (the step itself).
    cdp.eval("document.querySelector('.span-list th[data-sort=\"duration\"] button').click()");
    cdp.wait(
        Duration::from_secs(30),
        "the spans sorted by duration",
        |c| c.status()["span_sort"]["key"] == "duration",
    );
    let durations: Vec<f64> = cdp
        .eval("[...document.querySelectorAll('.span-list td[data-s]')].map((td) => Number(td.dataset.s))")
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(!durations.is_empty());
    // Largest first (the page's end less start of each row, to the µs the files hold).
    assert!(
        durations.windows(2).all(|w| w[0] >= w[1] - 1e-6),
        "{durations:?}"
    );
    assert!(
        (durations[0] - step.duration_us as f64 / 1e6).abs() < 1e-6,
        "{durations:?}"
    );
    cdp.screenshot(&out.join("hunt-timeline.png"));

    // The phase chart follows the zoom: the steps of the window only.
    open_tab(&mut cdp, 0, "steps", &["steps"]);
    let phases = cdp.eval("window.SMD.chartData('phases')");
    let n = phases["x"].as_array().unwrap().len();
    assert!((1..=3).contains(&n), "{phases}");
    assert!(
        phases["title"].as_str().unwrap().contains("in the window"),
        "{phases}"
    );
    let labels = strings(&phases["labels"]);
    assert_eq!(
        labels,
        ["other", "optimizer", "backward", "forward", "data loading"],
        "{phases}"
    );
    cdp.screenshot(&out.join("hunt-steps-zoomed.png"));
    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    server.shutdown();
}
