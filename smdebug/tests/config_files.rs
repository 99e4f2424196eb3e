//! SageMaker's configuration files in a session: what they state overrides the builder, a
//! window edited in the profiler file reaches a running loop, broken files fail at start.

use std::path::Path;
use std::time::{Duration, Instant};

use smdebug::io::sagemaker::ConfigSources;
use smdebug::prelude::*;
use smdebug::profiler::spans::SpanConfig;
use smdebug::read::profile::{ProfilerReader, SpanQuery};
use smdebug_core::timeline::Profiling;
use smdebug_storage::testing::wait_for;

/// Writes `text` to a scratch file beside `path` and renames it over `path`, as SageMaker and
/// editors replace a file.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The steps (TRAIN mode steps) that have a span in `row`.
fn steps_with(run: &Path, row: &str) -> Vec<u64> {
    let reader = ProfilerReader::open(run.to_str().unwrap()).unwrap();
    let mut steps: Vec<u64> = reader
        .spans(&SpanQuery::default().phase(row))
        .unwrap()
        .into_iter()
        .filter_map(|s| s.step)
        .collect();
    steps.sort_unstable();
    steps
}

fn builder(location: &Path, sources: ConfigSources) -> SessionBuilder {
    Session::builder(location)
        .config_files(sources)
        .no_system()
        .spans(SpanConfig::default().close_interval(Duration::from_millis(200)))
}

/// `steps` TRAIN steps, each loading a batch and saving the loss.
fn train(session: &mut Session, steps: u64) {
    session.set_mode(Mode::Train).unwrap();
    for _ in session.data(0..steps) {
        session.hook().save_scalar("loss", 1.0, &["losses"]);
        session.step().unwrap();
    }
}

#[test]
fn what_the_files_state_overrides_the_builder_and_the_rest_stands() {
    let dir = tempfile::tempdir().unwrap();
    let from_code = dir.path().join("from-code");
    let from_file = dir.path().join("from-file");
    let hook_file = dir.path().join("debughookconfig.json");
    let profiler_file = dir.path().join("profilerconfig.json");
    std::fs::write(
        &hook_file,
        serde_json::json!({
            "LocalPath": from_file.to_str().unwrap(),
            "HookParameters": {"save_interval": "2"},
        })
        .to_string(),
    )
    .unwrap();
    // As the SageMaker SDK writes it: the sub-config is a string, keys in any case.
    std::fs::write(
        &profiler_file,
        r#"{"ProfilingParameters": {"dataloaderprofilingconfig": "{\"StartStep\": 2, \"NumSteps\": 2, }"}}"#,
    )
    .unwrap();
    let mut session = builder(&from_code, ConfigSources::new(&hook_file, &profiler_file))
        .save(SaveConfig::every(5))
        .start()
        .unwrap();
    assert_eq!(session.location().local_path(), Some(from_file.as_path()));
    train(&mut session, 6);
    session.finish().unwrap();

    assert!(!from_code.exists(), "the file's LocalPath names the run");
    let trial = Trial::open(from_file.to_str().unwrap()).unwrap();
    assert_eq!(
        trial.tensor("loss").unwrap().steps(None).unwrap(),
        [0, 2, 4],
        "the file's save_interval, not the builder's"
    );
    assert_eq!(steps_with(&from_file, "DataLoaderIter"), [2, 3]);
    // Not in the file: the builder's (step spans at every step).
    assert_eq!(
        steps_with(&from_file, "Step:ModeKeys.TRAIN"),
        (0..6).collect::<Vec<_>>()
    );
}

#[test]
fn a_window_opened_in_the_profiler_file_while_the_job_runs_reaches_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let profiler_file = dir.path().join("profilerconfig.json");
    // Data loading stated off ("{}") at start.
    replace(
        &profiler_file,
        r#"{"ProfilingParameters": {"DataloaderProfilingConfig": "{}"}}"#,
    );
    let sources = ConfigSources::new(dir.path().join("no-hook-config.json"), &profiler_file);
    let mut session = builder(&run, sources).start().unwrap();
    session.set_mode(Mode::Train).unwrap();
    let mut data = session.data(0u64..);
    let mut step = 0u64;
    // One step per look: the job trains until the edited window opens.
    let first = wait_for(Duration::from_secs(60), "the edited window to open", || {
        data.next();
        session.hook().save_scalar("loss", 1.0, &["losses"]);
        session.step().unwrap();
        step += 1;
        if step == 3 {
            // Three steps from the next one, as a user edits the file of a running job.
            replace(
                &profiler_file,
                r#"{"ProfilingParameters": {"DataloaderProfilingConfig": "{\"NumSteps\": 3}"}}"#,
            );
        }
        session
            .timeline()
            .is_open(Profiling::DataLoading)
            .then_some(step)
    });
    // And past the window's three steps.
    for _ in 0..5 {
        data.next();
        session.hook().save_scalar("loss", 1.0, &["losses"]);
        session.step().unwrap();
    }
    session.finish().unwrap();
    assert!(first > 3);
    assert_eq!(
        steps_with(&run, "DataLoaderIter"),
        [first, first + 1, first + 2]
    );
}

