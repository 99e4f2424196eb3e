//! The report as the rule runner's [`Reporter`]: drawn from the runner's state when it
//! finishes (and, following a live run, as often as the runner is told).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use smdebug_read::trial::{TensorSource, TensorSubscription};
use smdebug_rules::report::{DEFAULT_REPORT_DIR, REPORT_FILE, sagemaker_report_dir};
use smdebug_rules::runner::RunnerBuilder;
use smdebug_rules::{NoDestination, ReportPlan, ReportWriteError, Reporter, RunState};
use smdebug_storage::{Location, Storage};

use crate::input::{LoadOptions, ReportInput};
use crate::notebook::{notebook_name, render_notebook, rule_summary_name};
use crate::output::{
    write_beside, write_beside_to, write_report, write_report_to, write_rule_files_to,
};
use crate::scalars::{LiveScalars, ScalarsAhead, ScalarsBeside, ScalarsSource};

/// Writes the profiling report of the run a `RuleRunner` evaluates, from the runner's own
/// data. Attach it with `RunnerBuilder::reporter`.
#[derive(Clone, Debug)]
pub struct ReportWriter {
    /// The page on local disk; `None`: `run_dir` inside the run, through the run's storage
    /// (local or object store), when the runner writes into the run.
    html: Option<PathBuf>,
    /// Without `html`: the folder inside the run ([`DEFAULT_REPORT_DIR`] unless
    /// [`into_run_folder`](Self::into_run_folder) named another).
    run_dir: String,
    /// With `html`: the folder the rules' JSON files go to, when asked for.
    rule_dir: Option<PathBuf>,
    options: LoadOptions,
    /// Where the run's scalars are taken from ([`scalars_from`](Self::scalars_from)); `None`:
    /// read from the run.
    scalars: Option<Arc<dyn ScalarsSource>>,
    /// The run's scalars read beside the rules: while they step over a finished run
    /// ([`offline_runner`]), or as the runner follows a live one
    /// ([`follow_scalars`](Self::follow_scalars)).
    scalars_beside: Option<Arc<dyn ScalarsBeside>>,
    /// The input [`Reporter::prepare`] built, drawn by [`Reporter::write`].
    prepared: Option<ReportInput>,
}

impl ReportWriter {
    /// The report goes into the run (`<run>/`[`DEFAULT_REPORT_DIR`]`/`[`REPORT_FILE`]) when
    /// the runner writes into the run; otherwise it is not written and `ProfilerReport` says so.
    pub fn into_run() -> ReportWriter {
        ReportWriter {
            html: None,
            run_dir: DEFAULT_REPORT_DIR.to_owned(),
            rule_dir: None,
            options: LoadOptions::default(),
            scalars: None,
            scalars_beside: None,
            prepared: None,
        }
    }

    /// The report goes into the folder `dir` inside the run (`<run>/<dir>/`[`REPORT_FILE`],
    /// each rule's JSON result, the notebook and the rules' summary it reads beside it),
    /// through the run's storage, local or object store: wherever the run is, the report is in
    /// it.
    pub fn into_run_folder(dir: &str) -> ReportWriter {
        ReportWriter {
            run_dir: dir.trim_matches('/').to_owned(),
            ..ReportWriter::into_run()
        }
    }

    /// The report goes into SageMaker's folder layout inside the run:
    /// `<run>/rule-output/ProfilerReport-<timestamp>/profiler-output/` (the timestamp, seconds
    /// since the epoch, is now), with the page, the notebook and each rule's JSON result, through
    /// the run's storage, as SageMaker lays out a training job's rule output.
    pub fn sagemaker_layout() -> ReportWriter {
        ReportWriter::into_run_folder(&sagemaker_report_dir(std::time::SystemTime::now()))
    }

    /// The page goes to `html` on local disk, with its notebook and the rules' summary the
    /// notebook reads beside it, named after the page ([`notebook_name`],
    /// [`rule_summary_name`]: `report.html` → `report.ipynb`, `report.rules.json`); nothing else
    /// is written (see [`rule_files_to`](Self::rule_files_to) for the rules' JSON results).
    pub fn to_file(html: impl Into<PathBuf>) -> ReportWriter {
        ReportWriter {
            html: Some(html.into()),
            ..ReportWriter::into_run()
        }
    }

    /// With [`to_file`](Self::to_file): each rule's JSON result is written into `dir` too
    /// (`<RuleName>.json`). The report inside a run always has them beside its page.
    pub fn rule_files_to(mut self, dir: impl Into<PathBuf>) -> ReportWriter {
        self.rule_dir = Some(dir.into());
        self
    }

    /// The run's scalars are taken from `source`, a reader in the process that follows them
    /// already (the dashboard a `Session` serves: smdebug-serve's `ServedScalars`), instead of
    /// being read from the run again; when the source cannot give them, they are read.
    pub fn scalars_from(mut self, source: impl ScalarsSource + 'static) -> ReportWriter {
        self.scalars = Some(Arc::new(source));
        self
    }

    /// For a runner that follows a live run: the run's scalars are read through `shared`, a
    /// subscription to the [`TensorSource`] the runner's trial reads through
    /// ([`RunnerBuilder::tensor_source`], both subscribed before either reads), on the
    /// runner's own thread after its looks (at most once a second), into fixed-size summaries;
    /// the report takes them and reads nothing of the run again. So a `Session` with rules and
    /// the report reads each index and event file of its run once, dashboard or not.
    pub fn follow_scalars(mut self, shared: TensorSubscription) -> ReportWriter {
        self.scalars_beside = Some(Arc::new(LiveScalars::new(shared)));
        self
    }

