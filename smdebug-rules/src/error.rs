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
        /// The name asked for.
        name: String,
        /// The built-in rules' names.
        available: Vec<String>,
    },

    /// A parameter the rule does not have.
    #[error("rule {rule}: unknown parameter `{param}` (its parameters: {})", .expected.join(", "))]
    UnknownParameter {
        /// The rule's name.
        rule: String,
        /// The parameter's name.
        param: String,
        /// The parameters the rule has.
        expected: Vec<String>,
    },

    /// A parameter whose value has the wrong type or is out of range.
    #[error("rule {rule}: parameter `{param}`: {reason}")]
    BadParameter {
        /// The rule's name.
        rule: String,
        /// The parameter's name.
        param: String,
        /// What is wrong.
        reason: String,
    },

    /// A rule specification (`NAME:param=value,...` or JSON) that cannot be parsed.
    #[error("bad rule specification `{spec}`: {reason}")]
    BadSpec {
        /// The specification as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },

    /// A regular expression parameter that does not compile.
    #[error("rule {rule}: bad regex `{pattern}`: {reason}")]
    BadRegex {
        /// The rule's name.
        rule: String,
        /// The regex as given.
        pattern: String,
        /// What is wrong.
        reason: String,
    },

    /// A rule given to a runner that cannot be registered (no name).
    #[error("rule `{rule}`: {reason}")]
    BadRule {
        /// The rule's name.
        rule: String,
        /// What is wrong.
        reason: String,
    },

    /// A rule asks for a capture no hook can make (a pattern that does not compile, a schedule
    /// that ends before it starts).
    #[error("rule {rule}: bad capture request: {source}")]
    Capture {
        /// The rule's name.
        rule: String,
        /// What the hook's configuration said.
        #[source]
        source: smdebug_core::Error,
    },

    /// The run could not be opened (missing, unreachable, not an smdebug run).
    #[error("cannot open run `{location}`: {source}")]
    OpenRun {
        /// The run's location.
        location: String,
        /// The reader's or the store's error.
        #[source]
        source: Box<smdebug_read::Error>,
    },

    /// Reading the run failed while a rule was evaluated (corrupt file, storage error, …).
    #[error("rule {rule} at step {step}: {source}")]
    Read {
        /// The rule's name.
        rule: String,
        /// The step being evaluated.
        step: u64,
        /// The reader's or the store's error.
        #[source]
        source: Box<smdebug_read::Error>,
    },

    /// One record a rule reads could not be read (a checksum that does not match, a record
    /// over the reader's budget, …: [`smdebug_read::Error::is_unreadable_record`]). While a
    /// runner invokes the rule, the reading helpers ([`TensorSelection`](crate::TensorSelection),
    /// [`value_at`](crate::value_at), …) leave such a record out as a tensor not saved at that
    /// step and the runner lists it in the rule's status; this error is what they return
    /// outside a runner. A rule that returns it (or an [`Error::Read`] of that kind) anyway
    /// does not end: that step goes unjudged, the record is listed, and the rule judges the
    /// other steps.
    #[error("rule {rule} at step {step}: `{tensor}` is unreadable: {source}")]
    Unreadable {
        /// The rule's name.
        rule: String,
        /// The step being evaluated.
        step: u64,
        /// The tensor whose record could not be read.
        tensor: String,
        /// The reader's error, naming the file and the byte offset.
        #[source]
        source: Box<smdebug_read::Error>,
    },

    /// A rule reported a failure of its own (inputs that contradict each other, a user rule's
    /// own error): what went wrong is the source, a message (`"cannot go on".into()`) or the
    /// rule's own error.
    #[error("rule {rule} at step {step}: {source}")]
    Rule {
        /// The rule's name.
        rule: String,
        /// The step being evaluated.
        step: u64,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// An action could not be carried out (server unreachable, command failed, …).
    #[error("action `{action}` of rule {rule} failed: {reason}")]
    Action {
        /// The rule's name.
        rule: String,
        /// The action's type.
        action: String,
        /// What is wrong.
        reason: String,
    },

    /// An action whose cargo feature this build leaves out (`webhook`, `email`).
    #[error(
        "the {action} action needs smdebug-rules' `{feature}` feature, which this build leaves \
         out (enable it: smdebug-rules = {{ features = [\"{feature}\"] }}; the smdebug command \
         has it)"
    )]
    ActionNotCompiled {
        /// The action's type (`webhook`, `email`).
        action: String,
        /// smdebug-rules' feature that compiles it in.
        feature: &'static str,
    },

    /// An action's configuration is incomplete or invalid.
    #[error("bad action configuration `{action}`: {reason}")]
    BadAction {
        /// The action's type.
        action: String,
        /// What is wrong.
        reason: String,
    },

    /// Reading or writing a file in the run directory (stop request, rule summary) failed.
    #[error("{location}: {op} `{path}` failed: {source}")]
    Store {
        /// The run's location.
        location: String,
        /// What was done (`read`, `write`, ...).
        op: &'static str,
        /// The file.
        path: String,
        /// The reader's or the store's error.
        #[source]
        source: Box<smdebug_read::Error>,
    },

    /// A file the rules crate owns (stop request, summary) holds something unexpected.
    #[error("{path}: {reason}")]
    BadFile {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// The runner's thread could not be started.
    #[error("runner: cannot start the runner thread: {0}")]
    RunnerThread(#[source] std::io::Error),

    /// The runner's thread panicked: its statuses are lost.
    #[error("runner: the runner thread panicked")]
    RunnerPanicked,

    /// The runner's thread was already waited for.
    #[error("runner: the runner was already joined")]
    RunnerJoined,
}

/// `Result` with smdebug-rules' [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A run location given as text that names none (`s3:/bucket`): the run cannot be opened,
    /// named as given.
    pub(crate) fn unparsed_location(e: smdebug_storage::Error) -> Error {
        let location = match &e {
            smdebug_storage::Error::InvalidLocation { location, .. } => location.clone(),
            _ => String::new(),
        };
        Error::OpenRun {
            location,
            source: Box::new(e.into()),
        }
    }
}

/// True for reader errors that mean "this tensor is not there at this step (yet)": a rule treats
/// them as "nothing to check", as Python smdebug's rule invoker does with
/// `TensorUnavailableForStep` (which its Trial also raises for a tensor saved only as
/// reductions: `OnlyReductionsSaved` here), and a step that is not (yet) there
/// (`StepUnavailable`, `StepNotYetAvailable`: an offline evaluation of a run that has not ended
/// reads its incomplete steps too). A string tensor (`StringTensor`: XGBoost's text columns)
/// has no numbers for a rule to check either.
pub(crate) fn is_absent(e: &smdebug_read::Error) -> bool {
    matches!(
        e,
        smdebug_read::Error::TensorNotFound { .. }
            | smdebug_read::Error::StepNotAvailable { .. }
            | smdebug_read::Error::StepUnavailable { .. }
            | smdebug_read::Error::StepNotYetAvailable { .. }
            | smdebug_read::Error::WorkerNotFound { .. }
            | smdebug_read::Error::ReductionNotSaved { .. }
            | smdebug_read::Error::OnlyReductionsSaved { .. }
            | smdebug_read::Error::Format(smdebug_format::Error::StringTensor { .. })
            | smdebug_read::Error::CollectionNotFound { .. }
    )
}

/// Why a [`Reporter`](crate::Reporter) could not write its report: the writer's own error,
/// kept as its source.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ReportWriteError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl ReportWriteError {
    /// Wraps the writer's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> ReportWriteError {
        ReportWriteError(Box::new(error))
    }
}
