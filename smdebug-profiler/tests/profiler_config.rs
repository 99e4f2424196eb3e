//! SageMaker's profiler-config file (`profilerconfig.json`), read as Python smdebug 1.0.34 reads
//! it: every example under `tests/data/sagemaker/profiler/` (SageMaker's documentation and
//! Python SDK, smdebug's own test configs; see the README there) opens the windows smdebug's
//! `ProfilerConfigParser` opens (`tests/interop_python/profiler_config.py`, with
//! `$SMDEBUG_PYTHON`), and the broken ones are errors naming the file, the key and the value.
//! The watcher sees edits, keeps the last good configuration, and picks up a file created late.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use smdebug_core::config_keys::Unapplied;
use smdebug_core::timeline::TimelineConfig;
use smdebug_core::window::{Window, WindowState};
use smdebug_io::sagemaker::{ConfigSources, PROFILER_CONFIG_ENV};
use smdebug_profiler::ProfilerError;
use smdebug_profiler::config::{
    CProfileTimer, ProfilerConfig, ProfilerConfigWatcher, PythonProfilerName,
};
use smdebug_profiler::spans::SpanConfig;
use smdebug_profiler::system::SamplerConfig;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sagemaker/profiler")
}

fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{} fixtures", files.len());
    files
}

fn fixture(name: &str) -> ProfilerConfig {
    ProfilerConfig::read(&data_dir().join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|| panic!("{name} is missing"))
}

fn at(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(secs)
}

/// Sweeps of (global step, seconds since the epoch), each asked in order from a fresh parser:
/// around the time windows of the examples (2023-11-14 22:13:20 and the documentation's
/// 12345567789), fast steps for windows of 0.1 s, and a job whose first question is at step 5.
fn sweeps() -> Vec<Vec<(u64, f64)>> {
    vec![
        (0..40).map(|s| (s, 1_699_999_990.25 + s as f64)).collect(),
        (0..40)
            .map(|s| (s, 12_345_567_780.25 + s as f64 * 0.5))
            .collect(),
        (0..40)
            .map(|s| (s, 1_600_000_000.0 + s as f64 * 0.037))
            .collect(),
        (5..45)
            .map(|s| (s, 1_650_000_000.5 + s as f64 * 2.0))
            .collect(),
    ]
}

const CATEGORIES: [&str; 3] = [
    "DETAILED_PROFILING",
    "DATALOADER_PROFILING",
    "PYTHON_PROFILING",
];

fn open_at(window: &Window, sweep: &[(u64, f64)]) -> Vec<bool> {
    let mut state = WindowState::new(window.clone());
    sweep
        .iter()
        .map(|(step, t)| state.contains(*step, at(*t)))
        .collect()
}

const METRIC_NAMES: [&str; 6] = [
    "DataLoaderIter.next",
    "dataloaderiter.NEXT",
    "dataloader:event1",
    "Dataloader:Event2",
    "GetNext",
    "Step:ModeKeys.TRAIN",
];

/// Examples where this crate reads a valid file differently from smdebug, by design (the
/// module docs of `smdebug_profiler::config` say why); `tests` below pin what is read instead.
const READ_DIFFERENTLY: [(&str, &str); 1] = [(
    "sdk_framework_profile_time_range.json",
    "the SDK writes `Duration`, which smdebug ignores (one step); read as the duration here",
)];

/// Broken examples: the part of our error, and what smdebug does instead.
const BROKEN: [(&str, &str); 3] = [
    (
        "smdebug_invalid_profiler_config_parser.json",
        "key must be a string",
    ),
    (
        "smdebug_invalid_string_data_profiler_config_parser.json",
        "ProfilingParameters.RotateMaxFileSizeInBytes = `None`: expected a number",
    ),
    (
        "smdebug_string_data_profiler_config_parser.json",
        "ProfilingParameters.DetailedProfilingConfig: states a step range (StartStep, NumSteps) \
         and a time range",
    ),
];

