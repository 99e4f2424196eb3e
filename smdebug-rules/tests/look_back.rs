//! Each debugging rule declares how far back from the step it judges it asks the trial about
//! earlier steps (`Needs::look_back`); the runner lets the trial go of the steps behind every
//! live rule's look-back. A rule that needs the whole run (the default, for a rule that says
//! nothing) keeps it all; a rule reading behind what it declared is told so in its status
//! (`StepReleased`), never given `NoData` nor a step skipped in silence.

use std::path::Path;

use smdebug_core::Mode;
use smdebug_format::layout;
use smdebug_io::crafted::{scalar, write_collections, write_step};
use smdebug_read::trial::Trial;
use smdebug_rules::{
    Error, LookBack, Needs, Result, Rule, RuleResult, RuleRunner, RuleSpec, Status, TensorRule,
    TensorSelection,
};
use smdebug_testkit::runs::write_finished_run;

const STEPS: u64 = 3_000;

/// A finished run of `STEPS` TRAIN steps, `loss` = 1000 − the step / 10 (falling).
fn write_run(run: &Path) {
    write_finished_run(run, STEPS, |s| {
        vec![scalar("loss", 1000.0 - s as f32 / 10.0)]
    });
}

fn loss_at(step: u64) -> f64 {
    f64::from(1000.0 - step as f32 / 10.0)
}

/// Compares the loss at the step judged with the loss `back` steps before (or at step 0 with
/// `back: None`); declares `declared` as its look-back (the default `Needs` when `None`).
struct Compare {
    name: &'static str,
    back: Option<u64>,
    declared: Option<LookBack>,
}

impl TensorRule for Compare {
    fn name(&self) -> &str {
        self.name
    }

    fn needs(&self) -> Needs {
        let needs = Needs::of(self.name, &TensorSelection::exact(&["loss"]), "losses");
        match self.declared {
            Some(look_back) => needs.looking_back(look_back),
            None => needs,
        }
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let earlier = match self.back {
            Some(back) if step < back => return Ok(result),
            Some(back) => step - back,
            None => 0,
        };
        let read = |s: u64| -> Result<f64> {
            let value = trial
                .tensor("loss")
                .and_then(|t| t.value(s, None, None))
                .map_err(|e| Error::Read {
                    rule: self.name.to_string(),
                    step,
                    source: Box::new(e),
                })?;
            Ok(value.iter().next().copied().unwrap())
        };
        let (now, then) = (read(step)?, read(earlier)?);
        // The values are exact: what the run holds at those steps.
        assert_eq!((now, then), (loss_at(step), loss_at(earlier)));
        result.datapoints = 1;
        if now > then {
            result.fire(format!("loss rose from step {earlier} to {step}"));
        }
        Ok(result)
    }
}

fn runner(run: &Path, rules: Vec<Compare>) -> RuleRunner {
    let mut builder = RuleRunner::builder(run).write_into_run(false);
    for rule in rules {
        builder = builder.rule(Rule::tensor(rule), Vec::new());
    }
    builder.build().unwrap()
}

/// Every built-in debugging rule asks about the step it judges alone: what it needs of earlier
/// steps it keeps itself.
#[test]
fn every_builtin_debugging_rule_judges_step_by_step() {
    let other = tempfile::tempdir().unwrap();
    write_run(other.path());
    let mut checked = 0;
    for rule in smdebug_rules::builtin_rules() {
        let name = rule.name;
        // The rules with a parameter that has no default.
        let spec = match name {
            "SimilarAcrossRuns" => format!("{name}:other_trials={}", other.path().display()),
            "TensorVariance" => format!("{name}:max_threshold=10"),
            _ => name.to_string(),
        };
        let built = smdebug_rules::build_rule(&RuleSpec::parse(&spec).unwrap()).unwrap();
        if let Rule::Tensor(r) = built {
            assert_eq!(r.needs().look_back, LookBack::Steps(0), "{name}");
            checked += 1;
        }
    }
    assert_eq!(checked, 20, "every built-in debugging rule");
}

