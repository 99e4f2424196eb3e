//! The lean training side: what a training loop links, and what a build without the optional
//! backends and actions says when asked for one.
//!
//! In the workspace's test run, features are unified across every member (the CLI turns all
//! backends and actions on), so the "left out" checks below take their other branch there.
//! CI therefore also runs this crate alone, `SMDEBUG_LEAN_ALONE=1 cargo nextest run -p
//! smdebug-lean-training`, where smdebug-io and smdebug-rules have their default features and
//! every optional part must be left out (`.ci/test`).

use std::process::Command;
use std::sync::Arc;

use smdebug_format::stop::StopRequest;
use smdebug_io::stop::request_stop;
use smdebug_read::trial::Trial;
use smdebug_rules::{ActionConfig, RuleRunner, RuleSpec};
use smdebug_storage::Backend;
use smdebug_storage::open_storage;

/// Crates of an HTTP, TLS, mail or chart stack.
const HEAVY: &[&str] = &[
    "reqwest",
    "hyper",
    "h2",
    "rustls",
    "tokio-rustls",
    "aws-lc-rs",
    "aws-lc-sys",
    "ring",
    "openssl",
    "native-tls",
    "lettre",
    "plotters",
];

/// The crate names in `cargo tree -p PACKAGE -e normal` (this workspace's lock file, offline).
fn normal_dependencies(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            package,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn the_training_side_links_no_http_tls_mail_or_chart_stack() {
    for package in [
        "smdebug-lean-training",
        "smdebug",
        "smdebug-profiler",
        "smdebug-io",
        "smdebug-core",
    ] {
        let names = normal_dependencies(package);
        assert!(
            names.iter().any(|n| n == "smdebug-core"),
            "cargo tree -p {package} listed {names:?}"
        );
        let heavy: Vec<&String> = names
            .iter()
            .filter(|n| HEAVY.contains(&n.as_str()))
            .collect();
        assert!(heavy.is_empty(), "{package} pulls in {heavy:?}");
    }
    // The same check catches the stack where it is wanted: the CLI turns every backend and
    // action on.
    let cli = normal_dependencies("smdebug-cli");
    for wanted in ["reqwest", "hyper", "rustls", "lettre", "plotters"] {
        assert!(
            cli.iter().any(|n| n == wanted),
            "smdebug-cli lacks {wanted}"
        );
    }
}

/// Crates a default training build leaves to features: the readers (`read`: the `Trial` with its
/// thread pool and memory maps, the profiler readers and Kineto parser, the analysis above
/// them), the object-store client and its async runtime (`memory`, `s3`, ...), `url`'s IDNA
/// tables, the code profile's sampler, unwinder and flame graphs (`code-profile`).
const BEHIND_FEATURES: &[&str] = &[
    "smdebug-read",
    "smdebug-analysis",
    "smdebug-rules",
    "rayon-core",
    "memmap2",
    "flate2",
    "object_store",
    "tokio",
    "futures",
    "url",
    "idna",
    "pprof",
    "inferno",
    "symbolic-demangle",
    "backtrace",
];

/// What `cargo add smdebug` builds for a training loop, at most.
const DEFAULT_BUILD_CRATES: usize = 120;

#[test]
fn the_default_training_build_stays_within_its_crate_budget() {
    for package in ["smdebug", "smdebug-lean-training"] {
        let names = normal_dependencies(package);
        let left_in: Vec<&String> = names
            .iter()
            .filter(|n| BEHIND_FEATURES.contains(&n.as_str()))
            .collect();
        assert!(
            left_in.is_empty(),
            "{package} builds {left_in:?} by default"
        );
        assert!(
            names.len() <= DEFAULT_BUILD_CRATES,
            "{package}'s default build is {} crates (at most {DEFAULT_BUILD_CRATES}): {names:?}",
            names.len()
        );
    }
    // GPU metrics stay in the default build (NVML is loaded at run time, and a GPU job that
    // silently sampled no GPU would report what is not so); the lean crate takes smdebug's
    // defaults.
    assert!(
        normal_dependencies("smdebug")
            .iter()
            .any(|n| n == "nvml-wrapper")
    );
}

#[test]
fn the_loop_captures_to_disk_and_stops_when_a_stop_request_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run = run.to_str().unwrap();
    let store = open_storage(run).unwrap();
    // Asked to stop after step 3 as a rule runner would: through the run directory. The loop
    // sleeps between steps like a real one does work, so that the watcher, which looks every
    // 200 ms, is heard long before the step limit.
    let outcome = smdebug_lean_training::train(run, 10_000, |step| {
        if step == 3 {
            let mut req = StopRequest::new("LossNotDecreasing fired at step 3");
            req.step = Some(3);
            request_stop(store.as_ref(), &req).unwrap();
        }
        // workload: a training step's time (see above).
        std::thread::sleep(std::time::Duration::from_millis(5));
    })
    .unwrap();
    let cause = outcome.stopped.clone().unwrap();
    assert_eq!(cause.reason, "LossNotDecreasing fired at step 3");
    // The request's step travels with its reason; it names no rule.
    assert_eq!((cause.rule, cause.step), (None, Some(3)));
    assert!(outcome.steps > 3 && outcome.steps < 10_000, "{outcome:?}");

    let trial = Trial::open(run).unwrap();
    assert!(trial.is_complete().unwrap());
    assert_eq!(
        trial.end_reason().unwrap().map(|r| r.to_string()),
        Some("stopped: LossNotDecreasing fired at step 3".to_string())
    );
    let mut names = trial.tensor_names().unwrap();
    names.sort();
    assert_eq!(names, ["b", "grad/b", "grad/w", "loss", "w"]);
    let loss = trial.tensor("loss").unwrap();
    let steps = loss.steps(None).unwrap();
    assert_eq!(steps, (0..outcome.steps).collect::<Vec<_>>());
    let last = loss.value(outcome.steps - 1, None, None).unwrap();
    assert_eq!(last.iter().copied().collect::<Vec<f64>>(), [outcome.loss]);
    // Gradient descent on a line: the loss went down.
    let first = loss.value(0, None, None).unwrap()[[]];
    assert!(outcome.loss < first, "{} !< {first}", outcome.loss);
}

