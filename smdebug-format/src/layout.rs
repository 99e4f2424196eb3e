//! The run directory's paths, relative to the run root, as smdebug names them.
//!
//! ```text
//! collections/000000000/<worker>_collections.json
//! events/<step:012>/<step:012>_<worker>.tfevents
//! index/<step/1000:09>/<step:012>_<worker>.json
//! training_job_end.ts
//! progress/<worker>.json
//! tensorboard/<MODE>/events.out.tfevents.<first step:012>.<worker>
//! jobs/<worker>/<process>.json
//! ```
//!
//! and, written by the other crates into the same run: `system/` (system metrics),
//! `framework/` (framework traces, code profiles), `rules/` (the rules' summary, the
//! profiling report), `report/` (the report where the demo puts it), `stop_request.json`.
//! [`RUN_FOLDERS`] and [`RUN_FILES`] are the one list of what a run owns
//! (`smdebug_io::run_folder` replaces a run by deleting exactly these).
//!
//! ```
//! use smdebug_format::layout;
//! assert_eq!(layout::event_file(3, "worker_0"), "events/000000000003/000000000003_worker_0.tfevents");
//! assert_eq!(layout::index_file(1234, "worker_1"), "index/000000001/000000001234_worker_1.json");
//! assert_eq!(layout::parse_index_file("index/000000001/000000001234_worker_1.json"),
//!            Some((1234, "worker_1".to_string())));
//! ```

use smdebug_core::Mode;

/// Folder of the event files.
pub const EVENTS_DIR: &str = "events";
/// Folder of the index files.
pub const INDEX_DIR: &str = "index";
/// Folder of the collections files.
pub const COLLECTIONS_DIR: &str = "collections";
/// Folder of TensorBoard's files (one sub-folder per mode: TensorBoard shows each as a run).
pub const TENSORBOARD_DIR: &str = "tensorboard";
/// The end-of-run marker. Python smdebug only checks that it exists; ours holds a small JSON
/// body with the reason.
pub const END_MARKER: &str = "training_job_end.ts";
/// Folder of the training job's progress files, one per worker (`progress/<worker>.json`:
/// planned steps, the last step, what the writers wrote and dropped; see
/// `crate::progress`). Python smdebug's `create_trial` and TensorBoard read neither this
/// folder nor anything in it.
pub const PROGRESS_DIR: &str = "progress";
/// Folder of the identity files of the processes that write the run, one per process
/// (`jobs/<worker>/<process>.json`, see [`crate::jobs`]). Python smdebug reads nothing in it.
pub const JOBS_DIR: &str = "jobs";
/// Folder of system metrics (smdebug-profiler's `system/incremental/<hour>/...`).
pub const SYSTEM_DIR: &str = "system";
/// Folder of framework traces and code profiles (smdebug-profiler's `framework/pevents/...`,
/// `framework/code/...`).
pub const FRAMEWORK_DIR: &str = "framework";
/// Folder of the rules' output: `rules/rule_job_summary.json`, the profiling report in
/// `rules/ProfilerReport/profiler-output/`.
pub const RULES_DIR: &str = "rules";
/// Folder of the report where the demo and the README put it (`report/profiler-report.html`
/// and the rules' files beside it).
pub const REPORT_DIR: &str = "report";
/// Folder of the report in SageMaker's layout
/// (`rule-output/ProfilerReport-<timestamp>/profiler-output/`).
pub const RULE_OUTPUT_DIR: &str = "rule-output";
/// The probe older dashboards wrote to learn whether they may write into the run (written and
/// removed at once; now `smdebug_io::run_folder::probe_write`'s name): a run owns a leftover one.
pub const WRITE_PROBE: &str = ".smdebug-serve-write-check";

/// The start of the name of the probe `start()` stores and removes to learn whether the
/// location takes writes (see `smdebug_io::run_folder::probe_write`): a run owns a leftover one.
pub const START_PROBE_PREFIX: &str = ".smdebug-probe-";

/// `.smdebug-probe-<writer>-<pid>.tmp`, the start probe of one process.
pub fn start_probe_file(writer: &str, pid: u32) -> String {
    format!("{START_PROBE_PREFIX}{writer}-{pid}.tmp")
}

