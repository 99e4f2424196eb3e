//! The calls every adapter's hook shares, written once and stamped onto each adapter's hook by
//! [`adapter_hook_methods!`](crate::adapter_hook_methods): real inherent methods, shown in each
//! adapter's documentation, instead of a `Deref` to [`AdapterHook`].
//!
//! [`AdapterHook`]: super::AdapterHook

/// Gives an adapter hook that is a newtype over [`AdapterHook<F>`](crate::adapter::AdapterHook)
/// (`struct MyHook(AdapterHook<F>)`) the calls every adapter shares, as inherent methods, and
/// `AsRef`/`AsMut` to the kit (what code generic over adapters, such as the conformance suite,
/// goes through) and [`Capture`](crate::Capture) (what a session drives, forwarded to the kit).
/// The methods: `adapter`/`adapter_mut` (the kit itself, for what an adapter author needs:
/// `due`, `record`, `module_probe`), `hook`, `hook_mut`, `stop_signal`, `stop_requested`, `is_due`, `anything_due`, `save_metric`, `save_scalar`, `probe`,
/// `timeline`, `data`, `forward`, `optimizer`, `scope`, `set_mode`, `step` and `close`.
///
/// `adapter_hook_methods!(MyHook, F)` defines those; `adapter_hook_methods!(MyHook, F, tensors)` also
/// `save_tensor`, `save_loss` and `save_loss_inputs` taking the framework's tensor type as it is (an adapter whose
/// tensors need converting first, as burn's do, writes its own).
///
/// ```
/// use smdebug_core::adapter::{AdapterHook, Due, Framework, tally};
/// use smdebug_core::{Hook, MemorySink, SaveConfig};
///
/// /// A framework whose tensors are plain vectors.
/// #[derive(Default)]
/// struct Vectors;
///
/// impl Framework for Vectors {
///     type Tensor = Vec<f32>;
///     type Error = smdebug_core::Error;
///     fn keep(t: &Vec<f32>) -> Vec<f32> {
///         t.clone()
///     }
///     fn scalar(&mut self, _: &str, t: &Vec<f32>) -> Result<Option<f64>, Self::Error> {
///         Ok((t.len() == 1).then(|| f64::from(t[0])))
///     }
///     fn record(&mut self, hook: &mut Hook, due: Vec<Due<Vec<f32>>>) -> Result<usize, Self::Error> {
///         tally(due.into_iter().map(|d| -> smdebug_core::Result<bool> {
///             let view = smdebug_core::TensorView::from_slice(&d.tensor, &[d.tensor.len()])?;
///             Ok(hook.save_due(&d.name, &d.due, &view))
///         }))
///     }
/// }
///
/// struct VectorHook(AdapterHook<Vectors>);
///
/// smdebug_core::adapter_hook_methods!(VectorHook, Vectors, tensors);
///
/// let sink = MemorySink::default();
/// let builder = Hook::builder().save_config(SaveConfig::every(1));
/// let mut hook = VectorHook(AdapterHook::new(builder, sink.clone(), Vectors)?);
/// hook.save_loss("loss", &vec![0.5])?;
/// hook.save_tensor("w", &vec![1.0, 2.0], &["weights"])?;
/// hook.step()?;
/// hook.close()?;
/// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
/// assert_eq!(names, ["loss", "w"]); // the one-element loss as a scalar of shape []
/// assert_eq!(sink.closes(), 1);
/// # Ok::<(), smdebug_core::Error>(())
/// ```
#[macro_export]
macro_rules! adapter_hook_methods {
    ($hook:ty, $framework:ty, tensors) => {
        $crate::adapter_hook_methods!($hook, $framework);

        impl $hook {
            $crate::adapter_hook_methods!(@tensors $framework);
        }
    };
    ($hook:ty, $framework:ty) => {
        impl $hook {
            $crate::adapter_hook_methods!(@common $framework);
        }

        impl ::std::convert::AsRef<$crate::adapter::AdapterHook<$framework>> for $hook {
            fn as_ref(&self) -> &$crate::adapter::AdapterHook<$framework> {
                &self.0
            }
        }

        impl ::std::convert::AsMut<$crate::adapter::AdapterHook<$framework>> for $hook {
            fn as_mut(&mut self) -> &mut $crate::adapter::AdapterHook<$framework> {
                &mut self.0
            }
        }

        /// What a session drives: the step boundary, mode switches and the end of the run,
        /// through the adapter kit underneath.
        impl $crate::Capture for $hook {
            type Error = <$framework as $crate::adapter::Framework>::Error;

            fn core(&self) -> &$crate::Hook {
                self.0.hook()
            }

            fn end_step(&mut self) -> ::std::result::Result<(), Self::Error> {
                $crate::Capture::end_step(&mut self.0)
            }

            fn switch_mode(&mut self, mode: $crate::Mode) -> ::std::result::Result<(), Self::Error> {
                $crate::Capture::switch_mode(&mut self.0, mode)
            }

            fn close_run(&mut self) -> ::std::result::Result<(), Self::Error> {
                $crate::Capture::close_run(&mut self.0)
            }
        }
    };
    (@tensors $framework:ty) => {

        /// Saves a framework tensor under `name` in `collections` (plus every collection whose
        /// `include_regex` matches the name) when due. Returns whether anything was recorded.
        pub fn save_tensor(
            &mut self,
            name: &str,
            tensor: &<$framework as $crate::adapter::Framework>::Tensor,
            collections: &[&str],
        ) -> ::std::result::Result<bool, <$framework as $crate::adapter::Framework>::Error> {
            self.0.save_tensor(name, tensor, collections)
        }

        /// Saves a loss in `losses`: a one-element tensor as the scalar `name` (an `f64` of
        /// shape `[]`, as Python smdebug stores it), a larger one as a tensor.
        pub fn save_loss(
            &mut self,
            name: &str,
            loss: &<$framework as $crate::adapter::Framework>::Tensor,
        ) -> ::std::result::Result<bool, <$framework as $crate::adapter::Framework>::Error> {
            self.0.save_loss(name, loss)
        }

        /// Saves what the loss `name` was computed from, as Python smdebug's `register_loss`
        /// does: `predictions` as `<name>.predictions` (collection `predictions`) and `labels`
        /// as `<name>.labels` (collection `labels`), each when due; nothing is copied
        /// otherwise. ClassImbalance and Confusion read them with their default parameters.
        /// Returns how many were recorded.
        pub fn save_loss_inputs(
            &mut self,
            name: &str,
            predictions: &<$framework as $crate::adapter::Framework>::Tensor,
            labels: &<$framework as $crate::adapter::Framework>::Tensor,
        ) -> ::std::result::Result<usize, <$framework as $crate::adapter::Framework>::Error> {
            self.0.save_loss_inputs(name, predictions, labels)
        }
    };
    (@common $framework:ty) => {
        /// The adapter kit this hook is built on (for adapter authors: `due`, `record`,
        /// `module_probe`).
        pub fn adapter(&self) -> &$crate::adapter::AdapterHook<$framework> {
            &self.0
        }

        /// The adapter kit this hook is built on, mutably.
        pub fn adapter_mut(&mut self) -> &mut $crate::adapter::AdapterHook<$framework> {
            &mut self.0
        }

        /// The core hook: mode, step counters, configuration.
        pub fn hook(&self) -> &$crate::Hook {
            self.0.hook()
        }

        /// The core hook, to save host data (`save_tensor` with a `TensorView`) directly.
        pub fn hook_mut(&mut self) -> &mut $crate::Hook {
            self.0.hook_mut()
        }

        /// The stop signal the hook watches; hand it to whatever may ask the job to stop.
        pub fn stop_signal(&self) -> $crate::StopSignal {
            self.0.stop_signal()
        }

        /// Why, when someone asked this job to stop. Check it once per step.
        pub fn stop_requested(&self) -> ::std::option::Option<$crate::StopCause> {
            self.0.stop_requested()
        }

        /// Whether `name` in `collections` is due now (a flag when nothing is due this step,
        /// one hash lookup otherwise). Always false once closed.
        pub fn is_due(&mut self, name: &str, collections: &[&str]) -> bool {
            self.0.is_due(name, collections)
        }

        /// Whether anything at all may be saved at this step. Always false once closed.
        pub fn anything_due(&self) -> bool {
            self.0.anything_due()
        }

        /// Saves a metric (accuracy, …) in `metrics`. Returns whether it was recorded.
        pub fn save_metric(&mut self, name: &str, value: f64) -> bool {
            self.0.save_metric(name, value)
        }

        /// Saves a scalar in the given collections. Returns whether it was recorded.
        pub fn save_scalar(&mut self, name: &str, value: f64, collections: &[&str]) -> bool {
            self.0.save_scalar(name, value, collections)
        }

        /// A capture point for a tensor computed inside a forward pass, saved under `name`
        /// when due, in `collections` plus every collection whose `include_regex` matches
        /// `name`. With no collections named, only regex collections (and `save_all`) select
        /// it.
        pub fn probe(
            &mut self,
            name: &str,
            collections: &[&str],
        ) -> $crate::adapter::Probe<$framework> {
            self.0.probe(name, collections)
        }

        /// The loop's timeline (off unless the builder was given one): its spans and windows.
        pub fn timeline(&self) -> &$crate::timeline::Timeline {
            self.0.timeline()
        }

        /// Wraps the loop's data iterator: each `next()` that yields a batch is a data-loading
        /// span while the data-loading window is open. The iterator holds no borrow of the hook.
        pub fn data<I: ::std::iter::IntoIterator>(
            &self,
            batches: I,
        ) -> $crate::timeline::TimedIter<I::IntoIter> {
            self.0.data(batches)
        }

        /// Runs the forward pass `f` as the step's forward span. Returns what `f` returns.
        pub fn forward<R>(&self, f: impl FnOnce() -> R) -> R {
            self.0.forward(f)
        }

        /// Runs the optimizer step `f` as the step's optimizer span.
        pub fn optimizer<R>(&self, f: impl FnOnce() -> R) -> R {
            self.0.optimizer(f)
        }

        /// Runs `f` inside a span of `phase` (a phase of the loop's own with
        /// `Phase::Custom`).
        pub fn scope<R>(&self, phase: $crate::phase::Phase, f: impl FnOnce() -> R) -> R {
            self.0.scope(phase, f)
        }

        /// Switches mode (TRAIN, EVAL, PREDICT); a step with records is closed first.
        pub fn set_mode(
            &mut self,
            mode: $crate::Mode,
        ) -> ::std::result::Result<(), <$framework as $crate::adapter::Framework>::Error> {
            self.0.set_mode(mode)
        }

        /// Ends the step: saves what the probes kept, publishes the step and advances the
        /// step counters. An error saving a kept tensor is returned after the step advanced.
        pub fn step(
            &mut self,
        ) -> ::std::result::Result<(), <$framework as $crate::adapter::Framework>::Error> {
            self.0.step()
        }

        /// Ends the run: the last step, the collections and the end marker. Closing again
        /// does nothing; afterwards nothing is saved.
        pub fn close(
            &mut self,
        ) -> ::std::result::Result<(), <$framework as $crate::adapter::Framework>::Error> {
            self.0.close()
        }
    };
}
