//! The rule runner: evaluates rules over a finished run, or follows a live run in its own
//! thread (or process), keeps a status per rule, triggers actions and writes a JSON summary
//! into the run (`rules/rule_job_summary.json`) unless told not to write into the run
//! ([`RunnerBuilder::write_into_run`]).
//!
//! Debugging rules are evaluated step by step over the trial's tensors. Profiler rules are fed
//! the run's system metrics and framework spans: offline in windows of 60 s of job time,
//! following a live run as the sampler and the span writer publish them (see
//! [`crate::profiler`]). A run may hold only profiler data (no tensors at all); then only the
//! profiler rules have something to check.
//!
//! A rule that never fired ends in `NoIssuesFound` when it checked something, and in `NoData`
//! (with the reason in its message) when it checked nothing, once the run is over or the
//! offline evaluation finished ([`crate::status`]). `ProfilerReport`'s status sums up its
//! profiler rules': `IssuesFound` when one of them found issues, `Error` when one failed.
//!
//! ```no_run
//! use smdebug_rules::{RuleRunner, RuleSpec};
//!
//! let mut runner = RuleRunner::builder("/tmp/my_run")
//!     .spec(RuleSpec::parse("VanishingGradient").unwrap())
//!     .spec(RuleSpec::parse("LossNotDecreasing:num_steps=20").unwrap())
//!     .build()
//!     .unwrap();
//! let summary = runner.run_offline().unwrap();
//! for rule in &summary.rules {
//!     println!("{}: {:?} {}", rule.rule, rule.status, rule.message);
//! }
//! ```

//!
//! The runner is split by concern, each part owning its state:
//!
//! - `builder`: [`RunnerBuilder`], the rules checked and put together;
//! - `run`: the run as read (storage, trial, end marker, when data last arrived);
//! - `evaluation`: one slot per rule, debugging rules stepped over the trial, profiler rules'
//!   results recorded, the verdicts at the end;
//! - `feeding`: the profiler data read and cut into windows for the profiler rules;
//! - `actions`: a rule's actions carried out once at its first firing, or at every status
//!   change;
//! - `trail`: each rule's status as it changes: its log in the run (`rules/<Rule>/log`) and
//!   status lines for the training log ([`StatusLines`]);
//! - `persistence`: the summary published and stored, the report ([`Reporter`], [`RunState`]);
//! - `engine`: [`RuleRunner`], holding those parts; the offline evaluation;
//! - `threads`: the follow loop, [`RuleRunner::spawn`] and [`RunnerHandle`].

mod actions;
mod builder;
mod engine;
mod evaluation;
mod feeding;
mod persistence;
mod run;
mod threads;
mod trail;

pub use crate::status::{RuleStatus, SUMMARY_FILE, Status, Summary, read_summary};
pub use builder::RunnerBuilder;
pub use engine::RuleRunner;
pub use persistence::{NoDestination, ReportPlan, Reporter, RunState};
pub use smdebug_format::layout::rule_log_file;
pub use threads::{RunnerHandle, RunnerWaker};
pub use trail::StatusLines;
