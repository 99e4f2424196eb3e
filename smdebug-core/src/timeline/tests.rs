//! Tests of the timeline.

use super::*;
use std::sync::{Arc, Mutex};

use crate::mode::Mode;
use crate::phase::Phase;
use crate::window::Window;

/// A window change: the profiler, open or closed, the global step, the mode step.
type Change = (Profiling, bool, u64, Option<u64>);
/// A span as the tests compare it: its row, its name and its step.
type Row = (String, String, Option<(Mode, u64)>);

#[derive(Default)]
struct Kept {
    spans: Mutex<Vec<SpanRecord>>,
    changes: Mutex<Vec<Change>>,
}

impl SpanSink for Kept {
    fn record(&self, span: SpanRecord) {
        self.spans.lock().unwrap().push(span);
    }
    fn window_changed(&self, c: WindowChange) {
        self.changes.lock().unwrap().push((
            c.profiling,
            c.open,
            c.global_step,
            c.step.map(|s| s.1),
        ));
    }
}

impl Kept {
    fn rows(&self) -> Vec<Row> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s.phase.trace_name().into_owned(),
                    s.name.to_string(),
                    s.step,
                )
            })
            .collect()
    }
}

/// `steps` TRAIN steps of a loop that loads a batch, runs a module inside its forward
/// pass, and runs backward and the optimizer.
fn run(timeline: &Timeline, steps: u64) {
    timeline.start(Mode::Train, 0, 0);
    let mut data = timeline.data(0..steps).workers(2);
    for step in 0..steps {
        data.next().unwrap();
        timeline.scope(Phase::Forward, || {
            timeline.module_scope("fc1", || ());
        });
        timeline.scope(Phase::Backward, || ());
        drop(timeline.span(Phase::Optimizer));
        timeline.boundary((Mode::Train, step), (Mode::Train, step + 1), step + 1);
    }
    timeline.close(steps);
}

#[test]
fn every_step_gets_its_phases_by_default() {
    let kept = Arc::new(Kept::default());
    run(&Timeline::new(TimelineConfig::default(), kept.clone()), 3);
    let rows = kept.rows();
    for step in 0..3 {
        let at = Some((Mode::Train, step));
        for row in [
            "DataLoaderIter",
            "Forward",
            "Backward(post-forward)",
            "Optimizer",
            "Step:ModeKeys.TRAIN",
        ] {
            assert_eq!(
                rows.iter().filter(|r| r.0 == row && r.2 == at).count(),
                1,
                "{row} at step {step}: {rows:?}"
            );
        }
    }
    assert!(!rows.iter().any(|r| r.0 == MODULE_ROW), "detailed is off");
    let data = kept.spans.lock().unwrap()[0].clone();
    assert_eq!(data.args, [("num_workers".into(), 2.into())]);
}

#[test]
fn a_loader_says_whether_it_pins_memory_on_each_data_loading_span() {
    let kept = Arc::new(Kept::default());
    let timeline = Timeline::new(TimelineConfig::default(), kept.clone());
    timeline.start(Mode::Train, 0, 0);
    // The last word counts: one `pin_memory` argument a span.
    let data = timeline
        .data(0..2)
        .pin_memory(true)
        .workers(1)
        .pin_memory(false);
    for (step, _) in data.enumerate() {
        let step = step as u64;
        timeline.boundary((Mode::Train, step), (Mode::Train, step + 1), step + 1);
    }
    timeline.close(2);
    let spans = kept.spans.lock().unwrap();
    let loads: Vec<_> = spans
        .iter()
        .filter(|s| s.phase == Phase::DataLoading)
        .collect();
    assert_eq!(loads.len(), 2);
    for load in loads {
        assert_eq!(
            load.args,
            [
                ("num_workers".into(), 1.into()),
                ("pin_memory".into(), false.into())
            ]
        );
    }
}

