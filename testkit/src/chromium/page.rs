//! One page of headless Chromium attached over the DevTools protocol, at the size a test looks
//! at it.

use std::path::Path;

use serde_json::json;

use super::cdp::{Browser, Cdp};

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

/// The size the dashboard's browser tests look at a page in: a laptop's screen.
pub const SCREEN: (u32, u32) = (1440, 900);

/// Chromium with its profile in `dir/profile`, a blank page at [`SCREEN`] attached with
/// `Page` and `Runtime` enabled: what most browser tests open before they navigate.
pub fn open_page(binary: &Path, dir: &Path) -> (Browser, Cdp) {
    open(
        binary,
        &dir.join("profile"),
        Some(SCREEN),
        &["Page", "Runtime"],
    )
}
