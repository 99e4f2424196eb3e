//! Where a rule stands: the status names a summary, an event and a rule's log use. A leaf
//! module, so that the actions (which tell a status change) and the statuses (whose rules name
//! their actions) both import it.

use serde::{Deserialize, Serialize};

/// Where a rule stands (SageMaker's `RuleEvaluationStatus`, and `NoData`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Status {
    /// The run goes on and the rule has not fired (whether or not it checked anything yet).
    InProgress,
    /// The run is over (or the offline evaluation finished), the rule checked something and
    /// never fired.
    NoIssuesFound,
    /// The rule fired at least once.
    IssuesFound,
    /// The run is over (or the offline evaluation finished) and the rule checked nothing: no
    /// tensor matched its selection, the run has no GPU metrics, no step was saved. Not a
    /// pass: the status's `message` says why (see [`RuleStatus::message`](crate::status::RuleStatus::message)).
    NoData,
    /// The rule failed (a read error, a bad configuration found at run time); it is no longer
    /// evaluated. The other rules go on.
    Error,
}

impl Status {
    /// Every status, in the order above.
    pub const ALL: [Status; 5] = [
        Status::InProgress,
        Status::NoIssuesFound,
        Status::IssuesFound,
        Status::NoData,
        Status::Error,
    ];

    /// The status's name, as the summary file writes it (`IssuesFound`, …).
    pub fn name(self) -> &'static str {
        match self {
            Status::InProgress => "InProgress",
            Status::NoIssuesFound => "NoIssuesFound",
            Status::IssuesFound => "IssuesFound",
            Status::NoData => "NoData",
            Status::Error => "Error",
        }
    }

    /// What the status means, in a few words for people (`no data: nothing to check`).
    pub fn meaning(self) -> &'static str {
        match self {
            Status::InProgress => "in progress",
            Status::NoIssuesFound => "checked, no issues found",
            Status::IssuesFound => "issues found",
            Status::NoData => "no data: nothing to check",
            Status::Error => "the rule failed",
        }
    }
}
