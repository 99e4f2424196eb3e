//! The one error type of the `smdebug` crate.

/// Why a session could not start, or what failed while it finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The capture configuration is wrong (a bad regex, an inconsistent schedule, a worker rank
    /// outside the job).
    #[error("capture configuration: {0}")]
    Config(#[from] smdebug_core::Error),
    /// The run's storage or a reader or writer of it failed.
    #[error(transparent)]
    Io(#[from] smdebug_io::Error),
    /// The system sampler or the span writer failed.
    #[error(transparent)]
    Profiler(#[from] smdebug_profiler::ProfilerError),
    /// A rule, its parameters or its actions are wrong, or the rule runner failed.
    #[cfg(feature = "rules")]
    #[error(transparent)]
    Rules(#[from] smdebug_rules::Error),
    /// The dashboard could not start.
    #[cfg(feature = "serve")]
    #[error(transparent)]
    Serve(#[from] smdebug_serve::ServeError),
    /// The framework adapter failed to save what its probes kept, or to build its hook.
    #[error("capture: {0}")]
    Capture(Box<dyn std::error::Error + Send + Sync>),
    /// The location holds a run that ended (its end marker is there): a new job would mix its
    /// steps with the old one's. Python smdebug refuses it too.
    #[error(
        "{location} holds a run that ended already: choose another location, or replace it \
         with SessionBuilder::overwrite(true)"
    )]
    RunExists {
        /// The location.
        location: String,
    },
    /// A part of the session could not be started.
    #[error("cannot start {part}: {reason}")]
    Start {
        /// Which part (`the stop watcher`, `the rule runner`, ...).
        part: &'static str,
        /// Why.
        reason: String,
    },
}

/// A result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
