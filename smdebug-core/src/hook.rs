//! The hook: the training loop's one object. At each step it decides, cheaply, which tensors are
//! due; it turns due tensors into owned records (raw and/or reductions) and hands them to a sink.
//!
//! ```
//! use smdebug_core::{Hook, MemorySink, Mode, SaveConfig, TensorView};
//!
//! let sink = MemorySink::default();
//! let mut hook = Hook::builder().save_config(SaveConfig::every(2)).build(sink.clone()).unwrap();
//! hook.set_mode(Mode::Train);
//! for step in 0..4 {
//!     let w = vec![step as f32; 6];
//!     hook.save_tensor("fc1.weight", &TensorView::from_slice(&w, &[2, 3]).unwrap(), &["weights"]);
//!     hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
//!     hook.step();
//! }
//! hook.close();
//! // Steps 0 and 2 were due: two tensors each.
//! assert_eq!(sink.tensors().len(), 4);
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::collection::{Collection, CollectionsFile};
use crate::config::{CaptureRequest, HookConfig};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::reduction::{Reduction, ReductionConfig, ReductionOp};
use crate::save_config::SaveConfig;
use crate::sink::{EndReason, Record, Sink, StepKey, StringRecord, TensorRecord};
use crate::strings::StringTensor;
use crate::tensor::{Tensor, TensorView};
use crate::timeline::Timeline;

/// A request to stop training, shared between the hook, the writer and anything that watches
/// rules. Setting it is cheap and idempotent; the first reason wins.
#[derive(Clone, Debug, Default)]
pub struct StopSignal {
    requested: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<String>>>,
}

impl StopSignal {
    /// Asks the training loop to stop at its next step.
    pub fn request(&self, reason: impl Into<String>) {
        if let Ok(mut r) = self.reason.lock()
            && r.is_none()
        {
            *r = Some(reason.into());
        }
        self.requested.store(true, Ordering::Release);
    }

    /// The reason, once a stop was requested.
    pub fn requested(&self) -> Option<String> {
        if !self.requested.load(Ordering::Acquire) {
            return None;
        }
        self.reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .or_else(|| Some("stop requested".into()))
    }
}

/// Builds a [`Hook`]. Defaults are those of [`HookConfig::default`]: the eight built-in
/// collections, every 500th step of each mode, raw tensors, no TensorBoard, worker 0 of 1.
#[derive(Debug, Default)]
pub struct HookBuilder {
    config: HookConfig,
    worker_rank: usize,
    num_workers: usize,
    stop: StopSignal,
    timeline: Timeline,
    errors: Vec<Error>,
    requests: Vec<CaptureRequest>,
}

impl HookBuilder {
    /// Starts from a complete configuration (e.g. [`HookConfig::from_smdebug_json`]).
    pub fn from_config(config: HookConfig) -> Self {
        HookBuilder {
            config,
            ..Default::default()
        }
    }

    /// The default schedule for collections without their own.
    pub fn save_config(mut self, save_config: SaveConfig) -> Self {
        self.config.save_config = save_config;
        self
    }

    /// The default of what to save for collections without their own reduction config.
    pub fn reduction_config(mut self, reductions: ReductionConfig) -> Self {
        self.config.reduction_config = reductions;
        self
    }

    /// Adds a collection, replacing a built-in of the same name.
    pub fn collection(mut self, collection: Collection) -> Self {
        self.config
            .collections
            .retain(|c| c.name() != collection.name());
        self.config.collections.push(collection);
        self
    }

    /// Adds a custom collection of the tensors whose names match `pattern`.
    pub fn include_regex(mut self, collection: &str, pattern: &str) -> Self {
        if let Err(e) = self.config.collection_mut(collection).include(pattern) {
            self.errors.push(e);
        }
        self
    }

    /// Saves every tensor the loop offers (collection `all`).
    pub fn save_all(mut self, on: bool) -> Self {
        self.config.save_all = on;
        self
    }

    /// Also writes TensorBoard scalars and histograms.
    pub fn export_tensorboard(mut self, on: bool) -> Self {
        self.config.export_tensorboard = on;
        self
    }