#[test]
fn disable_profiler_turns_spans_and_sampling_off() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let profiler_file = dir.path().join("profilerconfig.json");
    std::fs::write(&profiler_file, r#"{"DisableProfiler": true}"#).unwrap();
    let sources = ConfigSources::new(dir.path().join("absent.json"), &profiler_file);
    let mut session = Session::builder(&run)
        .config_files(sources)
        .start()
        .unwrap();
    train(&mut session, 4);
    let summary = session.finish().unwrap();
    assert_eq!((summary.spans_written, summary.system_samples), (0, 0));
    assert_eq!(summary.steps, 4, "capture goes on: {summary}");
}

#[test]
fn a_broken_file_is_an_error_at_start_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let hook_file = dir.path().join("debughookconfig.json");
    let profiler_file = dir.path().join("profilerconfig.json");
    std::fs::write(
        &hook_file,
        r#"{"HookParameters": {"save_interval": "often"}}"#,
    )
    .unwrap();
    let err = builder(&run, ConfigSources::new(&hook_file, &profiler_file))
        .start()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(hook_file.to_str().unwrap()) && err.contains("save_interval"),
        "{err}"
    );

    std::fs::remove_file(&hook_file).unwrap();
    std::fs::write(
        &profiler_file,
        r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"StartStep\": \"soon\"}"}}"#,
    )
    .unwrap();
    let err = builder(&run, ConfigSources::new(&hook_file, &profiler_file))
        .start()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(profiler_file.to_str().unwrap()) && err.to_lowercase().contains("startstep"),
        "{err}"
    );
    assert!(!run.join("training_job_end.ts").exists());
}

/// Makes a FIFO at `path`; no writer ever opens it, so a blocking open or read waits forever.
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[test]
fn a_fifo_or_a_device_as_either_file_is_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    let absent = dir.path().join("absent.json");
    let zero = Path::new("/dev/zero");
    for (hook, profiler, named, kind) in [
        (&*fifo, &*absent, &*fifo, "a FIFO"),
        (&*absent, &*fifo, &*fifo, "a FIFO"),
        (zero, &*absent, zero, "a character device"),
        (&*absent, zero, zero, "a character device"),
    ] {
        // On a thread, so that a start that hangs fails the test instead of holding it.
        let (tx, rx) = std::sync::mpsc::channel();
        let sources = ConfigSources::new(hook, profiler);
        let location = run.clone();
        std::thread::spawn(move || {
            let _ = tx.send(builder(&location, sources).start().map(|_| ()));
        });
        let err = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("start hung on {} as a config file", named.display()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(named.to_str().unwrap()) && err.contains(kind),
            "{err}"
        );
        assert!(!run.join("training_job_end.ts").exists());
    }
}

