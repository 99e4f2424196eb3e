//! What a folder of finished runs costs the dashboard once they are read: threads, and CPU
//! seconds over a window (issue 27: 1,000 finished runs cost 1,004 threads and 16.6 CPU-s
//! every 20 s).
//!
//! ```sh
//! cargo run -p smdebug-serve --example finished_runs -- [RUNS] [WINDOW_S] [EMPTY_STEP_FOLDERS]
//! ```
//!
//! Writes RUNS finished runs (a system file and an end marker each; the first run also gets
//! EMPTY_STEP_FOLDERS empty folders under `events/` and `index/`) into a temporary folder, serves it, waits
//! until every run is shown complete, then prints the server's threads and the process's CPU
//! seconds and follower passes over WINDOW_S seconds.

use std::time::{Duration, Instant};

use serde_json::json;
use smdebug_format::layout::END_MARKER;
use smdebug_format::system::system_file_key;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

/// User plus system CPU seconds of this process (`/proc/self/stat`, clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command name: state is field 0, utime 11, stime 12.
    (ticks(11) + ticks(12)) / 100.0
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (runs, window, empty) = (arg(0, 1_000), arg(1, 20), arg(2, 0));
    let dir = tempfile::tempdir()?;
    for i in 0..runs {
        let run = dir.path().join(format!("run{i:05}"));
        let store = LocalStorage::new(&run)?;
        let start = 1_700_000_000u64;
        let line = json!({"Type": "cpu", "Name": "total", "Dimension": "CPUUtilization",
                          "Value": 50.0, "NodeId": "algo-1", "Timestamp": start as f64});
        store.put(
            &system_file_key(start, "algo-1"),
            format!("{line}\n").into_bytes().into(),
        )?;
        store.put(END_MARKER, "completed".into())?;
        if i == 0 {
            for step in 0..empty {
                std::fs::create_dir_all(run.join(format!("events/{step:012}")))?;
                std::fs::create_dir_all(run.join(format!("index/{step:09}")))?;
            }
        }
    }
    let before = threads();
    let server = Server::start(ServeOptions::new([dir.path()]))?;
    let url = format!("http://{}/api/runs", server.addr());
    let client = reqwest::blocking::Client::builder().no_proxy().build()?;
    let began = Instant::now();
    loop {
        let v: serde_json::Value = client.get(&url).send()?.json()?;
        let list = v["runs"].as_array().cloned().unwrap_or_default();
        if list.len() == runs as usize && list.iter().all(|r| r["complete"] == true) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "{runs} finished runs ({empty} empty step folders in one) read in {:.1} s; {} threads added, {} followers",
        began.elapsed().as_secs_f64(),
        threads().saturating_sub(before),
        server.follower_threads()
    );
    // Settle: the backoff reaches its cap after a few passes.
    std::thread::sleep(Duration::from_secs(15));
    let (cpu0, passes0) = (cpu_seconds(), server.follower_passes());
    std::thread::sleep(Duration::from_secs(window));
    println!(
        "over {window} s: {:.2} CPU-s, {} passes, {} threads",
        cpu_seconds() - cpu0,
        server.follower_passes() - passes0,
        threads()
    );
    server.shutdown();
    Ok(())
}