    /// This process's rank and the job's number of workers (`RANK`/`WORLD_SIZE`).
    pub fn worker(mut self, rank: usize, num_workers: usize) -> Self {
        self.worker_rank = rank;
        self.num_workers = num_workers;
        self
    }

    /// The worker this process is, e.g. [`WorkerInfo::from_env`](crate::WorkerInfo::from_env)
    /// (`RANK`/`WORLD_SIZE` and other launchers' variables).
    pub fn worker_info(self, worker: crate::WorkerInfo) -> Self {
        self.worker(worker.rank, worker.world_size)
    }

    /// Shares a stop signal (e.g. one a rule runner sets).
    pub fn stop_signal(mut self, stop: StopSignal) -> Self {
        self.stop = stop;
        self
    }

    /// Measures the loop's phases on `timeline` (see [`crate::timeline`]): the hook's
    /// [`step`](Hook::step) is its step boundary, so every step gets its span, and the
    /// profiling windows move with the hook's global step. Default: off.
    pub fn timeline(mut self, timeline: Timeline) -> Self {
        self.timeline = timeline;
        self
    }

    /// Also saves what a rule asks for (smdebug-rules' `capture_requests`). Requests are
    /// applied by [`build`](Self::build), after every other setting, with
    /// [`HookConfig::apply`]: the collection is saved at the union of its schedule and the
    /// requested steps.
    pub fn capture(mut self, request: CaptureRequest) -> Self {
        self.requests.push(request);
        self
    }

    /// Validates the configuration and builds the hook. The first configuration error (a bad
    /// regex, an inconsistent schedule, a rank outside the worker count) is returned here, never
    /// later in the training loop.
    pub fn build(mut self, sink: impl Sink + 'static) -> Result<Hook> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        let num_workers = self.num_workers.max(1);
        if self.worker_rank >= num_workers {
            return Err(Error::Config(format!(
                "worker rank {} is not below the number of workers {num_workers}",
                self.worker_rank
            )));
        }
        self.config.save_config.validate()?;
        for request in &self.requests {
            self.config.apply(request)?;
        }
        for c in &self.config.collections {
            if let Some(s) = &c.save_config {
                s.validate()?;
            }
        }
        if self.config.save_all {
            self.config.collection_mut("all").include(".*")?;
        }
        let mut hook = Hook {
            config: self.config,
            sink: Box::new(sink),
            mode: Mode::Global,
            global_step: 0,
            mode_steps: [0; 4],
            due_now: Vec::new(),
            any_due: false,
            membership: HashMap::new(),
            step_has_records: false,
            collections_dirty: true,
            num_workers,
            worker_rank: self.worker_rank,
            stop: self.stop,
            timeline: self.timeline,
            closed: false,
        };
        hook.refresh_due();
        hook.timeline
            .start(hook.mode, hook.mode_step(), hook.global_step);
        Ok(hook)
    }
}

/// What is due for one tensor at the current step ([`Hook::due_tensor`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DueTensor {
    /// The whole tensor is due.
    pub raw: bool,
    /// Reductions due, in the order their values are recorded.
    pub reductions: Vec<Reduction>,
    /// It belongs to a scalar collection (losses, metrics): saved whole, a TensorBoard scalar.
    scalar: bool,
    /// A TensorBoard histogram is due with the raw tensor.
    histogram: bool,
}

impl DueTensor {
    /// Only reductions are due: an adapter may compute them where the tensor lives.
    pub fn reductions_only(&self) -> bool {
        !self.raw && !self.reductions.is_empty()
    }
}

/// Decides per step what to save and hands it to a sink. See the module docs for an example.
///
/// Steps: tensors saved before [`step`](Hook::step) belong to the current global step; `step()`
/// closes it and advances the global step and the current mode's step. Changing the mode with
/// [`set_mode`](Hook::set_mode) after something was saved in the current step closes that step
/// first, so a step never mixes modes.
pub struct Hook {
    config: HookConfig,
    sink: Box<dyn Sink>,
    mode: Mode,
    global_step: u64,
    mode_steps: [u64; 4],
    /// Per collection: is it due at the current (mode, mode step)?
    due_now: Vec<bool>,
    /// Fast path: nothing at all is due this step.
    any_due: bool,
    /// Tensor name -> indices of the collections it belongs to (regex matches cached once).
    membership: HashMap<String, Vec<usize>>,
    step_has_records: bool,
    collections_dirty: bool,
    num_workers: usize,
    worker_rank: usize,
    stop: StopSignal,
    timeline: Timeline,
    closed: bool,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("mode", &self.mode)
            .field("global_step", &self.global_step)
            .field("mode_step", &self.mode_step())
            .field("collections", &self.config.collections.len())
            .finish()
    }
}