#[test]
fn a_profiler_file_replaced_by_a_fifo_mid_run_keeps_the_last_config_and_finish_returns() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let profiler_file = dir.path().join("profilerconfig.json");
    replace(
        &profiler_file,
        r#"{"ProfilingParameters": {"DataloaderProfilingConfig": "{\"StartStep\": 0, \"NumSteps\": 1000}"}}"#,
    );
    let sources = ConfigSources::new(dir.path().join("absent.json"), &profiler_file);
    let mut session = builder(&run, sources).start().unwrap();
    train(&mut session, 3);
    std::fs::remove_file(&profiler_file).unwrap();
    mkfifo(&profiler_file);
    // The follower looks every second: give it three looks at the FIFO, a window in which
    // nothing may change while training goes on (the follower counts no looks a test could
    // wait on).
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3_500) {
        train(&mut session, 1);
        // workload: a training step's time, within the window above.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        session.timeline().is_open(Profiling::DataLoading),
        "the last good configuration stays in force"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(session.finish().unwrap());
    });
    let summary = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("finish() returned");
    let said: Vec<&String> = summary
        .problems
        .iter()
        .filter(|p| p.contains("a FIFO, not a regular file"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {summary}");
    assert!(
        said[0].contains(profiler_file.to_str().unwrap())
            && said[0].contains("keeping the last good profiler configuration"),
        "{summary}"
    );
    assert!(run.join("training_job_end.ts").exists());
    assert!(steps_with(&run, "DataLoaderIter").len() > 3);
}

#[test]
fn keys_not_applied_are_listed_in_the_summary_with_the_files_applied_and_the_others_apply() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let hook_file = dir.path().join("debughookconfig.json");
    let profiler_file = dir.path().join("profilerconfig.json");
    std::fs::write(
        &hook_file,
        r#"{"HookParameters": {"save_interval": "2", "save_al": "true"},
            "CollectionConfigurations": [{"CollectionName": "losses",
                "CollectionParameters": {"save_interval": "3", "save_histogrm": "true"}}]}"#,
    )
    .unwrap();
    std::fs::write(
        &profiler_file,
        r#"{"ProfilingParameters": {"LocalPth": "/tmp/x"}, "DisableProfilr": true}"#,
    )
    .unwrap();
    let mut session = builder(&run, ConfigSources::new(&hook_file, &profiler_file))
        .start()
        .unwrap();
    train(&mut session, 7);
    let summary = session.finish().unwrap();
    let (h, p) = (hook_file.display(), profiler_file.display());
    assert_eq!(summary.config_files, [h.to_string(), p.to_string()]);
    assert_eq!(
        summary.config_warnings,
        [
            format!("{h}: `HookParameters.save_al`: unknown key, did you mean `save_all`?"),
            format!(
                "{h}: `CollectionConfigurations[0].CollectionParameters.save_histogrm`: unknown \
                 key, did you mean `save_histogram`?"
            ),
            format!("{p}: `DisableProfilr`: unknown key, did you mean `DisableProfiler`?"),
            format!("{p}: `ProfilingParameters.LocalPth`: unknown key, did you mean `LocalPath`?"),
        ]
    );
    let text = summary.to_string();
    assert!(
        text.contains(&format!("configured by {h}, {p}\n")),
        "{text}"
    );
    for w in &summary.config_warnings {
        assert!(
            text.contains(&format!("configuration warning: {w}\n")),
            "{text}"
        );
    }
    // What the files spell right applies: the losses every 3 steps; the misspelled
    // DisableProfilr turned nothing off.
    let trial = smdebug::read::Trial::open(run.to_str().unwrap()).unwrap();
    assert_eq!(
        trial
            .tensor("loss")
            .unwrap()
            .steps(Some(Mode::Train))
            .unwrap(),
        [0, 3, 6]
    );
    assert!(summary.spans_written > 0, "{summary}");
}

#[test]
fn files_that_apply_every_key_give_no_warning_and_no_file_is_listed_when_none_exists() {
    let dir = tempfile::tempdir().unwrap();
    let hook_file = dir.path().join("debughookconfig.json");
    std::fs::write(&hook_file, r#"{"HookParameters": {"save_interval": "2"}}"#).unwrap();
    let absent = dir.path().join("profilerconfig.json");
    let mut session = builder(
        &dir.path().join("run"),
        ConfigSources::new(&hook_file, &absent),
    )
    .start()
    .unwrap();
    train(&mut session, 2);
    let summary = session.finish().unwrap();
    assert_eq!(summary.config_files, [hook_file.display().to_string()]);
    assert!(summary.config_warnings.is_empty(), "{summary}");

    let mut session = builder(
        &dir.path().join("run2"),
        ConfigSources::new(&absent, &absent),
    )
    .start()
    .unwrap();
    train(&mut session, 2);
    let summary = session.finish().unwrap();
    assert!(summary.config_files.is_empty(), "{summary}");
    assert!(!summary.to_string().contains("configured by"), "{summary}");
}

#[test]
fn a_storage_given_for_one_location_is_not_used_for_the_run_a_file_names_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let from_code = dir.path().join("from-code");
    let from_file = dir.path().join("from-file");
    let hook_file = dir.path().join("debughookconfig.json");
    std::fs::write(
        &hook_file,
        serde_json::json!({"LocalPath": from_file.to_str().unwrap()}).to_string(),
    )
    .unwrap();
    let storage: std::sync::Arc<dyn smdebug::storage::Storage> =
        std::sync::Arc::new(smdebug::storage::LocalStorage::new(&from_code).unwrap());
    let err = builder(
        &from_code,
        ConfigSources::new(&hook_file, dir.path().join("absent.json")),
    )
    .storage(storage)
    .start()
    .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, smdebug::Error::Start { .. }), "{message}");
    assert!(
        message.contains(from_code.to_str().unwrap())
            && message.contains(from_file.to_str().unwrap()),
        "{message}"
    );
    // Nothing was written, at either location.
    assert!(!from_code.exists() && !from_file.exists());
}
