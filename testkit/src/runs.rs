//! Runs for tests to read back: a hook that writes every step, and finished crafted runs.

use std::path::Path;
use std::sync::Arc;

use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig};
use smdebug_format::layout;
use smdebug_io::crafted::{CraftedRecord, write_collections, write_step};
use smdebug_io::storage::LocalStorage;
use smdebug_io::writer::{OverflowPolicy, Writer};

/// A hook built by `builder` writing into the run at `dir` (a local folder), its writer waiting
/// for room instead of dropping a step: what a test reads back is all it wrote.
pub fn blocking_hook(dir: &Path, builder: HookBuilder) -> Hook {
    let storage = Arc::new(LocalStorage::new(dir).unwrap());
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    builder.build(writer).unwrap()
}

/// A [`blocking_hook`] that saves every step.
pub fn every_step_hook(dir: &Path) -> Hook {
    blocking_hook(dir, Hook::builder().save_config(SaveConfig::every(1)))
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