impl Hook {
    /// A builder with smdebug's defaults (see [`HookBuilder`]).
    pub fn builder() -> HookBuilder {
        HookBuilder::default()
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The current global step.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }

    /// The current step counted within the current mode.
    pub fn mode_step(&self) -> u64 {
        self.mode_steps[self.mode as usize - 1]
    }

    /// This worker's rank among [`num_workers`](Self::num_workers).
    pub fn worker_rank(&self) -> usize {
        self.worker_rank
    }

    /// How many workers write the run.
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// The configuration in force (collections grow as tensors are saved into them).
    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    /// The stop signal this hook watches.
    pub fn stop_signal(&self) -> StopSignal {
        self.stop.clone()
    }

    /// The loop's timeline: framework spans and profiling windows (off unless the builder was
    /// given one).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The reason, when someone asked this job to stop. Check it once per step.
    pub fn stop_requested(&self) -> Option<String> {
        self.stop.requested()
    }

    /// Switches mode (TRAIN, EVAL, PREDICT). Closes the current step first if it has records.
    pub fn set_mode(&mut self, mode: Mode) {
        if mode == self.mode {
            return;
        }
        if self.step_has_records {
            self.step();
        }
        self.mode = mode;
        self.timeline.set_mode(mode, self.mode_step());
        self.refresh_due();
    }

    /// Whether anything at all may be saved at the current step: some collection (or a
    /// collection not created yet, which takes the default schedule) is due. Adapters check it
    /// before walking a model, so steps where nothing is due cost one call.
    pub fn anything_due(&self) -> bool {
        !self.closed
            && self.saves_on_this_worker()
            && (self.any_due
                || self
                    .config
                    .save_config
                    .should_save(self.mode, self.mode_step()))
    }

    /// Whether a tensor of this name, in these collections, would be saved at the current step.
    /// Cheap: a boolean when nothing is due, one hash lookup otherwise. Adapters ask this before
    /// copying a tensor off the device.
    pub fn is_due(&mut self, name: &str, collections: &[&str]) -> bool {
        if !self.any_due {
            return false;
        }
        let members = self.members(name, collections);
        members.iter().any(|&i| self.due_now[i])
    }

    /// Saves `view` under `name` if any of its collections (those named here, plus those whose
    /// regexes match the name) is due now. Returns whether anything was recorded. Never fails:
    /// the training loop is not the place to handle capture problems.
    pub fn save_tensor(&mut self, name: &str, view: &TensorView<'_>, collections: &[&str]) -> bool {
        if self.closed || !self.any_due {
            // The hot path of a step where nothing is due: one branch, no hashing. Membership is
            // learnt when the tensor is first due (the collections file lists saved tensors).
            return false;
        }
        match self.due_tensor(name, collections) {
            Some(due) => self.save_due(name, &due, view),
            None => false,
        }
    }

    /// What is due for the tensor `name` in `collections` at the current step: the raw tensor,
    /// reductions, or both; `None` when nothing is. Adapters ask this before touching a device
    /// tensor, then either copy it to the host and call [`save_due`](Self::save_due), or, when
    /// only reductions are due, compute them on the device and call
    /// [`save_reduction_values`](Self::save_reduction_values).
    pub fn due_tensor(&mut self, name: &str, collections: &[&str]) -> Option<DueTensor> {
        if self.closed || !self.any_due {
            return None;
        }
        let members = self.members(name, collections);
        let mut due = DueTensor::default();
        let mut any = false;
        for i in members.into_iter().filter(|&i| self.due_now[i]) {
            any = true;
            let c = &self.config.collections[i];
            if c.is_scalar() {
                // Losses and metrics are saved whole; reductions of a scalar say nothing new.
                due.scalar = true;
                due.raw = true;
                continue;
            }
            let rc = c
                .reduction_config
                .as_ref()
                .unwrap_or(&self.config.reduction_config);
            due.raw |= rc.save_raw_tensor || rc.reductions.is_empty();
            due.histogram |= c.save_histogram;
            for r in &rc.reductions {
                if !due.reductions.contains(r) {
                    due.reductions.push(*r);
                }
            }
        }
        any.then_some(due)
    }

