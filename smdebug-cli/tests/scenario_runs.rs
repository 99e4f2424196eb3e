//! The `smdebug` binary on the runs of the differential scenarios
//! (`smdebug-io/tests/data/scenarios/`, written by Python smdebug 1.0.34's own `FileWriter` and
//! `CollectionManager`): the issue-24 cases as the command line shows them. The answers are
//! the Rust `Trial`'s, the same as `smdebug_rs` and Python smdebug give (the scenarios check
//! that).

mod support;

use std::path::PathBuf;

use serde_json::Value;
use smdebug_testkit::files::copy_tree;
use support::{smdebug, stdout_ok};

/// Scenario `name` as it stands after its last stage, copied into a fresh directory.
fn scenario_run(name: &str) -> (tempfile::TempDir, PathBuf) {
    let stages = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/scenarios")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&stages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // stage_0, stage_1, ... in order: a later stage may hold a file rewritten.
    names.sort_by_key(|p| {
        p.file_name().unwrap().to_str().unwrap()["stage_".len()..]
            .parse::<u32>()
            .unwrap()
    });
    for stage in names {
        copy_tree(&stage, &run);
    }
    (dir, run)
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

/// Issue 24, case 1: the collections file names `worker_0` and declares one worker; `algo-1`
/// writes the steps. Every step is complete, and `info` tells the workers apart.
#[test]
fn a_worker_named_only_by_the_collections_file_holds_no_step_back() {
    let (_dir, run) = scenario_run("issue_workers_from_the_collections_file");
    let run = run.to_str().unwrap();
    let info: Value = serde_json::from_str(&stdout_ok(&["info", run])).unwrap();
    assert_eq!(info["workers"], serde_json::json!(["worker_0"]));
    assert_eq!(info["step_workers"], serde_json::json!(["algo-1"]));
    assert_eq!(info["num_workers"], 1);
    assert_eq!(info["num_steps"], 4);
    assert_eq!(info["last_complete_step"], 3);
    assert_eq!(lines(&stdout_ok(&["steps", run])), ["0", "1", "2", "3"]);
    let values: Vec<Value> = stdout_ok(&["value", run, "loss", "--all-steps"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 4);
    assert!(values.iter().all(|v| v["worker"] == "algo-1"));
}

/// Two workers declared, worker_1 behind: `steps` lists the steps both wrote, `--incomplete`
/// all of them.
#[test]
fn steps_lists_complete_steps_and_incomplete_ones_when_asked() {
    let (_dir, run) = scenario_run("a_worker_behind_holds_its_steps_back");
    let run = run.to_str().unwrap();
    assert_eq!(
        lines(&stdout_ok(&["steps", run])),
        ["0", "1", "2", "3", "4"]
    );
    assert_eq!(
        lines(&stdout_ok(&["steps", run, "--incomplete"])),
        ["0", "1", "2", "3", "4", "5"]
    );
}

/// Issue 24, case 4: a 1-byte placeholder entry. The run opens and reads; that tensor's value at
/// that step is an error naming the index file and the entry.
#[test]
fn a_placeholder_entry_fails_only_its_own_value() {
    let (_dir, run) = scenario_run("issue_placeholder_index_entry");
    let run = run.to_str().unwrap();
    let names = stdout_ok(&["tensors", run]);
    assert_eq!(lines(&names), ["fc.weight", "gradients/dummy:0", "loss"]);
    stdout_ok(&["value", run, "loss", "--step", "1"]);
    let out = smdebug(&["value", run, "gradients/dummy:0", "--step", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("index/000000000/000000000001_worker_0.json")
            && err.contains("tensor_payload entry 2")
            && err.contains("gradients/dummy:0")
            && err.contains("less than a record's framing"),
        "{err}"
    );
}

/// Issue 24, case 5: string tensors print their strings.
#[test]
fn value_prints_string_tensors_as_json_strings() {
    let (_dir, run) = scenario_run("issue_string_tensors");
    let run = run.to_str().unwrap();
    let v: Value =
        serde_json::from_str(&stdout_ok(&["value", run, "trees/Feature", "--step", "0"])).unwrap();
    assert_eq!(v["dtype"], "string");
    assert_eq!(v["shape"], serde_json::json!([3]));
    assert_eq!(v["values"], serde_json::json!(["f0", "Leaf", "Leaf"]));
}