fn alone() -> bool {
    std::env::var_os("SMDEBUG_LEAN_ALONE").is_some()
}

#[test]
fn an_object_store_left_out_of_the_build_is_a_clear_error() {
    let locations = [
        (Backend::Memory, "memory://lean/run"),
        (Backend::Aws, "s3://bucket/run"),
        (Backend::Gcp, "gs://bucket/run"),
        (Backend::Azure, "az://container/run"),
        (Backend::Http, "https://example.invalid/run"),
    ];
    for (backend, location) in locations {
        assert_eq!(Backend::for_location(location), Some(backend));
        if alone() {
            assert!(!backend.is_compiled(), "{backend:?} is compiled in");
        }
        let opened = open_storage(location);
        if backend.is_compiled() {
            // Built in (the workspace run): whatever else goes wrong, it is not this.
            if let Err(e) = opened {
                assert!(
                    !matches!(e, smdebug_storage::Error::BackendNotCompiled { .. }),
                    "{e}"
                );
            }
            continue;
        }
        let err = opened.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, smdebug_storage::Error::BackendNotCompiled { feature, .. } if feature == backend.feature()),
            "{msg}"
        );
        assert!(
            msg.contains(location)
                && msg.contains(&format!("`{}` feature", backend.feature()))
                && msg.contains("smdebug-storage"),
            "{msg}"
        );
    }
    // Local disk is always there, as a path or a file:// URL (decoded without `url`).
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("my run");
    let local: Arc<dyn smdebug_storage::Storage> = open_storage(run.to_str().unwrap()).unwrap();
    local.put("a.json", b"1".to_vec().into()).unwrap();
    let by_url = open_storage(format!("file://{}/my%20run", dir.path().display())).unwrap();
    assert_eq!(by_url.local_root(), Some(run.as_path()));
    assert_eq!(&by_url.get("a.json").unwrap()[..], b"1");
}

#[test]
fn a_notification_action_left_out_of_the_build_fails_when_the_runner_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().to_str().unwrap();
    smdebug_lean_training::train(run, 3, |_| {}).unwrap();
    let actions = [
        ActionConfig::Webhook {
            on: smdebug_rules::Trigger::FirstFiring,
            url: "http://127.0.0.1:9/hook".into(),
            timeout_s: 1.0,
        },
        ActionConfig::Email {
            on: smdebug_rules::Trigger::FirstFiring,
            smtp_host: "127.0.0.1".into(),
            smtp_port: Some(9),
            tls: smdebug_rules::actions::SmtpTls::None,
            username: None,
            password: None,
            password_env: None,
            from: "smdebug@example.com".into(),
            to: vec!["me@example.com".into()],
            timeout_s: 1.0,
        },
    ];
    for action in actions {
        let feature = action.required_feature().unwrap();
        if alone() {
            assert!(!action.is_compiled(), "{feature} is compiled in");
        }
        let built = RuleRunner::builder(run)
            .spec(RuleSpec::new("LossNotDecreasing").action(action.clone()))
            .build();
        if action.is_compiled() {
            if let Err(e) = built {
                panic!("{e}");
            }
            continue;
        }
        let msg = match built {
            Ok(_) => panic!("a runner with a {feature} action left out of the build was built"),
            Err(e) => e.to_string(),
        };
        assert!(
            msg.contains(action.kind())
                && msg.contains(&format!("`{feature}` feature"))
                && msg.contains("smdebug-rules"),
            "{msg}"
        );
        // The actions that need no feature are always there.
        RuleRunner::builder(run)
            .spec(RuleSpec::new("LossNotDecreasing").action(ActionConfig::StopTraining))
            .build()
            .map(drop)
            .unwrap();
    }
}

#[test]
fn a_code_profile_window_without_its_feature_fails_at_start_naming_it() {
    use smdebug::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let started = Session::builder(&run)
        .code_profiling(Window::steps(0, 5))
        .start();
    let err = match started {
        Ok(session) => {
            // Only where features are unified with the workspace's (whose tests sample).
            assert!(
                !alone(),
                "a code-profile window started in a build without `code-profile`"
            );
            session.finish().unwrap();
            return;
        }
        Err(e) => e,
    };
    let text = err.to_string();
    assert!(
        matches!(
            err,
            smdebug::Error::FeatureMissing {
                feature: "code-profile",
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("features = [\"code-profile\"]"), "{text}");
    // Nothing was claimed: the same location starts without the window.
    Session::builder(&run).start().unwrap().finish().unwrap();
}
