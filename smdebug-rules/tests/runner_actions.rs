//! The runner (offline, following a live run, in another process) and every action against a
//! real local server: an HTTP server on 127.0.0.1, aiosmtpd started as a subprocess, a real
//! command, and a real training process stopped through its run directory.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smdebug_core::{Mode, SaveConfig};
use smdebug_examples::Bug;
use smdebug_read::trial::Trial;
use smdebug_rules::{
    ActionConfig, Error, Needs, ProfilerInput, ProfilerNeeds, ProfilerRule, ProfilerWindow,
    Result as RulesResult, Rule, RuleResult, RuleRunner, RuleSpec, Status, TensorRule,
    read_summary,
};
use smdebug_storage::testing::{wait_for, wait_until};
use support::{example_run, hook_for, http_server};
use tempfile::tempdir;

#[test]
fn offline_run_writes_statuses_and_the_summary_file() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let summary = RuleRunner::builder(run.path())
        .spec(RuleSpec::parse("DeadRelu").unwrap())
        .spec(RuleSpec::parse("ExplodingTensor").unwrap())
        .spec(RuleSpec::parse("NLPSequenceRatio").unwrap())
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    assert!(summary.finished && summary.run_complete && summary.issues_found());
    let dead = summary.rule("DeadRelu").unwrap();
    assert_eq!(dead.status, Status::IssuesFound);
    let steps = Trial::open(run.path())
        .unwrap()
        .global_steps(Some(Mode::Train))
        .unwrap();
    assert_eq!(dead.fired_count, steps.len() as u64);
    assert_eq!(dead.last_fired_step, steps.last().copied());
    assert_eq!(
        summary.rule("ExplodingTensor").unwrap().status,
        Status::NoIssuesFound
    );
    let nlp = summary.rule("NLPSequenceRatio").unwrap();
    assert_eq!((nlp.status, nlp.datapoints), (Status::NoData, 0));
    assert!(
        nlp.message.contains("no tensor of this run matched") && nlp.message.contains("embedding"),
        "{}",
        nlp.message
    );
    assert!(!summary.has_errors());

    let on_disk = read_summary(run.path()).unwrap().unwrap();
    assert_eq!(on_disk, summary);
}

#[test]
fn bad_input_gives_clear_errors() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, None);
    let build = |spec: &str| {
        RuleRunner::builder(run.path())
            .spec(RuleSpec::parse(spec).unwrap())
            .build()
            .err()
            .unwrap()
    };
    let e = build("NoSuchRule");
    assert!(
        matches!(e, Error::UnknownRule { .. }) && e.to_string().contains("DeadRelu"),
        "{e}"
    );
    let e = build("DeadRelu:threshold=3");
    assert!(
        e.to_string().contains("unknown parameter `threshold`"),
        "{e}"
    );
    let e = build("VanishingGradient:threshold=tiny");
    assert!(e.to_string().contains("parameter `threshold`"), "{e}");
    let e = build("AllZero:tensor_regex=(unclosed");
    assert!(matches!(e, Error::BadRegex { .. }), "{e}");
    let missing = run.path().join("not-there");
    let e = RuleRunner::builder(&missing)
        .spec(RuleSpec::new("DeadRelu"))
        .build()
        .err()
        .unwrap();
    assert!(
        matches!(e, Error::OpenRun { .. }) && e.to_string().contains("not-there"),
        "{e}"
    );
    // Text that names no location is refused when the runner is built or spawned, naming it,
    // without waiting for a run to appear there.
    for bad in ["s3:/bucket/run", "foo://x/run"] {
        let built = RuleRunner::builder(bad)
            .spec(RuleSpec::new("DeadRelu"))
            .open_timeout(std::time::Duration::from_secs(600))
            .build()
            .err()
            .unwrap();
        let spawned = RuleRunner::builder(bad)
            .spec(RuleSpec::new("DeadRelu"))
            .open_timeout(std::time::Duration::from_secs(600))
            .spawn()
            .err()
            .unwrap();
        for e in [built, spawned] {
            assert!(
                matches!(e, Error::OpenRun { .. }) && e.to_string().contains(bad),
                "{bad}: {e}"
            );
        }
    }
    let e = RuleRunner::builder(run.path())
        .spec(RuleSpec::new("DeadRelu").action(ActionConfig::Webhook {
            on: smdebug_rules::Trigger::FirstFiring,
            url: "ftp://example.invalid".into(),
            timeout_s: 1.0,
        }))
        .build()
        .err()
        .unwrap();
    assert!(matches!(e, Error::BadAction { .. }), "{e}");
}

