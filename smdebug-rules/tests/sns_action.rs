//! The SNS action (SageMaker's e-mail and SMS notifications) against moto's SNS server, checked
//! with boto3 through an SQS queue subscribed to the same topic; and without credentials.
//!
//! Each test sets the AWS environment of its own process (cargo-nextest runs every test in a
//! process of its own; CI runs these with nextest).

mod support;

use std::path::Path;
use std::process::Command;

use smdebug_examples::Bug;
use smdebug_rules::actions::SnsProtocol;
use smdebug_rules::{ActionConfig, RuleRunner, RuleSpec, Status, Summary, Trigger};
use smdebug_storage::testing::{MotoServer, python};
use support::example_run;
use tempfile::tempdir;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/sns_moto.py");
const TOPIC: &str = "SMDebugRules";

fn moto_sns(moto: &MotoServer, command: &str) -> String {
    let out = Command::new(python())
        .args([SCRIPT, &moto.endpoint(), command, TOPIC])
        .output()
        .expect("run sns_moto.py");
    assert!(
        out.status.success(),
        "sns_moto.py {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn set_env(vars: &[(&str, &str)]) {
    for (k, v) in vars {
        // SAFETY: this test's process runs no other thread that reads the environment yet
        // (nextest runs each test in its own process).
        unsafe { std::env::set_var(k, v) };
    }
}

fn sns_action(moto: &MotoServer, protocol: SnsProtocol, endpoint: &str) -> ActionConfig {
    ActionConfig::Sns {
        protocol,
        endpoint: endpoint.into(),
        topic: TOPIC.into(),
        region: None,
        endpoint_url: Some(moto.endpoint()),
        timeout_s: 20.0,
        on: Trigger::FirstFiring,
    }
}

fn run_rules(run: &Path, actions: &[ActionConfig]) -> Summary {
    let mut spec = RuleSpec::new("DeadRelu");
    for a in actions {
        spec = spec.action(a.clone());
    }
    RuleRunner::builder(run)
        .spec(spec)
        .spec(RuleSpec::new("ExplodingTensor"))
        .build()
        .unwrap()
        .run_offline()
        .unwrap()
}

#[test]
fn a_firing_rule_subscribes_its_endpoints_once_and_publishes_to_the_topic() {
    let moto = MotoServer::start();
    set_env(&[
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]);
    // A listener on the topic, made before the rules: the action finds the topic there.
    let arn = moto_sns(&moto, "listen");
    assert!(arn.trim().ends_with(":SMDebugRules"), "{arn}");
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let actions = [
        sns_action(&moto, SnsProtocol::Email, "ml-team@example.com"),
        sns_action(&moto, SnsProtocol::Sms, "+15555550123"),
    ];
    // Twice, as two jobs notifying the same people would.
    for _ in 0..2 {
        let summary = run_rules(run.path(), &actions);
        let dead = summary.rule("DeadRelu").unwrap();
        assert_eq!(dead.status, Status::IssuesFound);
        assert!(dead.action_errors.is_empty(), "{:?}", dead.action_errors);
        assert_eq!(dead.actions, ["sns", "sns"]);
    }
    let seen: serde_json::Value = serde_json::from_str(&moto_sns(&moto, "report")).unwrap();

    // Each endpoint subscribed once, with smdebug's filter policy; the listener beside them.
    let mut subs: Vec<(String, String, serde_json::Value)> = seen["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["protocol"].as_str().unwrap().to_string(),
                s["endpoint"].as_str().unwrap().to_string(),
                s["filter_policy"].clone(),
            )
        })
        .collect();
    subs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(subs.len(), 3, "{subs:?}");
    assert_eq!(
        (subs[0].0.as_str(), subs[0].1.as_str()),
        ("email", "ml-team@example.com")
    );
    assert_eq!(
        subs[0].2,
        serde_json::json!({ "email": ["ml-team@example.com"] })
    );
    assert_eq!(
        (subs[1].0.as_str(), subs[1].1.as_str()),
        ("sms", "+15555550123")
    );
    assert_eq!(
        subs[1].2,
        serde_json::json!({ "phone_num": ["+15555550123"] })
    );
    assert_eq!(subs[2].0, "sqs");

    // Four publications (two endpoints, two jobs), each naming its endpoint and the finding.
    let messages = seen["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    for m in messages {
        let text = m["message"].as_str().unwrap();
        assert!(text.starts_with("DeadRelu fired at step"), "{text}");
        assert!(
            m["subject"]
                .as_str()
                .unwrap()
                .starts_with("[smdebug] DeadRelu fired at step"),
            "{m}"
        );
    }
    let mut to: Vec<&str> = messages
        .iter()
        .map(|m| {
            m["attributes"]["email"]
                .as_str()
                .or(m["attributes"]["phone_num"].as_str())
                .unwrap()
        })
        .collect();
    to.sort();
    assert_eq!(
        to,
        [
            "+15555550123",
            "+15555550123",
            "ml-team@example.com",
            "ml-team@example.com"
        ]
    );
}

#[test]
fn without_credentials_the_action_says_so_and_the_rules_go_on() {
    let moto = MotoServer::start();
    let nowhere = tempdir().unwrap();
    let missing = nowhere.path().join("none");
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ] {
        // SAFETY: as in `set_env`.
        unsafe { std::env::remove_var(k) };
    }
    set_env(&[
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", missing.to_str().unwrap()),
        ("AWS_SHARED_CREDENTIALS_FILE", missing.to_str().unwrap()),
    ]);
    let run = tempdir().unwrap();
    example_run(run.path(), 1, Some(Bug::DeadRelu));
    let summary = run_rules(
        run.path(),
        &[sns_action(&moto, SnsProtocol::Sms, "+15555550123")],
    );
    let dead = summary.rule("DeadRelu").unwrap();
    assert_eq!(dead.status, Status::IssuesFound);
    assert_eq!(dead.action_errors.len(), 1, "{:?}", dead.action_errors);
    let error = &dead.action_errors[0];
    assert!(
        error.contains("sns") && error.contains("no usable AWS credentials"),
        "{error}"
    );
    assert_eq!(
        summary.rule("ExplodingTensor").unwrap().status,
        Status::NoIssuesFound
    );
}

#[test]
fn bad_sns_endpoints_are_refused_when_the_runner_is_built() {
    let run = tempdir().unwrap();
    example_run(run.path(), 1, None);
    for (action, expect) in [
        (ActionConfig::sms("5555550123"), "E.164"),
        (ActionConfig::sns_email("nobody"), "not an e-mail address"),
        (
            ActionConfig::Sns {
                protocol: SnsProtocol::Email,
                endpoint: "a@example.com".into(),
                topic: "no spaces allowed".into(),
                region: None,
                endpoint_url: None,
                timeout_s: 1.0,
                on: Trigger::FirstFiring,
            },
            "topic",
        ),
    ] {
        let e = RuleRunner::builder(run.path())
            .spec(RuleSpec::new("DeadRelu").action(action))
            .build()
            .err()
            .expect("a bad SNS action was accepted");
        assert!(
            matches!(e, smdebug_rules::Error::BadAction { .. }) && e.to_string().contains(expect),
            "{e}"
        );
    }
    // SageMaker's `{"type": "sns", ...}` form reads with smdebug's defaults.
    let parsed: ActionConfig =
        serde_json::from_str(r#"{"type": "sns", "protocol": "sms", "endpoint": "+15555550123"}"#)
            .unwrap();
    assert_eq!(parsed, ActionConfig::sms("+15555550123"));
}
