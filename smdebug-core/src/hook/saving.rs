//! The [`Hook`] at work: which tensors are due at a step, their records (raw values and
//! reductions) handed to the sink, step and mode changes, closing.

use std::collections::HashMap;

use crate::collection::{CollectionsFile, LABELS_SUFFIX, PREDICTIONS_SUFFIX};
use crate::config::HookConfig;
use crate::mode::Mode;
use crate::reduction::{Reduction, ReductionOp};
use crate::sink::{EndReason, Record, Sink, StepKey, StopCause, StringRecord, TensorRecord};
use crate::strings::StringTensor;
use crate::tensor::{Tensor, TensorView};
use crate::timeline::Timeline;

use super::stop::StopSignal;

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
    pub(super) config: HookConfig,
    pub(super) sink: Box<dyn Sink>,
    pub(super) mode: Mode,
    pub(super) global_step: u64,
    pub(super) mode_steps: [u64; 4],
    /// Per collection: is it due at the current (mode, mode step)?
    pub(super) due_now: Vec<bool>,
    /// Fast path: nothing at all is due this step.
    pub(super) any_due: bool,
    /// Tensor name -> indices of the collections it belongs to (regex matches cached once).
    pub(super) membership: HashMap<String, Vec<usize>>,
    pub(super) step_has_records: bool,
    pub(super) collections_dirty: bool,
    pub(super) num_workers: usize,
    pub(super) worker_rank: usize,
    pub(super) stop: StopSignal,
    pub(super) timeline: Timeline,
    pub(super) closed: bool,
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

    /// Why, when someone asked this job to stop (the reason, and the rule and step when a rule
    /// asked). Check it once per step.
    pub fn stop_requested(&self) -> Option<StopCause> {
        self.stop.cause()
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

    /// Saves what the loss `name` was computed from, as Python smdebug's `register_loss` does:
    /// `predictions` (scores or classes) as `<name>.predictions` in `predictions` and `labels`
    /// as `<name>.labels` in `labels`, each when due. ClassImbalance and Confusion read them
    /// with their default parameters. Returns how many were recorded.
    pub fn save_loss_inputs(
        &mut self,
        name: &str,
        predictions: &TensorView<'_>,
        labels: &TensorView<'_>,
    ) -> usize {
        let predicted = self.save_tensor(
            &format!("{name}{PREDICTIONS_SUFFIX}"),
            predictions,
            &["predictions"],
        );
        let labelled = self.save_tensor(&format!("{name}{LABELS_SUFFIX}"), labels, &["labels"]);
        usize::from(predicted) + usize::from(labelled)
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
        let reason = match self.stop.cause() {
            Some(cause) => EndReason::Stopped(cause),
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

    pub(super) fn refresh_due(&mut self) {
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
