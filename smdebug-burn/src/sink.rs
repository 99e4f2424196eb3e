//! A sink shared by the [`smdebug_core::Hook`] and the adapter.
//!
//! The hook owns its sink. Reductions computed on the device arrive as finished scalars, which the
//! hook's `save_tensor` would reduce again; the adapter sends them straight to the same sink, and
//! needs to know whether the hook already ended the step so that it ends it exactly once.

use std::sync::{Arc, Mutex};

use smdebug_core::{Record, Sink};

struct Inner {
    sink: Box<dyn Sink>,
    /// The last step the hook sent `EndStep` for.
    last_end_step: Option<u64>,
}

/// A cloneable handle on one sink; every clone sends to the same place, in order.
#[derive(Clone)]
pub(crate) struct SharedSink(Arc<Mutex<Inner>>);

impl SharedSink {
    pub(crate) fn new(sink: impl Sink + 'static) -> Self {
        SharedSink(Arc::new(Mutex::new(Inner {
            sink: Box::new(sink),
            last_end_step: None,
        })))
    }

    /// Whether `EndStep { step }` went through this sink.
    pub(crate) fn ended(&self, step: u64) -> bool {
        self.0
            .lock()
            .map(|i| i.last_end_step == Some(step))
            .unwrap_or(false)
    }
}

impl Sink for SharedSink {
    fn send(&mut self, record: Record) {
        // The lock is only ever taken on the training thread, so it is never contended; a poisoned
        // lock (a panic inside the inner sink) drops the record rather than spreading the panic.
        if let Ok(mut inner) = self.0.lock() {
            if let Record::EndStep { step } = record {
                inner.last_end_step = Some(step);
            }
            inner.sink.send(record);
        }
    }
}