/// Whether a top-level name is a start probe's file (see [`start_probe_file`]).
pub fn is_start_probe_file(name: &str) -> bool {
    name.strip_prefix(START_PROBE_PREFIX)
        .and_then(|n| n.strip_suffix(".tmp"))
        .is_some_and(|n| !n.is_empty() && !n.contains('/'))
}

/// The folders a run owns, at its top: everything under them is the run's. Replacing a run
/// deletes these and [`RUN_FILES`], and a folder holding anything else is not a run.
pub const RUN_FOLDERS: [&str; 11] = [
    COLLECTIONS_DIR,
    EVENTS_DIR,
    INDEX_DIR,
    TENSORBOARD_DIR,
    PROGRESS_DIR,
    JOBS_DIR,
    SYSTEM_DIR,
    FRAMEWORK_DIR,
    RULES_DIR,
    REPORT_DIR,
    RULE_OUTPUT_DIR,
];

/// `name` made safe as a file name or folder: every character other than ASCII letters, digits,
/// `-` and `_` becomes `_` (a rule's result file and log folder, a downloaded report's name).
pub fn safe_file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The name of a rule's log file, inside its folder (`rules/<Rule>/log`).
pub const RULE_LOG: &str = "log";

/// A rule's log file, relative to the run: `rules/VanishingGradient/log`. The folder is the
/// rule's name made safe as a file name ([`safe_file_stem`], as the report names a rule's
/// result file), `rule` when nothing is left of it.
pub fn rule_log_file(rule: &str) -> String {
    rule_log_in(&rule_folder(rule))
}

/// A rule's folder under [`RULES_DIR`]: its name made safe as a file name, `rule` when nothing
/// is left of it.
pub fn rule_folder(rule: &str) -> String {
    let folder = safe_file_stem(rule);
    if folder.is_empty() {
        "rule".to_string()
    } else {
        folder
    }
}

/// The log file in rule folder `folder`: `rules/<folder>/log`.
pub fn rule_log_in(folder: &str) -> String {
    format!("{RULES_DIR}/{folder}/{RULE_LOG}")
}

/// The stop-request file, relative to the run (smdebug-io's `stop` reads and writes it).
pub const STOP_REQUEST_FILE: &str = "stop_request.json";

/// The files a run owns, at its top (see [`RUN_FOLDERS`]).
pub const RUN_FILES: [&str; 3] = [END_MARKER, STOP_REQUEST_FILE, WRITE_PROBE];

/// Whether `key` (a path relative to the run) is one of the run's own: under one of
/// [`RUN_FOLDERS`], or one of [`RUN_FILES`].
pub fn run_owns(key: &str) -> bool {
    match key.split_once('/') {
        Some((top, rest)) => !rest.is_empty() && RUN_FOLDERS.contains(&top),
        None => RUN_FILES.contains(&key) || is_start_probe_file(key),
    }
}

/// `jobs/<worker>/<process>.json`
pub fn job_file(worker: &str, process: &str) -> String {
    format!("{JOBS_DIR}/{worker}/{process}.json")
}

/// Worker and process of a job identity file path; `None` for anything else.
pub fn parse_job_file(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix(JOBS_DIR)?.strip_prefix('/')?;
    let (worker, file) = rest.split_once('/')?;
    let process = file.strip_suffix(".json")?;
    let plain = |s: &str| !s.is_empty() && !s.contains('/') && !s.starts_with('.');
    (plain(worker) && plain(process)).then(|| (worker.to_string(), process.to_string()))
}

/// `worker_<rank>`, smdebug's worker name.
pub fn worker_name(rank: usize) -> String {
    format!("worker_{rank}")
}

/// `events/<step:012>/<step:012>_<worker>.tfevents`
pub fn event_file(step: u64, worker: &str) -> String {
    // Joined from its parts, not formatted: a value-by-value reader makes one a file it reads.
    let mut digits = [0; 20];
    let step = padded(step, 12, &mut digits);
    let parts = [EVENTS_DIR, "/", step, "/", step, "_", worker, ".tfevents"];
    let mut path = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    parts.iter().for_each(|p| path.push_str(p));
    path
}

