//! One tensor of a trial, [`TrialTensor`]: its steps, workers and values (Python smdebug's
//! `Tensor`).

use std::collections::BTreeMap;

use ndarray::ArrayD;
use smdebug_core::{Mode, Reduction, Tensor};

use super::source::{self, Location};
use super::value::{TensorBytes, TensorValue};
use super::{Conversion, TrialTensor, VALUE_CHUNK_STEPS, ValueChunks};
use crate::error::{Error, Result};

impl<'t> TrialTensor<'t> {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The complete steps this tensor was saved at (smdebug numbering: global for `None`, else
    /// mode steps; a mode step counts when its global step is complete).
    pub fn steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        self.trial.tensor_steps(&self.name, mode, false)
    }

    /// Every step this tensor was saved at, complete or not (Python's
    /// `steps(mode, show_incomplete_steps=True)`).
    pub fn all_steps(&self, mode: Option<Mode>) -> Result<Vec<u64>> {
        self.trial.tensor_steps(&self.name, mode, true)
    }

    /// The value at a step: numbers or strings. The numeric reads below ([`value`](Self::value),
    /// [`raw`](Self::raw), …) take numbers only: a string tensor is `Error::StringTensor`
    /// there.
    pub fn read(&self, step: u64, mode: Option<Mode>, worker: Option<&str>) -> Result<TensorValue> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.trial.read_value(&self.name, &loc, Conversion::Stored)
    }

    /// Every saved value of this tensor at its complete steps in a mode, keyed by step, numbers
    /// or strings (see [`read`](Self::read)). Reads on a few threads like
    /// [`TrialTensor::values`].
    pub fn read_values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, TensorValue>> {
        self.read_values_as(mode, worker, Conversion::Stored)
    }

    /// [`read_values`](Self::read_values) for a caller that converts every value as
    /// `conversion` says (counted in the budget before each value is decoded, see
    /// [`Trial::raw_value_as`](super::Trial::raw_value_as)).
    pub fn read_values_as(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
        conversion: Conversion,
    ) -> Result<BTreeMap<u64, TensorValue>> {
        self.read_every_step(mode, worker, |loc| {
            self.trial.read_value(&self.name, loc, conversion)
        })
    }

    /// The value at a step as an `f64` array (every dtype converts).
    pub fn value(
        &self,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<ArrayD<f64>> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        Ok(self
            .trial
            .read(&self.name, &loc, Conversion::F64)?
            .to_array_f64())
    }

    /// The value at a step with its own dtype.
    pub fn raw(&self, step: u64, mode: Option<Mode>, worker: Option<&str>) -> Result<Tensor> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.trial.read(&self.name, &loc, Conversion::Stored)
    }

    /// The value at a step with its own dtype, its bytes not copied: a slice of the event file
    /// as it was read or mapped (for a caller that copies them into an array of its own).
    pub fn raw_bytes(
        &self,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorBytes> {
        let loc = self
            .trial
            .locate(&self.name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.trial.read_bytes(&self.name, &loc, Conversion::Stored)
    }

    /// A saved reduction of this tensor at a step (e.g. `"mean".parse()?`, `"abs_l2_norm"`).
    pub fn reduction_value(
        &self,
        step: u64,
        reduction: Reduction,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<f64> {
        let name = reduction.tensor_name(&self.name);
        let loc = self
            .trial
            .locate(&name, step, mode.unwrap_or(Mode::Global), worker)
            .map_err(|e| match e {
                Error::TensorNotFound { .. } | Error::StepNotAvailable { .. } => {
                    Error::ReductionNotSaved {
                        tensor: self.name.clone(),
                        reduction: reduction.to_string(),
                        step,
                    }
                }
                other => other,
            })?;
        let t = self.trial.read(&name, &loc, Conversion::F64)?;
        // A reduction is one number; more than one is not a value to pick from silently.
        match t.to_f64_vec()[..] {
            [v] => Ok(v),
            [] => Err(Error::ReductionNotSaved {
                tensor: self.name.clone(),
                reduction: reduction.to_string(),
                step,
            }),
            ref values => Err(Error::Format(smdebug_format::Error::CorruptRecord {
                path: loc.file.path().to_string(),
                offset: loc.start,
                reason: format!(
                    "reduction `{name}` holds {} values; a reduction is one value",
                    values.len()
                ),
            })),
        }
    }

    /// Every saved value of this tensor at its complete steps in a mode (Python's
    /// `Tensor.values`), keyed by step (smdebug numbering), as `f64` arrays. Reads on a few
    /// threads when there are many steps: each step is its own event file.
    pub fn values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, ArrayD<f64>>> {
        self.read_every_step(mode, worker, |loc| {
            Ok(self
                .trial
                .read(&self.name, loc, Conversion::F64)?
                .to_array_f64())
        })
    }

    /// Every saved value of this tensor at its complete steps in a mode, keyed by step, in the
    /// dtype it was saved in (what Python smdebug's `Tensor.values` returns). Reads on a few
    /// threads like [`TrialTensor::values`].
    pub fn raw_values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, Tensor>> {
        self.read_every_step(mode, worker, |loc| {
            self.trial.read(&self.name, loc, Conversion::Stored)
        })
    }

    /// Every saved value of this tensor at its complete steps in a mode, keyed by step, their
    /// bytes not copied (see [`TrialTensor::raw_bytes`]). Reads on a few threads like
    /// [`TrialTensor::values`].
    pub fn raw_bytes_values(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<BTreeMap<u64, TensorBytes>> {
        self.read_every_step(mode, worker, |loc| {
            self.trial.read_bytes(&self.name, loc, Conversion::Stored)
        })
    }

    /// Every saved value of this tensor at its complete steps in a mode, as
    /// [`read_values_as`](Self::read_values_as) reads them, handed over a stretch of steps at
    /// a time ([`ValueChunks`]) instead of in one map: a caller that converts each value into
    /// something of its own (the Python binding's `values()`, a dict of numpy arrays) holds
    /// one stretch of the trial's values and record places at a time, where the map held every
    /// value (and, until it was converted, every event file a value's bytes were sliced from).
    /// The steps are the complete ones when this is called; each stretch is looked up when it
    /// is read.
    pub fn value_chunks(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
        conversion: Conversion,
    ) -> Result<ValueChunks<'t>> {
        Ok(ValueChunks {
            trial: self.trial,
            name: self.name.clone(),
            steps: self.trial.tensor_steps(&self.name, mode, false)?,
            next: 0,
            mode,
            worker: worker.map(str::to_string),
            conversion,
        })
    }

    /// Reads every complete step of this tensor with `read`, a stretch of steps at a time (see
    /// [`ValueChunks`]), on a few threads when a stretch has many.
    fn read_every_step<T: Send>(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
        read: impl Fn(&Location) -> Result<T> + Sync,
    ) -> Result<BTreeMap<u64, T>> {
        let mut chunks = self.value_chunks(mode, worker, Conversion::Stored)?;
        let mut out = BTreeMap::new();
        while let Some(part) = chunks.next_with(&read) {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Workers that saved this tensor (or reductions of it) at a step, in name order (Python's
    /// `Tensor.workers`).
    pub fn workers(&self, step: u64, mode: Option<Mode>) -> Result<Vec<String>> {
        self.trial
            .tensor_workers(&self.name, step, mode.unwrap_or(Mode::Global))
    }
}

impl ValueChunks<'_> {
    /// How many steps are left to read.
    pub fn remaining(&self) -> usize {
        self.steps.len() - self.next
    }

    /// The next stretch's `(step, value)` pairs, in step order (numbers or strings, read as
    /// [`TrialTensor::read_values_as`] reads them); `None` once every step was read. An error
    /// is the stretch's first failure (a caller may go on: the next call reads the stretch
    /// after it).
    pub fn next_chunk(&mut self) -> Option<Result<Vec<(u64, TensorValue)>>> {
        let (trial, name, conversion) = (self.trial, self.name.clone(), self.conversion);
        self.next_with(&|loc: &Location| trial.read_value(&name, loc, conversion))
    }

    /// The next stretch, each step's record read with `read`.
    fn next_with<T: Send>(
        &mut self,
        read: &(impl Fn(&Location) -> Result<T> + Sync),
    ) -> Option<Result<Vec<(u64, T)>>> {
        if self.next >= self.steps.len() {
            return None;
        }
        let end = (self.next + VALUE_CHUNK_STEPS).min(self.steps.len());
        let steps = &self.steps[self.next..end];
        self.next = end;
        let locations =
            match self
                .trial
                .step_locations(&self.name, steps, self.mode, self.worker.as_deref())
            {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
        Some(read_locations(&locations, read))
    }
}

/// Reads `locations` with `read`, in order, on a few threads when there are many.
fn read_locations<T: Send>(
    locations: &[(u64, Location)],
    read: &(impl Fn(&Location) -> Result<T> + Sync),
) -> Result<Vec<(u64, T)>> {
    let threads = source::reader_threads(locations.len());
    let read_chunk = |chunk: &[(u64, Location)]| -> Result<Vec<(u64, T)>> {
        chunk.iter().map(|(s, loc)| Ok((*s, read(loc)?))).collect()
    };
    if threads <= 1 {
        return read_chunk(locations);
    }
    let chunk_len = locations.len().div_ceil(threads);
    let parts: Vec<Result<Vec<(u64, T)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = locations
            .chunks(chunk_len)
            .map(|c| scope.spawn(|| read_chunk(c)))
            .collect();
        handles
            .into_iter()
            // A panic in a reader thread is a bug: re-raise it here rather than hide it.
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out = Vec::with_capacity(locations.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}
