//! The one error type of the `smdebug` crate.

/// Why a session could not start, or what failed while it finished.
///
/// Its `Debug` form is its message and the chain of causes, so that `fn main() -> Result<(),
/// smdebug::Error>` prints what went wrong in words.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Something the session was asked to do needs a cargo feature of this crate that the build
    /// leaves out: an object store (`s3`, `gcs`, `azure`, `http`) or a notifying action
    /// (`notify`).
    #[error(
        "{what} needs the smdebug crate's `{feature}` feature, which this build leaves out \
         (enable it: smdebug = {{ version = \"0.1\", features = [\"{feature}\"] }})"
    )]
    FeatureMissing {
        /// What needs it (`opening s3://bucket/run (Amazon S3)`, `the webhook action`).
        what: String,
        /// This crate's feature.
        feature: &'static str,
    },
    /// The capture configuration is wrong (a bad regex, an inconsistent schedule, a worker rank
    /// outside the job).
    #[error("capture configuration: {0}")]
    Config(#[from] smdebug_core::Error),
    /// The run's storage or a reader or writer of it failed.
    #[error(transparent)]
    Io(Box<smdebug_io::Error>),
    /// The system sampler or the span writer failed.
    #[error(transparent)]
    Profiler(Box<smdebug_profiler::ProfilerError>),
    /// A rule, its parameters or its actions are wrong, or the rule runner failed.
    #[cfg(feature = "rules")]
    #[error(transparent)]
    Rules(Box<smdebug_rules::Error>),
    /// The dashboard could not start.
    #[cfg(feature = "serve")]
    #[error(transparent)]
    Serve(Box<smdebug_serve::ServeError>),
    /// The framework adapter failed to save what its probes kept, or to build its hook.
    #[error("capture: {0}")]
    Capture(Box<dyn std::error::Error + Send + Sync>),
    /// The location holds a run that ended (its end marker is there): a new job would mix its
    /// steps with the old one's. Python smdebug refuses it too.
    #[error(
        "{location} holds a run that ended already ({extent}): choose another location, or \
         replace it with SessionBuilder::overwrite(true)"
    )]
    RunExists {
        /// The location.
        location: String,
        /// What the run holds: steps, workers, files, the job that wrote it.
        extent: String,
    },
    /// A part of the session could not be started.
    #[error("cannot start {part}: {reason}")]
    Start {
        /// Which part (`the stop watcher`, `the rule runner`, ...).
        part: &'static str,
        /// Why.
        reason: String,
    },
    /// The run's location does not take writes (a missing bucket, denied credentials, a
    /// read-only or full disk, an unreachable store): `start` stores a small probe first.
    #[error("the run's location {location} cannot be written: {source}")]
    NotWritable {
        /// The location.
        location: String,
        /// The storage's own error.
        source: Box<smdebug_io::Error>,
    },
    /// Storage failed during the run: [`Session::finish`](crate::Session::finish) names what
    /// was not stored; the summary has every figure (each counts what storage acknowledged).
    #[error("{}", lost_message(.0))]
    Lost(Box<crate::SessionSummary>),
}

impl Error {
    /// The session's summary, when [`Session::finish`](crate::Session::finish) failed because
    /// storage did ([`Error::Lost`]).
    pub fn summary(&self) -> Option<&crate::SessionSummary> {
        match self {
            Error::Lost(summary) => Some(summary),
            _ => None,
        }
    }
}

fn lost_message(summary: &crate::SessionSummary) -> String {
    let mut text = format!(
        "storage failed during the run at {}; not stored: {}",
        summary.location,
        summary.lost.join("; ")
    );
    if let Some(first) = summary.problems.first() {
        text.push_str(&format!(" (first problem: {first})"));
    }
    text
}

