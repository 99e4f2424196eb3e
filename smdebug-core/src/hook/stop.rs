//! [`StopSignal`]: a request to stop training, shared by the hook, the writer and the rules.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request to stop training, shared between the hook, the writer and anything that watches
/// rules. Setting it is cheap and idempotent; the first reason wins.
#[derive(Clone, Debug, Default)]
pub struct StopSignal {
    requested: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<String>>>,
}

impl StopSignal {
    /// Asks the training loop to stop at its next step.
    pub fn request(&self, reason: impl Into<String>) {
        if let Ok(mut r) = self.reason.lock()
            && r.is_none()
        {
            *r = Some(reason.into());
        }
        self.requested.store(true, Ordering::Release);
    }

    /// The reason, once a stop was requested.
    pub fn requested(&self) -> Option<String> {
        if !self.requested.load(Ordering::Acquire) {
            return None;
        }
        self.reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .or_else(|| Some("stop requested".into()))
    }
}
