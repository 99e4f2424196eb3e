//! The dashboard's code-profile API on a run with a real code profile: the windows with their
//! top functions, the flame graph served sandboxed (no script), the pprof profile as a
//! download, and window names that are looked up, never turned into paths.

#![cfg(target_os = "linux")]

use std::sync::Arc;

use serde_json::Value;
use smdebug_core::Mode;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_profiler::system::NodeId;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;

/// A deliberately hot function.
#[inline(never)]
fn serve_code_hot_function(rounds: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..rounds {
        x = (x ^ (x >> 31))
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
            .wrapping_add(i);
    }
    std::hint::black_box(x)
}

#[test]
fn code_windows_their_flame_graphs_and_profiles_are_served_from_a_real_profile() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let profiler = CodeProfiler::start(
        CodeProfileConfig::default().node(NodeId::algo(1)),
        Arc::new(LocalStorage::new(&run).unwrap()),
    )
    .unwrap();
    // Sampled from its first step: the window opens right after the profiler starts.
    assert!(profiler.wait_ready(std::time::Duration::from_secs(60)));
    profiler.begin(Some((Mode::Train, 3))).unwrap();
    // A fixed amount of work (a few CPU seconds in a debug build).
    let mut sink = 0u64;
    for _ in 0..40 {
        sink ^= serve_code_hot_function(2_500_000);
    }
    profiler.end(Some((Mode::Train, 7))).unwrap();
    let report = profiler.finish().unwrap();
    assert_eq!(report.written, 1);
    assert!(report.samples > 0, "{report:?} {sink}");

    let server = Server::start(ServeOptions::new([&run])).unwrap();
    let root = server.url().trim_end_matches('/').to_owned();
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    // The listing can be asked for before the server's first read of the run has come to the
    // code profiles: the window is listed once it has (seen once under load in CI).
    let listing: Value = smdebug_storage::testing::wait_for(
        std::time::Duration::from_secs(60),
        "the code-profile window listed",
        || {
            let listing: Value = client
                .get(format!("{root}/api/runs/0/code"))
                .send()
                .unwrap()
                .json()
                .unwrap();
            (listing["total"] != 0).then_some(listing)
        },
    );
    assert_eq!(listing["total"], 1, "{listing}");
    assert_eq!(listing["warnings"].as_array().unwrap().len(), 0);
    let window = &listing["windows"][0];
    assert_eq!(window["steps"], "TRAIN steps 3–7");
    assert_eq!(window["node"], "algo-1");
    assert_eq!(window["samples"], report.samples);
    assert_eq!(window["flamegraph"], true);
    assert_eq!(window["pprof"], true);
    let hot = |list: &Value| {
        list.as_array().unwrap().iter().any(|f| {
            f["function"]
                .as_str()
                .unwrap()
                .contains("serve_code_hot_function")
        })
    };
    // By total samples: in a debug build the sampled leaves (self) are the iterator's inlined
    // functions the hot function calls, and which of them are sampled varies from run to run.
    assert!(hot(&window["top_total"]), "{window}");
    assert!(
        !window["top_self"].as_array().unwrap().is_empty(),
        "{window}"
    );
    let id = window["id"].as_str().unwrap();

    let svg = client
        .get(format!("{root}/api/runs/0/code/{id}/flamegraph.svg"))
        .send()
        .unwrap();
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    let csp = svg.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("sandbox") && !csp.contains("script-src"),
        "{csp}"
    );
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert_eq!(svg.headers()["x-content-type-options"], "nosniff");
    let svg = svg.text().unwrap();
    assert!(svg.contains("<svg") && svg.contains("serve_code_hot_function"));

    let pprof = client
        .get(format!("{root}/api/runs/0/code/{id}/profile.pb.gz"))
        .send()
        .unwrap();
    assert_eq!(pprof.status(), 200);
    assert!(
        pprof.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    assert_eq!(&pprof.bytes().unwrap()[..2], &[0x1f, 0x8b]);

    // The page's own policy is unchanged, and unknown or path-like window names are 404s.
    let page = client.get(format!("{root}/")).send().unwrap();
    let page_csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(page_csp.contains("script-src 'self'") && page_csp.contains("img-src 'self' data:"));
    for bad in ["1-2_0-algo-1", "..%2F..%2Fframework", "%2E%2E"] {
        let r = client
            .get(format!("{root}/api/runs/0/code/{bad}/flamegraph.svg"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 404, "{bad}");
    }
    let none = client
        .get(format!("{root}/api/runs/1/code"))
        .send()
        .unwrap();
    assert_eq!(none.status(), 404);
}
