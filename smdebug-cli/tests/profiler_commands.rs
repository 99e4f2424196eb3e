//! `smdebug trace` on the real Kineto traces in smdebug-read/tests/data, checked against the figures an
//! independent Python computation wrote (smdebug-read/tests/kineto/expected), and
//! `smdebug profile` around a real child process.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::smdebug_command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn trace_json_matches_the_independent_figures_for_two_ranks() {
    let traces = repo().join("smdebug-read/tests/data/pytorch-profiler-traces");
    let out = smdebug_command()
        .arg("trace")
        .arg("--json")
        .arg(traces.join("trace_filter__sampled_rank-1.json.gz"))
        .arg(traces.join("trace_filter__sampled_rank-0.json.gz"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = report["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for (i, rank) in ranks.iter().enumerate() {
        assert_eq!(rank["rank"].as_u64(), Some(i as u64), "ranks in rank order");
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(repo().join(format!(
                "smdebug-read/tests/kineto/expected/trace_filter__sampled_rank-{i}.json"
            )))
            .unwrap(),
        )
        .unwrap();
        for key in ["span_us", "gpu_busy_us", "gpu_idle_us"] {
            let (got, want) = (rank[key].as_f64().unwrap(), expected[key].as_f64().unwrap());
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{key}: {got} vs {want}"
            );
        }
        let top = &rank["gpu_kernels"][0];
        let want_top = &expected["gpu_kernels"][0];
        assert_eq!(top["name"], want_top["name"]);
        assert_eq!(top["count"], want_top["count"]);
        for key in [
            "name", "count", "total_us", "mean_us", "min_us", "max_us", "share",
        ] {
            assert!(!top[key].is_null(), "kernel field {key}");
        }
    }
}

#[test]
fn trace_of_a_broken_file_fails_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.json");
    std::fs::write(
        &bad,
        br#"{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur""#,
    )
    .unwrap();
    let out = smdebug_command().arg("trace").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.json"), "{err}");
}

#[test]
fn profile_runs_the_command_samples_it_and_returns_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let out = smdebug_command()
        .args(["profile", "--interval", "100", "--out"])
        .arg(&run)
        .args(["--", "sh", "-c", "sleep 0.6; exit 7"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = 0;
    for hour in std::fs::read_dir(run.join("system/incremental")).unwrap() {
        for file in std::fs::read_dir(hour.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            for line in text.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                assert!(
                    v["Type"].is_string() && v["Value"].is_number() && v["Timestamp"].is_number()
                );
                lines += 1;
            }
        }
    }
    assert!(lines > 0, "the sampler wrote metrics");

    let bad = smdebug_command()
        .args(["profile", "--interval", "5", "--out"])
        .arg(&run)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an interval under 100 ms is refused"
    );
    assert!(!bad.stderr.is_empty());
}
