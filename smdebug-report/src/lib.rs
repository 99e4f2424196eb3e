//! # smdebug-report
//!
//! The profiling report: one self-contained HTML page per run, and one JSON result per rule.
//!
//! **From the rule runner.** A [`ReportWriter`] attached to a `RuleRunner`
//! ([`RunnerBuilder::reporter`](smdebug_rules::runner::RunnerBuilder::reporter)) draws the page
//! from what the runner already holds: every rule's status with the parameters in force, the
//! system metrics and spans its profiler feed read, and its trial for the scalar curves. The
//! run is not read a second time.
//!
//! ```no_run
//! use smdebug_report::ReportWriter;
//! use smdebug_rules::{RuleRunner, RuleSpec};
//!
//! let summary = RuleRunner::builder("/tmp/run")
//!     .spec(RuleSpec::parse("ProfilerReport:CPUBottleneck_cpu_threshold=80").unwrap())
//!     .reporter(ReportWriter::to_file("/tmp/run-report/profiler-report.html"))
//!     .build()?
//!     .run_offline()?;
//! println!("{}", summary.rule("ProfilerReport").unwrap().message);
//! # Ok::<(), smdebug_rules::Error>(())
//! ```
//!
//! **From a follower.** [`ReportInput::from_followed`] draws from what a smdebug-profiler
//! `ProfilerFollower` gathered ([`FollowedRun`]): the dashboard's "Download report" uses the
//! state its follower holds, without reading the run again.
//!
//! **By itself.** [`ReportInput::load`] reads a run through smdebug-io's `Storage` (a local
//! path or an object-store URL), in one full pass of a `ProfilerFollower`: system metrics and framework spans (files of smdebug-profiler
//! or of Python smdebug / SageMaker Debugger), code profiles (smdebug-profiler's sampled CPU
//! stacks under `framework/code/`), scalar tensors per mode through the `Trial` (the
//! `losses` and `metrics` collections and any other tensor saved as a single value), and Kineto
//! traces named in [`LoadOptions::traces`]. Rule statuses come in through
//! [`ReportInput::with_rules`]. Loading never fails as a whole: a missing folder, a corrupt
//! metrics line, an unreadable trace or a run still being written becomes a [`Note`] that the
//! report shows where the data would have been.
//!
//! **Output.** [`render_html`] returns the page; [`write_report`] writes it and the rule
//! results through a `Storage` (each `put` is atomic, so a report regenerated while the job runs
//! is never seen half-written), as the report inside a run has them:
//!
//! ```text
//! <dir>/<report>.html       the page
//! <dir>/<RuleName>.json     one per rule: a RuleFile
//! ```
//!
//! [`write_report_to`] writes the page alone to a local file, and [`write_rule_files_to`] the
//! rule results into a local folder: a file named by the caller is the only thing written.
//!
//! **The notebook.** A [`ReportWriter`] also writes, beside the page, the notebook
//! `profiler-report.ipynb` ([`render_notebook`]; beside a page of another name, that name with
//! `.ipynb`) and the rules' summary the page was drawn from (`profiler-report.rules.json`,
//! the runner's `rule_job_summary.json` form), which the notebook reads. It is a Jupyter
//! notebook (nbformat 4) whose cells read the run again with the Python package `smdebug_rs`
//! (`smdebug_rs.profiler.system_metrics`/`framework_spans`, `smdebug_rs.rules.read_summary`)
//! and draw the page's figures with pandas and matplotlib: the rules' findings, the job's
//! phases, the step statistics, the system usage, forward against backward, GPU memory per GPU
//! and data loading; its last cell prints them as JSON (smdebug-py's
//! `tests/test_report_notebook.py` executes it with nbclient and compares them with the page).
//!
//! **SageMaker's folder layout.** [`ReportWriter::sagemaker_layout`] writes the report into
//! `<run>/rule-output/ProfilerReport-<timestamp>/profiler-output/`, where SageMaker keeps a
//! training job's profiler report.
//!
//! **The page.** The sections of [`SECTIONS`], in that order, each a
//! `<section id="…" class="report-section">`; a section without data says what is missing in a
//! `<p class="missing">`. Charts are inline SVG drawn with plotters (no font files needed), each
//! in a `<figure class="chart">`. A code profile's flame graph is the SVG written into the run,
//! embedded as a `data:` image (`<img>` in a `<figure class="flamegraph">`): an image's script
//! never runs, so a flame graph from a hostile run cannot act on the page. A system series or a worker's step durations are held as
//! at most 400 time slices (smdebug-profiler's `digest::Line`, slices merging as the run grows),
//! drawn as the slice means with a band from each slice's lowest to highest value; a scalar
//! curve longer than 400 points is cut the same way.
//! Every string from the data is HTML-escaped. The page loads nothing: its
//! Content-Security-Policy forbids every source except inline style and script and `data:`
//! images, and it names no URL other than the SVG/XHTML namespaces. A small inline script
//! checks the page once loaded and stores the result in `document.body.dataset.selfcheck`
//! (JSON: `sections`, `section_ids`, `charts`, `charts_drawn`, `empty_charts`, `errors`,
//! `csp_violations`), so a headless browser's `--dump-dom` shows whether it rendered.
//!
//! **Figures.** The page draws from a [`ProfileDigest`]: smdebug-profiler's aggregate of the
//! system metrics and spans, built as they are read, whose size does not grow with the run
//! (the runner's reporter, [`ReportInput::load`] in one streaming pass and the dashboard's
//! download all fill one). Counts, sums, means, deviations, minima and maxima are exact; a
//! percentile pN is the value at rank round(N% · (count − 1)) within 0.99 %
//! (`smdebug_analysis::stats::SKETCH_RELATIVE_ERROR`, a quantile sketch), as the tables say;
//! the GPU workload histograms are exact (1 % bins), the step and data-loading histograms are
//! counted from the sketch (a value within 0.99 % of a bin edge may land beside it), as their
//! captions say. Step durations are drawn per node and worker (one worker per GPU in
//! data-parallel jobs).
//! **One verdict:** a section about a rule (CPU and I/O bottlenecks, step outliers, load
//! balancing, GPU utilization, batch size, GPU memory growth, data-loading workers, the
//! initialization time) shows that rule's own evidence, its typed
//! [`Details`](smdebug_rules::profiler::Details) as recorded in its status: the bottleneck
//! counts are the rule's 20 ms snapshots, the circles on a chart are the snapshots or steps the
//! rule judged (the figure's `data-marked` gives their count), the distances between GPUs, the
//! batch-size p95s, the memory averages and rises, the worker count against the cores and the
//! initialization are the rule's. The page judges nothing itself: without the rule's result a section says so and draws
//! the recorded data only. Every threshold a figure names is the parameter of the rule, as that
//! rule ran (`ProfilerReport:CPUBottleneck_cpu_threshold=80`), or the rule's default when it did
//! not run. Summaries and histograms are `smdebug_analysis::stats`', the code the rules use.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod charts;
mod html;
mod input;
mod load;
mod notebook;
mod output;
mod render;
mod rule_file;
mod scalars;
mod stats;
mod writer;

pub use input::{
    CODE_PROFILE_WINDOWS_SHOWN, CodeProfile, LoadOptions, Note, NoteArea, ReportInput, SECTIONS,
    ScalarSeries,
};
pub use load::FollowedRun;
pub use notebook::{NOTEBOOK_FILE, notebook_name, render_notebook, rule_summary_name};
pub use output::{
    ReportError, WrittenReport, rule_file_name, safe_file_stem, write_report, write_report_to,
    write_rule_files, write_rule_files_to,
};
pub use render::render_html;
pub use rule_file::RuleFile;
pub use scalars::{FollowedScalars, SCALAR_POINTS, ScalarsSource};
pub use smdebug_analysis::digest::{ProfileDigest, SeriesDigest};
pub use smdebug_read::RankSummary;
pub use smdebug_read::profile::Span;
pub use writer::{ReportWriter, offline_runner};
