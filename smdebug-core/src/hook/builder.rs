//! [`HookBuilder`]: a hook's configuration, collections, worker, stop signal and timeline,
//! checked when it is built.

use std::collections::HashMap;

use crate::collection::Collection;
use crate::config::{CaptureRequest, HookConfig};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::reduction::ReductionConfig;
use crate::save_config::SaveConfig;
use crate::sink::Sink;
use crate::timeline::Timeline;

use super::saving::Hook;
use super::stop::StopSignal;

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

    /// Saves only the collections named (smdebug's `include_collections`; `losses` and `metrics`
    /// always are). Without it every collection is saved at its schedule.
    pub fn include_collections<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.config.include_collections =
            Some(names.iter().map(|n| n.as_ref().to_string()).collect());
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

impl Hook {
    /// A builder with smdebug's defaults (see [`HookBuilder`]).
    pub fn builder() -> HookBuilder {
        HookBuilder::default()
    }
}