fn run_python(files: &[PathBuf], sweeps: &[Vec<(u64, f64)>]) -> Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop_python/profiler_config.py");
    let interpreter = std::env::var("SMDEBUG_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let mut child = Command::new(&interpreter)
        .arg(&script)
        .args(files)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{interpreter}` (set SMDEBUG_PYTHON): {e}"));
    let spec = json!({"sweeps": sweeps, "names": METRIC_NAMES});
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(spec.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "profiler_config.py failed with `{interpreter}` (set SMDEBUG_PYTHON to an interpreter \
         with smdebug 1.0.34: bash .ci/setup-python):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    serde_json::from_str(last).unwrap()
}

#[test]
fn every_example_opens_the_windows_python_smdebug_opens() {
    let files = fixtures();
    let sweeps = sweeps();
    let python = run_python(&files, &sweeps);
    let mut differences = Vec::new();
    let mut compared = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let py = &python[path.to_str().unwrap()];
        if let Some((_, needle)) = BROKEN.iter().find(|(n, _)| *n == name) {
            let err = ProfilerConfig::read(path).expect_err(&name).to_string();
            assert!(
                err.contains(&path.display().to_string()) && err.contains(needle),
                "{name}: `{err}` should name the file and say `{needle}`"
            );
            // smdebug: the config is refused whole, or the broken part is switched off (or
            // falls back to defaults) with an error message.
            let refused = py["configs"].is_null()
                || py["configs"]
                    .as_object()
                    .unwrap()
                    .values()
                    .any(|c| !c["error"].is_null());
            assert!(refused, "{name}: smdebug accepted it: {py}");
            continue;
        }
        let config = ProfilerConfig::read(path)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap();
        let windows = config.windows_over(&TimelineConfig::off());
        if !READ_DIFFERENTLY.iter().any(|(n, _)| *n == name) {
            for (i, sweep) in sweeps.iter().enumerate() {
                for (category, window) in
                    CATEGORIES
                        .iter()
                        .zip([&windows.detailed, &windows.data_loading, &windows.code])
                {
                    let ours = open_at(window, sweep);
                    let theirs: Vec<bool> =
                        serde_json::from_value(py["sweeps"][i][category].clone()).unwrap();
                    compared += ours.len();
                    if ours != theirs {
                        differences.push(format!(
                            "{name}, sweep {i}, {category} ({window}): ours open at {:?}, smdebug's at {:?}",
                            open_steps(&ours, sweep),
                            open_steps(&theirs, sweep)
                        ));
                    }
                }
            }
        }
        // What smdebug keeps of ProfilingParameters when it enables profiling.
        if let (Some(p), false) = (&config.profiling_parameters, py["configs"].is_null()) {
            let local = p
                .local_path
                .clone()
                .unwrap_or("/opt/ml/output/profiler".into());
            let checks = [
                (
                    "LocalPath",
                    json!(local.to_lowercase()),
                    py["local_path"].clone(),
                ),
                (
                    "RotateMaxFileSizeInBytes",
                    json!(p.rotate_max_file_size.unwrap_or(10_485_760)),
                    py["file_max_size"].clone(),
                ),
                (
                    "RotateFileCloseIntervalInSeconds",
                    json!(
                        p.rotate_file_close_interval
                            .map_or(60.0, |d| d.as_secs_f64())
                    ),
                    json!(py["file_close_interval"].as_f64()),
                ),
                (
                    "FileOpenFailThreshold",
                    json!(p.file_open_fail_threshold.unwrap_or(50)),
                    py["file_open_fail_threshold"].clone(),
                ),
            ];
            for (key, ours, theirs) in checks {
                if ours != theirs {
                    differences.push(format!("{name}: {key}: ours {ours}, smdebug {theirs}"));
                }
            }
            if py["configs"]["DATALOADER_PROFILING"]["enabled"] == json!(true) {
                let regex = p.dataloader.as_ref().and_then(|d| d.metrics_regex.as_ref());
                for metric in METRIC_NAMES {
                    let ours = regex.is_none_or(|r| r.matches(metric));
                    if json!(ours) != py["metrics_names"][metric] {
                        differences.push(format!(
                            "{name}: MetricsRegex on `{metric}`: ours {ours}, smdebug {}",
                            py["metrics_names"][metric]
                        ));
                    }
                }
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences from smdebug:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(compared > 3000, "only {compared} answers compared");
}

fn open_steps(answers: &[bool], sweep: &[(u64, f64)]) -> Vec<u64> {
    answers
        .iter()
        .zip(sweep)
        .filter(|(open, _)| **open)
        .map(|(_, (s, _))| *s)
        .collect()
}

#[test]
fn documentation_examples_parse_to_the_values_they_state() {
    for name in [
        "docs_cli_training_job.json",
        "docs_cli_target_step.json",
        "docs_boto3_training_job.json",
        "docs_boto3_target_step.json",
    ] {
        let c = fixture(name);
        assert_eq!(
            c.system_interval,
            Some(Duration::from_millis(500)),
            "{name}"
        );
        let p = c.profiling_parameters.as_ref().unwrap();
        assert_eq!(p.local_path.as_deref(), Some("/opt/ml/output/profiler/"));
        assert_eq!(
            p.detailed.as_ref().unwrap().window,
            Window::steps(5, 3),
            "{name}"
        );
        let d = p.dataloader.as_ref().unwrap();
        assert_eq!(d.window, Window::steps(5, 3));
        assert_eq!(d.metrics_regex.as_ref().unwrap().as_str(), ".*");
        let py = p.python.as_ref().unwrap();
        assert_eq!(py.window, Window::steps(5, 3));
        assert_eq!(py.profiler_name, Some(PythonProfilerName::CProfile));
        assert_eq!(py.cprofile_timer, Some(CProfileTimer::TotalTime));
        let unapplied: Vec<String> = c.unapplied_keys().map(ToString::to_string).collect();
        assert!(unapplied.is_empty(), "{name}: {unapplied:?}");
        assert!(!c.framework_profiling_off());
    }
    for name in ["docs_cli_target_time.json", "docs_boto3_target_time.json"] {
        let p = fixture(name).profiling_parameters.unwrap();
        let expected = Window::time(at(12_345_567_789.0), Duration::from_secs(10));
        assert_eq!(p.detailed.unwrap().window, expected, "{name}");
        assert_eq!(p.dataloader.unwrap().window, expected);
        assert_eq!(p.python.unwrap().window, expected);
    }
    for name in ["docs_update_training_job_disable.json", "sdk_disabled.json"] {
        let c = fixture(name);
        assert!(
            c.system_profiling_off() && c.framework_profiling_off(),
            "{name}"
        );
    }

    // The SDK's FrameworkProfile() defaults: detailed at step 5, data loader at 7, Python 9-11.
    let c = fixture("sdk_framework_profile_defaults.json");
    assert_eq!(c.disable_profiler, Some(false));
    let p = c.profiling_parameters.as_ref().unwrap();
    assert_eq!(p.rotate_max_file_size, Some(10_485_760));
    assert_eq!(p.rotate_file_close_interval, Some(Duration::from_secs(60)));
    assert_eq!(p.file_open_fail_threshold, Some(50));
    let w = c.windows_over(&TimelineConfig::off());
    assert_eq!(
        (w.detailed, w.data_loading, w.code),
        (
            Window::steps(5, 1),
            Window::steps(7, 1),
            Window::steps(9, 3)
        )
    );
    assert_eq!(
        p.python.as_ref().unwrap().cprofile_timer,
        Some(CProfileTimer::Default)
    );
    // SageMaker's own keys that nothing here reads: said, as not supported.
    let unapplied: Vec<(&str, &Unapplied)> = p
        .unapplied
        .iter()
        .map(|k| (k.key.as_str(), &k.why))
        .collect();
    assert_eq!(
        unapplied,
        [
            (
                "ProfilingParameters.HorovodProfilingConfig",
                &Unapplied::NotSupported
            ),
            (
                "ProfilingParameters.SMDataParallelProfilingConfig",
                &Unapplied::NotSupported
            )
        ]
    );

    // A regex as the SDK writes it (`\.` unescaped), and Pyinstrument without a timer.
    let c = fixture("sdk_dataloader_regex_pyinstrument.json");
    let p = c.profiling_parameters.as_ref().unwrap();
    let regex = p
        .dataloader
        .as_ref()
        .unwrap()
        .metrics_regex
        .as_ref()
        .unwrap();
    assert_eq!(regex.as_str(), "DataLoaderIter\\.next");
    assert!(regex.matches("dataloaderiter.next") && !regex.matches("DataLoaderIterXnext"));
    assert_eq!(
        p.python.as_ref().unwrap().profiler_name,
        Some(PythonProfilerName::Pyinstrument)
    );
    assert_eq!(c.system_interval, Some(Duration::from_millis(100)));

    // Only the system monitor: no ProfilingParameters, so the code's windows stand.
    let c = fixture("sdk_system_monitor_only.json");
    assert!(c.profiling_parameters.is_none() && !c.framework_profiling_off());
    let code = TimelineConfig {
        detailed: Window::steps(1, 2),
        ..TimelineConfig::off()
    };
    assert_eq!(c.windows_over(&code), code);
}

#[test]
fn the_sdks_duration_is_read_as_the_duration() {
    let p = fixture("sdk_framework_profile_time_range.json")
        .profiling_parameters
        .unwrap();
    assert_eq!(
        p.detailed.unwrap().window,
        Window::time(at(1_700_000_000.0), Duration::from_secs(30))
    );
    let err = ProfilerConfig::from_json(
        r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"Duration\": 1, \"DurationInSeconds\": 2}"}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("both DurationInSeconds and Duration"), "{err}");
}

#[test]
fn keys_ignore_case_and_sub_configs_are_strings_or_objects() {
    let c = fixture("smdebug_case_insensitive_profiler_config_parser.json");
    let p = c.profiling_parameters.unwrap();
    assert_eq!(p.local_path.as_deref(), Some("/tmp/test"));
    assert_eq!(p.rotate_max_file_size, Some(100));
    assert_eq!(p.rotate_file_close_interval, Some(Duration::from_secs(1)));
    assert_eq!(p.file_open_fail_threshold, Some(5));
    assert_eq!(p.detailed.unwrap().window, Window::steps(2, 3));
    let unapplied: Vec<String> = p.unapplied.iter().map(ToString::to_string).collect();
    assert_eq!(
        unapplied,
        ["`ProfilingParameters.PROFILERENABLED`: ignored: not supported here"]
    );

    let as_object = ProfilerConfig::from_json(
        r#"{"PROFILINGPARAMETERS": {"detailedprofilingconfig": {"startstep": "2", "NUMSTEPS": 3},
            "PythonProfilingConfig": {"profilername": "PYINSTRUMENT"}}}"#,
    )
    .unwrap();
    let p = as_object.profiling_parameters.unwrap();
    assert_eq!(p.detailed.unwrap().window, Window::steps(2, 3));
    let py = p.python.unwrap();
    assert_eq!(py.profiler_name, Some(PythonProfilerName::Pyinstrument));
    assert_eq!(
        py.window,
        Window::Never,
        "no range: nothing profiled, as smdebug"
    );

    let err = ProfilerConfig::from_json(
        r#"{"ProfilingParameters": {"LocalPath": "/a", "localpath": "/b"}}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("given twice, as `LocalPath` and `localpath`"),
        "{err}"
    );
}

#[test]
fn step_and_time_windows_with_parts_left_open() {
    let windows = |sub: &str| {
        let text = json!({"ProfilingParameters": {"DetailedProfilingConfig": sub}}).to_string();
        ProfilerConfig::from_json(&text)
            .unwrap()
            .profiling_parameters
            .unwrap()
            .detailed
            .unwrap()
            .window
    };
    assert_eq!(windows(r#"{"NumSteps": 2}"#), Window::next_steps(2));
    assert_eq!(
        windows(r#"{"StartStep": 7}"#),
        Window::Steps {
            start: Some(7),
            num_steps: None
        }
    );
    assert_eq!(
        windows(r#"{"DurationInSeconds": 0.1}"#),
        Window::duration(Duration::from_millis(100))
    );
    assert_eq!(
        windows(r#"{"StartTimeInSecSinceEpoch": "1594429959.5"}"#),
        Window::Time {
            start: Some(at(1_594_429_959.5)),
            duration: None
        }
    );
    assert_eq!(windows("{}"), Window::Never, "stated empty: off");
    // Zero is stated: step 0 is profiled (smdebug, testing truthiness, profiles nothing).
    assert_eq!(
        windows(r#"{"StartStep": 0}"#),
        Window::Steps {
            start: Some(0),
            num_steps: None
        }
    );
    let mut w = WindowState::new(windows(r#"{"StartStep": 0}"#));
    assert!(w.contains(0, at(0.0)) && !w.contains(1, at(1.0)));
}

#[test]
fn a_step_range_and_a_time_range_together_is_an_error_naming_the_config() {
    for (config, sub) in [
        (
            "DetailedProfilingConfig",
            r#"{"StartStep": 2, "DurationInSeconds": 5}"#,
        ),
        (
            "DataloaderProfilingConfig",
            r#"{"NumSteps": 2, "StartTimeInSecSinceEpoch": 1700000000}"#,
        ),
        (
            "PythonProfilingConfig",
            r#"{"StartStep": 0, "Duration": 1}"#,
        ),
    ] {
        let text = json!({"ProfilingParameters": {config: sub}}).to_string();
        let err = ProfilerConfig::from_json(&text).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "ProfilingParameters.{config}: states a step range"
            )),
            "{config}: {err}"
        );
    }
}

#[test]
fn broken_values_are_errors_naming_the_file_the_key_and_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (r#"{"ProfilingParameters": {"#.to_string(), "EOF while parsing".to_string()),
        (
            json!({"ProfilingParameters": {"DetailedProfilingConfig": "{\"StartStep\": \"ten\"}"}}).to_string(),
            "ProfilingParameters.DetailedProfilingConfig.StartStep = `ten`: expected a number".into(),
        ),
        (
            json!({"ProfilingParameters": {"DetailedProfilingConfig": "{\"NumSteps\": -1}"}}).to_string(),
            "DetailedProfilingConfig.NumSteps = `-1`: expected a whole number".into(),
        ),
        (
            json!({"ProfilingParameters": {"PythonProfilingConfig": "{\"StartStep\": 2.5}"}}).to_string(),
            "PythonProfilingConfig.StartStep = `2.5`: expected a whole number".into(),
        ),
        (
            json!({"ProfilingParameters": {"DataloaderProfilingConfig": "{\"StartStep\": 1, \"MetricsRegex\": \"*\"}"}}).to_string(),
            "DataloaderProfilingConfig.MetricsRegex = `*`".into(),
        ),
        (
            json!({"ProfilingParameters": {"DetailedProfilingConfig": "{\"StartStep\": 1,"}}).to_string(),
            "ProfilingParameters.DetailedProfilingConfig = `{\"StartStep\": 1,`: expected a string key".into(),
        ),
        (
            json!({"ProfilingParameters": {"DetailedProfilingConfig": 5}}).to_string(),
            "ProfilingParameters.DetailedProfilingConfig = `5`: expected a string holding a dict".into(),
        ),
        (
            json!({"ProfilingParameters": "on"}).to_string(),
            "ProfilingParameters = `on`: expected an object, found a string".into(),
        ),
        (
            json!({"ProfilingParameters": {"LocalPath": 3}}).to_string(),
            "ProfilingParameters.LocalPath = `3`: expected a string".into(),
        ),
        (
            json!({"ProfilingParameters": {"RotateFileCloseIntervalInSeconds": "-1"}}).to_string(),
            "RotateFileCloseIntervalInSeconds = `-1`: expected a number of seconds".into(),
        ),
        (
            json!({"ProfilingParameters": {"PythonProfilingConfig": "{\"ProfilerName\": \"perf\"}"}}).to_string(),
            "PythonProfilingConfig.ProfilerName = `perf`: is neither cProfile nor Pyinstrument".into(),
        ),
        (
            json!({"ProfilingParameters": {"PythonProfilingConfig": "{\"cProfileTimer\": \"cpu\"}"}}).to_string(),
            "PythonProfilingConfig.cProfileTimer = `cpu`".into(),
        ),
        (
            json!({"DisableProfiler": "maybe"}).to_string(),
            "DisableProfiler = `maybe`: expected true or false".into(),
        ),
        (
            json!({"ProfilingIntervalInMilliseconds": "fast"}).to_string(),
            "ProfilingIntervalInMilliseconds = `fast`".into(),
        ),
        ("[]".into(), "must be a JSON object, not a list".into()),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.json"));
        std::fs::write(&path, text).unwrap();
        let err = ProfilerConfig::read(&path).unwrap_err();
        assert!(
            matches!(err, ProfilerError::BadProfilerConfig { .. }),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.starts_with(&path.display().to_string()) && err.contains(needle.as_str()),
            "`{text}` gave `{err}`, expected the file and `{needle}`"
        );
    }
}

