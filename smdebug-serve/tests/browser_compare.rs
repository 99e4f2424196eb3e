//! The Compare tab in Chromium at 1440×900, with two runs (each written by the support job,
//! with rule statuses beside it): its URL keeps the selection, a toggle per run shows the run's
//! issue count, step durations and system timelines are overlaid one series per run, and the
//! rules matrix has a cell per rule and run with the firing rule's evidence on hover. Turning a
//! run off changes the URL and leaves one series per chart and one matrix column.
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_testkit::chromium;
use support::{JobConfig, start_job};

/// A finished run written by the support job, with StepOutlier's and LowGPUUtilization's
/// statuses in it.
fn run_with_rules(dir: &Path, name: &str, steps: u64, slow_steps: Vec<u64>) -> String {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let job = start_job(
        Arc::new(LocalStorage::new(&run).unwrap()),
        Some(&run),
        JobConfig {
            steps,
            step_time: Duration::from_millis(5),
            sampler: true,
            start_delay: Duration::ZERO,
            slow_steps,
        },
    );
    assert_eq!(job.join(), None);
    let location = run.to_str().unwrap().to_owned();
    let summary = support::offline_rules(&location, &["StepOutlier", "LowGPUUtilization"]);
    support::write_rules(&run, &summary);
    location
}

fn series(cdp: &mut smdebug_testkit::chromium::Cdp) -> Value {
    cdp.eval(
        "Object.fromEntries([...document.querySelectorAll('#compare-charts [data-chart]')]\
           .map(e => [e.dataset.chart, [Number(e.dataset.series), e.dataset.runs]]))",
    )
}

#[test]
fn the_compare_tab_overlays_steps_and_system_of_the_runs_toggled_on_with_a_rules_matrix() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The first run's slow steps (12 of 300: more than StepOutlier allows, few enough to
    // stand 3σ out) make it fire; the second has none.
    let a = run_with_rules(dir.path(), "run-a", 300, (1..=12).map(|i| i * 23).collect());
    let b = run_with_rules(dir.path(), "run-b", 50, Vec::new());
    let server = Server::start(ServeOptions::new(vec![a, b])).unwrap();
    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(&format!("{}#/run/0/compare?runs=0,1", server.url()));
    cdp.wait(Duration::from_secs(60), "both runs compared", |c| {
        let s = c.status();
        s["tab"] == "compare"
            && s["compare"]["series"]["steps"] == 2
            && c.eval("document.querySelectorAll('#compare-rules td.cell').length") == 4
    });
    // A toggle per run, both on, with the issue count.
    let toggles = cdp.eval(
        "[...document.querySelectorAll('#compare-toggles label.run-toggle')]\
           .map(l => [l.dataset.run, l.querySelector('input').checked, l.textContent, \
                      l.querySelector('.sw').style.background !== ''])",
    );
    eprintln!("toggles: {toggles}");
    let toggles = toggles.as_array().unwrap();
    assert_eq!(toggles.len(), 2);
    for (t, name) in toggles.iter().zip(["run-a", "run-b"]) {
        assert_eq!(t[1], true, "{t}");
        assert_eq!(t[3], true, "{t}: no colour");
        assert!(t[2].as_str().unwrap().contains(name), "{t}");
        assert!(t[2].as_str().unwrap().contains("issue"), "{t}");
    }
    assert!(
        toggles[0][2].as_str().unwrap().contains("1 issue"),
        "{toggles:?}"
    );
    // Overlaid series: one per run on the steps, CPU and memory charts; no GPU on this machine.
    let charts = series(&mut cdp);
    eprintln!("charts: {charts}");
    for key in ["compare:steps", "compare:cpu", "compare:memory"] {
        assert_eq!(charts[key], json!([2, "0,1"]), "{key}: {charts}");
    }
    assert!(charts.get("compare:gpu").is_none(), "{charts}");
    // Each run's step line covers its steps (x = step).
    let xs = cdp.eval(
        "(() => { const c = document.querySelector('[data-chart=\"compare:steps\"]'); \
           return [...c.querySelectorAll('.u-legend .u-label')].map(e => e.textContent); })()",
    );
    assert_eq!(xs, json!(["run-a TRAIN", "run-b TRAIN"]), "{xs}");
    // The rules matrix: a row per rule, a cell per run, the status and its evidence.
    let cells = cdp.eval(
        "[...document.querySelectorAll('#compare-rules tr[data-rule]')].map(r => [r.dataset.rule, \
           [...r.querySelectorAll('td.cell')].map(c => [c.dataset.run, c.dataset.status, c.textContent, c.title])])",
    );
    eprintln!("matrix: {cells}");
    let rows = cells.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{cells}");
    assert_eq!(rows[0][0], "LowGPUUtilization");
    for cell in rows[0][1].as_array().unwrap() {
        assert_eq!(cell[1], "NoData", "{cell}");
        assert_eq!(cell[2], "not applicable", "{cell}");
        assert!(cell[3].as_str().unwrap().contains("GPU"), "{cell}");
    }
    assert_eq!(rows[1][0], "StepOutlier");
    let step_outlier = rows[1][1].as_array().unwrap();
    assert_eq!(step_outlier[0][0], "0");
    assert_eq!(step_outlier[0][1], "IssuesFound", "{cells}");
    assert!(
        step_outlier[0][3].as_str().unwrap().contains("at step"),
        "the evidence is on hover: {cells}"
    );
    assert_ne!(step_outlier[1][1], "IssuesFound", "{cells}");
    let artifacts = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve_compare");
    std::fs::create_dir_all(&artifacts).unwrap();
    cdp.screenshot(&artifacts.join("compare.png"));

    // Run b off: the URL says so, one series per chart, one matrix column.
    cdp.eval("document.querySelector('#compare-toggles input[data-run=\"1\"]').click()");
    cdp.wait(Duration::from_secs(30), "run b turned off", |c| {
        c.status()["compare"]["series"]["steps"] == 1
            && c.eval("document.querySelectorAll('#compare-rules td.cell').length") == 2
    });
    assert_eq!(
        cdp.eval("location.hash"),
        "#/run/0/compare?runs=0",
        "the selection is in the URL"
    );
    let charts = series(&mut cdp);
    for key in ["compare:steps", "compare:cpu", "compare:memory"] {
        assert_eq!(charts[key], json!([1, "0"]), "{key}: {charts}");
    }
    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["csp"], json!([]), "{s}");
    server.shutdown();
}
