//! # smdebug-rules
//!
//! Rules that check a run while it trains or after it ended, and the actions they trigger — the
//! Rust counterpart of SageMaker Debugger's rules.
//!
//! - [`TensorRule`]: the trait every debugging rule implements (built-in or custom): what it
//!   [`needs`](TensorRule::needs) (the tensors it reads and what the hook must save for it) and
//!   `invoke_at_step(trial, step) -> RuleResult`; [`ProfilerRule`]: the same for profiler rules,
//!   with its [`needs`](ProfilerRule::needs) (system metrics, framework spans, the step
//!   timeline: [`ProfilerNeeds`]) and `invoke_on_window`. Both are registered as a [`Rule`];
//!   what a rule consumes is part of its trait, so a rule that leaves it out does not compile,
//!   and a declaration that reads nothing is refused at registration ([`Rule::validate`]). A
//!   rule reports a finding by returning a fired result, never by panicking or returning an
//!   error.
//! - The twenty built-in debugging rules ([`rules`]) and eleven profiler rules ([`profiler`]:
//!   CPUBottleneck, LowGPUUtilization, StepOutlier, ...) with SageMaker's names, parameters and
//!   defaults, buildable from code, JSON or the command-line form `NAME:param=value,...`
//!   ([`RuleSpec`], [`build_rule`]). Profiler rules read the system metrics and framework spans
//!   of `smdebug-profiler` and implement [`ProfilerRule::invoke_on_window`].
//! - Rules ask for what they need ([`capture`]): [`capture_requests`] gives what a training
//!   job's hook must save for a set of rules (SageMaker's `collections_to_save`), which
//!   `smdebug_core::HookConfig::apply` (or `HookBuilder::capture`) adds to the hook's
//!   configuration, saving each collection at the union of the user's and the rules' steps.
//! - [`RuleRunner`]: evaluates rules over a finished run or follows a live one on its own thread
//!   (or in its own process, through the CLI), keeps a [`RuleStatus`] per rule and writes
//!   `<run>/rules/rule_job_summary.json` as the run progresses. A rule that checked nothing
//!   over a finished run is [`Status::NoData`], with the reason (no tensor matched its
//!   selection, no GPU metrics in the run, ...), never `NoIssuesFound`.
//! - [`actions`]: stop training, command, and behind cargo features (off by default, so that
//!   this crate compiles no HTTP client or mail stack unless asked) webhook (Slack-compatible
//!   JSON; feature `webhook`) and e-mail over SMTP (feature `email`; `notify` for both).
//!   Stopping a job in another process goes through the run directory: the runner writes
//!   `<run>/stop_request.json`; a [`smdebug_io::stop::StopWatcher`] in the training process sets the hook's
//!   stop signal, and the loop sees it at its next step.
//!
//! ```no_run
//! use smdebug_rules::{ActionConfig, RuleRunner, RuleSpec};
//!
//! // Follow a live run; stop it if the loss stops decreasing.
//! let handle = RuleRunner::builder("/tmp/run")
//!     .spec(RuleSpec::parse("LossNotDecreasing:num_steps=20").unwrap()
//!         .action(ActionConfig::StopTraining))
//!     .spec(RuleSpec::parse("ExplodingTensor").unwrap())
//!     .build()
//!     .unwrap()
//!     .spawn()
//!     .unwrap();
//! let summary = handle.join().unwrap();
//! println!("{}", serde_json::to_string_pretty(&summary).unwrap());
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actions;
pub mod capture;
pub mod error;
mod evidence;
mod needs;
pub mod params;
pub mod profiler;
pub mod recorded;
pub mod registry;
pub mod report;
pub mod rule;
pub mod rules;
pub mod runner;
pub mod select;
mod state;
pub mod status;
mod unreadable;
pub mod window;

pub use actions::{ActionConfig, StatusChange, Trigger};
pub use capture::{RULE_SAVE_INTERVAL, capture_requests, rules_capture_requests};
pub use error::{Error, ReportWriteError, Result};
pub use params::RuleSpec;
pub use recorded::{DecodeError, Parameters, ReportDetails, RuleDetails};
pub use registry::{
    BuiltinParams, BuiltinRule, RuleParams, all_builtin_rules, build_rule, builtin_profiler_rules,
    builtin_rules, find_builtin,
};
pub use rule::{
    Evidence, LookBack, Needs, ProfilerInput, ProfilerNeeds, ProfilerRule, Rule, RuleInput,
    RuleResult, TensorRule,
};
pub use runner::{
    NoDestination, ReportPlan, Reporter, RuleRunner, RunState, RunnerHandle, RunnerWaker,
};
pub use select::{TensorSelection, value_at, values_of_step};
pub use smdebug_core::CaptureRequest;
pub use status::{
    MAX_LISTED_UNREADABLE, RuleStatus, Status, Summary, read_summary, read_summary_from,
};
pub use window::{JudgedWindow, ProfilerWindow, StepRef, StepTimeline};

/// What [`rule_identity!`] expands to names, so that a crate using the macro needs no
/// `serde_json` in scope.
#[doc(hidden)]
pub mod __private {
    pub use serde_json::{Map, Value};
}