#[test]
fn a_missing_file_is_none_and_the_environment_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    let value = path.display().to_string();
    let sources = ConfigSources::from_vars(|v| (v == PROFILER_CONFIG_ENV).then(|| value.clone()));
    assert!(ProfilerConfig::load(&sources).unwrap().is_none());
    std::fs::write(&path, r#"{"DisableProfiler": "false"}"#).unwrap();
    let c = ProfilerConfig::load(&sources).unwrap().unwrap();
    assert_eq!(
        c.disable_profiler,
        Some(false),
        "the string \"false\" is false (smdebug: any non-empty string disables)"
    );
}

#[test]
fn disable_profiler_and_empty_parameters_turn_profiling_off() {
    let code = TimelineConfig {
        phases: Window::Always,
        detailed: Window::steps(3, 2),
        data_loading: Window::Always,
        code: Window::next_steps(1),
    };
    let off = ProfilerConfig::from_json(
        r#"{"ProfilingParameters": {"DisableProfiler": true, "DetailedProfilingConfig": "{\"StartStep\": 1}"}}"#,
    )
    .unwrap();
    assert!(off.system_profiling_off());
    assert_eq!(off.windows_over(&code), TimelineConfig::off());
    for text in [
        r#"{"ProfilingParameters": {}}"#,
        r#"{"ProfilingParameters": null}"#,
    ] {
        let empty = ProfilerConfig::from_json(text).unwrap();
        assert!(
            empty.framework_profiling_off() && !empty.system_profiling_off(),
            "{text}"
        );
        assert_eq!(empty.windows_over(&code), TimelineConfig::off());
    }
    // Stated parameters without sub-configs keep the code's windows.
    let rotation_only =
        ProfilerConfig::from_json(r#"{"ProfilingParameters": {"LocalPath": "/x"}}"#).unwrap();
    assert_eq!(rotation_only.windows_over(&code), code);
    // A stated sub-config replaces the code's window, the regex with it.
    let file = ProfilerConfig::from_json(
        r#"{"ProfilingParameters": {"DataloaderProfilingConfig": "{\"StartStep\": 4, \"MetricsRegex\": \"GetNext\"}"}}"#,
    )
    .unwrap();
    let dataloader = file.windows_over(&code);
    assert_eq!(
        dataloader.data_loading,
        Window::Steps {
            start: Some(4),
            num_steps: None
        }
    );
    assert_eq!(file.dataloader_metrics().unwrap().as_str(), "GetNext");
    assert_eq!(dataloader.detailed, code.detailed);
}

#[test]
fn rotation_and_interval_replace_the_codes_and_are_checked_naming_the_key() {
    let c = fixture("sdk_dataloader_regex_pyinstrument.json");
    let spans = c.span_config(SpanConfig::default()).unwrap();
    assert_eq!(spans.max_file_size(), 1_048_576);
    assert_eq!(spans.file_close_interval(), Duration::from_secs(30));
    let sampler = c.sampler_config(SamplerConfig::default()).unwrap();
    assert_eq!(sampler.sampling_interval(), Duration::from_millis(100));

    // Not stated: the code's settings.
    let code = SpanConfig::default().max_file_bytes(1 << 16);
    let none = ProfilerConfig::from_json("{}").unwrap();
    assert_eq!(none.span_config(code).unwrap().max_file_size(), 1 << 16);

    // smdebug's tests rotate at 300 bytes; the span writer takes 4 KiB at least.
    let path = data_dir().join("smdebug_complete_profiler_config_parser.json");
    let small = fixture("smdebug_complete_profiler_config_parser.json");
    let err = small
        .span_config(SpanConfig::default())
        .unwrap_err()
        .in_config_file(&path)
        .to_string();
    assert!(
        err.contains(&path.display().to_string())
            && err.contains("ProfilingParameters.RotateMaxFileSizeInBytes = `300`"),
        "{err}"
    );
    let fast = ProfilerConfig::from_json(
        r#"{"ProfilingParameters": {"RotateFileCloseIntervalInSeconds": 0.01}}"#,
    )
    .unwrap();
    let err = fast
        .span_config(SpanConfig::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("RotateFileCloseIntervalInSeconds = `0.01`"),
        "{err}"
    );
    let err = ProfilerConfig::from_json(r#"{"ProfilingIntervalInMilliseconds": 10}"#)
        .unwrap()
        .sampler_config(SamplerConfig::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ProfilingIntervalInMilliseconds = `10`"),
        "{err}"
    );
}

/// Writes `text` to a new file beside `path` and renames it over `path`, as an editor or
/// SageMaker replaces a file.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn detailed(config: &ProfilerConfig) -> Window {
    config.windows_over(&TimelineConfig::off()).detailed
}

const TWO_STEPS: &str = r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"StartStep\": 10, \"NumSteps\": 2}"}}"#;
const NEXT_STEP: &str =
    r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"NumSteps\": 1}"}}"#;