/// A custom rule that fails at step 3: its status becomes Error; the others go on.
struct FailsAtThree;

impl TensorRule for FailsAtThree {
    fn name(&self) -> &str {
        "FailsAtThree"
    }
    fn needs(&self) -> Needs {
        // It reads no tensor: it counts the steps that arrive.
        Needs::default().requiring("saved steps")
    }
    fn invoke_at_step(&mut self, _t: &Trial, step: u64) -> RulesResult<RuleResult> {
        if step == 3 {
            return Err(Error::Rule {
                rule: "FailsAtThree".into(),
                step,
                source: "cannot go on".into(),
            });
        }
        let mut r = RuleResult::new(step);
        r.datapoints = 1;
        Ok(r)
    }
}

/// A custom debugging rule whose `needs` declares nothing: no tensor read, nothing else needed.
struct DeclaresNothing;

impl TensorRule for DeclaresNothing {
    fn name(&self) -> &str {
        "DeclaresNothing"
    }
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn invoke_at_step(&mut self, _t: &Trial, step: u64) -> RulesResult<RuleResult> {
        Ok(RuleResult::new(step))
    }
}

/// A custom profiler rule whose `needs` reads nothing, or requires something it leaves blank.
struct ProfilerDeclares(ProfilerNeeds);

impl ProfilerRule for ProfilerDeclares {
    fn name(&self) -> &str {
        "ProfilerDeclares"
    }
    fn needs(&self) -> ProfilerNeeds {
        self.0.clone()
    }
    fn invoke_on_window(&mut self, _w: &ProfilerWindow<'_>) -> RulesResult<Vec<RuleResult>> {
        Ok(Vec::new())
    }
}

/// A rule whose declaration of what it consumes is empty (or names a blank requirement) is
/// refused when registered, built or spawned, with an error naming the rule and what is
/// missing; nothing is evaluated.
#[test]
fn a_rule_declaring_nothing_is_refused_at_registration() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, None);
    let refused = |rule: fn() -> Rule, expect: &[&str]| {
        let e = rule().validate().unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::BadRule { .. }), "{text}");
        for part in expect {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
        let built = RuleRunner::builder(run.path())
            .rule(rule(), Vec::new())
            .build()
            .err()
            .expect("built a runner with a rule that declares nothing");
        assert_eq!(built.to_string(), text);
        let spawned = RuleRunner::builder(run.path())
            .rule(rule(), Vec::new())
            .spawn()
            .err()
            .expect("spawned a runner with a rule that declares nothing");
        assert_eq!(spawned.to_string(), text);
        let asked = RuleRunner::builder(run.path())
            .rule(rule(), Vec::new())
            .capture_requests()
            .unwrap_err();
        assert_eq!(asked.to_string(), text);
    };
    refused(
        || Rule::tensor(DeclaresNothing),
        &[
            "DeclaresNothing",
            "declares nothing",
            "reads no tensor",
            "Needs::requiring",
        ],
    );
    refused(
        || Rule::profiler(ProfilerDeclares(ProfilerNeeds::default())),
        &[
            "ProfilerDeclares",
            "declares no profiler data",
            "SystemMetrics",
            "Spans",
        ],
    );
    refused(
        || {
            Rule::profiler(ProfilerDeclares(
                ProfilerNeeds::reading([ProfilerInput::Spans]).requiring("  "),
            ))
        },
        &["ProfilerDeclares", "requires something but names nothing"],
    );
    // What it reads is enough: the same rule reading spans is taken.
    Rule::profiler(ProfilerDeclares(ProfilerNeeds::reading([
        ProfilerInput::Spans,
    ])))
    .validate()
    .unwrap();
    // Every built-in rule that builds with its defaults declares what it reads (the others
    // need a parameter given).
    let mut checked = 0;
    for b in smdebug_rules::all_builtin_rules() {
        if let Ok(rule) = b.build(&Default::default()) {
            rule.validate()
                .unwrap_or_else(|e| panic!("{}: {e}", b.name));
            checked += 1;
        }
    }
    assert!(
        checked >= 25,
        "only {checked} built-in rules built with their defaults"
    );
}

