//! One tensor of a trial, [`TrialTensor`]: its steps, workers and values (Python smdebug's
//! `Tensor`).

use std::collections::BTreeMap;

use ndarray::ArrayD;
use smdebug_core::{Mode, Reduction, Tensor};

use super::records::{TensorBytes, TensorValue};
use super::source::{self, Location};
use super::{Conversion, TrialTensor};
use smdebug_io::error::{Error, Result};

impl TrialTensor<'_> {
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

    /// Reads every complete step of this tensor with `read`, on a few threads when there are
    /// many.
    fn read_every_step<T: Send>(
        &self,
        mode: Option<Mode>,
        worker: Option<&str>,
        read: impl Fn(&Location) -> Result<T> + Sync,
    ) -> Result<BTreeMap<u64, T>> {
        let locations = self.trial.step_locations(&self.name, mode, worker)?;
        let threads = source::reader_threads(locations.len());
        let read_chunk = |chunk: &[(u64, Location)]| -> Result<Vec<(u64, T)>> {
            chunk.iter().map(|(s, loc)| Ok((*s, read(loc)?))).collect()
        };
        if threads <= 1 {
            return Ok(read_chunk(&locations)?.into_iter().collect());
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
        let mut out = BTreeMap::new();
        for part in parts {
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