/// Whether `path` is [`event_file`]`(step, worker)`, compared without making it (a reader
/// asks this of every step's file).
pub fn is_event_file(path: &str, step: u64, worker: &str) -> bool {
    let mut digits = [0; 20];
    let step = padded(step, 12, &mut digits);
    strip_all(
        path,
        &[EVENTS_DIR, "/", step, "/", step, "_", worker, ".tfevents"],
    )
}

/// Whether `path` is [`index_file`]`(step, worker)`, compared without making it.
pub fn is_index_file(path: &str, step: u64, worker: &str) -> bool {
    let (mut folder, mut digits) = ([0; 20], [0; 20]);
    let folder = padded(step / 1000, 9, &mut folder);
    let step = padded(step, 12, &mut digits);
    strip_all(
        path,
        &[INDEX_DIR, "/", folder, "/", step, "_", worker, ".json"],
    )
}

/// `n` in decimal, zero-padded to `width` digits (at most 20), in `buf`.
fn padded(n: u64, width: usize, buf: &mut [u8; 20]) -> &str {
    let mut rest = n;
    let mut digits = 0;
    loop {
        buf[19 - digits] = b'0' + (rest % 10) as u8;
        rest /= 10;
        digits += 1;
        if rest == 0 {
            break;
        }
    }
    let len = digits.max(width.min(20));
    buf[20 - len..20 - digits].fill(b'0');
    std::str::from_utf8(&buf[20 - len..]).expect("ASCII digits")
}

