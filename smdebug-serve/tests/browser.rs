//! The dashboard in a real browser (Debian's chromium, headless), driven over the Chrome
//! DevTools Protocol: it opens on a run that does not exist yet, watches a demo job write it
//! (the step count and the CPU chart's last point advance, pushed by server-sent events), sees
//! the "run ended" state, zooms one chart and checks that the others follow and the span list
//! narrows to the window, and checks that every panel is drawn, that no script error, console
//! error or Content-Security-Policy violation occurred, that no request left the server, and
//! that a span named with markup shows as text.
//!
//! Why CDP over a WebSocket (tungstenite) rather than `--dump-dom`: the page is live. A dumped
//! DOM is one snapshot after a virtual-time budget, and an open event stream keeps virtual time
//! from advancing; the test has to watch the page change over real seconds, read every network
//! request and console message as events, and drag the mouse across a chart. The protocol
//! needs only a handful of commands, so a small client on a well-kept WebSocket crate is
//! sturdier than a browser-automation framework tied to browser versions, and nothing is
//! downloaded: it drives `/usr/bin/chromium` (`bash .ci/setup-browser`).
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium. Screenshots are left in
//! cargo's target directory (`target/tmp/serve_browser/`).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_testkit::chromium;
use support::{HOSTILE_NAME, JobConfig, start_job};

fn shared_trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-read/tests/data/pytorch-profiler-traces")
        .join(name)
}

fn as_f64(v: &Value) -> Option<f64> {
    v.as_f64()
}