    /// Records what `due` (from [`due_tensor`](Self::due_tensor) at this step) asks for, from a
    /// host view: the reductions, computed here, and the raw tensor when due.
    pub fn save_due(&mut self, name: &str, due: &DueTensor, view: &TensorView<'_>) -> bool {
        if self.closed {
            return false;
        }
        let values: Vec<f64> = due.reductions.iter().map(|r| r.compute(view)).collect();
        self.send_reductions(name, due, &values);
        if due.raw {
            let tb = self.config.export_tensorboard;
            let key = self.key();
            self.sink.send(Record::Tensor(TensorRecord {
                name: name.to_string(),
                key,
                tensor: view.to_owned(),
                to_events: true,
                tb_histogram: tb && due.histogram && !due.scalar && !view.is_empty(),
                tb_scalar: tb && view.len() == 1 && due.scalar,
            }));
        }
        self.step_has_records = true;
        true
    }

    /// Records reductions computed elsewhere (on a device): `values[i]` is the value of
    /// `due.reductions[i]`. The raw tensor is not recorded, so call this only when `due.raw` is
    /// false. Returns false (and records nothing) when the counts differ.
    pub fn save_reduction_values(&mut self, name: &str, due: &DueTensor, values: &[f64]) -> bool {
        if self.closed || values.len() != due.reductions.len() || values.is_empty() {
            return false;
        }
        self.send_reductions(name, due, values);
        self.step_has_records = true;
        true
    }

    fn send_reductions(&mut self, name: &str, due: &DueTensor, values: &[f64]) {
        let tb = self.config.export_tensorboard;
        let key = self.key();
        for (r, v) in due.reductions.iter().zip(values) {
            self.sink.send(Record::Tensor(TensorRecord {
                name: r.tensor_name(name),
                key,
                tensor: Tensor::scalar_f64(*v),
                to_events: true,
                tb_histogram: false,
                tb_scalar: tb && !due.raw && r.op == ReductionOp::Mean,
            }));
        }
    }

    fn key(&self) -> StepKey {
        StepKey {
            step: self.global_step,
            mode: self.mode,
            mode_step: self.mode_step(),
        }
    }

    /// Saves a string tensor (labels, tree columns, notes) under `name` if any of its
    /// collections is due now, as [`save_tensor`](Self::save_tensor) decides for numbers. Strings
    /// have no reductions or histograms; with TensorBoard output on, they are also a text
    /// summary. Returns whether it was recorded.
    pub fn save_strings(&mut self, name: &str, value: &StringTensor, collections: &[&str]) -> bool {
        if self.closed || !self.any_due || self.due_tensor(name, collections).is_none() {
            return false;
        }
        let key = self.key();
        self.sink.send(Record::Strings(StringRecord {
            name: name.to_string(),
            key,
            value: value.clone(),
            tb_text: self.config.export_tensorboard,
        }));
        self.step_has_records = true;
        true
    }

    /// Saves a scalar (a loss, a metric) as a one-element `f64` tensor.
    pub fn save_scalar(&mut self, name: &str, value: f64, collections: &[&str]) -> bool {
        let data = [value];
        let view = TensorView::from_slice(&data, &[]).expect("one element, empty shape");
        self.save_tensor(name, &view, collections)
    }

    /// Ends the current step: publishes what it recorded and advances the step counters.
    pub fn step(&mut self) {
        if self.closed {
            return;
        }
        if self.step_has_records {
            self.flush_collections();
            self.sink.send(Record::EndStep {
                step: self.global_step,
            });
        }
        self.step_has_records = false;
        let ended = (self.mode, self.mode_step());
        self.global_step += 1;
        self.mode_steps[self.mode as usize - 1] += 1;
        self.refresh_due();
        self.timeline
            .boundary(ended, (self.mode, self.mode_step()), self.global_step);
    }

