//! Measures the dashboard's first meaningful paint in a real headless Chromium, for the scale
//! figures in BENCHMARKS.md: opens `URL` in a fresh profile over the Chrome DevTools Protocol
//! and waits until the page reports the panels of its tab among overview, system, steps and
//! scalars drawn with the run's data (all four for a URL ending in `#/run/0/all`, as the
//! figures before the tabs were measured; the default summary tab draws the overview) (`first_paint_ms` in the page's status, `performance.now()` at that moment:
//! milliseconds since navigation started, every API fetch included). Also prints the
//! browser's first contentful paint and the number of charts drawn.
//!
//! ```sh
//! smdebug serve /tmp/synthetic-run --port 6007 &
//! cargo run --release -p smdebug-serve --example first_paint -- http://127.0.0.1:6007/ [RUNS]
//! ```
//!
//! Each of the `RUNS` (default 3) loads use a new Chromium profile (no cache).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use smdebug_testkit::chromium;

/// One load of `url` in a fresh Chromium profile: the page's first meaningful paint and what
/// it reported with it.
fn one_load(url: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let profile = tempfile::tempdir()?;
    let (_browser, mut cdp) = chromium::open(
        Path::new("/usr/bin/chromium"),
        profile.path(),
        None,
        &["Page"],
    );
    let started = Instant::now();
    cdp.navigate(url);
    let end = started + Duration::from_secs(120);
    loop {
        let status = cdp.status();
        if status["first_paint_ms"].is_number() {
            let fcp = cdp.eval(
                "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime",
            );
            return Ok(json!({
                "first_meaningful_paint_ms": status["first_paint_ms"],
                "first_contentful_paint_ms": fcp,
                "charts": status["charts"],
                "panels_drawn_at_ms": status["panel_ms"],
                "errors": status["errors"],
                "csp": status["csp"],
                "wall_ms_from_navigate": started.elapsed().as_millis() as u64,
            }));
        }
        if Instant::now() > end {
            return Err(format!("no first paint within 120 s: {status}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: first_paint URL [RUNS]")?;
    let runs: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    for _ in 0..runs {
        println!("{}", one_load(&url)?);
    }
    Ok(())
}
