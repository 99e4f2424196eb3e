//! The dashboard's profiler data does not grow with a run's length (issue 36): the bytes a
//! server holds once it has read a run of N steps over M minutes of system metrics and once it
//! has read one of 4N steps over 4M minutes (four times the spans and the samples), and
//! answered the System and Steps tabs over the whole run and a zoom (read again from the
//! files), differ by a few hundred bytes a trace file and a system file, not by the spans or
//! the samples (it kept 32 bytes a span and 8 a sample before). Counted by this test binary's
//! own allocator (live bytes: allocated less freed), not timed.

mod support;

use std::time::Duration;

use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::alloc;
use support::profile_run::write_run;
use support::{get_json, wait_for, wait_passes};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Steps of the short run (more than the step spans the pushes' journal keeps, 8,192).
const STEPS: u64 = 9_000;
/// Minutes of system metrics of the short run (its timelines' samples more than the journal
/// keeps, 65,536).
const MINUTES: u64 = 30;
/// Series sampled every 100 ms: two cores (the heatmap), the CPU total, two GPUs and memory.
const SERIES: u64 = 6;

/// Live bytes once a server has read the run at `dir` and answered the System and Steps tabs
/// over the whole run and a zoom of a minute, less the live bytes before it started.
fn served_bytes(dir: &std::path::Path, (samples, spans): (u64, u64)) -> i64 {
    let before = alloc::live() as i64;
    let mut options = ServeOptions::new([dir]);
    options.read_only = true;
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let state = wait_for(Duration::from_secs(600), "the whole run read", || {
        let r = get_json(&format!("{url}/api/runs"))["runs"][0].clone();
        (r["complete"] == true
            && r["samples"].as_u64() == Some(samples)
            && r["spans"].as_u64() == Some(spans))
        .then_some(r)
    });
    let api = format!("{url}/api/runs/0");
    let end = state["end"].as_f64().unwrap();
    let zoom = format!("from={}&to={}", end - 600.0, end - 540.0);
    get_json(&format!("{api}/overview"));
    for view in ["system?points=1400", "steps", "spans?last=true&limit=25"] {
        get_json(&format!("{api}/{view}"));
    }
    let steps = get_json(&format!("{api}/steps?{zoom}"));
    // The zoom's steps are read again from the files: every one of the window.
    assert!(steps["window_steps"].as_u64().unwrap() > 10, "{steps}");
    let system = get_json(&format!("{api}/system?points=1400&{zoom}"));
    let points = system["series"][0]["data"]["t"].as_array().unwrap().len();
    assert!(points >= 600, "a minute of 100 ms samples: {points}");
    get_json(&format!(
        "{api}/spans?limit=25&sort=duration&order=desc&{zoom}"
    ));
    // Settled: the follower's passes after the end no longer read anything.
    wait_passes(&server, 3);
    let held = alloc::live() as i64 - before;
    server.shutdown();
    held
}

#[test]
fn a_served_runs_profile_holds_the_same_bytes_at_four_times_the_length() {
    let short = tempfile::tempdir().unwrap();
    let long = tempfile::tempdir().unwrap();
    let short_counts = write_run(short.path(), STEPS, MINUTES);
    let long_counts = write_run(long.path(), 4 * STEPS, 4 * MINUTES);
    assert_eq!(short_counts.0, MINUTES * 600 * SERIES);
    // Once first, so that what a first server sets up for the process (the thread pools) is
    // in neither count.
    served_bytes(short.path(), short_counts);
    let short_bytes = served_bytes(short.path(), short_counts);
    let long_bytes = served_bytes(long.path(), long_counts);
    let more_spans = (long_counts.1 - short_counts.1) as i64;
    let more_samples = (long_counts.0 - short_counts.0) as i64;
    let growth = long_bytes - short_bytes;
    eprintln!(
        "served: {short_bytes} bytes after {short_counts:?} (samples, spans), {long_bytes} bytes \
         after {long_counts:?}: {growth} bytes more for {more_samples} more samples and \
         {more_spans} more spans"
    );
    // A few hundred bytes a file (the index of the trace files, the followers' lists of the
    // files read: 270 more files), nothing a span or a sample: keeping them would add 32 bytes
    // a span and 8 a sample, 4.3 MB and 3.9 MB here.
    assert!(
        growth < 1_000 * 3 * MINUTES as i64 * 2,
        "{growth} bytes more for {more_spans} more spans and {more_samples} more samples"
    );
}
