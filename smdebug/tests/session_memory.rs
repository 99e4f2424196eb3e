//! What a `Session` holds in the training process, counted byte by byte with a counting
//! allocator (never timed): with capture, framework spans, the system sampler, a code-profiling
//! window and rules (the profiler report's among them) all on, a job four times as long holds
//! the same bytes once its windows have closed; and a session without a code window never
//! readies the code profiler's sampler (pprof-rs's sample table: 45 MB once readied and 113 MB
//! once a window has run, counted here, kept for the process's life). One test in this binary:
//! the counter is the process's.

use std::path::Path;
use std::time::Duration;

use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::profiler::system::SamplerConfig;
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{TrainConfig, train_in_session};
use smdebug_testkit::alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

const MIB: isize = 1 << 20;

/// The writer's queue bound here: what capture may hold in flight when the writer is behind.
const QUEUE_BYTES: usize = 1 << 20;

/// Everything on, as the demo has it: capture every 5th step (the built-in collections and the
/// rules' requests), the system sampled every 100 ms, span files closed every 200 ms, a
/// code-profiling window at steps 5 to 9 when `code_window`, and rules in the process with the
/// profiler report's.
fn session(run: &Path, code_window: bool) -> Session {
    let mut builder = Session::builder(run)
        .save(SaveConfig::every(5))
        .writer_queue_bytes(QUEUE_BYTES)
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(200)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(200)))
        .rules([
            "VanishingGradient",
            "LossNotDecreasing",
            "WeightUpdateRatio",
            "ProfilerReport",
        ])
        .rules_poll_interval(Duration::from_millis(20));
    if code_window {
        builder = builder.code_profiling(Window::steps(5, 5));
    }
    builder.start().unwrap()
}

/// Bytes held over `base` once the session's threads have had time to take in what the loop
/// produced (the writer's queue drained, span and system files published, the rules caught
/// up): the least of a few readings a while apart, so a batch in flight is not counted.
fn settled_over(base: isize) -> isize {
    (0..6)
        .map(|_| {
            // workload: the measurement's spacing; readings spread in time, the least of
            // which is kept (no one event says every thread has settled).
            std::thread::sleep(Duration::from_millis(400));
            alloc::live() - base
        })
        .min()
        .unwrap()
}

#[test]
fn a_session_holds_the_same_bytes_after_four_times_as_many_steps() {
    let (train, eval) = Digits::load(&digits::default_path()).unwrap().split(0.2, 1);
    let dir = tempfile::tempdir().unwrap();
    let epochs = |epochs| TrainConfig {
        epochs,
        ..TrainConfig::default()
    };

    // Without a code window the code profiler's sampler is never readied: pprof-rs's table
    // (4,096 × 4 stacks of 128 frames, 45 MB counted here when readied) is not allocated.
    let base = alloc::live();
    let mut quiet = session(&dir.path().join("no-window"), false);
    train_in_session(&epochs(1), &train, &eval, &mut quiet);
    let without_window = settled_over(base);
    let summary = quiet.finish().unwrap();
    assert!(summary.problems.is_empty(), "{summary}");
    assert_eq!(summary.code_profiles, 0, "{summary}");
    eprintln!("a session without a code window holds {without_window} B after one epoch");
    assert!(
        without_window < 24 * MIB,
        "a session without a code window holds {without_window} B: the code profiler's \
         sampler was readied for no window"
    );

    // Everything on, a code window at steps 5 to 9: N steps, then 3N more.
    let base = alloc::live();
    let mut s = session(&dir.path().join("run"), true);
    let first = train_in_session(&epochs(10), &train, &eval, &mut s);
    let held_n = settled_over(base);
    alloc::reset_peak();
    let more = train_in_session(&epochs(30), &train, &eval, &mut s);
    let held_4n = settled_over(base);
    let peak_4n = alloc::peak() - base;
    let steps = s.hook().global_step();
    let summary = s.finish().unwrap();
    eprintln!(
        "{} training steps: held {held_n} B; {} training steps ({steps} in all): held \
         {held_4n} B, peak {peak_4n} B",
        first.steps,
        first.steps + more.steps,
    );

    // What the job ran: every step's records written, the window profiled and stored, the
    // rules evaluated while it trained.
    assert!(summary.problems.is_empty(), "{summary}");
    assert_eq!(summary.steps, steps, "{summary}");
    assert!(summary.records_written > 0, "{summary}");
    assert_eq!(summary.code_profiles, 1, "{summary}");
    assert!(
        summary.system_samples > 0 && summary.spans_written > 0,
        "{summary}"
    );
    for rule in &summary.rules {
        assert!(
            rule.steps_evaluated > 0 || rule.rule != "LossNotDecreasing",
            "{rule:?}"
        );
    }

    // 3N more steps (about 1,700 more, with ~40 spans, a dozen tensors and a system sample
    // or so each): anything kept per step or per span would be megabytes.
    let bound = 2 * MIB;
    assert!(
        held_4n - held_n < bound,
        "after {} training steps the session holds {held_4n} B, after {} {held_n} B: {} B \
         more, over the {bound} B a run of any length may add",
        first.steps + more.steps,
        first.steps,
        held_4n - held_n
    );
}
