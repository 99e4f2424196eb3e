//! The `smdebug` binary on runs broken on purpose (copies of Python smdebug's golden runs and
//! runs our writer and sampler wrote): the run is never written to unless asked, exit statuses
//! tell the truth (0 clean, 1 issues, 2 any error), and hostile values and names come out
//! readable.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use smdebug_read::profile::{ProfilerReader, SystemQuery};
use smdebug_storage::testing::{wait_for_exit, wait_until};
use smdebug_testkit::files::{Entry, copy_tree, snapshot};
use support::{golden, smdebug, smdebug_command};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A copy of a golden run (every default rule runs clean on it) with a summary file as the
/// live follower left it.
fn golden_copy_with_live_summary(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    copy_tree(&golden("pysmdebug_checksum"), &run);
    std::fs::create_dir_all(run.join("rules")).unwrap();
    std::fs::write(
        run.join("rules/rule_job_summary.json"),
        br#"{"written": "by the live follower"}"#,
    )
    .unwrap();
    run
}

/// The rule lines of `rules`' text output: name and status.
fn verdicts(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

#[test]
fn rules_and_report_leave_the_run_as_it_was_and_print_every_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let run = golden_copy_with_live_summary(dir.path());
    let run_s = run.to_str().unwrap();
    let before = snapshot(&run);

    let out = smdebug(&["rules", run_s]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = verdicts(&text(&out.stdout));
    let listed = smdebug(&["rules", run_s, "--json"]);
    let summary: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let rules = summary["rules"].as_array().unwrap();
    assert!(rules.len() >= 10, "{summary}");
    for r in rules {
        let name = r["rule"].as_str().unwrap();
        assert_eq!(
            printed.get(name).map(String::as_str),
            r["status"].as_str(),
            "{name}"
        );
    }
    let html = dir.path().join("elsewhere/report.html");
    let out = smdebug(&["report", run_s, "-o", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(html.exists());
    assert!(
        snapshot(&run) == before,
        "rules or report wrote into the run"
    );

    // Asked to, `rules` writes the summary into the run, or to a file.
    let file = dir.path().join("summary.json");
    let out = smdebug(&["rules", run_s, "--out", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["rules"].as_array().unwrap().len(), rules.len());
    assert!(snapshot(&run) == before);
    let out = smdebug(&["rules", run_s, "--write-into-run"]);
    assert_eq!(out.status.code(), Some(0));
    let in_run: Value =
        serde_json::from_slice(&std::fs::read(run.join("rules/rule_job_summary.json")).unwrap())
            .unwrap();
    assert_eq!(in_run["rules"].as_array().unwrap().len(), rules.len());
}

#[test]
fn a_summary_that_cannot_be_written_still_prints_every_verdict_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&golden("pysmdebug_multi"), &run);
    // `rules` is a file: nothing can be written under it, not even by root.
    std::fs::write(run.join("rules"), b"in the way").unwrap();
    let out = smdebug(&[
        "rules",
        run.to_str().unwrap(),
        "--rule",
        "ExplodingTensor",
        "--rule",
        "AllZero",
        "--write-into-run",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let printed = verdicts(&text(&out.stdout));
    assert!(printed.contains_key("ExplodingTensor"), "{printed:?}");
    assert!(printed.contains_key("AllZero"), "{printed:?}");
    assert!(
        text(&out.stderr).contains("rule_job_summary.json"),
        "{}",
        text(&out.stderr)
    );
}

/// A copy of a golden run (clean under every default rule) whose step-2 event file is cut
/// short.
fn corrupt_golden_copy(dir: &Path) -> PathBuf {
    let run = dir.join("corrupt");
    copy_tree(&golden("pysmdebug_checksum"), &run);
    let file = run.join("events/000000000002/000000000002_worker_0.tfevents");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..20]).unwrap();
    run
}

#[test]
fn a_rule_that_fails_on_a_corrupt_run_makes_rules_and_report_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let run = corrupt_golden_copy(dir.path());
    let run_s = run.to_str().unwrap();

    let out = smdebug(&["rules", run_s]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let failed: Vec<String> = verdicts(&text(&out.stdout))
        .into_iter()
        .filter(|(_, status)| status == "Error")
        .map(|(name, _)| name)
        .collect();
    assert!(!failed.is_empty(), "{}", text(&out.stdout));

    let html = dir.path().join("report.html");
    let out = smdebug(&["report", run_s, "-o", html.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(html.exists(), "the page is still written");
    assert!(
        stdout.contains(&format!("{} failed (", failed.len())),
        "{stdout}"
    );
    for name in &failed {
        assert!(stdout.contains(name.as_str()), "{name}: {stdout}");
        assert!(
            stderr.contains(&format!("rule {name} failed")),
            "{name}: {stderr}"
        );
    }
}

/// A run our writer wrote, 8 steps of one gradient, NaN from step 5 on.
fn run_with_nan(dir: &Path) -> PathBuf {
    use smdebug_core::{Hook, SaveConfig, TensorView};
    let run = dir.join("nan-run");
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(smdebug_io::writer::Writer::open(run.to_str().unwrap()).unwrap())
        .unwrap();
    for step in 0..8u64 {
        let mut g = vec![0.25f32; 16];
        if step >= 5 {
            g[2] = f32::NAN;
        }
        let view = TensorView::from_slice(&g, &[4, 4]).unwrap();
        hook.save_tensor("gradient/fc.weight", &view, &["gradients"]);
        hook.step();
    }
    hook.close();
    run
}

#[test]
fn report_exit_status_says_issues_and_unreadable_traces() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with_nan(dir.path());
    let run_s = run.to_str().unwrap();
    let html = dir.path().join("r.html");
    let out = smdebug(&["report", run_s, "-o", html.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("ExplodingTensor"), "{stdout}");

    let bad_trace = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&bad_trace, b"{\"traceEvents\": [ not json").unwrap();
    for args in [
        vec!["report", run_s],
        vec!["report"], // traces only
    ] {
        let html = dir.path().join(format!("t{}.html", args.len()));
        let mut args = args.clone();
        args.extend([
            "-o",
            html.to_str().unwrap(),
            "--trace",
            bad_trace.to_str().unwrap(),
        ]);
        let out = smdebug(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stdout)
        );
        assert!(
            text(&out.stderr).contains("rank0.pt.trace.json"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(html.exists(), "{args:?}: the page is still written");
    }
}

#[test]
fn report_into_an_existing_directory_writes_only_the_page_and_its_notebook_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let run = golden("pysmdebug_checksum");
    let out = smdebug(&[
        "report",
        run.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut inside: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    inside.sort();
    // The page, and the files named after it: its notebook and the rules' summary it reads.
    assert_eq!(
        inside,
        [
            "profiler-report.html",
            "profiler-report.ipynb",
            "profiler-report.rules.json"
        ]
    );
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, vec![std::ffi::OsString::from("out")], "{beside:?}");
}

#[test]
fn a_nan_or_infinite_threshold_is_rejected_naming_rule_and_parameter() {
    let run = golden("pysmdebug_multi");
    for value in ["NaN", "inf", "-inf"] {
        let spec = format!("VanishingGradient:threshold={value}");
        let out = smdebug(&["rules", run.to_str().unwrap(), "--rule", &spec]);
        assert_eq!(out.status.code(), Some(2), "{value}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(
            err.contains("VanishingGradient") && err.contains("threshold"),
            "{value}: {err}"
        );
        assert!(out.stdout.is_empty(), "{value}: nothing was evaluated");
    }
}

#[test]
fn trace_shows_no_inf_nan_or_huge_numbers_and_escapes_names() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("rank-0.pt.trace.json");
    std::fs::write(
        &trace,
        r#"{"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm\u001b[2J\u009b31m", "ts": 100, "dur": 20},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1e308, "dur": 1e308},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 130, "dur": 1e308},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": -1e308, "dur": 5, "args": {"device": 0}},
            {"ph": "X", "cat": "kernel", "name": "k\u202eevil", "ts": 140, "dur": 5, "args": {"device": 0}}
        ]}"#,
    )
    .unwrap();
    let out = smdebug(&["trace", trace.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{9b}') && !stdout.contains('\u{202e}')
    );
    assert!(stdout.contains("aten::mm\\u{1b}[2J\\u{9b}31m"), "{stdout}");
    assert!(stdout.contains("k\\u{202e}evil"), "{stdout}");
    let lower = stdout.to_lowercase();
    assert!(!lower.contains("inf") && !lower.contains("nan"), "{stdout}");
    let longest_number = stdout
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap();
    assert!(longest_number < 20, "{stdout}");
    assert!(stdout.contains("3 skipped"), "{stdout}");

    let out = smdebug(&["trace", "--json", trace.to_str().unwrap()]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rank = &report["ranks"][0];
    assert_eq!(rank["skipped_event_count"], 3);
    assert_eq!(rank["span_us"], 45.0);
    assert_eq!(
        rank["cpu_operators"][0]["name"],
        "aten::mm\u{1b}[2J\u{9b}31m"
    );
}

#[test]
fn tensor_names_with_control_characters_print_escaped() {
    use smdebug_core::{Hook, SaveConfig, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(
            // Block, not the default drop: on a loaded machine the queue must not decide what
            // this test sees (it once listed nothing).
            smdebug_io::writer::Writer::builder(
                smdebug_storage::open_storage(run.to_str().unwrap()).unwrap(),
            )
            .overflow(smdebug_io::writer::OverflowPolicy::Block)
            .build()
            .unwrap(),
        )
        .unwrap();
    let v = [1.0f32, 2.0];
    let view = TensorView::from_slice(&v, &[2]).unwrap();
    hook.save_tensor("evil\u{1b}]0;pwned\u{7}\nname", &view, &["weights"]);
    hook.save_tensor("fc1.weight", &view, &["weights"]);
    hook.step();
    hook.close();
    // Dropping the hook waits for its writer (`close` does not): the run is on disk after.
    drop(hook);
    let out = smdebug(&["tensors", run.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "evil\\u{1b}]0;pwned\\u{7}\\nname\nfc1.weight\n"
    );
}

#[test]
fn a_run_without_collections_files_counts_the_workers_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&golden("pysmdebug_multi"), &run);
    std::fs::remove_dir_all(run.join("collections")).unwrap();
    let out = smdebug(&["info", run.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["workers"].as_array().unwrap().len(), 2, "{info}");
    assert_eq!(info["num_workers"], 2, "{info}");
}

#[test]
fn rules_follow_gives_up_on_a_run_whose_writer_died() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    // Three steps and no end marker: the writer never finished.
    copy_tree(&golden("pysmdebug_incomplete"), &run);
    let mut child = smdebug_command()
        .args([
            "rules",
            run.to_str().unwrap(),
            "--follow",
            "--idle-timeout",
            "1",
            "--rule",
            "ExplodingTensor",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_exit(
        &mut child,
        Duration::from_secs(120),
        "rules --follow to give up on an idle run",
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let printed = verdicts(&text(&out.stdout));
    assert_eq!(
        printed.get("ExplodingTensor").map(String::as_str),
        Some("InProgress"),
        "{}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("nothing new arrived for 1 s") && err.contains("training_job_end.ts"),
        "{err}"
    );
}

#[test]
fn profile_into_an_existing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let out = smdebug(&["profile", "--out", file.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(file.to_str().unwrap()), "{err}");
}

#[test]
fn every_subcommand_documents_its_exit_status() {
    for sub in [
        "rules", "report", "info", "tensors", "steps", "value", "trace", "profile",
    ] {
        let out = smdebug(&[sub, "--help"]);
        assert!(out.status.success(), "{sub}");
        assert!(
            text(&out.stdout).contains("Exit status:"),
            "{sub}: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn a_system_record_stamped_0_does_not_move_the_jobs_start() {
    use smdebug_core::{SaveConfig, SaveConfigMode};
    use smdebug_examples::digits::{self, Digits};
    use smdebug_examples::{TrainConfig, train_in_session};
    use smdebug_profiler::spans::SpanConfig;
    use smdebug_profiler::system::SamplerConfig;

    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    // Spans and system metrics only: nothing is captured.
    let mut session = smdebug::Session::builder(&run)
        .save(SaveConfig::new(SaveConfigMode::never()))
        .system(
            SamplerConfig::default()
                .interval(Duration::from_millis(100))
                .publish_interval(Duration::from_millis(500)),
        )
        .spans(SpanConfig::default().close_interval(Duration::from_millis(500)))
        .start()
        .unwrap();
    let data = Digits::load(&digits::default_path()).unwrap();
    let (train, eval) = data.split(0.2, 1);
    // A system-metrics file is published before the training.
    wait_until(Duration::from_secs(60), "a system-metrics file", || {
        ProfilerReader::open(&run)
            .and_then(|r| r.system_samples(&SystemQuery::default()))
            .is_ok_and(|s| !s.is_empty())
    });
    let cfg = TrainConfig {
        epochs: 1,
        ..TrainConfig::default()
    };
    train_in_session(&cfg, &train, &eval, &mut session);
    session.finish().unwrap();
    assert!(run.join("training_job_end.ts").exists());

    let rule = ["--rule", "MaxInitializationTime", "--json"];
    let judge = |run: &Path| {
        let mut args = vec!["rules", run.to_str().unwrap()];
        args.extend(rule);
        let out = smdebug(&args);
        let summary: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        (out.status.code(), summary["rules"][0].clone())
    };
    let (code, clean) = judge(&run);
    assert_eq!(code, Some(0), "{clean}");
    assert_eq!(clean["status"], "NoIssuesFound", "{clean}");

    // One record of the first system file claims 1970, another the far future.
    let first = snapshot(&run.join("system"))
        .into_iter()
        .find_map(|(path, entry)| matches!(entry, Entry::File(_)).then_some(path))
        .expect("a system-metrics file");
    let file = run.join("system").join(first);
    let mut bytes = std::fs::read(&file).unwrap();
    let line = String::from_utf8(bytes.split(|b| *b == b'\n').next().unwrap().to_vec()).unwrap();
    let sample: Value = serde_json::from_str(&line).unwrap();
    for stamp in ["0", "-1e308", "1e308"] {
        let forged = line.replace(&sample["Timestamp"].to_string(), stamp);
        assert_ne!(forged, line);
        bytes.extend_from_slice(forged.as_bytes());
        bytes.push(b'\n');
    }
    std::fs::write(&file, bytes).unwrap();
    let (code, forged) = judge(&run);
    assert_eq!(code, Some(0), "{forged}");
    assert_eq!(forged["status"], "NoIssuesFound", "{forged}");
    let warnings = forged["warnings"].to_string();
    assert!(
        warnings.contains("window") && warnings.contains("skipped"),
        "{forged}"
    );
}

/// `smdebug ARGS` with its address space limited to `limit_mib` MiB (`ulimit -v`): an
/// allocation past it fails, which Rust's allocator turns into an abort (exit 134). A command
/// that stays within it proves it never allocated what a record claims.
fn smdebug_within(limit_mib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", limit_mib << 10))
        .arg(env!("CARGO_BIN_EXE_smdebug"))
        .args(args)
        .output()
        .expect("sh runs")
}

/// A record of under 100 bytes of uint8, bool or half with one fill value and 2^29 elements:
/// inside the 1 GiB budget as stored (512 MiB or 1 GiB), 4.5-5 GiB as f64 and more as JSON.
/// `value` and `rules` refuse it before decoding, naming the file, the tensor and the size,
/// and exit 2 — under a 1 GiB address-space limit, where decoding it would abort. A smaller
/// shape reads, and `--max-tensor-bytes` decides where the line is.
#[test]
fn a_fill_record_over_the_budget_once_converted_is_an_error_not_an_abort() {
    use smdebug_core::DType;
    use smdebug_io::crafted::fill_record_run;
    for dtype in [DType::U8, DType::Bool, DType::F16] {
        let dir = tempfile::tempdir().unwrap();
        let (run, len) = fill_record_run(dir.path(), "mask", dtype, &[1 << 29]);
        assert!(len < 100);
        let out = smdebug_within(1024, &["value", &run, "mask", "--step", "0"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{dtype}: {err}");
        for part in [
            "events/000000000000/000000000000_worker_0.tfevents",
            "`mask`",
            "JSON",
            "--max-tensor-bytes",
        ] {
            assert!(err.contains(part), "{dtype}: `{part}` missing from: {err}");
        }
        let claimed = (1u128 << 29) * (2 * dtype.size() as u128 + 8 + 32);
        assert!(err.contains(&claimed.to_string()), "{dtype}: {err}");
        // The rules read it as f64: the rule that read it ends in Error, naming it.
        let out = smdebug_within(
            1024,
            &["rules", &run, "--rule", "AllZero:tensor_regex=mask"],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{dtype}: {err}");
        assert!(err.contains("AllZero failed"), "{dtype}: {err}");
        assert!(
            err.contains("`mask`") && err.contains("f64"),
            "{dtype}: {err}"
        );
    }
    // 1000 uint8 values cost 1000 * (1 + 1 + 8 + 32) bytes as JSON: the limit decides.
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = fill_record_run(dir.path(), "mask", DType::U8, &[1000]);
    let at = |limit: u64| {
        smdebug(&[
            "value",
            &run,
            "mask",
            "--step",
            "0",
            "--max-tensor-bytes",
            &limit.to_string(),
        ])
    };
    let out = at(42_000);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["values"].as_array().unwrap().len(), 1000);
    assert!(v["values"].as_array().unwrap().iter().all(|x| x == 7.0));
    let out = at(41_999);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("limit of 41999 bytes"));
}

/// A FIFO in place of an index file: `info` and `steps` exit 2 at once, naming it (they used to
/// block in `open` for ever). Killed after 30 s, which fails the test.
#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_an_index_file_does_not_hang_info_or_steps() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&golden("pysmdebug_multi"), &run);
    let index = run.join("index/000000000/000000000000_worker_0.json");
    std::fs::remove_file(&index).unwrap();
    let made = Command::new("mkfifo").arg(&index).status().unwrap();
    assert!(made.success());
    for cmd in ["info", "steps"] {
        let mut child = smdebug_command()
            .args([cmd, run.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let what = format!("`smdebug {cmd}` to end (not hang) on a FIFO");
        wait_for_exit(&mut child, Duration::from_secs(30), &what);
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("index/000000000/000000000000_worker_0.json") && err.contains("FIFO"),
            "{cmd}: {err}"
        );
    }
}

/// A run whose identity files name two jobs (files of a killed job and of the next, written by
/// a tool that claims nothing): every command that reads it says so, `info` in its
/// `warnings` and `value` on stderr, and neither writes into it.
#[test]
fn a_run_holding_two_jobs_files_is_flagged_by_info_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    copy_tree(&golden("pysmdebug_checksum"), &run);
    for (job, process, started) in [
        ("killed-job", "aa01", 1_795_000_000.0),
        ("next-job", "bb02", 1_795_000_600.0),
    ] {
        let identity = serde_json::json!({
            "version": 1, "job": job, "process": process, "worker": "worker_0", "rank": 0,
            "world_size": 1, "host": "trainer-1", "pid": 4242, "started": started,
            "heartbeat": started + 30.0, "finished": job == "next-job",
        });
        std::fs::create_dir_all(run.join("jobs/worker_0")).unwrap();
        std::fs::write(
            run.join(format!("jobs/worker_0/{process}.json")),
            identity.to_string(),
        )
        .unwrap();
    }
    let before = snapshot(&run);
    let info = smdebug(&["info", run.to_str().unwrap()]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    let v: Value = serde_json::from_slice(&info.stdout).unwrap();
    let first = v["warnings"][0].as_str().unwrap_or_default();
    assert!(
        first.starts_with("the run holds the files of 2 jobs")
            && first.contains("killed-job")
            && first.contains("next-job"),
        "{v}"
    );
    assert!(
        v["warnings"][1]
            .as_str()
            .is_some_and(|w| w.starts_with("worker_0 was written by 2 processes")),
        "{v}"
    );
    let value = smdebug(&["value", run.to_str().unwrap(), "fc1.weight", "--all-steps"]);
    assert!(value.status.success(), "{}", text(&value.stderr));
    let err = text(&value.stderr);
    assert!(
        err.contains("smdebug: warning: the run holds the files of 2 jobs"),
        "{err}"
    );
    assert_eq!(snapshot(&run), before, "read only");
}
