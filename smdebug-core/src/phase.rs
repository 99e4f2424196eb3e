//! What a span measures, and the names smdebug gives it in trace files.

use std::borrow::Cow;

use crate::mode::Mode;

/// The part of the training loop a span covers.
///
/// Each phase is one "process" row of the trace (its `process_name` metadata), named as
/// Python smdebug's hooks name them so its analysis code recognises them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// One step in a mode: `Step:ModeKeys.TRAIN`.
    Step(Mode),
    /// Waiting for the next batch: `DataLoaderIter`.
    DataLoading,
    /// The forward pass: `Forward`.
    Forward,
    /// The backward pass: `Backward(post-forward)`.
    Backward,
    /// The optimizer update: `Optimizer`.
    Optimizer,
    /// Any other phase, under the given row name.
    Custom(Cow<'static, str>),
}

impl Phase {
    /// The row (`process_name`) this phase is written under.
    pub fn trace_name(&self) -> Cow<'static, str> {
        match self {
            Phase::Step(mode) => Cow::Owned(format!("Step:ModeKeys.{}", mode.name())),
            Phase::DataLoading => Cow::Borrowed("DataLoaderIter"),
            Phase::Forward => Cow::Borrowed("Forward"),
            Phase::Backward => Cow::Borrowed("Backward(post-forward)"),
            Phase::Optimizer => Cow::Borrowed("Optimizer"),
            Phase::Custom(name) => name.clone(),
        }
    }

    /// The event name used when the caller gives none.
    pub fn default_event_name(&self) -> Cow<'static, str> {
        match self {
            Phase::Step(_) => self.trace_name(),
            Phase::DataLoading => Cow::Borrowed("DataLoaderIter::GetNext"),
            Phase::Forward => Cow::Borrowed("forward"),
            Phase::Backward => Cow::Borrowed("backward"),
            Phase::Optimizer => Cow::Borrowed("optimizer_step"),
            Phase::Custom(name) => name.clone(),
        }
    }

    /// The phase a row name stands for; names this crate does not know become `Custom`.
    pub fn from_trace_name(name: &str) -> Phase {
        if let Some(mode) = name.strip_prefix("Step:").and_then(Mode::from_name) {
            return Phase::Step(mode);
        }
        match name {
            "DataLoaderIter" => Phase::DataLoading,
            "Forward" => Phase::Forward,
            "Backward(post-forward)" => Phase::Backward,
            "Optimizer" => Phase::Optimizer,
            other => Phase::Custom(Cow::Owned(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_names_round_trip() {
        for phase in [
            Phase::Step(Mode::Eval),
            Phase::DataLoading,
            Phase::Forward,
            Phase::Backward,
            Phase::Optimizer,
            Phase::Custom("allreduce".into()),
        ] {
            assert_eq!(Phase::from_trace_name(&phase.trace_name()), phase);
        }
        assert_eq!(Phase::Step(Mode::Train).trace_name(), "Step:ModeKeys.TRAIN");
    }
}
