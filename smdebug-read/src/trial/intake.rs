//! What taking in one index file means, shared by the `Trial`'s state and the
//! [`TensorFollower`](super::TensorFollower): which index files were read, when a file conflicts
//! with what is known of its step, and under which name a tensor is listed.

use std::sync::Arc;

use smdebug_core::{Mode, Reduction};

use super::source::IndexEntry;
use super::step_map::StepMap;
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
/// it, and these are not read again (Python smdebug's read-files cache). A first listing of a
/// long run holds every step here until it is read through, so a file at its usual path
/// (`index/<step>/<step>_<worker>.json`) is kept as its worker's number, a few bytes, where a
/// set of paths took ~340 bytes a step.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReadFiles {
    steps: StepMap<u64, StepFiles>,
    /// The workers named by usual paths, each once.
    workers: Vec<Arc<str>>,
}

/// The index files read of one step: one, usually.
#[derive(Clone, Debug)]
enum StepFiles {
    One(ReadFile),
    Many(Vec<ReadFile>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ReadFile {
    /// The usual path of the step and this worker (its number in [`ReadFiles::workers`]).
    Usual(u32),
    /// Any other path.
    Other(Box<str>),
}

impl ReadFiles {
    /// How `path` of `step` is kept, when it is; `None` for a usual path of a worker not seen.
    fn key(&self, step: u64, path: &str) -> Option<ReadFile> {
        self.key_of(usual_worker(step, path).as_deref(), path)
    }

    /// [`ReadFiles::key`] with the path's usual worker, if it is one, already worked out.
    fn key_of(&self, usual: Option<&str>, path: &str) -> Option<ReadFile> {
        match usual {
            Some(worker) => self
                .workers
                .iter()
                .position(|w| **w == *worker)
                .map(|i| ReadFile::Usual(i as u32)),
            None => Some(ReadFile::Other(path.into())),
        }
    }

    /// Index file `path` of `step` was taken in.
    pub fn insert(&mut self, step: u64, path: String) {
        let usual = usual_worker(step, &path);
        let file = match self.key_of(usual.as_deref(), &path) {
            Some(file) => file,
            None => {
                self.workers.push(usual.unwrap_or_default().into());
                ReadFile::Usual((self.workers.len() - 1) as u32)
            }
        };
        let mut new = Some(file);
        let files = self
            .steps
            .get_or_insert_with(step, || StepFiles::One(new.take().expect("taken once")));
        let Some(file) = new else {
            return;
        };
        match files {
            StepFiles::One(first) if *first == file => {}
            StepFiles::One(first) => *files = StepFiles::Many(vec![first.clone(), file]),
            StepFiles::Many(all) => {
                if !all.contains(&file) {
                    all.push(file);
                }
            }
        }
    }

    /// Whether index file `path` of `step` was taken in.
    pub fn contains(&self, step: u64, path: &str) -> bool {
        let (Some(files), Some(file)) = (self.steps.get(&step), self.key(step, path)) else {
            return false;
        };
        match files {
            StepFiles::One(one) => *one == file,
            StepFiles::Many(all) => all.contains(&file),
        }
    }

    /// Index files at or before the last complete step are never listed again: forgets them.
    pub fn forget_through(&mut self, last_complete: Option<u64>) {
        if let Some(last) = last_complete {
            self.steps.drop_before(&last.saturating_add(1));
        }
    }
}

/// The worker whose usual index file of `step` is `path`, if it is one.
fn usual_worker(step: u64, path: &str) -> Option<String> {
    let (s, worker) = smdebug_format::layout::parse_index_file(path)?;
    (s == step && smdebug_format::layout::is_index_file(path, step, &worker)).then_some(worker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usual_and_other_paths_are_each_known_once_per_step() {
        let mut read = ReadFiles::default();
        let usual = |step: u64, worker: &str| smdebug_format::layout::index_file(step, worker);
        read.insert(7, usual(7, "worker_0"));
        read.insert(7, usual(7, "worker_0"));
        read.insert(7, "index/elsewhere/7.json".into());
        read.insert(8, usual(8, "worker_1"));
        assert!(read.contains(7, &usual(7, "worker_0")));
        assert!(read.contains(7, "index/elsewhere/7.json"));
        assert!(
            !read.contains(7, &usual(7, "worker_1")),
            "worker_1 read step 8 only"
        );
        assert!(read.contains(8, &usual(8, "worker_1")));
        assert!(!read.contains(8, &usual(8, "worker_0")));
        // A usual path of step 8 is another file when asked of step 9.
        assert!(!read.contains(9, &usual(8, "worker_1")));
        assert!(matches!(read.steps.get(&7), Some(StepFiles::Many(all)) if all.len() == 2));
        read.forget_through(Some(7));
        assert!(!read.contains(7, &usual(7, "worker_0")));
        assert!(read.contains(8, &usual(8, "worker_1")));
    }
}
