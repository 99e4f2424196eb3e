//! Headless Chromium for the browser tests: where the binary is, one page attached over the
//! DevTools protocol ([`Cdp`]) at the size a test looks at it, or one run of the browser on its
//! command line (`--dump-dom`, `--screenshot`) for a page that needs no driving.

mod cdp;
mod headless;

use std::path::{Path, PathBuf};

use serde_json::json;

pub use cdp::{Browser, Cdp};
pub use headless::run_headless;

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
