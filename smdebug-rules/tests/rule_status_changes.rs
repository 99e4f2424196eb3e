//! A rule's status as it changes: actions triggered by status changes (a real command and a
//! real HTTP server), each rule's log in the run, and the status lines of a training log, on
//! runs recorded through the real hook, offline and while the run is written.

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use smdebug_core::{Mode, SaveConfig};
use smdebug_examples::Bug;
use smdebug_read::trial::Trial;
use smdebug_rules::runner::{StatusLines, rule_log_file};
use smdebug_rules::{
    ActionConfig, Needs, Result as RulesResult, Rule, RuleResult, RuleRunner, RuleSpec, Status,
    TensorRule, Trigger,
};
use smdebug_storage::testing::wait_until;
use support::{example_run, hook_for, http_server};
use tempfile::tempdir;

/// A command that appends `rule from to step` to `file` at each event.
fn appending_command(file: &Path, on: Trigger) -> ActionConfig {
    ActionConfig::Command {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!(
                "echo \"$SMDEBUG_RULE ${{SMDEBUG_STATUS_FROM:-none}} ${{SMDEBUG_STATUS:-none}} $SMDEBUG_STEP\" >> {}",
                file.display()
            ),
        ],
        timeout_s: 10.0,
        on,
    }
}

/// Status lines kept in memory.
fn captured(every: Duration) -> (StatusLines, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    (
        StatusLines {
            every,
            sink: Arc::new(move |line| sink.lock().unwrap().push(line.to_string())),
        },
        lines,
    )
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_status_change_reaches_its_actions_the_rules_log_and_the_training_log() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let changes = run.path().join("changes.txt");
    let firings = run.path().join("firings.txt");
    let (url, posted) = http_server(200);
    let (lines, said) = captured(Duration::from_secs(3600));
    let summary = RuleRunner::builder(run.path())
        .spec(
            RuleSpec::new("DeadRelu")
                .action(appending_command(&changes, Trigger::StatusChange))
                .action(ActionConfig::Webhook {
                    url,
                    timeout_s: 10.0,
                    on: Trigger::StatusChange,
                }),
        )
        .spec(
            RuleSpec::new("ExplodingTensor")
                .action(appending_command(&changes, Trigger::StatusChange))
                // Never fires: this one is never carried out.
                .action(appending_command(&firings, Trigger::FirstFiring)),
        )
        .status_lines(lines)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let dead = summary.rule("DeadRelu").unwrap();
    assert_eq!(dead.status, Status::IssuesFound);
    assert!(dead.action_errors.is_empty(), "{:?}", dead.action_errors);
    let last = summary.last_step.unwrap();

    // The command: one line per change, with the old and the new status.
    let mut got = lines_of(&changes);
    got.sort();
    assert_eq!(
        got,
        [
            format!("DeadRelu InProgress IssuesFound {last}"),
            format!("ExplodingTensor InProgress NoIssuesFound {last}"),
        ]
    );
    assert!(
        !firings.exists(),
        "a first-firing action ran for a rule that never fired"
    );

    // The webhook: the change in its JSON and its text.
    let body: serde_json::Value =
        serde_json::from_str(&posted.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(body["smdebug"]["rule"], "DeadRelu");
    assert_eq!(body["smdebug"]["change"]["from"], "InProgress");
    assert_eq!(body["smdebug"]["change"]["to"], "IssuesFound");
    let text = body["text"].as_str().unwrap();
    assert!(
        text.starts_with("DeadRelu: InProgress -> IssuesFound at step"),
        "{text}"
    );
    assert!(posted.recv_timeout(Duration::from_millis(300)).is_err());

    // Each rule's log in the run: started, then its change with the message.
    let log = lines_of(&run.path().join(rule_log_file("DeadRelu")));
    assert_eq!(log.len(), 3, "{log:#?}");
    assert!(log[0].ends_with(&format!(
        "DeadRelu: InProgress: evaluation of {} started",
        run.path().display()
    )));
    assert!(
        log[1].contains(&format!(
            "DeadRelu: InProgress -> IssuesFound at step {last}: "
        )) && log[1].contains(&dead.message),
        "{}",
        log[1]
    );
    // The last look says where each rule stands, with figures from the summary.
    assert!(
        log[2].ends_with(&format!(
            "DeadRelu: IssuesFound ({} steps judged, fired {} times) at step {last}",
            dead.steps_judged, dead.fired_count
        )),
        "{}",
        log[2]
    );
    let exploding = lines_of(&run.path().join(rule_log_file("ExplodingTensor")));
    assert!(
        exploding[1].contains("ExplodingTensor: InProgress -> NoIssuesFound"),
        "{exploding:#?}"
    );

    // The training log: each change at once, then every rule's standing.
    let said = said.lock().unwrap().clone();
    assert!(
        said.iter()
            .any(|l| l.starts_with("smdebug rule DeadRelu: InProgress -> IssuesFound")),
        "{said:#?}"
    );
    assert!(
        said.iter()
            .any(|l| l.starts_with("smdebug rule ExplodingTensor: InProgress -> NoIssuesFound")),
        "{said:#?}"
    );
    // The interval (an hour) never passed: no standing lines, only the changes.
    assert_eq!(said.len(), 2, "{said:#?}");
}

/// Fires at one step, from then on.
struct FiresFrom(u64);

impl TensorRule for FiresFrom {
    fn name(&self) -> &str {
        "FiresFrom"
    }
    fn needs(&self) -> Needs {
        Needs::default().requiring("saved steps")
    }
    fn invoke_at_step(&mut self, _t: &Trial, step: u64) -> RulesResult<RuleResult> {
        let mut r = RuleResult::new(step);
        r.datapoints = 1;
        if step >= self.0 {
            r.fire(format!("step {step} is past {}", self.0));
        }
        Ok(r)
    }
}

#[test]
fn a_change_is_in_the_rules_log_while_the_run_goes_on_and_the_verdict_at_its_end() {
    let run = tempdir().unwrap();
    let dir = run.path().to_path_buf();
    let (go_on_tx, go_on) = mpsc::channel::<()>();
    let trainer = std::thread::spawn(move || {
        let mut hook = hook_for(&dir, SaveConfig::every(1));
        hook.set_mode(Mode::Train);
        // LossNotDecreasing judges two windows of 10 losses: 30 steps give it some.
        for step in 0..30u64 {
            hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
            hook.step();
            // The job waits after step 7 until the test has seen the firing in the log.
            if step == 7 {
                go_on.recv().unwrap();
            }
        }
        hook.close();
    });
    let changes = run.path().join("changes.txt");
    let (lines, said) = captured(Duration::from_millis(100));
    let handle = RuleRunner::builder(run.path())
        .rule(
            Rule::tensor(FiresFrom(5)),
            vec![appending_command(&changes, Trigger::StatusChange)],
        )
        .spec(RuleSpec::new("LossNotDecreasing"))
        .poll_interval(Duration::from_millis(20))
        .open_timeout(Duration::from_secs(10))
        .status_lines(lines)
        .spawn()
        .unwrap();
    let log = run.path().join(rule_log_file("FiresFrom"));
    wait_until(
        Duration::from_secs(30),
        "the firing in FiresFrom's log",
        || {
            lines_of(&log)
                .iter()
                .any(|l| l.contains("FiresFrom: InProgress -> IssuesFound at step"))
        },
    );
    // The run has not ended: the other rule is still in progress, and said so in the log.
    assert!(
        lines_of(&run.path().join(rule_log_file("LossNotDecreasing")))
            .iter()
            .all(|l| !l.contains("-> NoIssuesFound"))
    );
    assert_eq!(lines_of(&changes).len(), 1, "{:?}", lines_of(&changes));
    // Status lines come at the interval while the job waits (the runner looks at least every
    // 2 s when nothing changes), not only at the end.
    let standing = |said: &Arc<Mutex<Vec<String>>>| {
        said.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("smdebug rule LossNotDecreasing: InProgress ("))
            .count()
    };
    wait_until(
        Duration::from_secs(30),
        "two status lines while following",
        || standing(&said) >= 2,
    );
    go_on_tx.send(()).unwrap();
    trainer.join().unwrap();
    let summary = handle.join().unwrap();
    assert_eq!(
        summary.rule("FiresFrom").unwrap().status,
        Status::IssuesFound
    );
    // Firing again at every later step is no change: one line for the whole run.
    assert_eq!(
        lines_of(&changes),
        [format!("FiresFrom InProgress IssuesFound {}", {
            // The step the rules had reached when the change was seen.
            let line = lines_of(&log)
                .into_iter()
                .find(|l| l.contains("-> IssuesFound"))
                .unwrap();
            let after = line.split("at step ").nth(1).unwrap();
            after.split(':').next().unwrap().to_string()
        })]
    );
    let loss_log = lines_of(&run.path().join(rule_log_file("LossNotDecreasing")));
    assert!(
        loss_log
            .iter()
            .any(|l| l.contains("LossNotDecreasing: InProgress -> NoIssuesFound at step 29")),
        "{loss_log:#?}"
    );
    let said = said.lock().unwrap().clone();
    assert!(
        said.iter()
            .any(|l| l.starts_with("smdebug rule LossNotDecreasing: InProgress -> NoIssuesFound")),
        "{said:#?}"
    );
}
