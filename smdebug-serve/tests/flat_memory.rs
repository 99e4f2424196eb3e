//! The dashboard's memory does not grow with a run's scalar values (issue 36): the bytes a
//! server holds once it has read a run of N steps and once it has read a run of 4N steps, each
//! of 40 scalars a step, differ by a few bytes a step (the run's list of steps), not by the
//! values (40 a step: the per-value columns it kept before held 8.5 to 20 bytes each, 340 to
//! 800 bytes a step). Counted by this test binary's own allocator (live bytes: allocated
//! less freed), not timed.

mod support;

use std::time::Duration;

use smdebug_core::Mode;
use smdebug_serve::{ServeOptions, Server};
use smdebug_testkit::alloc;
use smdebug_testkit::runs::every_step_hook;
use support::{get_json, wait_for, wait_passes};

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

const SCALARS: usize = 40;
const N: u64 = 1_500;

/// A run of `steps` steps of [`SCALARS`] scalars, and an eval loss every 10 steps, written by
/// the real hook and writer.
fn write_run(dir: &std::path::Path, steps: u64) {
    let mut hook = every_step_hook(dir);
    let names: Vec<String> = (0..SCALARS).map(|i| format!("metric_{i:02}")).collect();
    for step in 0..steps {
        hook.set_mode(Mode::Train);
        for (i, name) in names.iter().enumerate() {
            let value = ((step * 31 + i as u64 * 7) % 1_000) as f64 / (step as f64 + 1.0);
            hook.save_scalar(name, value, &["metrics"]);
        }
        hook.step();
        if step % 10 == 9 {
            hook.set_mode(Mode::Eval);
            hook.save_scalar("metric_00", 1.0 / (step as f64 + 1.0), &["metrics"]);
            hook.step();
        }
    }
    hook.close();
}

/// Live bytes once a server has read the run at `dir` (and answered its overview and a zoom),
/// less the live bytes before it started, and how many scalar values it read.
fn served_bytes(dir: &std::path::Path, steps: u64) -> (i64, u64) {
    let before = alloc::live() as i64;
    let mut options = ServeOptions::new([dir]);
    options.read_only = true;
    let server = Server::start(options).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let values = steps * SCALARS as u64 + steps / 10;
    wait_for(Duration::from_secs(600), "the whole run read", || {
        let r = &get_json(&format!("{url}/api/runs"))["runs"][0];
        (r["complete"] == true
            && r["index_pending"] == 0
            && r["scalar_values"].as_u64() == Some(values))
        .then_some(())
    });
    // What a page asks for: the overview charts, the whole run's scalars and a zoom (read
    // from the files); the server keeps none of it.
    let api = format!("{url}/api/runs/0");
    get_json(&format!("{api}/headlines"));
    get_json(&format!("{api}/scalars?limit=256"));
    get_json(&format!("{api}/scalars?from=100&to=400&limit=256"));
    // Settled: the follower's passes after the end no longer read anything.
    wait_passes(&server, 3);
    let held = alloc::live() as i64 - before;
    server.shutdown();
    (held, values)
}

#[test]
fn a_served_run_holds_the_same_bytes_at_four_times_the_steps() {
    let short = tempfile::tempdir().unwrap();
    let long = tempfile::tempdir().unwrap();
    write_run(short.path(), N);
    write_run(long.path(), 4 * N);
    // Once first, so that what a first server sets up for the process (the thread pools) is
    // in neither count.
    served_bytes(short.path(), N);
    let (short_bytes, short_values) = served_bytes(short.path(), N);
    let (long_bytes, long_values) = served_bytes(long.path(), 4 * N);
    let more_values = (long_values - short_values) as i64;
    let more_steps = (3 * N + 3 * N / 10) as i64;
    let growth = long_bytes - short_bytes;
    eprintln!(
        "served: {short_bytes} bytes after {short_values} values, {long_bytes} bytes after \
         {long_values}: {growth} bytes more for {more_values} more values ({:.2} a value, \
         {:.1} a step)",
        growth as f64 / more_values as f64,
        growth as f64 / more_steps as f64
    );
    // A few bytes a step (the run's steps and the tensor follower's list of them: 8 bytes
    // each), nothing a value: keeping every value would add 8.5 bytes a value or more.
    assert!(
        growth < 48 * more_steps,
        "{growth} bytes more for {more_steps} more steps ({more_values} more values)"
    );
}