#[test]
fn a_failing_rule_is_reported_and_the_others_go_on() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let summary = RuleRunner::builder(run.path())
        .rule(Rule::tensor(FailsAtThree), Vec::new())
        .spec(RuleSpec::new("DeadRelu"))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let failed = summary.rule("FailsAtThree").unwrap();
    assert_eq!(failed.status, Status::Error);
    assert_eq!(failed.steps_evaluated, 3);
    assert!(failed.message.contains("cannot go on"));
    assert!(summary.has_errors());
    assert_eq!(
        summary.rule("DeadRelu").unwrap().status,
        Status::IssuesFound
    );
}

#[test]
fn webhook_posts_slack_compatible_json_once_and_failures_are_recorded() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let (url, bodies) = http_server(200);
    // A second webhook to a port nobody listens on: its failure must not stop the runner.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let summary = RuleRunner::builder(run.path())
        .spec(
            RuleSpec::new("DeadRelu")
                .action(ActionConfig::Webhook {
                    on: smdebug_rules::Trigger::FirstFiring,
                    url,
                    timeout_s: 5.0,
                })
                .action(ActionConfig::Webhook {
                    on: smdebug_rules::Trigger::FirstFiring,
                    url: dead_url,
                    timeout_s: 2.0,
                }),
        )
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&bodies.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with("DeadRelu fired at step 0"), "{text}");
    assert_eq!(body["smdebug"]["rule"], "DeadRelu");
    assert_eq!(body["smdebug"]["step"], 0);
    assert!(body["smdebug"]["evidence"][0]["tensor"] == "relu1.output");
    let st = summary.rule("DeadRelu").unwrap();
    assert_eq!(st.status, Status::IssuesFound);
    assert_eq!(st.action_errors.len(), 1, "{:?}", st.action_errors);
    assert!(
        st.action_errors[0].contains("webhook"),
        "{:?}",
        st.action_errors
    );
    // Actions run once, at the first firing: no second request reached the server.
    assert!(bodies.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn webhook_error_status_is_an_action_error() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let (url, _bodies) = http_server(500);
    let summary = RuleRunner::builder(run.path())
        .spec(RuleSpec::new("DeadRelu").action(ActionConfig::Webhook {
            on: smdebug_rules::Trigger::FirstFiring,
            url,
            timeout_s: 5.0,
        }))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let errs = &summary.rule("DeadRelu").unwrap().action_errors;
    assert!(errs.len() == 1 && errs[0].contains("HTTP 500"), "{errs:?}");
}

#[test]
fn command_action_gets_the_event_and_failures_are_recorded() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let out = run.path().join("event.txt");
    let summary = RuleRunner::builder(run.path())
        .spec(
            RuleSpec::new("DeadRelu")
                .action(ActionConfig::Command {
                    on: smdebug_rules::Trigger::FirstFiring,
                    program: "sh".into(),
                    args: vec![
                        "-c".into(),
                        format!(
                            "echo \"$SMDEBUG_RULE $SMDEBUG_STEP\" > {0}; cat >> {0}",
                            out.display()
                        ),
                    ],
                    timeout_s: 10.0,
                })
                .action(ActionConfig::Command {
                    on: smdebug_rules::Trigger::FirstFiring,
                    program: "sh".into(),
                    args: vec!["-c".into(), "echo broken >&2; exit 3".into()],
                    timeout_s: 10.0,
                }),
        )
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let written = std::fs::read_to_string(&out).unwrap();
    let (first, json) = written.split_once('\n').unwrap();
    assert_eq!(first, "DeadRelu 0");
    let event: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(event["rule"], "DeadRelu");
    let errs = &summary.rule("DeadRelu").unwrap().action_errors;
    assert!(errs.len() == 1 && errs[0].contains("broken"), "{errs:?}");
}