/// Whether `path` is `parts` one after another, and nothing more.
fn strip_all(path: &str, parts: &[&str]) -> bool {
    let mut rest = path;
    for part in parts {
        match rest.strip_prefix(part) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// `index/<step/1000:09>`: the folder of `step`'s index files.
pub fn index_folder(step: u64) -> String {
    format!("{INDEX_DIR}/{:09}", step / 1000)
}

/// `index/<step/1000:09>/<step:012>_<worker>.json`
pub fn index_file(step: u64, worker: &str) -> String {
    format!("{INDEX_DIR}/{:09}/{step:012}_{worker}.json", step / 1000)
}

/// `collections/000000000/<worker>_collections.json`
pub fn collections_file(worker: &str) -> String {
    format!("{COLLECTIONS_DIR}/000000000/{worker}_collections.json")
}

/// `progress/<worker>.json`
pub fn progress_file(worker: &str) -> String {
    format!("{PROGRESS_DIR}/{worker}.json")
}

/// Worker of a progress file path (`progress/worker_0.json`); `None` for anything else
/// (temporary files included).
pub fn parse_progress_file(path: &str) -> Option<String> {
    let rest = path.strip_prefix(PROGRESS_DIR)?.strip_prefix('/')?;
    let worker = rest.strip_suffix(".json")?;
    (!worker.is_empty() && !worker.contains('/')).then(|| worker.to_string())
}

/// `tensorboard/<MODE>/events.out.tfevents.<first_step:012>.<worker>`: TensorBoard loads
/// files whose name contains `tfevents`, in name order within a run folder.
pub fn tensorboard_file(mode: Mode, first_step: u64, worker: &str) -> String {
    format!(
        "{TENSORBOARD_DIR}/{}/events.out.tfevents.{first_step:012}.{worker}",
        mode.name()
    )
}

/// A listing offset for `Storage::list_after` over
/// [`INDEX_DIR`] that returns the index files of steps `>= step` (and only those).
pub fn index_list_offset(step: u64) -> String {
    format!("{INDEX_DIR}/{:09}/{step:012}", step / 1000)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `<step>_<worker>` from a file stem: the step is the digits before the first `_`.
fn step_and_worker(stem: &str) -> Option<(u64, String)> {
    let (step, worker) = stem.split_once('_')?;
    if step.is_empty() || !step.bytes().all(|b| b.is_ascii_digit()) || worker.is_empty() {
        return None;
    }
    Some((step.parse().ok()?, worker.to_string()))
}

/// Step and worker of an index file path (`…/000000000003_worker_0.json`); `None` for anything
/// else (temporary files included).
pub fn parse_index_file(path: &str) -> Option<(u64, String)> {
    step_and_worker(file_name(path).strip_suffix(".json")?)
}

/// Step and worker of an event file path (`…/000000000003_worker_0.tfevents`).
pub fn parse_event_file(path: &str) -> Option<(u64, String)> {
    step_and_worker(file_name(path).strip_suffix(".tfevents")?)
}

/// Worker of a collections file path (`…/worker_0_collections.json`).
pub fn parse_collections_file(path: &str) -> Option<String> {
    let worker = file_name(path).strip_suffix("_collections.json")?;
    (!worker.is_empty()).then(|| worker.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparisons without a path made answer as comparing with the path made does.
    #[test]
    fn usual_paths_are_recognised_as_the_made_ones_are() {
        let steps = [
            0,
            7,
            999,
            1000,
            123_456,
            999_999_999_999,
            1_000_000_000_000,
            u64::MAX,
        ];
        let workers = ["worker_0", "worker_12", "w", "", "worker_0.x"];
        let mut candidates = Vec::new();
        for &step in &steps {
            for worker in workers {
                candidates.push(event_file(step, worker));
                candidates.push(index_file(step, worker));
            }
        }
        candidates.extend(
            [
                "events/000000000007/000000000007_worker_0.tfevents.tmp",
                "events/000000000007/7_worker_0.tfevents",
                "events/7/000000000007_worker_0.tfevents",
                "index/000000000/000000000007_worker_0.json/",
                "index/00000000/000000000007_worker_0.json",
                "",
            ]
            .map(String::from),
        );
        for &step in &steps {
            for worker in workers {
                for path in &candidates {
                    assert_eq!(
                        is_event_file(path, step, worker),
                        *path == event_file(step, worker),
                        "{path} {step} {worker}"
                    );
                    assert_eq!(
                        is_index_file(path, step, worker),
                        *path == index_file(step, worker),
                        "{path} {step} {worker}"
                    );
                }
            }
        }
    }

    #[test]
    fn list_offset_separates_steps() {
        let before = index_file(1999, "worker_0");
        let at = index_file(2000, "worker_0");
        let off = index_list_offset(2000);
        assert!(before < off && off < at, "{before} < {off} < {at}");
        assert!(index_file(999, "w") < index_list_offset(1000));
        assert!(index_file(1000, "a_long_worker") > index_list_offset(1000));
    }

    #[test]
    fn parses_worker_names_with_underscores() {
        assert_eq!(
            parse_event_file("events/000000000000/000000000000_4242_goldenhost.tfevents"),
            Some((0, "4242_goldenhost".to_string()))
        );
        assert_eq!(
            parse_index_file("index/000000000/000000000003_worker_0.json.tmp"),
            None
        );
        assert_eq!(
            parse_collections_file("collections/000000000/worker_1_collections.json").as_deref(),
            Some("worker_1")
        );
        assert_eq!(
            parse_progress_file(&progress_file("worker_3")).as_deref(),
            Some("worker_3")
        );
        assert_eq!(parse_progress_file("progress/worker_0.json.tmp"), None);
        assert_eq!(parse_progress_file("progress/a/b.json"), None);
        assert_eq!(
            parse_job_file(&job_file("worker_1", "0123abcd")),
            Some(("worker_1".to_string(), "0123abcd".to_string()))
        );
        assert_eq!(parse_job_file("jobs/worker_1/.x_json.1-2.tmp"), None);
        assert_eq!(parse_job_file("jobs/worker_1.json"), None);
    }

    #[test]
    fn a_run_owns_its_folders_and_markers_only() {
        for key in [
            event_file(3, "worker_0"),
            index_file(3, "worker_0"),
            collections_file("worker_0"),
            progress_file("worker_0"),
            job_file("worker_0", "ab"),
            tensorboard_file(Mode::Train, 0, "worker_0"),
            END_MARKER.to_string(),
            "stop_request.json".to_string(),
            "rules/rule_job_summary.json".to_string(),
            "report/profiler-report.html".to_string(),
        ] {
            assert!(run_owns(&key), "{key}");
        }
        for key in [
            "src/main.rs",
            "README.md",
            "events",
            "index/",
            "notes/events/x",
        ] {
            assert!(!run_owns(key), "{key}");
        }
    }
}
