//! [`Capture`]: what a session drives at each step, the core [`Hook`] of a hand-written loop or
//! a framework adapter's hook around it.
//!
//! A session (the `smdebug` crate) owns the capture side and calls these at the step boundary
//! and at the end, whatever the framework; everything framework-specific stays on the adapter's
//! own hook type, which the loop reaches through the session.

use crate::adapter::{AdapterHook, Framework};
use crate::hook::Hook;
use crate::mode::Mode;

/// The capture side of a training loop, as a session drives it.
pub trait Capture {
    /// What a step or a close can fail with (saving a kept tensor, for adapters).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The core hook underneath: schedules, stop signal, timeline.
    fn core(&self) -> &Hook;

    /// Ends the step (publishes it, advances the counters).
    fn end_step(&mut self) -> Result<(), Self::Error>;

    /// Switches mode.
    fn switch_mode(&mut self, mode: Mode) -> Result<(), Self::Error>;

    /// Ends the run (the end marker, with the stop reason when one was requested).
    fn close_run(&mut self) -> Result<(), Self::Error>;
}

impl Capture for Hook {
    type Error = std::convert::Infallible;

    fn core(&self) -> &Hook {
        self
    }

    fn end_step(&mut self) -> Result<(), Self::Error> {
        self.step();
        Ok(())
    }

    fn switch_mode(&mut self, mode: Mode) -> Result<(), Self::Error> {
        self.set_mode(mode);
        Ok(())
    }

    fn close_run(&mut self) -> Result<(), Self::Error> {
        self.close();
        Ok(())
    }
}

impl<F: Framework> Capture for AdapterHook<F>
where
    F::Error: std::error::Error + Send + Sync + 'static,
{
    type Error = F::Error;

    fn core(&self) -> &Hook {
        self.hook()
    }

    fn end_step(&mut self) -> Result<(), F::Error> {
        self.step()
    }

    fn switch_mode(&mut self, mode: Mode) -> Result<(), F::Error> {
        self.set_mode(mode)
    }

    fn close_run(&mut self) -> Result<(), F::Error> {
        self.close()
    }
}