#[test]
fn the_watcher_sees_a_file_renamed_over_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    std::fs::write(&path, TWO_STEPS).unwrap();
    let mut watcher = ProfilerConfigWatcher::start(&path).unwrap();
    assert_eq!(detailed(watcher.current().unwrap()), Window::steps(10, 2));
    assert!(watcher.poll().is_none(), "nothing changed");
    replace(&path, NEXT_STEP);
    let new = watcher.poll().expect("the edit is seen at the first poll");
    assert_eq!(detailed(&new), Window::next_steps(1));
    assert_eq!(watcher.current(), Some(&new));
    assert!(watcher.poll().is_none(), "seen once");
}

#[test]
fn an_edit_that_brings_a_key_not_applied_is_among_the_watchers_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    std::fs::write(&path, TWO_STEPS).unwrap();
    let mut watcher = ProfilerConfigWatcher::start(&path).unwrap();
    replace(
        &path,
        r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"NumStep\": 1}"}}"#,
    );
    let new = watcher.poll().expect("the edit is applied");
    assert_eq!(detailed(&new), Window::Never, "NumStep states no window");
    assert_eq!(
        watcher.problems(),
        [format!(
            "{}: `ProfilingParameters.DetailedProfilingConfig.NumStep`: unknown key, did you \
             mean `NumSteps`?",
            path.display()
        )]
    );
    // Said once, not again at the next edit that keeps it.
    replace(
        &path,
        r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"NumStep\": 2}"}}"#,
    );
    assert!(watcher.poll().is_none(), "the same configuration");
    assert_eq!(watcher.problems().len(), 1);
}

