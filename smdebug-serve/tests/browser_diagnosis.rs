//! The first screen of a run a rule stopped, in Chromium at 1440×900 (driven over the DevTools
//! protocol like `browser.rs`), measured in the DOM: the run's health in one sentence, its long
//! rule message kept out of the header pill, the state tile, the run card and the Compare
//! table (the full text on demand); the rule that stopped the job listed first with its badge,
//! findings coloured by severity, the not-applicable reason said once; the loss chart with its
//! TRAIN and EVAL lines and the NaN steps marked; durations written as people write them.
//!
//! The run is written by smdebug's hook (a loss that turns NaN, NaN gradients), its rules
//! evaluated by the real rule runner, its end marker written as a job that honoured the rule's
//! stop request writes it (with the rule's own `fired at step` line), and a later stop request
//! from another rule left in the run, as the demo's bug run has it.
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium. The first screen's
//! screenshot is left in cargo's target directory (`target/tmp/serve_diagnosis/`).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_core::EndReason;
use smdebug_format::stop::StopRequest;
use smdebug_format::{end_marker_body, layout};
use smdebug_io::stop::request_stop;
use smdebug_rules::actions::RuleEvent;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_testkit::chromium;
use smdebug_testkit::runs::every_step_hook;

use support::{GRADIENTS, NAN_FROM, write_exploding_run as write_run};

/// What the page measures of the first screen.
const MEASURE: &str = "(() => { const box = (q) => { const e = document.querySelector(q); \
    if (!e) return null; const r = e.getBoundingClientRect(); return { h: r.height, w: r.width, bottom: r.bottom, \
      text: e.textContent, scroll_w: e.scrollWidth, client_w: e.clientWidth }; }; \
    const rules = Array.from(document.querySelectorAll('#summary-rules .rule')); \
    return { header: box('header'), pill: box('#run-state'), issues: box('#issue-count'), tile: box('#tile-state'), \
      health: box('#summary-health'), full: document.getElementById('summary-health-full').textContent, \
      full_hidden: document.getElementById('summary-health-details').hidden, \
      card_state: box('#overview-runs dd[data-count=\"state\"]'), notice_hidden: document.getElementById('run-notice').hidden, \
      step: document.getElementById('summary-step').textContent, rate: document.getElementById('summary-rate').textContent, \
      issue_tile: document.getElementById('summary-issues').textContent, issue_more: document.getElementById('summary-issues-more').textContent, \
      rules: rules.map((r) => ({ name: r.dataset.rule, severity: r.dataset.severity, \
        badge: (r.querySelector('.badge') || {}).textContent || null, colour: getComputedStyle(r).borderLeftColor, h: r.getBoundingClientRect().height })), \
      na_groups: Array.from(document.querySelectorAll('#summary-rules .na-group')).map((g) => g.textContent), \
      summary_text: document.getElementById('summary-rules').textContent, \
      evidence: Array.from(document.querySelectorAll('#summary-rules .evidence')).map((e) => e.textContent), \
      loss: window.SMD.chartData('headline:loss'), \
      loss_title: (document.querySelector('[data-chart=\"headline:loss\"] h4') || {}).textContent }; })()";

