//! Which workers saved a tensor at a step, as smdebug counts them. The trial's `workers` and
//! the lookup errors (an unknown worker) both ask; it lives apart from both so that neither
//! imports the other.

use std::collections::BTreeSet;

use smdebug_core::{Mode, Reduction, ReductionOp};
use smdebug_io::Trial;

/// The workers that saved `name` (or, as smdebug counts them, only reductions of it) at a step.
pub fn workers_of(
    trial: &Trial,
    name: &str,
    step: u64,
    mode: Mode,
) -> smdebug_io::Result<Vec<String>> {
    let mut workers: BTreeSet<String> = trial
        .tensor(name)?
        .workers(step, Some(mode))?
        .into_iter()
        .collect();
    for op in ReductionOp::ALL {
        for reduction in [Reduction::new(op), Reduction::abs(op)] {
            if let Ok(stored) = trial.tensor(&reduction.tensor_name(name)) {
                workers.extend(stored.workers(step, Some(mode))?);
            }
        }
    }
    Ok(workers.into_iter().collect())
}