/// Rules within their look-back read every step they ask for, exactly, over a run long enough
/// for the runner to release steps; a rule that needs the whole run keeps every step held.
#[test]
fn rules_read_what_they_declared_and_a_whole_run_rule_keeps_every_step() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path());
    // Within their look-back: everything is judged, nothing released too early.
    let mut r = runner(
        dir.path(),
        vec![
            Compare {
                name: "ThreeBack",
                back: Some(3),
                declared: Some(LookBack::Steps(3)),
            },
            Compare {
                name: "SameStep",
                back: Some(0),
                declared: Some(LookBack::Steps(0)),
            },
        ],
    );
    let summary = r.run_offline().unwrap();
    for (rule, judged) in [("ThreeBack", STEPS - 3), ("SameStep", STEPS)] {
        let st = summary.rule(rule).unwrap();
        assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
        assert_eq!(st.datapoints, judged, "{st:#?}");
    }
    // The trial holds the last steps only: three before the last, and the last.
    let trial = r.trial().unwrap();
    assert_eq!(trial.released_before(), STEPS - 4);
    assert_eq!(trial.steps(None).unwrap().len(), 4);

    // With a rule comparing with step 0 (declaring nothing: the whole run), nothing goes.
    let mut r = runner(
        dir.path(),
        vec![
            Compare {
                name: "FromStart",
                back: None,
                declared: None,
            },
            Compare {
                name: "SameStep",
                back: Some(0),
                declared: Some(LookBack::Steps(0)),
            },
        ],
    );
    let summary = r.run_offline().unwrap();
    let st = summary.rule("FromStart").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
    assert_eq!(st.datapoints, STEPS);
    assert_eq!(r.trial().unwrap().released_before(), 0);
    assert_eq!(r.trial().unwrap().steps(None).unwrap().len() as u64, STEPS);
}

/// A rule reading further back than it declared gets the trial's `StepReleased`: its status is
/// `Error`, naming the step, not `NoData` and not a pass; the other rules go on.
#[test]
fn a_rule_reading_behind_its_look_back_is_told_the_step_was_released() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path());
    let mut r = runner(
        dir.path(),
        vec![
            Compare {
                name: "Overreach",
                back: Some(50),
                declared: Some(LookBack::Steps(2)),
            },
            Compare {
                name: "SameStep",
                back: Some(0),
                declared: Some(LookBack::Steps(0)),
            },
        ],
    );
    let summary = r.run_offline().unwrap();
    let st = summary.rule("Overreach").unwrap();
    assert_eq!(st.status, Status::Error, "{st:#?}");
    assert!(
        st.message.contains("was released from this trial's index"),
        "{}",
        st.message
    );
    let same = summary.rule("SameStep").unwrap();
    assert_eq!(same.status, Status::NoIssuesFound, "{same:#?}");
    assert_eq!(same.datapoints, STEPS);
}

/// A runner following a run while it is written, reading the index only 50 steps ahead of its
/// rules, judges every step of it once, values exact: none lost between stretches, none
/// judged twice.
#[test]
fn a_runner_following_a_live_run_with_a_short_read_ahead_judges_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    write_collections(run, "worker_0", 1);
    // Each step is written aside and renamed into the run, its event file before its index
    // file, as the writers publish them: the runner never sees a file half written.
    let staging = tempfile::tempdir().unwrap();
    let write = |steps: std::ops::Range<u64>| {
        for s in steps {
            let loss = scalar("loss", 1000.0 - s as f32 / 10.0);
            write_step(staging.path(), s, "worker_0", Mode::Train, s, &[loss]);
            for file in [
                layout::event_file(s, "worker_0"),
                layout::index_file(s, "worker_0"),
            ] {
                let to = run.join(&file);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::rename(staging.path().join(&file), to).unwrap();
            }
        }
    };
    write(0..1000);
    let handle = RuleRunner::builder(run)
        .write_into_run(false)
        .index_read_ahead(50)
        .poll_interval(std::time::Duration::from_millis(5))
        .rule(
            Rule::tensor(Compare {
                name: "ThreeBack",
                back: Some(3),
                declared: Some(LookBack::Steps(3)),
            }),
            Vec::new(),
        )
        .spec(RuleSpec::parse("LossNotDecreasing").unwrap())
        .spawn()
        .unwrap();
    write(1000..STEPS);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
    let summary = handle.join().unwrap();
    let three = summary.rule("ThreeBack").unwrap();
    assert_eq!(three.status, Status::NoIssuesFound, "{three:#?}");
    assert_eq!(three.steps_evaluated, STEPS);
    assert_eq!(three.datapoints, STEPS - 3);
    let loss = summary.rule("LossNotDecreasing").unwrap();
    assert_eq!(loss.status, Status::NoIssuesFound, "{loss:#?}");
    assert_eq!(loss.steps_evaluated, STEPS);
}
