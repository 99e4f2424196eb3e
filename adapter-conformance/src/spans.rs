//! Framework spans through the adapter, with no timing code in the loop: the step boundary is
//! the step span, the hook's data iterator times loading, the fixture's pass gives the forward,
//! backward, optimizer and per-module spans, and the timeline's windows decide which are
//! measured at each step. The spans go through smdebug-profiler's [`SpanRecorder`] into the run
//! and are read back with its [`ProfilerReader`] (and, once, with Python smdebug's reader).
//!
//! The loop is driven through [`Capture`], as a session drives it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use smdebug_core::timeline::{MODULE_ROW, Profiling, Timeline, TimelineConfig};
use smdebug_core::window::Window;
use smdebug_core::{Capture, Hook, HookBuilder, Mode, SaveConfig};
use smdebug_profiler::spans::{SpanConfig, SpanRecorder, SpanWriterGuard};
use smdebug_profiler::system::NodeId;
use smdebug_read::profile::{ProfilerReader, Span, SpanQuery};
use smdebug_read::trial::Trial;

use crate::fixture::{Data, Fixture, hook_at, ok};

/// The reader script of smdebug-profiler's interop tests (Python smdebug's own readers).
const PYTHON_READERS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../smdebug-profiler/tests/interop_python/smdebug_readers.py"
);

/// A hook writing its run into `dir`, whose timeline (with `windows`) hands its spans to
/// smdebug-profiler's span recorder, writing into the same run as Python smdebug's node
/// `algo-1`, worker 0. Finish the run with [`finish_profiled`].
pub fn profiled_hook<F: Fixture>(
    fx: &F,
    dir: &Path,
    builder: HookBuilder,
    windows: TimelineConfig,
) -> (F::Hook, SpanWriterGuard) {
    let config = SpanConfig::default().node(NodeId::algo(1)).worker(0);
    let (recorder, writer) = SpanRecorder::start_local(config, dir).unwrap();
    let timeline = Timeline::new(windows, Arc::new(recorder));
    (hook_at(fx, dir, builder.timeline(timeline)), writer)
}

/// Ends a run of [`profiled_hook`] as a session does ([`Capture::close_run`], then the span
/// writer), checks that no span was dropped, and returns every span written, read back by
/// smdebug-read's profiler reader.
pub fn finish_profiled<F: Fixture>(
    mut hook: F::Hook,
    writer: SpanWriterGuard,
    dir: &Path,
) -> Vec<Span> {
    ok(hook.close_run());
    drop(hook);
    let report = writer.finish().unwrap();
    assert_eq!(
        (report.dropped, report.write_errors, report.written),
        (0, 0, report.recorded),
        "{report:?}"
    );
    let reader = ProfilerReader::open(dir).unwrap();
    let spans = reader.spans(&SpanQuery::default()).unwrap();
    assert_eq!(spans.len() as u64, report.written);
    spans
}

/// `train` TRAIN steps, then `eval` EVAL steps, the way a loop with a session runs them:
/// batches from the hook's timed iterator, the fixture's pass, the loss, and the step boundary
/// through [`Capture`]. `during(hook, global_step)` runs in each step, after the pass.
fn profiled_loop<F: Fixture>(
    fx: &F,
    hook: &mut F::Hook,
    train: usize,
    eval: usize,
    mut during: impl FnMut(&F::Hook, u64),
) {
    let data = Data::load();
    let mut model = fx.model(hook);
    ok(hook.switch_mode(Mode::Train));
    for (x, y) in hook.as_ref().data(data.train_batches(32, train, 11)) {
        let pass = fx.pass(&mut model, hook, &x, &y, true, false);
        ok(hook.as_mut().save_loss("loss", &pass.loss));
        during(hook, hook.core().global_step());
        ok(hook.end_step());
    }
    ok(hook.switch_mode(Mode::Eval));
    let test = data.test_batches(64);
    assert!(test.len() >= eval, "{} test batches", test.len());
    for (x, y) in hook.as_ref().data(test.into_iter().take(eval)) {
        let pass = fx.pass(&mut model, hook, x, y, false, false);
        ok(hook.as_mut().save_loss("loss", &pass.loss));
        during(hook, hook.core().global_step());
        ok(hook.end_step());
    }
}

/// The loop's steps in order (the index is the global step): `train` TRAIN steps, then `eval`
/// EVAL steps.
fn loop_steps(train: u64, eval: u64) -> Vec<(Mode, u64)> {
    let train = (0..train).map(|s| (Mode::Train, s));
    train.chain((0..eval).map(|s| (Mode::Eval, s))).collect()
}

/// The spans of row `phase` at `(mode, step)`.
fn at<'a>(spans: &'a [Span], phase: &str, (mode, step): (Mode, u64)) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.phase == phase && s.mode == Some(mode) && s.step == Some(step))
        .collect()
}

