//! Runs for tests to read back: a hook that writes every step, and finished crafted runs.

use std::path::Path;
use std::sync::Arc;

use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig};
use smdebug_format::layout;
use smdebug_io::crafted::{CraftedRecord, scalar, write_collections, write_step};
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_storage::{LocalStorage, Storage};

/// A hook built by `builder` writing into the run at `dir` (a local folder), its writer waiting
/// for room instead of dropping a step: what a test reads back is all it wrote.
pub fn blocking_hook(dir: &Path, builder: HookBuilder) -> Hook {
    blocking_hook_on(Arc::new(LocalStorage::new(dir).unwrap()), builder)
}

/// A [`blocking_hook`] writing into `storage` (any location: `memory://...` too).
pub fn blocking_hook_on(storage: Arc<dyn Storage>, builder: HookBuilder) -> Hook {
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    builder.build(writer).unwrap()
}

/// A [`blocking_hook`] that saves every step.
pub fn every_step_hook(dir: &Path) -> Hook {
    blocking_hook(dir, every_step())
}

/// A [`blocking_hook_on`] `storage` that saves every step.
pub fn every_step_hook_on(storage: Arc<dyn Storage>) -> Hook {
    blocking_hook_on(storage, every_step())
}

/// A hook of worker `rank` of `workers` that saves every step into the run at `dir` (the
/// workers of one run each write their own files), waiting for room as [`blocking_hook`] does.
pub fn worker_hook(dir: &Path, rank: usize, workers: usize) -> Hook {
    let writer = Writer::builder(Arc::new(LocalStorage::new(dir).unwrap()))
        .worker_rank(rank)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    every_step().worker(rank, workers).build(writer).unwrap()
}

fn every_step() -> HookBuilder {
    Hook::builder().save_config(SaveConfig::every(1))
}

/// A finished crafted run at `run`: `steps` TRAIN steps of `worker_0` (each mode step its
/// global step) holding `records(step)`, the collections file and the end marker.
pub fn write_finished_run(
    run: &Path,
    steps: u64,
    mut records: impl FnMut(u64) -> Vec<CraftedRecord>,
) {
    for s in 0..steps {
        write_step(run, s, "worker_0", Mode::Train, s, &records(s));
    }
    write_collections(run, "worker_0", 1);
    std::fs::write(run.join(layout::END_MARKER), b"").unwrap();
}

/// Crafted TRAIN steps `steps` of `worker_0` (each mode step its global step), each holding
/// the scalar `loss` equal to the step: no collections file, no end marker.
pub fn write_losses(run: &Path, steps: impl IntoIterator<Item = u64>) {
    for s in steps {
        write_step(
            run,
            s,
            "worker_0",
            Mode::Train,
            s,
            &[scalar("loss", s as f32)],
        );
    }
}

/// A [`write_finished_run`] of the synthetic benchmark run's shape
/// (`smdebug-serve/examples/synthetic_run`): each step saves `tensors` scalars
/// `layer00/value`, `layer01/value`, ..., each equal to the step.
pub fn write_scalar_run(run: &Path, steps: u64, tensors: usize) {
    let names: Vec<String> = (0..tensors).map(|i| format!("layer{i:02}/value")).collect();
    write_finished_run(run, steps, |s| {
        names.iter().map(|n| scalar(n, s as f32)).collect()
    });
}