    /// Ends the run: publishes the current step and the collections, and tells the sink to write
    /// the end marker. With a pending stop request, the marker carries its reason.
    ///
    /// It does not wait for the sink: capture never blocks training, so smdebug-io's `Writer`
    /// writes what is queued on its own thread, and it is dropping the hook (with its sink)
    /// that waits for the writer to finish (up to the writer's shutdown timeout). To read the
    /// run in the same process, drop the hook first.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        if self.step_has_records {
            self.step();
        }
        self.collections_dirty = true;
        self.flush_collections();
        let reason = match self.stop.requested() {
            Some(r) => EndReason::Stopped(r),
            None => EndReason::Completed,
        };
        self.sink.send(Record::Close(reason));
        self.timeline.close(self.global_step);
        self.closed = true;
    }

    /// The collections file content for this worker. When only one worker saves
    /// ([`HookConfig::save_all_workers`] false), it says one worker, as smdebug's does.
    pub fn collections_file(&self) -> CollectionsFile {
        CollectionsFile {
            collections: self.config.collections.clone(),
            num_workers: if self.config.save_all_workers {
                self.num_workers
            } else {
                1
            },
        }
    }

    /// Whether this worker saves anything: every worker does, unless the configuration says
    /// only one (smdebug's `include_workers: "one"`), which is worker 0.
    fn saves_on_this_worker(&self) -> bool {
        self.config.save_all_workers || self.worker_rank == 0
    }

    fn flush_collections(&mut self) {
        if self.collections_dirty && self.saves_on_this_worker() {
            self.collections_dirty = false;
            let json = self.collections_file().to_json();
            self.sink.send(Record::Collections(json));
        }
    }

    /// The collections `name` belongs to, learning new memberships on the way.
    fn members(&mut self, name: &str, named: &[&str]) -> Vec<usize> {
        if let Some(m) = self.membership.get(name)
            && named
                .iter()
                .all(|n| m.iter().any(|&i| self.config.collections[i].name() == *n))
        {
            return m.clone();
        }
        let mut members: Vec<usize> = Vec::new();
        for n in named {
            let before = self.config.collections.len();
            let idx = match self.config.collections.iter().position(|c| c.name() == *n) {
                Some(i) => i,
                None => {
                    self.config.collection_mut(n);
                    before
                }
            };
            if self.config.collections[idx].add_tensor_name(name) {
                self.collections_dirty = true;
            }
            members.push(idx);
        }
        for (i, c) in self.config.collections.iter_mut().enumerate() {
            if !members.contains(&i) && c.matches(name) {
                if c.add_tensor_name(name) {
                    self.collections_dirty = true;
                }
                members.push(i);
            }
        }
        members.sort_unstable();
        if self.due_now.len() != self.config.collections.len() {
            self.refresh_due();
        }
        self.membership.insert(name.to_string(), members.clone());
        members
    }

    fn refresh_due(&mut self) {
        let mode = self.mode;
        let step = self.mode_step();
        let saves = self.saves_on_this_worker();
        let config = &self.config;
        self.due_now = config
            .collections
            .iter()
            .map(|c| {
                saves
                    && config.includes(c.name())
                    && c.save_config
                        .as_ref()
                        .unwrap_or(&config.save_config)
                        .should_save(mode, step)
            })
            .collect();
        self.any_due = self.due_now.iter().any(|d| *d);
    }
}

impl Drop for Hook {
    /// A hook dropped without `close()` still publishes its last step and the end marker.
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::save_config::SaveConfigMode;
    use crate::sink::MemorySink;

    fn hook(sink: &MemorySink, b: HookBuilder) -> Hook {
        b.build(sink.clone()).unwrap()
    }

    /// A collection saved only as its mean and its largest absolute value.
    fn mean_and_abs_max(name: &str) -> Collection {
        Collection::new(name).with_reductions(ReductionConfig::reductions_only([
            Reduction::new(ReductionOp::Mean),
            Reduction::abs(ReductionOp::Max),
        ]))
    }

    /// Name, step and values of every tensor record.
    fn saved(sink: &MemorySink) -> Vec<(String, u64, Vec<f64>)> {
        sink.tensors()
            .into_iter()
            .map(|t| (t.name, t.key.step, t.tensor.to_f64_vec()))
            .collect()
    }