fn step_row(mode: Mode) -> String {
    format!("Step:ModeKeys.{}", mode.name())
}

fn assert_inside(inner: &Span, outer: &Span) {
    assert!(
        inner.start_us >= outer.start_us && inner.end_us <= outer.end_us,
        "{inner:?} is not inside {outer:?}"
    );
}

/// What one step measured, as the tests expect it.
#[derive(Clone, Copy, Debug)]
struct Measured {
    /// The step span and the forward span (and, in TRAIN, backward and optimizer).
    phases: bool,
    /// One data-loading span.
    data: bool,
    /// The fixture's per-module spans.
    modules: bool,
}

/// Checks the spans of a loop over `steps` (index = global step) against `expect(global)`, and
/// that there are no others: step spans in order without overlap, phases inside their step,
/// module spans inside the forward pass.
fn assert_spans<F: Fixture>(
    fx: &F,
    spans: &[Span],
    steps: &[(Mode, u64)],
    expect: impl Fn(u64) -> Measured,
) {
    let mut accounted = 0;
    let mut previous_step: Option<&Span> = None;
    for (global, &(mode, step)) in steps.iter().enumerate() {
        let want = expect(global as u64);
        let here = |phase: &str| at(spans, phase, (mode, step));
        let what = format!("{mode:?} step {step} (global {global})");
        let step_spans = here(&step_row(mode));
        let forward = here("Forward");
        let training = want.phases && mode == Mode::Train;
        let after = [here("Backward(post-forward)"), here("Optimizer")];
        let data = here("DataLoaderIter");
        let modules = here(MODULE_ROW);
        assert_eq!(
            step_spans.len(),
            usize::from(want.phases),
            "step span, {what}"
        );
        assert_eq!(forward.len(), usize::from(want.phases), "forward, {what}");
        for spans in &after {
            assert_eq!(spans.len(), usize::from(training), "{spans:?}, {what}");
        }
        assert_eq!(data.len(), usize::from(want.data), "data loading, {what}");
        let mut names: Vec<&str> = modules.iter().map(|s| s.name.as_str()).collect();
        let mut want_names = if want.modules {
            fx.timed_modules().to_vec()
        } else {
            Vec::new()
        };
        names.sort_unstable();
        want_names.sort_unstable();
        assert_eq!(names, want_names, "module spans, {what}");
        if let [step_span] = step_spans[..] {
            for span in forward.iter().chain(after.iter().flatten()).chain(&data) {
                assert_inside(span, step_span);
            }
            if let Some(previous) = previous_step {
                assert!(
                    previous.end_us <= step_span.start_us,
                    "{previous:?} overlaps {step_span:?}"
                );
            }
            previous_step = Some(step_span);
        }
        if let [forward] = forward[..] {
            for module in &modules {
                assert_inside(module, forward);
            }
        }
        accounted += step_spans.len()
            + forward.len()
            + after.iter().map(Vec::len).sum::<usize>()
            + data.len()
            + modules.len();
    }
    assert_eq!(
        accounted,
        spans.len(),
        "spans outside the loop's steps: {spans:?}"
    );
}

/// Every step gets one step span (TRAIN and EVAL, numbered per mode) with its forward span
/// inside, and in training its backward and optimizer spans; data-loading spans are measured
/// only in the data-loading window's steps and per-module spans only in the detailed window's
/// steps (which here runs on from TRAIN into EVAL), inside the forward pass.
pub fn framework_spans_mark_every_step_with_its_phases_in_train_and_eval<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let windows = TimelineConfig {
        phases: Window::Always,
        data_loading: Window::steps(2, 3),
        detailed: Window::steps(5, 3),
        code: Window::Never,
    };
    let builder = Hook::builder().save_config(SaveConfig::every(4));
    let (mut hook, writer) = profiled_hook(fx, dir.path(), builder, windows);
    profiled_loop(fx, &mut hook, 6, 3, |_, _| {});
    let spans = finish_profiled::<F>(hook, writer, dir.path());
    assert_spans(fx, &spans, &loop_steps(6, 3), |global| Measured {
        phases: true,
        data: (2..5).contains(&global),
        modules: (5..8).contains(&global),
    });
    // Capture ran beside the spans: TRAIN steps 0 and 4, EVAL step 0 (global 6).
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 4, 6]);
}

