//! A dashboard that stays up and truthful: idle and slow sockets, foreign pages, concurrent
//! report downloads, many series, many finished runs, runs deleted or written again.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde_json::{Value, json};
use smdebug_format::layout::END_MARKER;
use smdebug_format::system::system_file_key;
use smdebug_serve::{ConnectionLimits, ServeOptions, Server};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use support::{JobConfig, client, closed_within, get_json, start_job, wait_for};

fn local(dir: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStorage::new(dir).unwrap())
}

fn base(server: &Server) -> String {
    format!("http://{}", server.addr())
}

fn quick_job(steps: u64) -> JobConfig {
    JobConfig {
        steps,
        step_time: Duration::from_millis(2),
        sampler: false,
        start_delay: Duration::ZERO,
        slow_steps: Vec::new(),
    }
}

/// `n` samples a series of the given `(type, name, dimension)` series on node algo-1, one
/// system file, 1 s apart from `start`.
fn write_system(store: &dyn Storage, series: &[(String, String, String)], n: usize) {
    let start = 1_700_000_000u64;
    let mut text = String::new();
    for i in 0..n {
        for (kind, name, dimension) in series {
            text.push_str(
                &json!({"Type": kind, "Name": name, "Dimension": dimension,
                        "Value": ((i * 7) % 100) as f64, "NodeId": "algo-1",
                        "Timestamp": start as f64 + i as f64})
                .to_string(),
            );
            text.push('\n');
        }
    }
    store
        .put(&system_file_key(start, "algo-1"), text.into_bytes().into())
        .unwrap();
}

fn gpu_series(n: usize) -> Vec<(String, String, String)> {
    (0..n)
        .flat_map(|g| {
            [
                ("gpu".into(), format!("gpu{g}"), "GPUUtilization".into()),
                (
                    "gpu".into(),
                    format!("gpu{g}"),
                    "GPUMemoryUtilization".into(),
                ),
            ]
        })
        .collect()
}

#[test]
fn idle_and_slow_sockets_without_the_token_do_not_lock_out_the_token_holder() {
    let dir = tempfile::tempdir().unwrap();
    write_system(local(dir.path()).as_ref(), &gpu_series(1), 10);
    let mut options = ServeOptions::new([dir.path()]);
    options.token = Some("holder-token".into());
    options.limits = ConnectionLimits {
        max_connections: 24,
        max_untrusted_per_client: 12,
        header_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(60),
        ..ConnectionLimits::default()
    };
    let server = Server::start(options).unwrap();
    let root = base(&server);
    // 150 sockets on loopback: most idle, every third one feeding half a request's headers.
    let mut sockets: Vec<TcpStream> = (0..150)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr()).unwrap();
            if i % 3 == 0 {
                s.write_all(b"GET /api/runs HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
            }
            s
        })
        .collect();
    // The token holder is served meanwhile, again and again, each on a new connection.
    for _ in 0..5 {
        let c = client();
        let r = c
            .get(format!("{root}/api/runs"))
            .header("x-smdebug-token", "holder-token")
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let stats = server.connections();
    assert!(stats.open <= 24, "{stats:?}");
    // An idle or half-sent connection is closed after the header timeout (2 s; the bound
    // only catches sockets held forever).
    let last = sockets.last_mut().unwrap();
    assert!(closed_within(last, Duration::from_secs(30)));
    wait_for(Duration::from_secs(30), "the idle sockets closed", || {
        (server.connections().open == 0).then_some(())
    });
    drop(sockets);
    server.shutdown();
}

#[test]
fn idle_connections_on_loopback_are_closed_and_the_server_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new([dir.path()]);
    options.limits = ConnectionLimits {
        max_connections: 32,
        max_untrusted_per_client: 32,
        header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        ..ConnectionLimits::default()
    };
    let server = Server::start(options).unwrap();
    let url = base(&server);
    // 100 connections that never send a byte: past the cap, the oldest are closed.
    let sockets: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    assert!(server.connections().open <= 32);
    assert_eq!(get_json(&format!("{url}/api/runs"))["runs"][0]["id"], 0);
    // A kept-alive connection that made a request is trusted and closed once idle (2 s).
    let mut kept = TcpStream::connect(server.addr()).unwrap();
    let request = format!(
        "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        server.addr().port()
    );
    kept.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    kept.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    assert!(closed_within(&mut kept, Duration::from_secs(30)));
    wait_for(
        Duration::from_secs(30),
        "every idle connection closed",
        || (server.connections().open == 0).then_some(()),
    );
    drop(sockets);
    server.shutdown();
}