    /// The two reductions of `gradient/fc.w` at `step`, as [`mean_and_abs_max`] saves them
    /// for the gradient `[-3, 1]`.
    fn fc_w_reductions(step: u64) -> Vec<(String, u64, Vec<f64>)> {
        vec![
            (
                "smdebug/reductions/mean/gradient/fc.w".into(),
                step,
                vec![-1.0],
            ),
            (
                "smdebug/reductions/abs_max/gradient/fc.w".into(),
                step,
                vec![3.0],
            ),
        ]
    }

    #[test]
    fn per_mode_schedules_and_step_counters() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder().save_config(
                SaveConfig::every(2).with_mode(Mode::Eval, SaveConfigMode::steps([1])),
            ),
        );
        let w = [1.0f32, 2.0];
        let v = TensorView::from_slice(&w, &[2]).unwrap();
        h.set_mode(Mode::Train);
        for _ in 0..4 {
            h.save_tensor("w", &v, &["weights"]);
            h.step();
        }
        h.set_mode(Mode::Eval);
        for _ in 0..3 {
            h.save_tensor("w", &v, &["weights"]);
            h.step();
        }
        h.close();
        let keys: Vec<(u64, Mode, u64)> = sink
            .tensors()
            .iter()
            .map(|t| (t.key.step, t.key.mode, t.key.mode_step))
            .collect();
        assert_eq!(
            keys,
            vec![(0, Mode::Train, 0), (2, Mode::Train, 2), (5, Mode::Eval, 1)]
        );
        assert!(matches!(
            sink.records.lock().unwrap().last(),
            Some(Record::Close(EndReason::Completed))
        ));
        assert_eq!(sink.ended_steps(), vec![0, 2, 5]);
    }

    /// String tensors follow their collections' schedule like numbers, end their step, join
    /// their collections and become text summaries when TensorBoard output is on.
    #[test]
    fn string_tensors_are_saved_when_their_collection_is_due() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .save_config(SaveConfig::every(2))
                .export_tensorboard(true),
        );
        let labels = StringTensor::from_strs(&["cat", "dog"]);
        let mut saved = Vec::new();
        for _ in 0..4 {
            saved.push(h.save_strings("labels", &labels, &["labels"]));
            h.step();
        }
        h.close();
        assert_eq!(saved, [true, false, true, false]);
        let records = sink.records.lock().unwrap();
        let strings: Vec<&StringRecord> = records
            .iter()
            .filter_map(|r| match r {
                Record::Strings(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(strings.len(), 2);
        assert_eq!((strings[1].key.step, strings[1].value.clone()), (2, labels));
        assert!(strings.iter().all(|s| s.tb_text && s.name == "labels"));
        drop(records);
        assert_eq!(sink.ended_steps(), [0, 2]);
        // A closed hook saves nothing.
        assert!(!h.save_strings("labels", &StringTensor::from_strs(&["x"]), &["labels"]));
    }

    #[test]
    fn collections_left_out_of_the_included_list_are_not_saved() {
        let sink = MemorySink::default();
        let config = HookConfig::from_smdebug_json(
            r#"{"HookParameters": {"save_interval": "1"},
                "CollectionConfigurations": [{"CollectionName": "gradients"}]}"#,
        )
        .unwrap();
        let mut h = hook(&sink, HookBuilder::from_config(config));
        let x = [1.0f32, 2.0];
        let v = TensorView::from_slice(&x, &[2]).unwrap();
        assert!(h.save_tensor("gradient/fc.w", &v, &[]));
        assert!(!h.save_tensor("fc.w", &v, &["weights"]));
        assert!(
            h.save_scalar("loss", 0.5, &["losses"]),
            "losses are always included"
        );
        h.step();
        let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["gradient/fc.w", "loss"]);
    }

    #[test]
    fn with_include_workers_one_only_worker_0_saves_and_says_one_worker() {
        let config = HookConfig::from_smdebug_json(
            r#"{"HookParameters": {"save_interval": "1", "include_workers": "one"}}"#,
        )
        .unwrap();
        let x = [1.0f32];
        let v = TensorView::from_slice(&x, &[1]).unwrap();
        let mut collections_files = Vec::new();
        for rank in 0..2 {
            let sink = MemorySink::default();
            let mut h = hook(
                &sink,
                HookBuilder::from_config(config.clone()).worker(rank, 2),
            );
            assert_eq!(h.anything_due(), rank == 0);
            assert_eq!(h.save_tensor("fc.w", &v, &["weights"]), rank == 0);
            h.step();
            h.close();
            assert_eq!(
                sink.tensors().len(),
                usize::from(rank == 0),
                "worker {rank}"
            );
            collections_files.push(
                sink.records
                    .lock()
                    .unwrap()
                    .iter()
                    .filter_map(|r| match r {
                        Record::Collections(json) => Some(json["_meta"]["num_workers"].clone()),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            );
        }
        assert!(
            collections_files[0].iter().all(|n| n == 1),
            "{collections_files:?}"
        );
        assert!(!collections_files[0].is_empty() && collections_files[1].is_empty());
    }

    #[test]
    fn reductions_replace_or_join_raw_tensors() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .save_config(SaveConfig::every(1))
                .collection(mean_and_abs_max("gradients")),
        );
        let g = [-3.0f32, 1.0];
        h.save_tensor(
            "gradient/fc.w",
            &TensorView::from_slice(&g, &[2]).unwrap(),
            &[],
        );
        h.step();
        assert_eq!(
            saved(&sink),
            fc_w_reductions(0),
            "the gradients collection matched by its built-in regex, reductions only"
        );
    }

    #[test]
    fn reductions_computed_elsewhere_are_recorded_like_the_hooks_own() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .save_config(SaveConfig::every(2))
                .collection(mean_and_abs_max("gradients"))
                .collection(Collection::new("weights")),
        );
        let due = h.due_tensor("gradient/fc.w", &["gradients"]).unwrap();
        assert!(due.reductions_only());
        assert_eq!(due.reductions.len(), 2);
        assert!(
            !h.due_tensor("fc.w", &["weights"])
                .unwrap()
                .reductions_only()
        );
        // A count that does not match the plan records nothing.
        assert!(!h.save_reduction_values("gradient/fc.w", &due, &[1.0]));
        assert!(h.save_reduction_values("gradient/fc.w", &due, &[-1.0, 3.0]));
        h.step();
        assert_eq!(
            h.due_tensor("gradient/fc.w", &["gradients"]),
            None,
            "step 1 is not due"
        );
        h.close();
        assert_eq!(saved(&sink), fc_w_reductions(0));
        assert_eq!(
            sink.ended_steps(),
            vec![0],
            "the step with device-computed reductions is published once"
        );
    }

    #[test]
    fn anything_due_follows_the_schedules_and_ends_with_close() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .save_config(SaveConfig::every(100))
                .collection(Collection::new("gradients").with_save_config(SaveConfig::every(3))),
        );
        let due: Vec<bool> = (0..7)
            .map(|_| {
                let d = h.anything_due();
                h.step();
                d
            })
            .collect();
        assert_eq!(due, [true, false, false, true, false, false, true]);
        h.close();
        assert!(!h.anything_due());
    }

    #[test]
    fn nothing_due_means_nothing_copied_or_sent() {
        let sink = MemorySink::default();
        let mut h = hook(&sink, Hook::builder().save_config(SaveConfig::every(100)));
        h.step(); // step 1: not due
        let big = vec![0.5f32; 1024];
        let v = TensorView::from_slice(&big, &[1024]).unwrap();
        assert!(!h.is_due("w", &["weights"]));
        assert!(!h.save_tensor("w", &v, &["weights"]));
        assert!(sink.tensors().is_empty());
    }

    #[test]
    fn custom_regex_collection_selects_by_name() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .save_config(SaveConfig::new(SaveConfigMode::never()))
                .collection(
                    Collection::new("attention")
                        .with_regex(r"^layer0\.attn\.(scores|q|k)$")
                        .unwrap()
                        .with_save_config(SaveConfig::every(1)),
                ),
        );
        let x = [1u8, 2, 3];
        let v = TensorView::from_slice(&x, &[3]).unwrap();
        assert!(h.save_tensor("layer0.attn.scores", &v, &[]));
        assert!(!h.save_tensor("layer1.attn.scores", &v, &[]));
        assert!(!h.save_tensor("layer0.fc.weight", &v, &["weights"]));
        h.step();
        let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec!["layer0.attn.scores"]);
    }

    #[test]
    fn bad_configuration_fails_at_build() {
        let err = Hook::builder()
            .include_regex("relus", "relu[")
            .build(MemorySink::default())
            .unwrap_err();
        assert!(err.to_string().contains("relu["), "{err}");
        let err = Hook::builder()
            .worker(2, 2)
            .build(MemorySink::default())
            .unwrap_err();
        assert!(err.to_string().contains("rank 2"), "{err}");
    }

    #[test]
    fn mode_change_closes_a_step_with_records() {
        let sink = MemorySink::default();
        let mut h = hook(&sink, Hook::builder().save_config(SaveConfig::every(1)));
        h.set_mode(Mode::Train);
        h.save_scalar("loss", 0.5, &["losses"]);
        h.set_mode(Mode::Eval);
        h.save_scalar("loss", 0.7, &["losses"]);
        drop(h);
        let keys: Vec<StepKey> = sink.tensors().iter().map(|t| t.key).collect();
        assert_eq!(
            keys[0],
            StepKey {
                step: 0,
                mode: Mode::Train,
                mode_step: 0
            }
        );
        assert_eq!(
            keys[1],
            StepKey {
                step: 1,
                mode: Mode::Eval,
                mode_step: 0
            }
        );
    }

    #[test]
    fn stop_request_is_seen_and_recorded_in_the_end_reason() {
        let sink = MemorySink::default();
        let stop = StopSignal::default();
        let mut h = hook(&sink, Hook::builder().stop_signal(stop.clone()));
        assert_eq!(h.stop_requested(), None);
        stop.request("LossNotDecreasing fired at step 40");
        stop.request("a later reason is ignored");
        assert_eq!(
            h.stop_requested().as_deref(),
            Some("LossNotDecreasing fired at step 40")
        );
        h.close();
        let records = sink.records.lock().unwrap();
        assert_eq!(
            records.last(),
            Some(&Record::Close(EndReason::Stopped(
                "LossNotDecreasing fired at step 40".into()
            )))
        );
    }

    /// A rule's request saves what the user's configuration would not: the loop offers
    /// `relu1.output` in `outputs` (never due here), the request's regex collection takes it at
    /// the requested steps, and a request given before the default schedule still unions with it.
    #[test]
    fn capture_requests_save_what_rules_ask_for_at_their_steps() {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            Hook::builder()
                .capture(
                    CaptureRequest::new("relu_output", SaveConfig::every(3), "DeadRelu")
                        .with_regex(r"relu\d*\.output"),
                )
                .capture(CaptureRequest::new(
                    "gradients",
                    SaveConfig::every(4),
                    "VanishingGradient",
                ))
                .save_config(SaveConfig::new(SaveConfigMode::never())),
        );
        let x = [1.0f32, 0.0];
        let v = TensorView::from_slice(&x, &[2]).unwrap();
        h.set_mode(Mode::Train);
        for _ in 0..7 {
            h.save_tensor("relu1.output", &v, &["outputs"]);
            h.save_tensor("gradient/fc1.weight", &v, &["gradients"]);
            h.save_tensor("fc1.weight", &v, &["weights"]);
            h.step();
        }
        h.close();
        let got: Vec<(String, u64)> = saved(&sink).into_iter().map(|(n, s, _)| (n, s)).collect();
        let want: Vec<(String, u64)> = [
            ("relu1.output", 0),
            ("gradient/fc1.weight", 0),
            ("relu1.output", 3),
            ("gradient/fc1.weight", 4),
            ("relu1.output", 6),
        ]
        .iter()
        .map(|(n, s)| (n.to_string(), *s))
        .collect();
        assert_eq!(got, want);
        let bad = Hook::builder()
            .capture(CaptureRequest::new("x", SaveConfig::every(1), "Rule").with_regex("("))
            .build(MemorySink::default());
        assert!(bad.is_err_and(|e| e.to_string().contains("Rule")));
    }
}
