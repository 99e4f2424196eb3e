//! Headless Chromium for the browser tests: where the binary is, one page attached over the
//! DevTools protocol ([`cdp`]) at the size a test looks at it, or one run of the browser on its
//! command line (`--dump-dom`, `--screenshot`) for a page that needs no driving.

mod cdp;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

pub use cdp::{Browser, Cdp};

/// The flags every headless run starts with: no sandbox or GPU, and nothing that reaches the
/// network or a user profile on its own.
const HEADLESS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
];

/// `/usr/bin/chromium`; `None` (the test skips) when it is missing and `SMDEBUG_SKIP_BROWSER=1`,
/// a panic saying how to install it when it is missing otherwise.
pub fn binary() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/chromium");
    if path.exists() {
        return Some(path);
    }
    if std::env::var("SMDEBUG_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("SMDEBUG_SKIP_BROWSER=1: skipping the browser checks");
        return None;
    }
    panic!(
        "/usr/bin/chromium is missing: run `bash .ci/setup-browser` (apt-get install chromium), \
         or set SMDEBUG_SKIP_BROWSER=1 to skip the browser checks"
    );
}

/// Chromium with its profile in `profile`, a blank page attached with `domains` enabled
/// (`"Page"`, `"Runtime"`, `"Network"`, `"Log"`), `size` its viewport when given.
pub fn open(
    binary: &Path,
    profile: &Path,
    size: Option<(u32, u32)>,
    domains: &[&str],
) -> (Browser, Cdp) {
    let browser = Browser::launch(binary, profile);
    let mut cdp = Cdp::connect(&browser.ws_url);
    let target = cdp.call("Target.createTarget", json!({"url": "about:blank"}));
    let session = cdp.call(
        "Target.attachToTarget",
        json!({"targetId": target["targetId"], "flatten": true}),
    );
    cdp.session = Some(session["sessionId"].as_str().unwrap().to_owned());
    for domain in domains {
        cdp.call(&format!("{domain}.enable"), json!({}));
    }
    if let Some((width, height)) = size {
        cdp.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    }
    (browser, cdp)
}

/// Runs Chromium once with its profile in `profile`, `args` after the headless flags (with its
/// log on stderr and 10 s of virtual time for the page's scripts): its stdout and stderr. Panics
/// when it fails.
pub fn run_headless(binary: &Path, profile: &Path, args: &[String]) -> (String, String) {
    let output = Command::new(binary)
        .args(HEADLESS)
        .args(["--enable-logging=stderr", "--virtual-time-budget=10000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "chromium failed ({}): {stderr}",
        output.status
    );
    (stdout, stderr)
}
