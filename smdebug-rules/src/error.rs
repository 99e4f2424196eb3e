//! The one error type of smdebug-rules.
//!
//! A rule whose condition is present does not return an error: it returns a fired
//! [`RuleResult`](crate::RuleResult). Errors are for bad input (an unknown rule, a parameter of
//! the wrong type, a regex that does not compile, a run that is not there) and for failures
//! (a corrupt file, a store that cannot be reached, an action that could not be carried out).

/// Errors from rule construction, rule evaluation, the runner and actions.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No built-in rule has this name.
    #[error("unknown rule `{name}` (built-in rules: {})", .available.join(", "))]
    UnknownRule {
        name: String,
        available: Vec<String>,
    },

    /// A parameter the rule does not have.
    #[error("rule {rule}: unknown parameter `{param}` (its parameters: {})", .expected.join(", "))]
    UnknownParameter {
        rule: String,
        param: String,
        expected: Vec<String>,
    },

    /// A parameter whose value has the wrong type or is out of range.
    #[error("rule {rule}: parameter `{param}`: {reason}")]
    BadParameter {
        rule: String,
        param: String,
        reason: String,
    },

    /// A rule specification (`NAME:param=value,...` or JSON) that cannot be parsed.
    #[error("bad rule specification `{spec}`: {reason}")]
    BadSpec { spec: String, reason: String },

    /// A regular expression parameter that does not compile.
    #[error("rule {rule}: bad regex `{pattern}`: {reason}")]
    BadRegex {
        rule: String,
        pattern: String,
        reason: String,
    },

    /// The run could not be opened (missing, unreachable, not an smdebug run).
    #[error("cannot open run `{location}`: {source}")]
    OpenRun {
        location: String,
        #[source]
        source: Box<smdebug_io::Error>,
    },

    /// Reading the run failed while a rule was evaluated (corrupt file, storage error, …).
    #[error("rule {rule} at step {step}: {source}")]
    Read {
        rule: String,
        step: u64,
        #[source]
        source: Box<smdebug_io::Error>,
    },

    /// A custom rule reported a failure of its own.
    #[error("rule {rule} at step {step}: {reason}")]
    Rule {
        rule: String,
        step: u64,
        reason: String,
    },

    /// An action could not be carried out (server unreachable, command failed, …).
    #[error("action `{action}` of rule {rule} failed: {reason}")]
    Action {
        rule: String,
        action: String,
        reason: String,
    },

    /// An action's configuration is incomplete or invalid.
    #[error("bad action configuration `{action}`: {reason}")]
    BadAction { action: String, reason: String },

    /// Reading or writing a file in the run directory (stop request, rule summary) failed.
    #[error("{location}: {op} `{path}` failed: {source}")]
    Store {
        location: String,
        op: &'static str,
        path: String,
        #[source]
        source: Box<smdebug_io::Error>,
    },

    /// A file the rules crate owns (stop request, summary) holds something unexpected.
    #[error("{path}: {reason}")]
    BadFile { path: String, reason: String },

    /// The runner's thread could not be started or panicked.
    #[error("runner: {0}")]
    Runner(String),
}

/// `Result` with smdebug-rules' [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// True for reader errors that mean "this tensor is not there at this step (yet)": a rule treats
/// them as "nothing to check", as Python smdebug's rule invoker does with
/// `TensorUnavailableForStep` (which its Trial also raises for a tensor saved only as
/// reductions: `OnlyReductionsSaved` here). A tensor of a dtype the reader has no type for
/// (`UnsupportedDtype`: XGBoost's string columns) has no numbers for a rule to check either.
pub(crate) fn is_absent(e: &smdebug_io::Error) -> bool {
    matches!(
        e,
        smdebug_io::Error::TensorNotFound { .. }
            | smdebug_io::Error::StepNotAvailable { .. }
            | smdebug_io::Error::WorkerNotFound { .. }
            | smdebug_io::Error::ReductionNotSaved { .. }
            | smdebug_io::Error::OnlyReductionsSaved { .. }
            | smdebug_io::Error::UnsupportedDtype { .. }
            | smdebug_io::Error::CollectionNotFound { .. }
    )
}