fn python() -> String {
    std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn email_action_delivers_to_a_real_smtp_server() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let maildir = run.path().join("maildir");
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new(python())
        .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
        .args(["-c", "aiosmtpd.handlers.Mailbox"])
        .arg(&maildir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aiosmtpd (pip install aiosmtpd)");
    wait_until(Duration::from_secs(30), "aiosmtpd to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let email = |port: u16| ActionConfig::Email {
        on: smdebug_rules::Trigger::FirstFiring,
        smtp_host: "127.0.0.1".into(),
        smtp_port: Some(port),
        tls: smdebug_rules::actions::SmtpTls::None,
        username: None,
        password: None,
        password_env: None,
        from: "smdebug <smdebug@example.com>".into(),
        to: vec!["ml-team@example.com".into()],
        timeout_s: 10.0,
    };
    let summary = RuleRunner::builder(run.path())
        .spec(RuleSpec::new("DeadRelu").action(email(port)))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let st = summary.rule("DeadRelu").unwrap();
    assert!(st.action_errors.is_empty(), "{:?}", st.action_errors);
    let new = std::fs::read_dir(maildir.join("new")).unwrap();
    let messages: Vec<String> = new
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert!(
        m.contains("Subject: [smdebug] DeadRelu fired at step 0"),
        "{m}"
    );
    assert!(m.contains("To: ml-team@example.com"), "{m}");
    assert!(m.contains("relu1.output"), "{m}");

    // The server is gone now: the failure is recorded, the runner finishes.
    let summary = RuleRunner::builder(run.path())
        .spec(RuleSpec::new("DeadRelu").action(email(port)))
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let errs = &summary.rule("DeadRelu").unwrap().action_errors;
    assert!(errs.len() == 1 && errs[0].contains("SMTP"), "{errs:?}");
}

#[test]
fn stalled_training_fires_once_when_a_live_run_pauses() {
    let run = tempdir().unwrap();
    let dir = run.path().to_path_buf();
    // The first step must exist before the runner opens the run.
    let trainer = std::thread::spawn(move || {
        let mut hook = hook_for(&dir, SaveConfig::every(1));
        hook.set_mode(Mode::Train);
        for step in 0..16 {
            hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
            hook.step();
            let pause = if step == 9 { 2500 } else { 30 };
            // workload: 30 ms steps, and a hang after step 9 (which the runner must see).
            std::thread::sleep(Duration::from_millis(pause));
        }
        hook.close();
    });
    let handle = RuleRunner::builder(run.path())
        .spec(RuleSpec::parse("StalledTraining:threshold=1.2").unwrap())
        .spec(RuleSpec::new("StalledTrainingRule").param("threshold", "1800"))
        .poll_interval(Duration::from_millis(50))
        .open_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .spawn()
        .unwrap();
    // While the run goes on, the summary in the run says InProgress or IssuesFound.
    let live = wait_for(
        Duration::from_secs(30),
        "the summary while following",
        || read_summary(run.path()).unwrap(),
    );
    assert!(!live.finished);
    trainer.join().unwrap();
    let summary = handle.join().unwrap();
    assert!(summary.run_complete && summary.finished);
    let stalled = &summary.rules[0];
    assert_eq!(stalled.status, Status::IssuesFound, "{stalled:?}");
    assert_eq!(stalled.fired_count, 1);
    assert_eq!(stalled.first_fired_step, Some(9));
    assert_eq!(summary.rules[1].status, Status::NoIssuesFound);
    assert_eq!(summary.last_step, Some(15));
}

/// The example binary built beside this test.
fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap();
    target.join("examples").join(name)
}

