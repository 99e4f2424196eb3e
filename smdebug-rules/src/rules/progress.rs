//! Rules about training progress: Overtraining, StalledTraining.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, Needs, RuleResult, TensorRule};
use crate::rules::losses::Window;
use crate::select::request;
use crate::select::{TensorSelection, mode_at};

/// Parameters of [`Overtraining`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OvertrainingParams {
    /// TRAIN steps without improvement before the training loss counts as stalled. Default 5.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience_train: u64,
    /// EVAL values per window; a whole window without improvement and the validation loss
    /// counts as stalled. Default 10.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience_validation: u64,
    /// An improvement is a loss lower than the best so far by more than this. Default `0.01`.
    #[serde(deserialize_with = "lenient::f64")]
    pub delta: f64,
}

impl Default for OvertrainingParams {
    fn default() -> Self {
        OvertrainingParams {
            patience_train: 5,
            patience_validation: 10,
            delta: 0.01,
        }
    }
}

/// The best window of values so far, and how many values have come since one improved on it.
#[derive(Default)]
struct Record {
    best: Option<Window>,
    since: u64,
}

impl Record {
    /// Judges `current`, a window standing for `values` values, against the best so far. It
    /// improves when its mean is below the best by more than `delta`, or could be within the
    /// noise of the two means: noise alone never counts as a stall.
    fn judge(&mut self, current: Window, delta: f64, values: u64) {
        let improved = self
            .best
            .is_none_or(|best| current.mean < best.mean - delta + current.noise(&best));
        if improved {
            self.since = 0;
            if self.best.is_none_or(|b| current.mean < b.mean) {
                self.best = Some(current);
            }
        } else {
            self.since += values;
        }
    }
}

/// The validation side: windows of `patience_validation` EVAL values, judged mean to mean.
#[derive(Default)]
struct EvalPlateau {
    values: Vec<f64>,
    record: Record,
}

impl EvalPlateau {
    /// Adds a value; at the end of a window, judges it against the best window so far.
    fn observe(&mut self, loss: f64, delta: f64, size: usize) {
        self.values.push(loss);
        if self.values.len() < size {
            return;
        }
        let current = Window::of(&self.values);
        self.values.clear();
        self.record.judge(current, delta, size as u64);
    }
}

/// The training side: the moving window of the last `patience_train` values.
#[derive(Default)]
struct Plateau {
    record: Record,
    /// The last values, for the moving average.
    window: std::collections::VecDeque<f64>,
}

impl Plateau {
    /// Takes the moving window `current`, judged as the validation side judges its windows:
    /// one lucky batch sets no best, and batches that swing more than `delta` are no stall. A
    /// window whose mean is not finite never improves.
    fn observe(&mut self, current: Window, delta: f64) {
        if current.mean.is_finite() {
            self.record.judge(current, delta, 1);
        } else {
            self.record.since += 1;
        }
    }
}

/// **Overtraining** — for each loss (the `losses` collection, else names containing `loss`),
/// tracks the best TRAIN value (of the moving average over `patience_train` values, as
/// per-batch losses are noisy) and the best EVAL window (the mean of `patience_validation`
/// consecutive EVAL values, compared window to window, as evaluation batches differ); training
/// has stalled when it has not improved on its best by more than `delta` for `patience_train`
/// TRAIN steps, validation when a whole window of `patience_validation` EVAL values did not.
/// On both sides a window counts as improving when its mean is below the best by more than
/// `delta` less three standard errors of the difference of the two means: noise is no stall
/// (the two-worker example's batch losses swing by ±0.1 while they fall, and a moving average
/// compared without its noise stalled for 8 saved steps there). Fires when both have stalled
/// (when the run has no complete EVAL window yet, when training has).
///
/// When it fires: more training will not help: stop (early stopping at the best validation
/// step), or change the learning-rate schedule.
pub struct Overtraining {
    params: OvertrainingParams,
    losses: TensorSelection,
    state: HashMap<String, (Plateau, EvalPlateau)>,
}

impl Overtraining {
    /// The rule's name.
    pub const NAME: &'static str = "Overtraining";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: OvertrainingParams) -> Result<Self> {
        Check::new(Self::NAME).finite("delta", params.delta)?;
        Ok(Overtraining {
            losses: TensorSelection::losses(Self::NAME, &[], &[], true)?,
            params,
            state: HashMap::new(),
        })
    }
}

