//! `profile_command`: a real child process tree is run to completion and sampled.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use smdebug_format::system::vocab;
use smdebug_profiler::ProfilerError;
use smdebug_profiler::system::{NodeId, SamplerConfig, profile_command};
use smdebug_read::profile::{ProfilerReader, SystemQuery};
use smdebug_storage::LocalStorage;

#[test]
fn profiles_a_child_tree_until_it_exits_and_returns_its_status() {
    let dir = tempfile::tempdir().unwrap();
    // A shell whose child (a grandchild of ours) keeps a core busy for about a second, then
    // the shell exits with status 3.
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "sh -c 'end=$(($(date +%s) + 2)); while [ $(date +%s) -lt $end ]; do i=0; \
         while [ $i -lt 2000 ]; do i=$((i+1)); done; done'; exit 3",
    ]);
    let outcome = profile_command(
        command,
        SamplerConfig::default()
            .interval(Duration::from_millis(100))
            .node(NodeId::algo(1)),
        Arc::new(LocalStorage::new(dir.path()).unwrap()),
    )
    .unwrap();
    assert_eq!(outcome.status.code(), Some(3));
    assert!(outcome.sampler.samples >= 5, "{:?}", outcome.sampler);

    let samples = ProfilerReader::open(dir.path())
        .unwrap()
        .system_samples(&SystemQuery::default().metric_type(vocab::TYPE_PROCESS))
        .unwrap();
    let series = |dimension: &str| -> Vec<f64> {
        samples
            .iter()
            .filter(|s| s.dimension == dimension)
            .map(|s| s.value)
            .collect()
    };
    let cpu = series(vocab::PROCESS_CPU_UTILIZATION);
    let count = series(vocab::PROCESS_COUNT);
    let rss = series(vocab::PROCESS_RSS_BYTES);
    assert!(!cpu.is_empty() && !count.is_empty() && !rss.is_empty());
    let busiest = cpu.iter().cloned().fold(0.0, f64::max);
    assert!(busiest > 30.0, "the busy grandchild was not seen: {cpu:?}");
    // The shell and its busy child were both counted at some point.
    assert!(count.iter().any(|c| *c >= 2.0), "{count:?}");
    let root_names: std::collections::BTreeSet<&str> =
        samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(root_names.len(), 1, "{root_names:?}");
    assert!(root_names.iter().next().unwrap().starts_with("pid"));
}

#[test]
fn invalid_configuration_runs_nothing_and_a_missing_program_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut command = Command::new("touch");
    command.arg(&marker);
    let err = profile_command(
        command,
        SamplerConfig::default().interval(Duration::from_millis(10)),
        Arc::new(LocalStorage::new(dir.path()).unwrap()),
    )
    .unwrap_err();
    assert!(matches!(err, ProfilerError::InvalidInterval { .. }));
    assert!(
        !marker.exists(),
        "the command ran despite the invalid configuration"
    );

    let err = profile_command(
        Command::new("/nonexistent/smdebug-no-such-program"),
        SamplerConfig::default(),
        Arc::new(LocalStorage::new(dir.path()).unwrap()),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ProfilerError::Command {
                action: "spawn",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("smdebug-no-such-program"));
}