#[test]
fn the_dashboard_draws_every_panel_and_follows_a_live_run_in_chromium() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("live-run");
    let mut options = ServeOptions::new([&run]);
    options.traces = vec![
        shared_trace("trace_filter__sampled_rank-0.json.gz"),
        shared_trace("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
    ];
    let server = Server::start(options).unwrap();
    let origin = server.url().trim_end_matches('/').to_owned();

    let (browser, mut cdp) = chromium::open(
        &binary,
        &dir.path().join("profile"),
        Some((1400, 1000)),
        &["Page", "Runtime", "Log", "Network"],
    );
    // Every section on one page (the tab a link to `#/run/0/all` opens).
    cdp.navigate(&format!("{}#/run/0/all", server.url()));

    // The page opens before the run's folder exists: it says so, and that it waits for it.
    cdp.wait(Duration::from_secs(30), "the first drawing", |c| {
        c.status()["updates"].as_u64().unwrap_or(0) >= 1
    });
    let state = cdp.eval("document.getElementById('run-state').textContent");
    let state = state.as_str().unwrap();
    assert!(
        state.contains("the folder does not exist") && state.contains("waiting for it"),
        "{state}"
    );
    // In white on the pill's colour, as every state is (not the grey of a hint on olive).
    let colour = cdp.eval("getComputedStyle(document.getElementById('run-state')).color");
    assert_eq!(colour, "rgb(255, 255, 255)", "the missing run's pill text");
    cdp.wait(Duration::from_secs(30), "the missing run's sentence", |c| {
        c.eval(
            "[document.getElementById('summary-health').textContent, document.getElementById('health-box').className]",
        ) == json!([
            "No run here: the folder does not exist (waiting for it)",
            "health-box waiting"
        ])
    });

    // The job starts while the page is open.
    std::fs::create_dir_all(&run).unwrap();
    let job = start_job(
        Arc::new(LocalStorage::new(&run).unwrap()),
        Some(&run),
        JobConfig {
            steps: 160,
            step_time: Duration::from_millis(40),
            sampler: true,
            start_delay: Duration::from_millis(500),
            slow_steps: vec![50, 120],
        },
    );

    // Live: the step count and the CPU chart's last point advance while the run is written,
    // pushed to the open page.
    let mut step_counts = Vec::new();
    let mut last_points = Vec::new();
    let mut stop_enabled_while_live = false;
    cdp.wait(Duration::from_secs(90), "the run to end", |c| {
        let s = c.status();
        if s["ended"] == true {
            return true;
        }
        if let Some(n) = s["steps"].as_u64().filter(|&n| n > 0)
            && step_counts.last() != Some(&n)
        {
            step_counts.push(n);
        }
        if let Some(p) = as_f64(&s["last_point"])
            && last_points.last() != Some(&p)
        {
            last_points.push(p);
        }
        if c.eval("document.getElementById('stop').disabled") == false {
            stop_enabled_while_live = true;
        }
        false
    });
    assert!(
        step_counts.len() >= 3,
        "the step count advanced only through {step_counts:?}"
    );
    assert!(
        step_counts.windows(2).all(|w| w[0] < w[1]),
        "{step_counts:?}"
    );
    assert!(
        last_points.len() >= 2,
        "the CPU chart's last point advanced only through {last_points:?}"
    );
    assert!(stop_enabled_while_live, "the stop button was never enabled");
    assert_eq!(job.join(), None);

    // Ended: the header says so, the stop button is off, and the final numbers arrive.
    cdp.wait(Duration::from_secs(20), "the final state", |c| {
        let s = c.status();
        // The aggregates (the node table) are fetched again when the run ends.
        s["steps"] == 176
            && s["panels"]["tensors"] == true
            && c.eval("document.querySelectorAll('#node-stats table tr').length")
                .as_u64()
                .is_some_and(|n| n >= 3)
    });
    // The end marker's reason is the pill's tooltip, not its text (which keeps to one line).
    let state = cdp.eval(
        "[document.getElementById('run-state').textContent, document.getElementById('run-state').title]",
    );
    assert!(
        state[0].as_str().unwrap().starts_with("run ended · ")
            && state[1].as_str().unwrap().contains("\ncompleted"),
        "{state}"
    );
    assert_eq!(cdp.eval("document.getElementById('stop').disabled"), true);

    // Every panel is drawn.
    let counts = cdp.eval(
        "JSON.stringify(Object.fromEntries(['system-charts','step-charts','phase-chart',\
         'scalar-charts','tensor-charts'].map(id => [id, document.querySelectorAll('#' + id + \
         ' .uplot canvas').length])))",
    );
    let counts: Value = serde_json::from_str(counts.as_str().unwrap()).unwrap();
    assert!(counts["system-charts"].as_u64().unwrap() >= 3, "{counts}"); // CPU, memory, network/disk
    assert!(counts["step-charts"].as_u64().unwrap() >= 3, "{counts}"); // TRAIN, EVAL, histogram
    assert_eq!(counts["phase-chart"], 1, "{counts}");
    assert_eq!(counts["scalar-charts"], 2, "{counts}"); // accuracy, loss
    assert_eq!(counts["tensor-charts"], 2, "{counts}"); // reductions, distribution
    let overview = cdp.eval(
        "[document.querySelectorAll('#overview-runs .card').length, \
          document.querySelectorAll('#node-stats table tr').length, \
          document.querySelectorAll('#kineto-tables table tr').length, \
          document.getElementById('heatmap').height]",
    );
    assert_eq!(overview[0], 1, "{overview}");
    assert!(overview[1].as_u64().unwrap() >= 3, "{overview}");
    assert!(overview[2].as_u64().unwrap() >= 10, "{overview}");
    assert!(overview[3].as_u64().unwrap() >= 10, "{overview}");
    // The heatmap's colour scale is labelled as a person writes a percentage.
    let scale =
        cdp.eval("[...document.querySelectorAll('#heatmap-scale span')].map(s => s.textContent)");
    assert_eq!(scale, json!(["0 %", "100 %"]), "{scale}");
    // Durations in the unit that fits them ("640 µs", "12.5 ms", "3.20 s"), never "0.00 s" for
    // a phase shorter than 5 ms.
    let durations = cdp.eval(
        "JSON.stringify([...document.querySelectorAll('#overview-runs dt')]\
         .filter(dt => ['duration', 'initialization', 'training loop', 'finalization']\
         .includes(dt.textContent)).map(dt => dt.nextElementSibling.textContent))",
    );
    let durations: Vec<String> = serde_json::from_str(durations.as_str().unwrap()).unwrap();
    eprintln!("overview durations: {durations:?}");
    assert_eq!(durations.len(), 4, "{durations:?}");
    for d in &durations {
        let (number, unit) = d.rsplit_once(' ').unwrap_or_else(|| panic!("{d:?}"));
        assert!(["µs", "ms", "s"].contains(&unit), "{d:?} in {durations:?}");
        let number: f64 = number
            .parse()
            .unwrap_or_else(|_| panic!("{d:?} in {durations:?}"));
        assert!(
            number != 0.0 || d == "0 s",
            "{d:?} in {durations:?}: a zero that hides a duration"
        );
    }

    // Until a tensor is picked, the Tensors panel opens on the first that is not a scalar
    // (`attention`, not `accuracy`, the first name): a scalar is the Scalars tab's.
    cdp.wait(
        Duration::from_secs(30),
        "the first tensor that is not a scalar",
        |c| {
            c.eval("document.getElementById('tensor-select').value") == "attention"
                && c.eval("document.getElementById('tensor-select').options[0].value") == "accuracy"
        },
    );

    // A 2-D tensor at a chosen step.
    cdp.eval(
        "(() => { const s = document.getElementById('tensor-select'); s.value = 'attention'; \
         s.dispatchEvent(new Event('change')); })()",
    );
    cdp.wait(Duration::from_secs(20), "the attention heatmap", |c| {
        c.eval("document.getElementById('tensor2d-info').textContent")
            .as_str()
            .unwrap_or("")
            .contains("shape [8, 8]")
    });
    // Its histograms over steps: a ridge per step the server counted (read while the job runs:
    // the page's answer and a later one may differ by the steps written since).
    cdp.wait(Duration::from_secs(20), "the attention histograms", |c| {
        c.eval("document.getElementById('tensor-hist-info').textContent")
            .as_str()
            .unwrap_or("")
            .starts_with("attention: ")
    });
    let drawn = cdp.eval(
        "(() => { const c = document.getElementById('tensor-hist');            return [c.hidden, Number(c.dataset.steps), Number(c.dataset.bins)]; })()",
    );
    let served = support::get_json(&format!(
        "{origin}/api/runs/0/tensor_histograms?name=attention&steps=40&bins=30"
    ));
    assert_eq!(drawn[0], false);
    assert_eq!(drawn[2], 30);
    let ridges = drawn[1].as_u64().unwrap();
    assert!(
        ridges >= 2 && ridges <= served["steps"].as_array().unwrap().len() as u64,
        "{drawn} ridges, {served}"
    );

    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_browser");
    std::fs::create_dir_all(&artifacts).unwrap();
    cdp.screenshot(&artifacts.join("dashboard.png"));

    // Linked zoom: drag across the first system chart; every time chart takes the window and
    // the span list narrows to it.
    // The span list is one of the panels patched live and fetched whole at most every ten
    // seconds or when the run's phase changes: on a loaded machine the end's fetch comes
    // after the slower panels, so the list is first waited for to hold every span the server
    // has of the ended run.
    let all_spans = support::get_json(&format!("{origin}/api/runs/0/spans?limit=1"))["count"]
        .as_u64()
        .unwrap();
    cdp.wait(Duration::from_secs(30), "the ended run's span list", |c| {
        c.status()["window_spans"].as_u64() == Some(all_spans)
    });

    // The span named with markup is text: no element was made of it, the title is untouched.
    // It was written at step 3, so the list (the latest 25 spans of the window) is sorted by
    // name to show it: `<` sorts before every other span's name. (Looked for in the list as the
    // run's first drawing left it, it was there only when that drawing's window held about 20
    // spans: a race.)
    cdp.eval("document.querySelector('#spans .span-list th[data-sort=name] button').click()");
    let row = format!(
        "Array.from(document.querySelectorAll('#spans td')).some(td => td.textContent === {})",
        serde_json::to_string(HOSTILE_NAME).unwrap()
    );
    cdp.wait(
        Duration::from_secs(30),
        "the span list sorted by name",
        |c| c.status()["span_sort"]["key"] == "name" && c.eval(&row) == true,
    );
    let escaped = cdp.eval(&format!(
        "[{row}, document.querySelectorAll('main img').length, document.title]"
    ));
    assert_eq!(escaped, json!([true, 0, "smdebug serve"]));
    let rect = cdp.eval(
        "(() => { const o = document.querySelector('#system-charts .u-over'); \
         o.scrollIntoView(); const r = o.getBoundingClientRect(); \
         return [r.left, r.top, r.width, r.height]; })()",
    );
    let (x, y, w, h) = (
        rect[0].as_f64().unwrap(),
        rect[1].as_f64().unwrap(),
        rect[2].as_f64().unwrap(),
        rect[3].as_f64().unwrap(),
    );
    let (x0, x1, ym) = (x + w * 0.4, x + w * 0.6, y + h / 2.0);
    cdp.drag(ym, x0, x1);
    cdp.wait(Duration::from_secs(20), "the zoomed views", |c| {
        let s = c.status();
        s["zoom"].is_array()
            && s["window_spans"]
                .as_u64()
                .is_some_and(|n| n > 0 && n < all_spans)
    });
    let s = cdp.status();
    let zoom = (
        s["zoom"][0].as_f64().unwrap(),
        s["zoom"][1].as_f64().unwrap(),
    );
    let scales = s["time_scales"].as_array().unwrap();
    assert!(scales.len() >= 4, "{s}");
    for scale in scales {
        let (lo, hi) = (scale[0].as_f64().unwrap(), scale[1].as_f64().unwrap());
        assert!(
            (lo - zoom.0).abs() < 1e-3 && (hi - zoom.1).abs() < 1e-3,
            "a time chart did not follow the zoom {zoom:?}: {scales:?}"
        );
    }
    cdp.screenshot(&artifacts.join("dashboard-zoomed.png"));

    // Nothing went wrong on the way, and nothing left the server.
    cdp.pump(Duration::from_millis(300));
    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["csp"], json!([]), "{s}");
    let mut requests = Vec::new();
    for e in &cdp.events {
        let p = &e["params"];
        match e["method"].as_str().unwrap() {
            "Network.requestWillBeSent" => {
                requests.push(p["request"]["url"].as_str().unwrap().to_owned())
            }
            "Runtime.exceptionThrown" => panic!("script error: {p}"),
            "Runtime.consoleAPICalled" => {
                assert!(
                    !["error", "warning", "assert"].contains(&p["type"].as_str().unwrap()),
                    "console: {p}"
                )
            }
            "Log.entryAdded" => {
                assert!(
                    !["error", "warning"].contains(&p["entry"]["level"].as_str().unwrap()),
                    "browser log: {p}"
                )
            }
            _ => {}
        }
    }
    assert!(requests.len() >= 10, "{requests:?}");
    for url in &requests {
        assert!(
            url.starts_with(&format!("{origin}/")),
            "a request left the server: {url}"
        );
    }
    assert!(
        requests.iter().any(|u| u.contains("/api/events")),
        "no event stream: {requests:?}"
    );
    let log = browser.stderr.lock().unwrap().join("\n");
    assert!(!log.contains("Refused to"), "{log}");
    drop(cdp);
    drop(browser);
    server.shutdown();
}