impl TensorRule for Overtraining {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        Needs::default()
            .reading(&self.losses)
            .capturing(request("losses", Self::NAME))
            .requiring(format!(
                "a loss saved at an EVAL step, or at {} TRAIN steps",
                self.params.patience_train.max(1)
            ))
            .step_by_step()
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let Some(mode) = mode_at(Self::NAME, trial, step)? else {
            return Ok(result);
        };
        let p = &self.params;
        for reading in self.losses.scalars_at(Self::NAME, trial, step)? {
            let (name, loss) = reading?;
            let (train, eval) = self.state.entry(name.clone()).or_default();
            match mode {
                Mode::Train => {
                    // Per-batch training losses are noisy: follow their moving average over
                    // `patience_train` values, so one lucky batch does not set the best.
                    let w = p.patience_train.max(1) as usize;
                    train.window.push_back(loss);
                    while train.window.len() > w {
                        train.window.pop_front();
                    }
                    if train.window.len() < w {
                        // Judged once the moving average has its `patience_train` values.
                        result.unjudged += 1;
                        continue;
                    }
                    let values: Vec<f64> = train.window.iter().copied().collect();
                    train.observe(Window::of(&values), p.delta)
                }
                Mode::Eval => eval.observe(loss, p.delta, p.patience_validation.max(1) as usize),
                _ => continue,
            }
            result.datapoints += 1;
            let train_stalled =
                train.record.best.is_some() && train.record.since >= p.patience_train;
            let eval_stalled =
                eval.record.best.is_some() && eval.record.since >= p.patience_validation;
            let has_eval = eval.record.best.is_some();
            if train_stalled && (eval_stalled || !has_eval) {
                let mut msg = format!(
                    "{name}: training loss has not improved on {:.6} by more than {} for {} TRAIN steps",
                    train.record.best.map_or(f64::NAN, |b| b.mean),
                    p.delta,
                    train.record.since
                );
                // Per mode: what was measured, steps without improvement, the patience.
                let mut stalls = vec![(
                    "train_steps_without_improvement",
                    train.record.since,
                    p.patience_train,
                )];
                if has_eval {
                    msg.push_str(&format!(
                        ", validation loss not on {:.6} for {} EVAL steps",
                        eval.record.best.map_or(f64::NAN, |b| b.mean),
                        eval.record.since
                    ));
                    stalls.push((
                        "eval_steps_without_improvement",
                        eval.record.since,
                        p.patience_validation,
                    ));
                }
                result.fire(msg);
                for (measure, since, patience) in stalls {
                    result.evidence.push(
                        Evidence::new(&name, step, measure, since as f64).limit(patience as f64),
                    );
                }
            }
        }
        Ok(result)
    }
}

/// Parameters of [`StalledTraining`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StalledTrainingParams {
    /// Seconds without a new step before the rule fires. Default `1800`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// Also stop the training job when it fires. Default `false`.
    #[serde(deserialize_with = "lenient::bool")]
    pub stop_training_on_fire: bool,
    /// SageMaker used this to find the job to stop; accepted and ignored here (the stop request
    /// goes through the run directory). Default: none.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub training_job_name_prefix: Option<String>,
}

impl Default for StalledTrainingParams {
    fn default() -> Self {
        StalledTrainingParams {
            threshold: 1800.0,
            stop_training_on_fire: false,
            training_job_name_prefix: None,
        }
    }
}

/// **StalledTraining** — fires when a live run has written no new step for `threshold`
/// seconds (measured by the runner that follows it; a finished run never stalls). With
/// `stop_training_on_fire`, the runner also asks the job to stop.
///
/// When it fires: the job hangs (a deadlock in data loading or collective communication, a
/// dead worker) or saves too rarely for this threshold.
pub struct StalledTraining {
    params: StalledTrainingParams,
    fired_for: Option<Option<u64>>,
}

impl StalledTraining {
    /// The rule's name.
    pub const NAME: &'static str = "StalledTraining";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: StalledTrainingParams) -> Result<Self> {
        Check::new(Self::NAME).positive("threshold", params.threshold, "number of seconds")?;
        Ok(StalledTraining {
            params,
            fired_for: None,
        })
    }

    /// Whether the rule asks the runner to stop training when it fires.
    pub fn stops_training(&self) -> bool {
        self.params.stop_training_on_fire
    }
}

impl TensorRule for StalledTraining {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        // It reads no tensor: it watches saved steps arrive, so the hook must save something
        // regularly; losses cost the least.
        Needs::default()
            .capturing(request("losses", Self::NAME))
            .requiring("saved steps")
            .step_by_step()
    }

    fn invoke_at_step(&mut self, _trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        result.datapoints = 1;
        Ok(result)
    }

    fn on_idle(
        &mut self,
        _trial: &Trial,
        last_step: Option<u64>,
        idle: Duration,
    ) -> Result<Option<RuleResult>> {
        let secs = idle.as_secs_f64();
        // One firing per stall: a new step starts a new watch.
        if secs < self.params.threshold || self.fired_for == Some(last_step) {
            return Ok(None);
        }
        self.fired_for = Some(last_step);
        let step = last_step.unwrap_or(0);
        let mut result = RuleResult::new(step);
        result.datapoints = 1;
        let after = match last_step {
            Some(s) => format!("after step {s}"),
            None => "since the runner started".to_string(),
        };
        result.fire(format!(
            "no new step for {secs:.1} s {after} (threshold {} s)",
            self.params.threshold
        ));
        result.evidence.push(
            Evidence::new("(run)", step, "seconds_without_new_step", secs)
                .limit(self.params.threshold),
        );
        Ok(Some(result))
    }
}
