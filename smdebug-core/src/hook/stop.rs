//! [`StopSignal`]: a request to stop training, shared by the hook, the writer and the rules.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sink::StopCause;

/// A request to stop training, shared between the hook, the writer and anything that watches
/// rules. Setting it is cheap and idempotent; the first reason wins.
#[derive(Clone, Debug, Default)]
pub struct StopSignal {
    requested: Arc<AtomicBool>,
    cause: Arc<Mutex<Option<StopCause>>>,
}

impl StopSignal {
    /// Asks the training loop to stop at its next step: with a reason (`"enough"`), or a rule's
    /// [`StopCause`] naming the rule and step.
    pub fn request(&self, cause: impl Into<StopCause>) {
        if let Ok(mut c) = self.cause.lock()
            && c.is_none()
        {
            *c = Some(cause.into());
        }
        self.requested.store(true, Ordering::Release);
    }

    /// The first request's cause (its reason, and the rule and step when a rule asked), once a
    /// stop was requested.
    pub fn cause(&self) -> Option<StopCause> {
        if !self.requested.load(Ordering::Acquire) {
            return None;
        }
        self.cause
            .lock()
            .ok()
            .and_then(|c| c.clone())
            .or_else(|| Some(StopCause::from("stop requested")))
    }
}
