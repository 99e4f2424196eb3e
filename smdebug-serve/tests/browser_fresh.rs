//! Fresh or flagged, in Chromium at 1440×900 (driven over the DevTools protocol like
//! `browser.rs`): a page open on a job in a child process says how old its data is ("updated
//! N s ago"); when the job is killed with SIGKILL the page turns to "crashed" without a reload,
//! with no ETA; when the server stops it says "disconnected" and shows the run's state as the
//! last known one, not as a live pill.
//!
//! Set `SMDEBUG_SKIP_BROWSER=1` to skip on a machine without chromium. The crashed page's
//! screenshot is left in cargo's target directory (`target/tmp/serve_fresh/crashed.png`).

mod support;

use std::time::Duration;

use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::chromium;
use support::spawn_child_job;

/// The child process of the test below (returns at once when run as a test).
#[test]
fn child_job() {
    support::child_job_main();
}

#[test]
fn a_killed_job_turns_crashed_and_a_stopped_server_disconnected_without_a_reload() {
    let Some(binary) = chromium::binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut child = spawn_child_job(&run, "child_job");
    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let (_browser, mut cdp) = chromium::open_page(&binary, dir.path());
    cdp.navigate(server.url());
    cdp.wait(Duration::from_secs(60), "the live run", |c| {
        let s = c.status();
        s["phase"] == "live"
            && s["connection"] == "up"
            && s["steps"].as_u64() > Some(20)
            && s["freshness"]
                .as_str()
                .is_some_and(|f| f.starts_with("updated "))
    });
    // A mark that a reload would wipe.
    cdp.eval("window.notReloaded = true");
    // The ETA tile says what it rests on (a rate or why there is none).
    let rate = cdp.eval("document.getElementById('summary-rate').textContent");
    assert!(
        rate.as_str().unwrap().contains("steps/s") || rate.as_str().unwrap().contains("rate"),
        "{rate}"
    );

    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    cdp.wait(Duration::from_secs(30), "crashed", |c| {
        let s = c.status();
        s["phase"] == "crashed"
            && c.eval("document.getElementById('summary-state').textContent") == "crashed"
    });
    assert_eq!(
        cdp.eval("window.notReloaded === true"),
        true,
        "the page was reloaded"
    );
    let s = cdp.status();
    let note = s["phase_note"].as_str().unwrap();
    assert!(note.contains(&format!("process {pid}")), "{note}");
    assert!(
        s["state_text"]
            .as_str()
            .unwrap()
            .starts_with("crashed · last advanced "),
        "{s}"
    );
    let state_class = cdp.eval("document.getElementById('run-state').className");
    assert_eq!(state_class, "state crashed");
    // Nothing would read a stop request.
    assert_eq!(cdp.eval("document.getElementById('stop').disabled"), true);
    // No ETA on a run that does not advance: the overview, fetched again on the change, says
    // so too.
    cdp.wait(Duration::from_secs(15), "no ETA", |c| {
        c.status()["eta_note"] == "no ETA: the run crashed"
            && c.eval("document.getElementById('summary-rate').textContent")
                .as_str()
                .is_some_and(|t| t.starts_with("no ETA: the run crashed"))
    });
    let more = cdp.eval("document.getElementById('summary-state-more').textContent");
    assert!(
        more.as_str().unwrap().contains("not marked finished"),
        "{more}"
    );
    let png = cdp.png(false);
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve_fresh");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("crashed.png"), &png).unwrap();

    // The server stops: the page says so and no longer shows the state as current.
    server.shutdown();
    cdp.wait(Duration::from_secs(30), "disconnected", |c| {
        let s = c.status();
        s["connection"] == "down"
            && s["freshness"]
                .as_str()
                .is_some_and(|f| f.starts_with("disconnected"))
    });
    let s = cdp.status();
    assert!(
        s["state_text"]
            .as_str()
            .unwrap()
            .starts_with("last known: crashed"),
        "{s}"
    );
    assert_eq!(
        cdp.eval("document.getElementById('run-state').className"),
        "state disconnected"
    );
    assert_eq!(
        cdp.eval("document.getElementById('summary-state').textContent"),
        "disconnected"
    );
    assert_eq!(cdp.eval("window.notReloaded === true"), true);
    let png = cdp.png(false);
    std::fs::write(out.join("disconnected.png"), &png).unwrap();
}
