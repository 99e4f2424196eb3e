//! Reading values, as a [`Trial`] does: a handle on one tensor, the steps of a run as a stream,
//! one value (decoded, converted, or as its record's bytes), and every record of a tensor in
//! the JSON form of the interop checkers.

use smdebug_core::Mode;

use super::decoded;
use super::records;
use super::source::{FirstFetch, Location};
use super::state::State;
use super::{
    Budget, Conversion, JsonElement, StepSelector, StepStream, TensorBytes, TensorRecordJson,
    TensorValue, Trial, TrialTensor,
};
use crate::error::{Error, Result};

impl Trial {
    /// A handle on one tensor. A name not known yet is looked for in new files at once.
    pub fn tensor(&self, name: &str) -> Result<TrialTensor<'_>> {
        let mut st = self.throttled()?;
        if !st.knows_tensor(name) {
            self.refresh_if_live(&mut st)?;
        }
        if !st.knows_tensor(name) {
            return Err(Error::TensorNotFound {
                name: name.to_string(),
                location: self.location.clone(),
            });
        }
        Ok(TrialTensor {
            trial: self,
            name: name.to_string(),
        })
    }

    /// Every value of the run, step by step in step order: the way to read a whole run (or
    /// several tensors across it) when each step's values can be handled together.
    ///
    /// `mode` picks the steps (`None` or `Global`: all of them); `names` the tensors, by stored
    /// name (`None`: every record, saved reductions included). A few threads read the step
    /// files ahead of the caller, each file once, into reused buffers, and decode the records
    /// with the checks of [`TrialTensor::raw`]; the values are not copied out of the buffers.
    /// Steps listed when this is called are read, complete or not; steps written later need
    /// another call.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), smdebug_read::Error> {
    /// let trial = smdebug_read::trial::Trial::open("/tmp/run")?;
    /// for step in trial.read_steps(None, Some(&["loss"]))? {
    ///     let step = step?;
    ///     for v in &step.values {
    ///         match &v.value {
    ///             Ok(value) => println!("{} {}: {:?}", step.step, v.name, value.to_tensor()),
    ///             Err(e) => eprintln!("{} {}: {e}", step.step, v.name),
    ///         }
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_steps(&self, mode: Option<Mode>, names: Option<&[&str]>) -> Result<StepStream> {
        let (plan, local_root) = {
            let st = self.fresh()?;
            (st.plan_steps(mode, names), st.local_root.clone())
        };
        StepStream::start(
            self.storage.clone(),
            local_root,
            self.options.max_tensor_bytes,
            plan,
        )
    }

    /// Tensor `name`'s value at a step, its bytes not copied: what
    /// `trial.tensor(name)?.raw_bytes(step, mode, worker)` gives, looked up in one go (one lock,
    /// no handle), for callers that read one value per call (the Python binding's `value`).
    /// An unknown name is [`Error::TensorNotFound`], a tensor saved only as reductions
    /// [`Error::OnlyReductionsSaved`], a step without it the error its state says:
    /// [`Error::StepNotAvailable`] (a complete step without it), [`Error::StepUnavailable`] or
    /// [`Error::StepNotYetAvailable`], as Python's `Tensor.value` raises them.
    pub fn raw_bytes(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorBytes> {
        let loc = self.locate(name, step, mode.unwrap_or(Mode::Global), worker)?;
        self.read_bytes(name, &loc, Conversion::Stored)
    }

    /// Tensors `names`' values at one step as `f64` arrays, in the order of `names`: each the
    /// value or the error `trial.tensor(name)?.value(step, mode, worker)` gives, read in one
    /// go for a caller that reads every selected tensor of a step (the rules). The records are
    /// looked up under one lock, and those of one number (a run's scalars) are read in one
    /// pass, each field once, rather than through the general decoder; any other record, and
    /// any that pass does not answer for (a damaged one), is decoded and checked as `value`
    /// does. Every name gets its answer: none is skipped, and the records of each event file
    /// are read from the one copy of it the trial fetches.
    pub fn values_at_step<S: AsRef<str>>(
        &self,
        names: &[S],
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Vec<Result<ndarray::ArrayD<f64>>> {
        let mode = mode.unwrap_or(Mode::Global);
        let located: Vec<Result<Location>> = match self.throttled() {
            Ok(mut st) => names
                .iter()
                .map(|name| {
                    let name = name.as_ref();
                    let loc = self.find_location(&mut st, name, step, mode, worker)?;
                    if self.options.read_files_ahead {
                        self.ahead
                            .follow(&st, name, &loc, &self.files, &self.storage);
                    }
                    Ok(loc)
                })
                .collect(),
            // A refresh that failed: each name as `value` would find it, one by one.
            Err(_) => names
                .iter()
                .map(|name| self.locate(name.as_ref(), step, mode, worker))
                .collect(),
        };
        let budget = self.budget(Conversion::F64);
        let mut seen = smdebug_format::number::SeenMetadata::default();
        located
            .into_iter()
            .zip(names)
            .map(|(loc, name)| {
                records::read_f64(
                    self.storage.as_ref(),
                    &self.files,
                    &loc?,
                    name.as_ref(),
                    budget,
                    &mut seen,
                )
            })
            .collect()
    }

    /// Tensor `name`'s value at a step, numbers or strings (a string tensor is
    /// `Error::StringTensor` for [`raw_bytes`](Trial::raw_bytes)); otherwise as
    /// [`raw_bytes`](Trial::raw_bytes).
    pub fn raw_value(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<TensorValue> {
        self.raw_value_as(name, step, mode, worker, Conversion::Stored)
    }

    /// [`raw_value`](Trial::raw_value) for a caller that converts the value as `conversion`
    /// says: the budget ([`TrialOptions::max_tensor_bytes`](super::TrialOptions::max_tensor_bytes)) counts the conversion too, before
    /// the value is decoded (`smdebug_rs` copies every value into a numpy array:
    /// [`Conversion::Array`]).
    pub fn raw_value_as(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
        conversion: Conversion,
    ) -> Result<TensorValue> {
        let mode = mode.unwrap_or(Mode::Global);
        if !self.options.read_files_ahead {
            let loc = self.locate(name, step, mode, worker)?;
            return self.read_value(name, &loc, conversion);
        }
        let read = decoded::Read {
            name,
            mode,
            worker,
            conversion,
        };
        // The values of the batch being decoded are likely the ones asked for: they are
        // waited for here (a caller like the Python binding asked `decoded_value` first, and
        // comes here without the interpreter's lock).
        self.decoded.wait_for_pending(read);
        if let Some(value) = self.take_decoded(read, step, true) {
            return Ok(value);
        }
        // Values are decoded ahead of this caller, not files read ahead (`locate`'s).
        let loc = {
            let mut st = self.throttled()?;
            self.find_location(&mut st, name, step, mode, worker)?
        };
        // A caller reading value by value keeps the files it fetches (within the file cache's
        // budget), as the values decoded ahead of it do: its next tensor is in the same files.
        let value = self.read_value_as(name, &loc, conversion, FirstFetch::ForGood)?;
        let st = self.lock();
        self.decoded.after_read(
            read,
            step,
            st.generation,
            |after| decoded::next_locations(&st, name, after, mode, worker),
            |at| self.start_decoding(read, at),
        );
        Ok(value)
    }

    /// Starts decoding the values at `at` for `read` on the pool's threads.
    fn start_decoding(
        &self,
        read: decoded::Read<'_>,
        at: Vec<decoded::Planned>,
    ) -> Option<std::sync::Arc<decoded::Work>> {
        decoded::start(
            self.storage.clone(),
            self.files.clone(),
            read.name,
            self.budget(read.conversion),
            at,
        )
    }

    /// What [`raw_value_as`](Trial::raw_value_as) would give now, when its value was decoded
    /// ahead of this caller (see [`TrialOptions::read_files_ahead`](super::TrialOptions::read_files_ahead)):
    /// the index is as it was when the value was looked up, and no refresh is due. `None`
    /// otherwise, and when another thread holds the trial, and when the value may be in a batch
    /// still being decoded: this call never reads a file, looks for new ones or waits (it may
    /// hand the next batch of lookups to the reader's threads), so a caller may make it where
    /// it cannot block (the Python binding, holding the interpreter's lock) and read with
    /// `raw_value_as` when it gives nothing.
    pub fn decoded_value(
        &self,
        name: &str,
        step: u64,
        mode: Option<Mode>,
        worker: Option<&str>,
        conversion: Conversion,
    ) -> Option<TensorValue> {
        let read = decoded::Read {
            name,
            mode: mode.unwrap_or(Mode::Global),
            worker,
            conversion,
        };
        self.take_decoded(read, step, false)
    }

    /// A value decoded ahead (see [`decoded_value`](Trial::decoded_value)); `wait`: for the
    /// trial's lock (else `None` when another thread holds it).
    fn take_decoded(&self, read: decoded::Read<'_>, step: u64, wait: bool) -> Option<TensorValue> {
        let st = if wait {
            self.lock()
        } else {
            self.state.try_lock().ok()?
        };
        if self.may_refresh(&st)
            && st
                .last_refresh
                .is_none_or(|t| t.elapsed() >= self.options.refresh_interval)
        {
            return None;
        }
        self.decoded.take(
            read,
            step,
            st.generation,
            |after| decoded::next_locations(&st, read.name, after, read.mode, read.worker),
            |at| self.start_decoding(read, at),
        )
    }

    /// Tensor `name`'s record at `loc`, numbers or strings.
    pub(super) fn read_value(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<TensorValue> {
        self.read_value_as(name, loc, conversion, FirstFetch::Provisional)
    }

    /// [`read_value`](Trial::read_value), its event file kept as `first` says when this read
    /// fetches it whole for the first time.
    fn read_value_as(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
        first: FirstFetch,
    ) -> Result<TensorValue> {
        records::read_value(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
            first,
        )
    }

    /// The budget of one read whose value the reader converts as `conversion` says.
    pub(super) fn budget(&self, conversion: Conversion) -> Budget {
        Budget::new(self.options.max_tensor_bytes, conversion)
    }

    /// Where `name`'s record at `step` is. A step not known for the tensor is looked for in new
    /// files at once; still missing, the error is the one the step's state says.
    pub(super) fn locate(
        &self,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
    ) -> Result<Location> {
        let mut st = self.throttled()?;
        let loc = self.find_location(&mut st, name, step, mode, worker)?;
        if self.options.read_files_ahead {
            self.ahead
                .follow(&st, name, &loc, &self.files, &self.storage);
        }
        Ok(loc)
    }

    /// [`locate`](Trial::locate) in state `st`, no file read ahead.
    fn find_location(
        &self,
        st: &mut State,
        name: &str,
        step: u64,
        mode: Mode,
        worker: Option<&str>,
    ) -> Result<Location> {
        let mut found = st.find(name, step, mode, worker, &self.location)?;
        if found.is_none() && self.refresh_if_live(st)? {
            found = st.find(name, step, mode, worker, &self.location)?;
        }
        found.ok_or_else(|| st.miss(name, step, mode, &self.location))
    }

    /// Tensor `name`'s record at `loc`: only a record tagged `name` gives a value.
    pub(super) fn read(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<smdebug_core::Tensor> {
        records::read_tensor(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
        )
    }

    /// Tensor `name`'s record at `loc`, its values not copied.
    pub(super) fn read_bytes(
        &self,
        name: &str,
        loc: &Location,
        conversion: Conversion,
    ) -> Result<TensorBytes> {
        records::read_tensor_bytes(
            self.storage.as_ref(),
            &self.files,
            loc,
            name,
            self.budget(conversion),
        )
    }

    /// The steps at which `name` was saved (see [`TrialTensor::steps`]).
    pub(super) fn tensor_steps(
        &self,
        name: &str,
        mode: Option<Mode>,
        incomplete: bool,
    ) -> Result<Vec<u64>> {
        Ok(self.fresh()?.tensor_steps(name, mode, incomplete))
    }

    /// The workers that saved `name` at a step (see [`TrialTensor::workers`]).
    pub(super) fn tensor_workers(&self, name: &str, step: u64, mode: Mode) -> Result<Vec<String>> {
        self.throttled()?
            .tensor_workers(name, step, mode, &self.location)
    }

    /// Where `name`'s records are at `steps` (of `mode`'s numbering, as
    /// [`tensor_steps`](Trial::tensor_steps) gave them; see [`TrialTensor::value_chunks`]).
    pub(super) fn step_locations(
        &self,
        name: &str,
        steps: &[u64],
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<Vec<(u64, Location)>> {
        let mode_or_global = mode.unwrap_or(Mode::Global);
        let st = self.lock();
        steps
            .iter()
            .map(|&s| {
                let loc = st
                    .find(name, s, mode_or_global, worker, &self.location)?
                    .ok_or_else(|| st.miss(name, s, mode_or_global, &self.location))?;
                Ok((s, loc))
            })
            .collect()
    }

    /// Values of `name` in the CLI's JSON shape: one global step, or every complete step (in
    /// order), optionally restricted to a mode and a worker.
    pub fn tensor_records(
        &self,
        name: &str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<Vec<TensorRecordJson>> {
        self.tensor_records_iter(name, steps, mode, worker)?
            .collect()
    }

    /// [`tensor_records`](Trial::tensor_records) one step at a time: each value is read when
    /// the iterator reaches it, so a caller that prints and drops each record holds one value
    /// at a time (each within [`TrialOptions::max_tensor_bytes`](super::TrialOptions::max_tensor_bytes), counted as JSON numbers).
    pub fn tensor_records_iter<'t>(
        &'t self,
        name: &'t str,
        steps: StepSelector,
        mode: Option<Mode>,
        worker: Option<&str>,
    ) -> Result<impl Iterator<Item = Result<TensorRecordJson>> + 't> {
        let locations = {
            let st = self.fresh()?;
            st.locations_for(name, steps, mode, worker, self.location())?
        };
        Ok(locations
            .into_iter()
            .map(move |loc| self.record_json(name, &loc)))
    }

    /// The value of `name` at `loc` in the CLI's JSON shape.
    fn record_json(&self, name: &str, loc: &Location) -> Result<TensorRecordJson> {
        let (dtype, shape, values) = match self.read_value(name, loc, Conversion::Json)? {
            TensorValue::Numbers(bytes) => {
                let t = bytes.to_tensor();
                let values = t.to_f64_vec().into_iter().map(JsonElement::Number);
                (
                    t.dtype().name().to_string(),
                    t.shape().to_vec(),
                    values.collect(),
                )
            }
            TensorValue::Strings(strings) => {
                let values = strings
                    .values()
                    .iter()
                    .map(|v| JsonElement::Text(String::from_utf8_lossy(v).into_owned()));
                (
                    "string".to_string(),
                    strings.shape().to_vec(),
                    values.collect(),
                )
            }
        };
        Ok(TensorRecordJson {
            name: name.to_string(),
            step: loc.step,
            mode: loc.mode,
            mode_step: loc.mode_step,
            worker: loc.file.worker.to_string(),
            dtype,
            shape,
            values,
        })
    }
}