#[test]
fn a_step_span_runs_from_the_first_activity_to_the_boundary() {
    let kept = Arc::new(Kept::default());
    let timeline = Timeline::new(TimelineConfig::default(), kept.clone());
    timeline.start(Mode::Train, 0, 0);
    let mut data = timeline.data(0..1);
    data.next();
    timeline.scope(Phase::Forward, || ());
    timeline.boundary((Mode::Train, 0), (Mode::Train, 1), 1);
    // A step without measured activity runs from the previous boundary.
    timeline.boundary((Mode::Train, 1), (Mode::Train, 2), 2);
    let spans = kept.spans.lock().unwrap();
    let steps: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| matches!(s.phase, Phase::Step(_)))
        .collect();
    assert_eq!(steps.len(), 2);
    let load = &spans[0];
    assert_eq!(load.phase, Phase::DataLoading);
    assert_eq!(
        steps[0].start, load.start,
        "the step starts where loading did"
    );
    assert!(
        steps[0].end >= spans[1].end,
        "and ends after the forward pass"
    );
    assert_eq!(
        steps[1].start, steps[0].end,
        "the idle step follows the first"
    );
    assert_eq!(steps[1].step, Some((Mode::Train, 1)));
}

#[test]
fn windows_decide_which_spans_are_measured_and_the_sink_hears_of_changes() {
    let kept = Arc::new(Kept::default());
    let config = TimelineConfig {
        data_loading: Window::steps(1, 2),
        detailed: Window::steps(2, 1),
        code: Window::steps(3, 1),
        ..TimelineConfig::default()
    };
    run(&Timeline::new(config, kept.clone()), 5);
    let rows = kept.rows();
    let steps_of = |row: &str| -> Vec<u64> {
        rows.iter()
            .filter(|r| r.0 == row)
            .map(|r| r.2.unwrap().1)
            .collect()
    };
    assert_eq!(steps_of("DataLoaderIter"), [1, 2]);
    assert_eq!(steps_of(MODULE_ROW), [2]);
    assert_eq!(steps_of("Forward"), [0, 1, 2, 3, 4]);
    let changes = kept.changes.lock().unwrap().clone();
    assert_eq!(
        changes,
        // A window names its first step when it opens and its last when it closes.
        [
            (Profiling::Phases, true, 0, Some(0)),
            (Profiling::DataLoading, true, 1, Some(1)),
            (Profiling::Detailed, true, 2, Some(2)),
            (Profiling::DataLoading, false, 3, Some(2)),
            (Profiling::Detailed, false, 3, Some(2)),
            (Profiling::Code, true, 3, Some(3)),
            (Profiling::Code, false, 4, Some(3)),
            (Profiling::Phases, false, 5, Some(5)),
        ]
    );
}

#[test]
fn a_window_set_while_running_opens_at_the_next_boundary() {
    let kept = Arc::new(Kept::default());
    let timeline = Timeline::new(TimelineConfig::default(), kept.clone());
    timeline.start(Mode::Train, 0, 0);
    assert!(!timeline.is_open(Profiling::Detailed));
    // No start step: it opens at the step where it is first asked about.
    timeline.set_window(Profiling::Detailed, Window::next_steps(2));
    assert!(
        !timeline.is_open(Profiling::Detailed),
        "not before the boundary"
    );
    timeline.boundary((Mode::Train, 0), (Mode::Train, 1), 1);
    assert!(timeline.is_open(Profiling::Detailed));
    timeline.boundary((Mode::Train, 1), (Mode::Train, 2), 2);
    assert!(timeline.is_open(Profiling::Detailed));
    timeline.boundary((Mode::Train, 2), (Mode::Train, 3), 3);
    assert!(!timeline.is_open(Profiling::Detailed));
    assert_eq!(
        timeline.windows().unwrap().detailed,
        Window::next_steps(2),
        "the window in force"
    );
}

#[test]
fn an_off_timeline_measures_nothing_and_runs_the_work() {
    let timeline = Timeline::off();
    assert_eq!(timeline.scope(Phase::Forward, || 41 + 1), 42);
    assert_eq!(timeline.data(0..3).count(), 3);
    assert!(!timeline.is_open(Profiling::Phases));
    timeline.boundary((Mode::Train, 0), (Mode::Train, 1), 1);
    assert_eq!(timeline.current_step(), None);
}