#[test]
fn a_page_of_another_origin_is_refused_even_for_get() {
    let dir = tempfile::tempdir().unwrap();
    write_system(local(dir.path()).as_ref(), &gpu_series(2), 10);
    let server = Server::start(ServeOptions::new([dir.path()])).unwrap();
    let url = base(&server);
    let host = format!("127.0.0.1:{}", server.addr().port());
    let c = client();
    for path in ["/api/runs", "/api/runs/0/system", "/api/runs/0/report"] {
        let r = c
            .get(format!("{url}{path}"))
            .header("origin", "http://evil.example")
            .send()
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let body: Value = r.json().unwrap();
        assert!(body["error"].as_str().unwrap().contains("another site"));
        // A link on another site (the browser says so) cannot start a download either.
        let r = c
            .get(format!("{url}{path}"))
            .header("sec-fetch-site", "cross-site")
            .send()
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    let r = c
        .get(format!("{url}/api/runs"))
        .header("origin", format!("http://{host}"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    server.shutdown();
}

#[test]
fn concurrent_report_downloads_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // Enough data that a report takes a while to draw.
    write_system(local(dir.path()).as_ref(), &gpu_series(16), 2_000);
    let server = Server::start(ServeOptions::new([dir.path()])).unwrap();
    let url = base(&server);
    wait_for(Duration::from_secs(60), "the samples", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["samples"] == 64_000).then_some(())
    });
    let n = 6;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            let url = url.clone();
            std::thread::spawn(move || {
                let c = client();
                barrier.wait();
                let r = c.get(format!("{url}/api/runs/0/report")).send().unwrap();
                let status = r.status().as_u16();
                (status, r.text().unwrap())
            })
        })
        .collect();
    let answers: Vec<(u16, String)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let built = answers.iter().filter(|a| a.0 == 200).count();
    let refused: Vec<_> = answers.iter().filter(|a| a.0 == 429).collect();
    assert!(
        built >= 1,
        "{:?}",
        answers.iter().map(|a| a.0).collect::<Vec<_>>()
    );
    assert_eq!(built + refused.len(), n);
    assert!(
        !refused.is_empty(),
        "six at once, one slot: some are refused"
    );
    for (_, body) in refused {
        assert!(body.contains("one at a time"), "{body}");
    }
    server.shutdown();
}

#[test]
fn many_series_are_paged_and_the_heatmap_banded() {
    let dir = tempfile::tempdir().unwrap();
    // 2,000 GPUs: 4,000 series (utilization and memory).
    write_system(local(dir.path()).as_ref(), &gpu_series(2_000), 5);
    let server = Server::start(ServeOptions::new([dir.path()])).unwrap();
    let url = base(&server);
    wait_for(Duration::from_secs(60), "the samples", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["samples"] == 20_000).then_some(())
    });
    let c = client();
    let first = c
        .get(format!("{url}/api/runs/0/system"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(first.len() < 2_000_000, "{} bytes", first.len());
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["series"].as_array().unwrap().len(), 64);
    assert_eq!(first["series_total"], 4_000);
    assert_eq!(first["next_offset"], 64);
    let heat = &first["heatmap"];
    assert_eq!(heat["row_total"], 2_000);
    assert!(heat["rows"].as_array().unwrap().len() <= 256);
    assert!(heat["band"].as_u64().unwrap() >= 8);
    // Every series, page by page, each once.
    let mut names = std::collections::BTreeSet::new();
    let mut offset = Some(0u64);
    let mut pages = 0;
    while let Some(at) = offset {
        let page = get_json(&format!("{url}/api/runs/0/system?offset={at}&limit=1000"));
        let series = page["series"].as_array().unwrap();
        assert!(series.len() <= 256);
        for s in series {
            names.insert(format!("{} {}", s["name"], s["dimension"]));
        }
        offset = page["next_offset"].as_u64();
        pages += 1;
    }
    assert_eq!(names.len(), 4_000);
    assert_eq!(pages, 4_000usize.div_ceil(256));
    server.shutdown();
}

fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn finished_runs_cost_a_few_threads_and_are_polled_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let runs = 200;
    for i in 0..runs {
        let run = dir.path().join(format!("run{i:03}"));
        let store = local(&run);
        write_system(store.as_ref(), &gpu_series(1), 3);
        store.put(END_MARKER, "completed".into()).unwrap();
    }
    let before = threads_now();
    let mut options = ServeOptions::new([dir.path()]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let url = base(&server);
    assert!(server.follower_threads() <= 4);
    let added = threads_now().saturating_sub(before);
    // Followers, the runtime's workers and the server thread; never one a run.
    assert!(added < 20, "{added} threads for {runs} runs");
    wait_for(Duration::from_secs(120), "every run read", || {
        let v = get_json(&format!("{url}/api/runs"));
        let list = v["runs"].as_array().unwrap();
        (list.len() == runs && list.iter().all(|r| r["complete"] == true)).then_some(())
    });
    // Once nothing changes, each finished run waits twice as long each pass (up to 10 s).
    // workload: time for the waits to grow (what the test is about).
    std::thread::sleep(Duration::from_secs(8));
    let p0 = server.follower_passes();
    // workload: the window the passes are counted over.
    std::thread::sleep(Duration::from_secs(4));
    let passes = server.follower_passes() - p0;
    // At the poll interval it would be 200 runs × 4 s / 50 ms = 16,000 passes.
    assert!(
        passes <= 800,
        "{passes} passes over {runs} finished runs in 4 s"
    );
    eprintln!("{passes} passes over {runs} finished runs in 4 s; {added} threads added");
    server.shutdown();
}