/// With every window closed nothing is measured (no span, no trace file) and capture carries
/// on; with only the phases' window closed, only data-loading spans are measured.
pub fn closed_windows_measure_nothing_and_capture_carries_on<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let closed = TimelineConfig {
        phases: Window::Never,
        data_loading: Window::Never,
        detailed: Window::Never,
        code: Window::Never,
    };
    let builder = Hook::builder().save_config(SaveConfig::every(1));
    let (mut hook, writer) = profiled_hook(fx, dir.path(), builder, closed);
    profiled_loop(fx, &mut hook, 4, 2, |_, _| {});
    let spans = finish_profiled::<F>(hook, writer, dir.path());
    assert_eq!(spans, []);
    let reader = ProfilerReader::open(dir.path()).unwrap();
    assert_eq!(reader.trace_files().unwrap(), []);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), [0, 1, 2, 3, 4, 5]);

    let dir = tempfile::tempdir().unwrap();
    let phases_off = TimelineConfig {
        phases: Window::Never,
        ..TimelineConfig::default()
    };
    let (mut hook, writer) = profiled_hook(fx, dir.path(), Hook::builder(), phases_off);
    profiled_loop(fx, &mut hook, 4, 2, |_, _| {});
    let spans = finish_profiled::<F>(hook, writer, dir.path());
    assert_spans(fx, &spans, &loop_steps(4, 2), |_| Measured {
        phases: false,
        data: true,
        modules: false,
    });
}

/// Windows replaced while the loop runs (as an edited profiler configuration file replaces
/// them) take effect at the next step boundary: detailed profiling opened for two steps during
/// step 1 covers steps 2 and 3, data loading closed during step 1 is still measured in step 1,
/// and the phases closed during step 4 still give step 4 its spans.
pub fn a_window_changed_while_running_takes_effect_at_the_next_boundary<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let builder = Hook::builder().save_config(SaveConfig::every(5));
    let (mut hook, writer) = profiled_hook(fx, dir.path(), builder, TimelineConfig::default());
    profiled_loop(fx, &mut hook, 7, 0, |hook, global| {
        let timeline = hook.core().timeline();
        match global {
            1 => {
                timeline.set_window(Profiling::Detailed, Window::next_steps(2));
                timeline.set_window(Profiling::DataLoading, Window::Never);
                assert!(
                    !timeline.is_open(Profiling::Detailed),
                    "not before the boundary"
                );
                assert!(
                    timeline.is_open(Profiling::DataLoading),
                    "not before the boundary"
                );
            }
            4 => timeline.set_window(Profiling::Phases, Window::Never),
            _ => {}
        }
    });
    let spans = finish_profiled::<F>(hook, writer, dir.path());
    assert_spans(fx, &spans, &loop_steps(7, 0), |global| Measured {
        phases: global <= 4,
        data: global <= 1,
        modules: (2..4).contains(&global),
    });
}

/// Python smdebug's framework-metrics reader (`LocalAlgorithmMetricsReader`) reads the spans
/// the adapter measured, every one, with the same rows, names, times and steps.
pub fn python_smdebug_reads_the_adapters_spans<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let every_step = TimelineConfig {
        detailed: Window::Always,
        ..TimelineConfig::default()
    };
    let (mut hook, writer) = profiled_hook(fx, dir.path(), Hook::builder(), every_step);
    profiled_loop(fx, &mut hook, 3, 2, |_, _| {});
    let spans = finish_profiled::<F>(hook, writer, dir.path());
    type Row = (String, String, u64, u64, Option<u64>);
    let mut ours: Vec<Row> = spans
        .iter()
        .map(|s| {
            (
                s.phase.clone(),
                s.name.clone(),
                s.start_us,
                s.end_us,
                s.step,
            )
        })
        .collect();
    let seen = python_read(dir.path());
    let mut theirs: Vec<Row> = seen["framework"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e[4], "algo-1-0", "{e}");
            (
                e[0].as_str().unwrap().to_owned(),
                e[1].as_str().unwrap().to_owned(),
                e[2].as_u64().unwrap(),
                e[3].as_u64().unwrap(),
                e[5].as_str().and_then(|s| s.parse().ok()),
            )
        })
        .collect();
    ours.sort();
    theirs.sort();
    assert_eq!(theirs, ours);
    let modules = ours.iter().filter(|r| r.0 == MODULE_ROW).count();
    assert_eq!(modules, 5 * fx.timed_modules().len());
}

/// Python smdebug's readers on the run `dir` (`$SMDEBUG_PYTHON`, else `python3`).
fn python_read(dir: &Path) -> Value {
    let interpreter = std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let output = Command::new(&interpreter)
        .arg(PYTHON_READERS)
        .arg("read")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{interpreter}` (set SMDEBUG_PYTHON): {e}"));
    assert!(
        output.status.success(),
        "{PYTHON_READERS} read failed with `{interpreter}` (SMDEBUG_PYTHON must name a Python \
         with smdebug 1.0.34, numpy<2 and protobuf 3.20; `bash .ci/setup-python` prints one): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // smdebug logs to stdout on import; the answer is the last line.
    let stdout = String::from_utf8(output.stdout).unwrap();
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("bad JSON from {PYTHON_READERS}: {e}: {stdout}"))
}
