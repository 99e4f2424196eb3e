//! The dashboard's "Download report" is drawn from what its follower holds: for a run followed
//! live from before it exists to its end, the page equals the one `ReportInput::load` reads
//! from disk in one pass.

mod support;

use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde_json::json;
use smdebug_format::system::system_file_key;
use smdebug_report::{LoadOptions, ReportInput, render_html};
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use support::{JobConfig, client, get_json, start_job, wait_for, wait_until};

/// The page without its one time-dependent part, the time it was generated.
fn without_generated_time(html: &str) -> String {
    Regex::new(r"generated [^<]*</p>")
        .unwrap()
        .replace_all(html, "generated …</p>")
        .into_owned()
}

#[test]
fn the_downloaded_report_equals_the_report_loaded_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir_all(&run).unwrap();
    let location = run.to_str().unwrap().to_owned();
    let server = Server::start(ServeOptions::new(vec![location.clone()])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let store: Arc<dyn Storage> = Arc::new(LocalStorage::new(&run).unwrap());

    // A second node's metrics, appended out of time order while the dashboard follows, one
    // line that is not a record among them.
    let start = 1_700_000_000u64;
    let key = system_file_key(start, "algo-2");
    for part in 0..4u64 {
        let mut text = store.get(&key).map(|b| b.to_vec()).unwrap_or_default();
        for i in (0..50u64).rev() {
            let t = start as f64 + (part * 50 + i) as f64 * 0.2;
            text.extend_from_slice(
                (json!({"Type": "cpu", "Name": "total", "Dimension": "CPUUtilization",
                        "Value": (i % 9) as f64, "NodeId": "algo-2", "Timestamp": t})
                .to_string()
                    + "\n")
                    .as_bytes(),
            );
        }
        if part == 2 {
            text.extend_from_slice(b"{\"Type\": \"cpu\", not a record\n");
        }
        store.put(&key, text.into()).unwrap();
        // A pass that began after the write has read it before the next part comes.
        let passes = server.follower_passes();
        wait_until(
            Duration::from_secs(30),
            "the follower to read the part",
            || server.follower_passes() >= passes + 2,
        );
    }
    // A real job with the system sampler, served live to its end.
    start_job(
        Arc::clone(&store),
        Some(&run),
        JobConfig {
            steps: 40,
            step_time: Duration::from_millis(10),
            sampler: true,
            start_delay: Duration::ZERO,
            slow_steps: vec![7],
        },
    )
    .join();
    let runs = wait_for(Duration::from_secs(30), "the whole run", || {
        let v = get_json(&format!("{url}/api/runs"));
        (v["runs"][0]["complete"] == true && v["runs"][0]["index_pending"] == 0).then_some(v)
    });
    // A last pass would see a file the job closed last that the first did not.
    let passes = server.follower_passes();
    wait_until(Duration::from_secs(30), "two more follower passes", || {
        server.follower_passes() >= passes + 2
    });
    let runs_after = get_json(&format!("{url}/api/runs"));
    assert_eq!(runs["runs"][0]["samples"], runs_after["runs"][0]["samples"]);

    let downloaded = client()
        .get(format!("{url}/api/runs/0/report"))
        .send()
        .unwrap();
    assert_eq!(downloaded.status(), 200);
    let downloaded = downloaded.text().unwrap();
    let loaded = ReportInput::load(&location, &LoadOptions::default());
    assert!(loaded.has_metrics() && loaded.span_count() > 0);
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.message.contains(&key) && n.message.contains("line")),
        "{:#?}",
        loaded.notes
    );
    let from_disk = render_html(&loaded);
    assert_eq!(
        without_generated_time(&downloaded),
        without_generated_time(&from_disk)
    );
    server.shutdown();
}
