//! # smdebug-adapter-conformance
//!
//! One set of behaviour tests for the framework adapters, written once and run against each of
//! them (smdebug-candle, smdebug-burn, smdebug-tch), as `smdebug-io/tests/storage_conformance.rs`
//! does for the storage backends. An adapter's test binary implements [`Fixture`] (how to build
//! its hook, a 64-32-10 MLP on the digits set, and a tensor) and instantiates the suite with
//! [`adapter_conformance!`]:
//!
//! ```ignore
//! smdebug_adapter_conformance::adapter_conformance!(CandleFixture::f32());
//! ```
//!
//! The suite goes through the hook the way a training loop does. [`capture`]: what is saved at
//! which step and mode, the collections tensors land in, reductions computed on the device
//! against the host's, losses, metrics and scalars, probes, stop requests seen at the next step,
//! closing (explicitly, twice, or on drop), and configuration errors returned rather than
//! panicking. [`spans`]: the framework spans the adapter measures with no timing code in the
//! loop (step, data loading, forward, backward, optimizer, per-module), in the profiling windows
//! and nowhere else, written by smdebug-profiler's span recorder and read back with its reader
//! and with Python smdebug's. Runs are written with smdebug-io's `Writer` and read back with its
//! `Trial`, or kept in a `MemorySink` where only the records matter.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
mod fixture;
pub mod spans;
pub mod whole_model;

pub use capture::*;
pub use fixture::{
    ErrorOf, Expected, Fixture, Own, Pass, TensorOf, assert_run_matches, every_device_reduction,
    train, writer,
};
pub use spans::*;

/// Instantiates the suite for a fixture: one `#[test]` per behaviour.
#[macro_export]
macro_rules! adapter_conformance {
    (@tests $fixture:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::$name(&$fixture);
            }
        )*
    };
    ($fixture:expr) => {
        $crate::adapter_conformance!(@tests $fixture;
            recorded_tensors_equal_the_models_own_at_due_steps,
            per_mode_schedules_are_honoured_in_train_and_eval,
            reductions_only_collections_are_reduced_on_the_device_and_match_the_host,
            device_reductions_equal_the_host_ones_with_nan_inf_zeros_and_empty_tensors,
            steps_holding_only_device_reductions_are_ended_once_and_never_mix_modes,
            a_collection_on_its_own_schedule_is_walked_when_the_default_is_never_due,
            probes_save_the_last_tensor_of_a_due_step_in_named_and_regex_collections,
            losses_metrics_and_scalars_land_in_their_collections,
            a_stop_request_is_seen_at_the_next_step,
            a_stop_request_from_a_watcher_stops_the_loop_within_one_step,
            closing_is_idempotent_stops_saving_and_happens_on_drop,
            configuration_errors_are_returned_not_panics,
            framework_spans_mark_every_step_with_its_phases_in_train_and_eval,
            closed_windows_measure_nothing_and_capture_carries_on,
            a_window_changed_while_running_takes_effect_at_the_next_boundary,
            python_smdebug_reads_the_adapters_spans,
        );
    };
}