#[test]
fn a_runner_stops_a_training_process_through_the_run_directory() {
    let run = tempdir().unwrap();
    let bin = example_bin("train_until_stopped");
    assert!(bin.exists(), "{} (built by cargo test)", bin.display());
    // A net whose loss cannot decrease, 45 steps an epoch: 9,000 steps (about 14 s here) if
    // nobody stops it. The rule fires at step 19, but the stop reaches the job some hundreds of
    // steps later (the runner's first read, the job's stop watcher's poll); with 20 epochs
    // (1.4 s) a loaded machine could finish the job first.
    let epochs: u64 = 200;
    let child = Command::new(&bin)
        .args([
            run.path().to_str().unwrap(),
            "vanishing",
            &epochs.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let summary = RuleRunner::builder(run.path())
        .spec(RuleSpec::new("LossNotDecreasing").action(ActionConfig::StopTraining))
        .poll_interval(Duration::from_millis(50))
        .open_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .spawn()
        .unwrap()
        .join()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let steps: u64 = stdout
        .trim()
        .strip_prefix("steps=")
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(steps < epochs * 45, "the job was not stopped: {stdout}");
    assert!(
        stdout.contains("stopped=LossNotDecreasing fired at step"),
        "{stdout}"
    );

    let st = summary.rule("LossNotDecreasing").unwrap();
    assert_eq!(st.status, Status::IssuesFound);
    assert!(st.action_errors.is_empty(), "{:?}", st.action_errors);
    // The job ended with the rule's reason in its end marker, and the runner saw the end.
    assert!(summary.run_complete);
    let trial = Trial::open(run.path()).unwrap();
    let marker = std::fs::read(run.path().join("training_job_end.ts")).unwrap();
    match smdebug_format::parse_end_marker(&marker) {
        Some(smdebug_core::EndReason::Stopped(cause)) => {
            assert!(
                cause.reason.contains("LossNotDecreasing fired at step"),
                "{cause:?}"
            );
            // The marker names the rule and step from the request, across the processes.
            assert_eq!(cause.rule.as_deref(), Some("LossNotDecreasing"));
            assert_eq!(cause.step, st.first_fired_step);
        }
        other => panic!("end marker: {other:?}"),
    }
    assert!(
        trial.last_complete_step().unwrap().unwrap() > st.first_fired_step.unwrap(),
        "the job ran on to its next step, then stopped"
    );
}

#[test]
fn following_a_run_whose_folder_is_deleted_says_it_is_gone() {
    let parent = tempdir().unwrap();
    let run = parent.path().join("job");
    let mut hook = hook_for(&run, SaveConfig::every(1));
    hook.set_mode(Mode::Train);
    for step in 0..5 {
        hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
        hook.step();
    }
    // The steps are written in the background: wait for the last one's index file.
    let last = run.join("index/000000000/000000000004_worker_0.json");
    wait_until(Duration::from_secs(30), "the steps to be written", || {
        last.exists()
    });
    let started = Instant::now();
    let handle = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("LossNotDecreasing").unwrap())
        .poll_interval(Duration::from_millis(50))
        .open_timeout(Duration::from_secs(10))
        // Far longer than the test: it must end because the folder is gone, not idle.
        .idle_timeout(Duration::from_secs(600))
        .build()
        .unwrap()
        .spawn()
        .unwrap();
    // The runner follows the run (it has read it once) before its folder goes.
    wait_until(
        Duration::from_secs(30),
        "the runner to read the run",
        || handle.summary().is_some(),
    );
    // The runner writes its log into the run as it goes: a file it makes while the folder is
    // being removed leaves the folder not empty, so the removal is tried until it succeeds.
    wait_until(
        Duration::from_secs(30),
        "the run's folder to be removed",
        || match std::fs::remove_dir_all(&run) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => panic!("removing the run's folder: {e}"),
        },
    );
    let summary = handle.join().unwrap();
    let why = summary.gave_up.expect("the runner says why it stopped");
    assert!(why.contains("was deleted"), "{why}");
    assert!(!why.contains("writer"), "{why}");
    assert!(started.elapsed() < Duration::from_secs(300));
    drop(hook);
}