#[test]
fn a_stopped_runs_first_screen_reads_as_a_diagnosis() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("bug-run");
    std::fs::create_dir_all(&run).unwrap();
    write_run(&run);
    let location = run.to_str().unwrap().to_owned();
    let specs = [
        "ExplodingTensor",
        "LossNotDecreasing:num_steps=5",
        "LowGPUUtilization",
        "GPUMemoryIncrease",
        "LoadBalancing",
    ];
    let summary = support::offline_rules(&location, &specs);
    let exploding = summary.rule("ExplodingTensor").unwrap().clone();
    assert_eq!(
        exploding.status,
        smdebug_rules::Status::IssuesFound,
        "{exploding:?}"
    );
    let first = exploding.first_fired_step.unwrap();
    support::write_rules(&run, &summary);
    // The job honoured ExplodingTensor's request: its end marker repeats the rule's line, the
    // whole long message with it. Another rule's request came after and replaced the file.
    let line = RuleEvent {
        rule: "ExplodingTensor".into(),
        run: location.clone(),
        step: first,
        message: exploding.message.clone(),
        evidence: Vec::new(),
        change: None,
    }
    .summary_line();
    assert!(line.len() > 300, "the message should be long: {line}");
    let storage = LocalStorage::new(&run).unwrap();
    let mut later = StopRequest::new("LossNotDecreasing fired at step 30 of the run: no decrease");
    later.rule = Some("LossNotDecreasing".into());
    later.step = Some(30);
    request_stop(&storage, &later).unwrap();
    std::fs::write(
        run.join(layout::END_MARKER),
        end_marker_body(&EndReason::Stopped(line.clone().into()), 1.0e9),
    )
    .unwrap();

    let server = Server::start(ServeOptions::new(vec![location.clone()])).unwrap();
    let api = server.url().trim_end_matches('/').to_owned();
    let state = support::wait_for(Duration::from_secs(60), "the stopped run", || {
        let v = support::get_json(&format!("{api}/api/runs"))["runs"][0].clone();
        (v["phase"] == "stopped_by_rule" && v["rules"].as_u64() == Some(specs.len() as u64))
            .then_some(v)
    });
    // The rule the end marker names stopped it, not the later request's.
    assert_eq!(state["stop_rule"], "ExplodingTensor", "{state}");
    let overview = support::get_json(&format!("{api}/api/runs/0/overview"));
    let sentence = overview["health"]["sentence"].as_str().unwrap().to_owned();
    let last_step = state["last_step"].as_u64().unwrap();
    assert!(
        sentence.starts_with(&format!(
            "Stopped at step {last_step} by ExplodingTensor (fired at step {first}): NaN in loss and {GRADIENTS} gradients"
        )),
        "{sentence}"
    );

    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    cdp.wait(Duration::from_secs(60), "the first screen", |c| {
        let s = c.status();
        s["panels"]["overview"] == true
            && s["panels"]["headlines"] == true
            && c.eval("!!document.querySelector('#summary-rules .rule')") == true
    });
    let m = cdp.eval(MEASURE);
    eprintln!("first screen: {m:#}");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_diagnosis");
    std::fs::create_dir_all(&out).unwrap();
    cdp.screenshot(&out.join("stopped-first-screen.png"));

    // One sentence of health, two lines at most, the whole end reason on demand.
    assert_eq!(m["health"]["text"], sentence.as_str(), "{m}");
    assert!(m["health"]["h"].as_f64().unwrap() <= 2.0 * 22.0, "{m}");
    assert_eq!(m["full_hidden"], false, "{m}");
    assert!(m["full"].as_str().unwrap().contains(&line), "{m}");
    // The long message blows up nothing: the header stays one line (44 px at this width), the
    // pill one line of text, the state tile and the run card's state compact.
    let h = |k: &str| m[k]["h"].as_f64().unwrap();
    assert!(h("header") <= 52.0, "header {} px: {m}", h("header"));
    assert!(h("pill") <= 26.0, "pill {} px: {m}", h("pill"));
    assert!(h("issues") <= 26.0, "issue pill {} px: {m}", h("issues"));
    assert!(h("tile") <= 200.0, "state tile {} px: {m}", h("tile"));
    assert!(
        h("card_state") <= 26.0,
        "run card's state {} px: {m}",
        h("card_state")
    );
    assert_eq!(
        m["pill"]["text"].as_str().unwrap().split(" · ").next(),
        Some("stopped by ExplodingTensor"),
        "{m}"
    );
    assert_eq!(m["notice_hidden"], true, "{m}");

    // The rule that stopped the job first, with its badge; the findings in severity order and
    // colours; the not-applicable reason once for the three GPU rules.
    let rules = m["rules"].as_array().unwrap();
    assert_eq!(rules[0]["name"], "ExplodingTensor", "{m}");
    assert_eq!(rules[0]["badge"], "stopped the job", "{m}");
    assert_eq!(rules[0]["severity"], "stops_job", "{m}");
    let loss_rule = rules
        .iter()
        .find(|r| r["name"] == "LossNotDecreasing")
        .unwrap();
    assert_eq!(loss_rule["severity"], "model_quality", "{m}");
    assert_ne!(rules[0]["colour"], loss_rule["colour"], "{m}");
    for r in rules {
        assert!(
            r["h"].as_f64().unwrap() < 160.0,
            "a finding's box is too tall: {r}"
        );
    }
    let na_reason = &summary.rule("LowGPUUtilization").unwrap().message;
    assert_eq!(
        m["summary_text"]
            .as_str()
            .unwrap()
            .matches(na_reason.as_str())
            .count(),
        1,
        "the not-applicable reason should be said once: {m}"
    );
    let groups = m["na_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{m}");
    for rule in ["LowGPUUtilization", "GPUMemoryIncrease", "LoadBalancing"] {
        assert!(groups[0].as_str().unwrap().contains(rule), "{m}");
    }
    assert_eq!(m["issue_tile"], "2", "{m}");
    assert!(
        m["issue_more"]
            .as_str()
            .unwrap()
            .starts_with("1 stops the job · 1 model quality"),
        "{m}"
    );

    // The loss chart: TRAIN and EVAL together, the NaN steps marked from the first NaN on.
    let loss = &m["loss"];
    assert_eq!(loss["labels"], json!(["TRAIN", "EVAL"]), "{m}");
    let marks = loss["non_finite"].as_array().unwrap();
    assert!(!marks.is_empty(), "{m}");
    let from = marks
        .iter()
        .map(|x| x["from"].as_u64().unwrap())
        .min()
        .unwrap();
    assert_eq!(from, NAN_FROM, "{m}");
    assert!(marks.iter().all(|x| x["kind"] == "NaN"), "{m}");
    // Drawn within the plot.
    let width = loss["width"].as_f64().unwrap();
    for px in loss["marks"].as_array().unwrap() {
        let x0 = px[0].as_f64().unwrap();
        assert!(x0 > 0.0 && x0 < width, "{m}");
    }
    assert!(
        m["loss_title"]
            .as_str()
            .unwrap()
            .contains(&format!("NaN at steps {NAN_FROM}–")),
        "{m}"
    );

    // The title's last values are what the lines ended on: EVAL's last loss was NaN (drawn as a
    // gap), not "–" nor its last finite value.
    assert!(
        m["loss_title"]
            .as_str()
            .unwrap()
            .contains(", EVAL NaN at step "),
        "{m}"
    );
    // Evidence as a person reads it: a count is "1", not "1.00"; the measure is not said twice
    // ("loss (TRAIN) loss = NaN").
    let evidence: Vec<&str> = m["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .filter(|e| e.starts_with("step "))
        .collect();
    assert!(!evidence.is_empty(), "{m}");
    let exploding = evidence
        .iter()
        .find(|e| e.contains("nan_count = "))
        .unwrap_or_else(|| panic!("no nan_count evidence: {evidence:?}"));
    let count = exploding.split("nan_count = ").nth(1).unwrap();
    assert!(
        count.parse::<u64>().is_ok(),
        "a count of NaN values as a whole number: {exploding}"
    );
    for e in &evidence {
        let (_, measured) = e.split_once(": ").unwrap();
        let (subject, _) = measured.split_once(" = ").unwrap();
        let words: Vec<&str> = subject.split(' ').collect();
        let distinct: std::collections::BTreeSet<&str> = words.iter().copied().collect();
        assert_eq!(distinct.len(), words.len(), "a word said twice: {e}");
    }

    // How often a rule fired, in words: "fired 9 times in 40 checks", not "triggered 9 of 40".
    let text = m["summary_text"].as_str().unwrap();
    assert!(
        text.contains(" checks") && !text.contains("triggered"),
        "{m}"
    );

    // Ended: all steps done of none planned (no progress files): the last step, no "N-1 of N";
    // its rate is its average.
    assert_eq!(m["step"], format!("step {last_step}"), "{m}");

    // The Compare table's state cell stays one line.
    cdp.eval("location.hash = '#/run/0/compare'");
    cdp.wait(Duration::from_secs(30), "the comparison", |c| {
        c.eval("!!document.querySelector('#compare-table tr[data-run]')") == true
    });
    let row = cdp.eval(
        "(() => { const r = document.querySelector('#compare-table tr[data-run]'); \
           return { h: r.getBoundingClientRect().height, state: r.children[1].textContent, title: r.children[1].title }; })()",
    );
    assert!(row["h"].as_f64().unwrap() <= 30.0, "{row}");
    assert_eq!(row["state"], "stopped by ExplodingTensor", "{row}");
    assert!(row["title"].as_str().unwrap().contains(&sentence), "{row}");

    let s = cdp.status();
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["csp"], json!([]), "{s}");
    server.shutdown();
}

