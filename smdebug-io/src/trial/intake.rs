//! What taking in one index file means, shared by the `Trial`'s state and the
//! [`TensorFollower`](super::TensorFollower): which index files were read, when a file conflicts
//! with what is known of its step, and under which name a tensor is listed.

use std::collections::{BTreeMap, BTreeSet};

use smdebug_core::{Mode, Reduction};

use super::source::IndexEntry;
use crate::error::{Error, Result};

/// The name a reader lists a stored tensor under: like Python smdebug, a reduction
/// `smdebug/reductions/mean/w` (or `abs_l2`) is listed as its tensor `w`.
pub(crate) fn listed_name(stored: &str) -> &str {
    Reduction::parse_tensor_name(stored).map_or(stored, |(_, base)| base)
}

/// What is known of a step when another index file of it comes.
pub(crate) struct KnownStep<'a> {
    pub mode: Mode,
    pub mode_step: u64,
    /// The index file of the new file's worker already taken in for this step, if any.
    pub worker_file: Option<&'a str>,
    /// The first index file taken in for this step.
    pub first_file: &'a str,
}

/// Whether an index file adds to what is known.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// It does.
    New,
    /// It was taken in already (listed again): it changes nothing.
    Again,
}

/// Checks index file `idx` against what is known of its step: a second index file for the
/// same step and worker, or workers disagreeing on a step's mode, is
/// [`Error::ConflictingIndex`] naming both files.
pub(crate) fn admit(known: Option<KnownStep<'_>>, idx: &IndexEntry) -> Result<Admit> {
    let Some(known) = known else {
        return Ok(Admit::New);
    };
    match known.worker_file {
        Some(file) if file == idx.path => return Ok(Admit::Again),
        Some(file) => {
            return Err(Error::ConflictingIndex {
                first: file.to_string(),
                second: idx.path.clone(),
                reason: format!("both describe step {} of worker `{}`", idx.step, idx.worker),
            });
        }
        None => {}
    }
    if (known.mode, known.mode_step) != (idx.mode, idx.mode_step) {
        return Err(Error::ConflictingIndex {
            first: known.first_file.to_string(),
            second: idx.path.clone(),
            reason: format!(
                "global step {} is {} step {} in the first and {} step {} in the second",
                idx.step, known.mode, known.mode_step, idx.mode, idx.mode_step
            ),
        });
    }
    Ok(Admit::New)
}

/// Index files taken in for steps past the last complete step, by step: listing resumes after
/// it, and these are not read again (Python smdebug's read-files cache).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReadFiles(BTreeMap<u64, BTreeSet<String>>);

impl ReadFiles {
    /// Index file `path` of `step` was taken in.
    pub fn insert(&mut self, step: u64, path: String) {
        self.0.entry(step).or_default().insert(path);
    }

    /// Whether index file `path` of `step` was taken in.
    pub fn contains(&self, step: u64, path: &str) -> bool {
        self.0.get(&step).is_some_and(|p| p.contains(path))
    }

    /// Index files at or before the last complete step are never listed again: forgets them.
    pub fn forget_through(&mut self, last_complete: Option<u64>) {
        if let Some(last) = last_complete {
            self.0 = self.0.split_off(&last.saturating_add(1));
        }
    }
}