#[test]
fn the_watcher_sees_a_rewrite_in_place_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    let before = TWO_STEPS;
    let after = TWO_STEPS.replace("10", "20");
    assert_eq!(before.len(), after.len());
    std::fs::write(&path, before).unwrap();
    let mut watcher = ProfilerConfigWatcher::start(&path).unwrap();
    // Same inode, same length, most likely the same modification time: the content tells.
    std::fs::write(&path, &after).unwrap();
    let new = watcher.poll().expect("the rewrite is seen");
    assert_eq!(detailed(&new), Window::steps(20, 2));
}

#[test]
fn a_broken_edit_keeps_the_last_good_config_until_it_is_mended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    std::fs::write(&path, TWO_STEPS).unwrap();
    let mut watcher = ProfilerConfigWatcher::start(&path).unwrap();
    replace(
        &path,
        r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"StartStep\": \"soon\"}"}}"#,
    );
    assert!(watcher.poll().is_none(), "a broken edit yields nothing");
    assert_eq!(detailed(watcher.current().unwrap()), Window::steps(10, 2));
    replace(&path, NEXT_STEP);
    assert_eq!(detailed(&watcher.poll().unwrap()), Window::next_steps(1));
}

#[test]
fn a_file_created_after_start_is_picked_up_and_one_removed_keeps_the_last_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    let mut watcher = ProfilerConfigWatcher::start(&path).unwrap();
    assert!(watcher.current().is_none() && watcher.poll().is_none());
    replace(&path, NEXT_STEP);
    assert_eq!(detailed(&watcher.poll().unwrap()), Window::next_steps(1));
    std::fs::remove_file(&path).unwrap();
    assert!(watcher.poll().is_none());
    assert_eq!(detailed(watcher.current().unwrap()), Window::next_steps(1));
    // Back with the same content: nothing new; with other content: the new config.
    replace(&path, NEXT_STEP);
    assert!(watcher.poll().is_none());
    replace(&path, TWO_STEPS);
    assert_eq!(detailed(&watcher.poll().unwrap()), Window::steps(10, 2));
}

#[test]
fn a_broken_file_at_start_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profilerconfig.json");
    std::fs::write(
        &path,
        r#"{"ProfilingParameters": {"FileOpenFailThreshold": "many"}}"#,
    )
    .unwrap();
    let err = ProfilerConfigWatcher::start(&path).unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string())
            && err.contains("ProfilingParameters.FileOpenFailThreshold = `many`"),
        "{err}"
    );
}