/// Durations as people write them: whole seconds from ten seconds on, minutes and seconds
/// carried (never "59 min 60 s"), hours and minutes.
#[test]
fn durations_read_as_people_write_them() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("empty");
    std::fs::create_dir_all(&run).unwrap();
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    cdp.wait(Duration::from_secs(30), "the page", |c| {
        c.eval("!!(window.SMD && window.SMD.dur)") == true
    });
    let cases: [(f64, &str); 14] = [
        (0.000412, "412 µs"),
        (0.0013, "1.3 ms"),
        (0.9996, "1 s"),
        (4.24, "4.2 s"),
        (3.0, "3 s"),
        (9.96, "10 s"),
        (37.39, "37 s"),
        (59.6, "1 min"),
        (125.0, "2 min 05 s"),
        (3599.7, "1 h"),
        (3599.4, "59 min 59 s"),
        (3660.0, "1 h 01 min"),
        (7199.0, "2 h"),
        (-37.39, "-37 s"),
    ];
    let inputs: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let got = cdp.eval(&format!(
        "{}.map((x) => window.SMD.dur(x))",
        serde_json::to_string(&inputs).unwrap()
    ));
    let expected: Vec<Value> = cases.iter().map(|c| json!(c.1)).collect();
    assert_eq!(got, json!(expected));
    server.shutdown();
}