#[test]
fn a_run_written_again_from_step_0_is_detected_and_its_view_reset() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    std::fs::create_dir_all(&run).unwrap();
    let store = local(&run);
    let mut options = ServeOptions::new([&run]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let url = base(&server);
    start_job(Arc::clone(&store), Some(&run), quick_job(40)).join();
    let first = wait_for(Duration::from_secs(60), "the first run", || {
        let v = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (v["complete"] == true && v["last_step"].as_u64() >= Some(40)).then_some(v)
    });
    assert_eq!(first["resets"], 0);
    assert!(first["identity"].is_null());
    // The same folder written again, as a session with `overwrite` does: every file removed,
    // then a shorter run.
    for key in store.list("").unwrap() {
        store.delete(&key).unwrap();
    }
    start_job(Arc::clone(&store), Some(&run), quick_job(5)).join();
    let second = wait_for(Duration::from_secs(60), "the view reset", || {
        let v = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (v["resets"].as_u64() >= Some(1) && v["complete"] == true).then_some(v)
    });
    let why = second["identity"].as_str().unwrap();
    assert!(
        why.contains("written again") || why.contains("deleted"),
        "{why}"
    );
    assert!(why.contains("cleared"), "{why}");
    // Only the new run's steps: 5 train steps (0–4), no eval step.
    assert_eq!(second["last_step"], 4, "{second}");
    assert_eq!(second["steps"], 5, "{second}");
    server.shutdown();
}

#[test]
fn a_run_folder_deleted_while_served_is_shown_gone() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    let store = local(&run);
    write_system(store.as_ref(), &gpu_series(2), 20);
    let mut options = ServeOptions::new([&run]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let url = base(&server);
    wait_for(Duration::from_secs(60), "the run", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["samples"] == 80).then_some(())
    });
    std::fs::remove_dir_all(&run).unwrap();
    let gone = wait_for(Duration::from_secs(60), "the run gone", || {
        let v = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (v["gone"] == true).then_some(v)
    });
    assert_eq!(gone["exists"], false);
    assert_eq!(gone["samples"], 0);
    assert!(
        gone["identity"].as_str().unwrap().contains("deleted"),
        "{gone}"
    );
    // The same folder back with another run: shown, and no longer gone.
    write_system(local(&run).as_ref(), &gpu_series(1), 7);
    wait_for(Duration::from_secs(60), "the new run", || {
        let v = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (v["gone"] == false && v["samples"] == 14).then_some(())
    });
    server.shutdown();
}

#[test]
fn a_server_on_another_loopback_address_answers_at_its_printed_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new([dir.path()]);
    options.host = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let server = Server::start(options).unwrap();
    assert!(server.token().is_none());
    let url = server.url().trim_end_matches('/').to_owned();
    assert!(url.starts_with("http://127.0.0.2:"), "{url}");
    let r = client().get(format!("{url}/api/runs")).send().unwrap();
    assert_eq!(r.status(), 200);
    server.shutdown();
}

#[test]
fn a_run_folder_replaced_by_another_is_detected_and_shown_anew() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("job");
    write_system(local(&run).as_ref(), &gpu_series(2), 20);
    let mut options = ServeOptions::new([&run]);
    options.poll = Duration::from_millis(50);
    let server = Server::start(options).unwrap();
    let url = base(&server);
    wait_for(Duration::from_secs(60), "the first run", || {
        (get_json(&format!("{url}/api/runs"))["runs"][0]["samples"] == 80).then_some(())
    });
    // Another run prepared beside it, then moved into its place in two renames (faster than
    // a poll: the folder is never seen missing).
    let other = dir.path().join("other");
    write_system(local(&other).as_ref(), &gpu_series(1), 3);
    std::fs::rename(&run, dir.path().join("old")).unwrap();
    std::fs::rename(&other, &run).unwrap();
    let replaced = wait_for(Duration::from_secs(60), "the new run shown", || {
        let v = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (v["resets"].as_u64() >= Some(1) && v["samples"] == 6).then_some(v)
    });
    let why = replaced["identity"].as_str().unwrap();
    assert!(why.contains("replaced") || why.contains("deleted"), "{why}");
    assert_eq!(replaced["gone"], false);
    server.shutdown();
}