/// A result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The errors of the crates underneath, kept boxed so that a `Result` of this crate stays small.
macro_rules! boxed_from {
    ($($(#[$cfg:meta])? $variant:ident($source:ty)),* $(,)?) => {
        $(
            $(#[$cfg])?
            impl From<$source> for Error {
                fn from(e: $source) -> Self {
                    Error::$variant(Box::new(e))
                }
            }
        )*
    };
}

boxed_from!(
    Profiler(smdebug_profiler::ProfilerError),
    #[cfg(feature = "serve")]
    Serve(smdebug_serve::ServeError),
);

/// The facade's feature that brings in smdebug-storage's object-store feature `io_feature`.
fn store_feature(io_feature: &str) -> &'static str {
    match io_feature {
        "aws" => "s3",
        "gcp" => "gcs",
        "azure" => "azure",
        "memory" => "memory",
        _ => "http",
    }
}

impl From<smdebug_io::Error> for Error {
    fn from(e: smdebug_io::Error) -> Self {
        match e {
            // In the facade's words: its users enable `smdebug`'s features, not smdebug-storage's.
            smdebug_io::Error::Storage(smdebug_storage::Error::BackendNotCompiled {
                location,
                backend,
                feature,
            }) => Error::FeatureMissing {
                what: format!("opening `{location}` ({backend})"),
                feature: store_feature(feature),
            },
            e => Error::Io(Box::new(e)),
        }
    }
}

/// Storage's errors are smdebug-io's (`smdebug_io::Error::Storage`), in the facade's words where
/// they name a cargo feature.
impl From<smdebug_storage::Error> for Error {
    fn from(e: smdebug_storage::Error) -> Self {
        Error::from(smdebug_io::Error::from(e))
    }
}

#[cfg(feature = "rules")]
impl From<smdebug_rules::Error> for Error {
    fn from(e: smdebug_rules::Error) -> Self {
        match e {
            smdebug_rules::Error::ActionNotCompiled { action, feature } => Error::FeatureMissing {
                what: format!("the {action} action"),
                feature: if feature == "sns" { "sns" } else { "notify" },
            },
            smdebug_rules::Error::OpenRun { location, source } => match *source {
                smdebug_read::Error::Storage(
                    e @ smdebug_storage::Error::BackendNotCompiled { .. },
                ) => Error::from(e),
                source => Error::Rules(Box::new(smdebug_rules::Error::OpenRun {
                    location,
                    source: Box::new(source),
                })),
            },
            e => Error::Rules(Box::new(e)),
        }
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            write!(f, "\n  caused by: {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_out_backend_names_the_facade_feature() {
        for (io_feature, backend, feature) in [
            ("aws", "Amazon S3", "s3"),
            ("gcp", "Google Cloud Storage", "gcs"),
            ("azure", "Azure Blob Storage", "azure"),
            ("http", "HTTP", "http"),
            ("memory", "the in-process memory store", "memory"),
        ] {
            let e = Error::from(smdebug_storage::Error::BackendNotCompiled {
                location: "s3://bucket/run".into(),
                backend,
                feature: io_feature,
            });
            let text = e.to_string();
            assert!(
                matches!(e, Error::FeatureMissing { feature: f, .. } if f == feature),
                "{text}"
            );
            assert!(
                text.contains(&format!("features = [\"{feature}\"]"))
                    && text.contains("smdebug = {")
                    && !text.contains("smdebug-storage")
                    && text.contains("s3://bucket/run"),
                "{text}"
            );
        }
    }

    #[cfg(feature = "rules")]
    #[test]
    fn a_left_out_action_names_notify() {
        let e = Error::from(smdebug_rules::Error::ActionNotCompiled {
            action: "webhook".into(),
            feature: "webhook",
        });
        let text = e.to_string();
        assert!(
            text.contains("features = [\"notify\"]") && text.contains("webhook"),
            "{text}"
        );
        let e = Error::from(smdebug_rules::Error::ActionNotCompiled {
            action: "sns".into(),
            feature: "sns",
        });
        let text = e.to_string();
        assert!(text.contains("features = [\"sns\"]"), "{text}");
    }

    #[test]
    fn debug_prints_the_message_and_its_causes() {
        let e = Error::NotWritable {
            location: "/tmp/x".into(),
            source: Box::new(
                smdebug_storage::Error::InvalidLocation {
                    location: "s3:/x".into(),
                    reason: "not a URL".into(),
                }
                .into(),
            ),
        };
        let debug = format!("{e:?}");
        assert!(
            debug.starts_with("the run's location /tmp/x cannot be written"),
            "{debug}"
        );
        assert!(
            debug.contains("caused by:") && debug.contains("not a URL"),
            "{debug}"
        );
        assert!(!debug.contains("NotWritable {"), "{debug}");
    }
}