/// A run replaced while its page is open: the notice has its own line under the header, the
/// state pill keeps to one line and says nothing of it.
#[test]
fn a_replaced_runs_notice_has_its_own_place() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir_all(&run).unwrap();
    write_run(&run);
    let mut options = ServeOptions::new([&run]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    cdp.wait(Duration::from_secs(60), "the run", |c| {
        c.status()["panels"]["overview"] == true
    });
    let header = "document.querySelector('header').getBoundingClientRect().height";
    let before = cdp.eval(header).as_f64().unwrap();
    // The folder written again from the start: every file removed, then a shorter run.
    std::fs::remove_dir_all(&run).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let mut hook = every_step_hook(&run);
    for step in 0..3 {
        hook.save_scalar("loss", 1.0 / (1.0 + f64::from(step)), &["losses"]);
        hook.step();
    }
    hook.close();
    cdp.wait(Duration::from_secs(60), "the notice", |c| {
        c.status()["notice"].is_string() && c.status()["steps"] == 3
    });
    let m = cdp.eval(
        "(() => { const n = document.getElementById('run-notice'); const r = n.getBoundingClientRect(); \
           return { notice: n.textContent, hidden: n.hidden, top: r.top, \
             header: (() => { const h = document.querySelector('header').getBoundingClientRect(); return { height: h.height, bottom: h.bottom }; })(), \
             pill: document.getElementById('run-state').textContent, \
             pill_h: document.getElementById('run-state').getBoundingClientRect().height }; })()",
    );
    assert_eq!(m["hidden"], false, "{m}");
    assert!(
        m["notice"]
            .as_str()
            .unwrap()
            .starts_with("This run's view was reset: "),
        "{m}"
    );
    assert!(!m["pill"].as_str().unwrap().contains("reset"), "{m}");
    assert!(m["pill_h"].as_f64().unwrap() <= 26.0, "{m}");
    // The header as high as before; the notice below it.
    assert_eq!(m["header"]["height"].as_f64().unwrap(), before, "{m}");
    assert!(
        m["top"].as_f64().unwrap() >= m["header"]["bottom"].as_f64().unwrap(),
        "{m}"
    );
    server.shutdown();
}

/// A rules summary written by another version (ExplodingTensor's `only_nan` parameter renamed)
/// is shown with its verdict, and the page says, in the rule's box, that its parameters do not
/// read, naming the field: never a verdict that quietly lost what it ran with.
#[test]
fn a_status_that_does_not_read_is_said_in_the_rules_box() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("old-summary");
    std::fs::create_dir_all(&run).unwrap();
    write_run(&run);
    let location = run.to_str().unwrap().to_owned();
    let summary = support::offline_rules(&location, &["ExplodingTensor"]);
    let mut json = serde_json::to_value(&summary).unwrap();
    let params = json["rules"][0]["parameters"].as_object_mut().unwrap();
    let only_nan = params.remove("only_nan").unwrap();
    params.insert("nan_only".into(), only_nan);
    let drifted: smdebug_rules::Summary = serde_json::from_value(json).unwrap();
    assert_eq!(drifted.rules[0].problems().len(), 1);
    support::write_rules(&run, &drifted);

    let server = Server::start(ServeOptions::new(vec![location])).unwrap();
    let (_browser, mut cdp) = chromium::open(
        &binary,
        &dir.path().join("profile"),
        Some((1440, 900)),
        &["Page", "Runtime"],
    );
    cdp.call("Page.navigate", json!({"url": server.url()}));
    let box_of = "#summary-rules .rule[data-rule=\"ExplodingTensor\"]";
    cdp.wait(Duration::from_secs(60), "the rule's box", |c| {
        c.eval(&format!("!!document.querySelector('{box_of} .problem')")) == true
    });
    let m = cdp.eval(&format!(
        "(() => {{ const b = document.querySelector('{box_of}'); \
           return {{ status: b.querySelector('.status').textContent, \
             problems: Array.from(b.querySelectorAll('.problem')).map((p) => p.textContent) }}; }})()"
    ));
    assert_eq!(m["status"], "IssuesFound", "{m}");
    let problems = m["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{m}");
    let text = problems[0].as_str().unwrap();
    assert!(
        text.contains("ExplodingTensor rule's parameters") && text.contains("nan_only"),
        "{m}"
    );
    server.shutdown();
}