    /// Kineto (PyTorch profiler) traces the report adds to its operator sections.
    pub fn traces(mut self, traces: Vec<PathBuf>) -> ReportWriter {
        self.options.traces = traces;
        self
    }
}

impl Reporter for ReportWriter {
    fn prepare(&mut self, run: &RunState<'_>) -> ReportPlan {
        let destination = match (&self.html, run.location) {
            (Some(path), _) => Ok(path.display().to_string()),
            (None, _) if !run.write_into_run => Err(NoDestination::NotWritingIntoRun),
            (None, Location::Local(dir)) => Ok(dir
                .join(&self.run_dir)
                .join(REPORT_FILE)
                .display()
                .to_string()),
            (None, Location::Store { url, .. }) => Ok(format!(
                "{}/{}/{REPORT_FILE}",
                url.trim_end_matches('/'),
                self.run_dir
            )),
        };
        if destination.is_err() {
            return ReportPlan {
                destination,
                problems: Vec::new(),
            };
        }
        let input = ReportInput::from_run(
            run,
            &self.options,
            self.scalars.as_deref(),
            self.scalars_beside.as_deref(),
        );
        // Traces were named by the caller: one that cannot be read is the report's problem
        // (the page is still written, without it, and says why).
        let problems = input
            .trace_failures()
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.prepared = Some(input);
        ReportPlan {
            destination,
            problems,
        }
    }

    /// Reads on the scalars followed beside the runner ([`follow_scalars`](Self::follow_scalars)).
    fn follow(&mut self) {
        if let Some(beside) = &self.scalars_beside {
            beside.keep_up();
        }
    }

    fn write(&mut self, run: &RunState<'_>) -> Result<(), ReportWriteError> {
        let input = self
            .prepared
            .take()
            .unwrap_or_else(|| {
                ReportInput::from_run(
                    run,
                    &self.options,
                    self.scalars.as_deref(),
                    self.scalars_beside.as_deref(),
                )
            })
            .with_rules(run.summary.rules.clone());
        // The rules' statuses the page is drawn from, beside it for the notebook to read.
        let summary = serde_json::to_vec_pretty(run.summary).map_err(ReportWriteError::new)?;
        match &self.html {
            Some(path) => {
                if let Some(dir) = &self.rule_dir {
                    write_rule_files_to(&input, dir).map_err(ReportWriteError::new)?;
                }
                write_report_to(&input, path).map_err(ReportWriteError::new)?;
                let dir = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                let page = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let summary_name = rule_summary_name(&page);
                let notebook = render_notebook(
                    &input,
                    &absolute_location(run.location),
                    &absolute(&dir.join(&summary_name)),
                );
                write_beside_to(dir, &summary_name, summary).map_err(ReportWriteError::new)?;
                write_beside_to(dir, &notebook_name(&page), notebook.into_bytes())
                    .map_err(ReportWriteError::new)?;
            }
            None => {
                let location = absolute_location(run.location);
                let summary_name = rule_summary_name(REPORT_FILE);
                let summary_location = format!(
                    "{}/{}/{summary_name}",
                    location.trim_end_matches('/'),
                    self.run_dir
                );
                let storage = run.storage.as_ref();
                write_report(&input, storage, &format!("{}/{REPORT_FILE}", self.run_dir))
                    .map_err(ReportWriteError::new)?;
                let notebook = render_notebook(&input, &location, &summary_location);
                write_beside(
                    storage,
                    &format!("{}/{summary_name}", self.run_dir),
                    summary,
                )
                .map_err(ReportWriteError::new)?;
                write_beside(
                    storage,
                    &format!("{}/{}", self.run_dir, notebook_name(REPORT_FILE)),
                    notebook.into_bytes(),
                )
                .map_err(ReportWriteError::new)?;
            }
        }
        Ok(())
    }
}

/// A run location as the notebook names it: a local path made absolute (the notebook may be
/// opened from anywhere), an object-store URL as it is.
fn absolute_location(location: &Location) -> String {
    match location {
        Location::Local(dir) => absolute(dir),
        Location::Store { url, .. } => url.clone(),
    }
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The rule runner `builder` for a report written once at the end of an offline evaluation
/// (`smdebug report RUN`), with `writer` as its reporter, reading the run through `storage`:
/// the rules' trial and the report's scalar curves, read on a thread of their own while the
/// rules step over the run, read the run's collections, index and event files through one
/// [`TensorSource`], each file once for both, the curves going no further ahead of the rules
/// than the source holds ([`TensorFollower::read_to_end_paced`]). The profiler data is read
/// once already (the runner's profiler follower is the report's).
///
/// [`TensorFollower::read_to_end_paced`]: smdebug_read::trial::TensorFollower::read_to_end_paced
pub fn offline_runner(
    builder: RunnerBuilder,
    writer: ReportWriter,
    storage: Arc<dyn Storage>,
) -> RunnerBuilder {
    let source = TensorSource::new(Arc::clone(&storage));
    // Both subscribe before either reads: a late subscriber reads what came before it again.
    let (for_rules, for_scalars) = (source.subscribe(), source.subscribe());
    let writer = ReportWriter {
        scalars_beside: Some(Arc::new(ScalarsAhead::start(for_scalars))),
        ..writer
    };
    builder
        .storage(storage)
        .tensor_source(for_rules)
        .reporter(writer)
}
