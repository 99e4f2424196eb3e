//! Rules about the loss: LossNotDecreasing, Overfit.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use smdebug_core::{CaptureRequest, Mode, SaveConfig};
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, LookBack, Needs, RuleResult, TensorRule};
use crate::select::{RULE_SAVE_INTERVAL, request};
use crate::select::{SelectionParams, TensorSelection, mode_at, read_error, scalar_at};

/// Parameters of [`LossNotDecreasing`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossNotDecreasingParams {
    /// Loss tensors besides the `losses` collection (`collection_names`, `tensor_regex`).
    /// Default: none.
    #[serde(flatten)]
    pub selection: SelectionParams,
    /// Also check the `losses` collection. Default `true`.
    #[serde(deserialize_with = "lenient::bool")]
    pub use_losses_collection: bool,
    /// Values per window: the loss is judged as means of consecutive, non-overlapping windows
    /// of this many values of the mode. Default 10.
    #[serde(deserialize_with = "lenient::u64")]
    pub num_steps: u64,
    /// Each window's mean must be lower than the previous window's by at least this percentage.
    /// Default `0.1`.
    #[serde(deserialize_with = "lenient::f64")]
    pub diff_percent: f64,
    /// Fires when a window's mean is more than this percentage above the lowest window mean,
    /// beyond noise; also the widest noise band in which a stall can be told. Default `5`.
    #[serde(deserialize_with = "lenient::f64")]
    pub increase_threshold_percent: f64,
    /// TRAIN, EVAL or GLOBAL. Default: none: TRAIN if the loss has TRAIN steps, else EVAL, else
    /// GLOBAL.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub mode: Option<String>,
}

impl Default for LossNotDecreasingParams {
    fn default() -> Self {
        LossNotDecreasingParams {
            selection: SelectionParams::default(),
            use_losses_collection: true,
            num_steps: 10,
            diff_percent: 0.1,
            increase_threshold_percent: 5.0,
            mode: None,
        }
    }
}

#[derive(Default)]
struct LossTrack {
    mode: Option<Mode>,
    /// The values of the window being filled (at most `num_steps`).
    window: Vec<f64>,
    /// Mean and standard error of the last complete window.
    previous: Option<Window>,
    /// The complete window with the lowest mean so far.
    lowest: Option<Window>,
}

/// How many standard errors of a difference of two window means are taken for noise. A run
/// makes dozens of window comparisons: at two, the noise of a healthy run's batch losses
/// crossed the line once in the raw digits run's 45 windows; at three, never in the demo's, the
/// raw digits' or the hook corpus's healthy runs, while a loss stuck at chance level (its window
/// means within ±1 %) still shows at the first comparison.
const NOISE_SES: f64 = 3.0;

/// A complete window of `num_steps` values: its mean and the standard error of that mean.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub(crate) mean: f64,
    se: f64,
}

impl Window {
    pub(crate) fn of(values: &[f64]) -> Window {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Window {
            mean,
            se: (var / n).sqrt(),
        }
    }

    /// Three standard errors of the difference between this window's mean and `other`'s, in
    /// percent of `base`: the band within which two windows' means differ by noise alone.
    pub(crate) fn noise_percent(&self, other: &Window, base: f64) -> f64 {
        self.noise(other) / base.abs() * 100.0
    }

    /// Three standard errors of the difference between this window's mean and `other`'s.
    pub(crate) fn noise(&self, other: &Window) -> f64 {
        NOISE_SES * self.se.hypot(other.se)
    }
}

/// **LossNotDecreasing** — follows each loss (scalar) in one mode. Per-batch losses are noisy,
/// so it compares like with like: the means of consecutive, non-overlapping windows of
/// `num_steps` values, with `noise` = three standard errors of the difference of two window means
/// (from the spread of the values in each), in percent of the earlier one. At the end of each
/// window it fires when
///
/// - from the second window on, the mean fell less than `diff_percent` % from the window before,
///   and that fall plus `noise` is under `increase_threshold_percent` % (the windows are precise
///   enough to tell a stall from noise: a stuck loss at chance level is, a converging loss
///   swinging ±15 % with the batch is not); or
/// - the mean is more than `increase_threshold_percent` % above the lowest window mean so far
///   once `noise` is taken off the rise;
///
/// and at once when the loss is NaN.
///
/// Losses come from the `losses` collection (`use_losses_collection`), `collection_names` and
/// `tensor_regex`; with none of these present, tensors whose name contains `loss` (`loss`,
/// `CrossEntropyLoss_output_0`). SageMaker preferred EVAL steps by default; Rust loops record
/// one evaluation loss per batch, which varies with the batch, so the default here prefers
/// TRAIN and falls back to EVAL, then GLOBAL: the first evaluation comes after a whole epoch,
/// too late to report a stuck loss early, and in the demo the mean of one evaluation pass swings
/// by up to 47 % from the pass before (SGD at a constant rate) while its training windows fall.
///
/// When it fires: the model has stopped learning: lower (or raise) the learning rate, check
/// that the optimizer steps and that gradients reach the parameters, check the data and labels.
pub struct LossNotDecreasing {
    params: LossNotDecreasingParams,
    mode: Option<Mode>,
    losses: TensorSelection,
    tracks: HashMap<String, LossTrack>,
}

impl LossNotDecreasing {
    /// The rule's name.
    pub const NAME: &'static str = "LossNotDecreasing";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: LossNotDecreasingParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.at_least("num_steps", params.num_steps, 1)?;
        check.finite("diff_percent", params.diff_percent)?;
        check.finite(
            "increase_threshold_percent",
            params.increase_threshold_percent,
        )?;
        Ok(LossNotDecreasing {
            mode: check.mode("mode", params.mode.as_deref())?,
            losses: TensorSelection::losses(
                Self::NAME,
                &params.selection.collection_names,
                &params.selection.tensor_regex,
                params.use_losses_collection,
            )?,
            params,
            tracks: HashMap::new(),
        })
    }

    fn pick_mode(&self, trial: &Trial, name: &str, step: u64) -> Result<Mode> {
        if let Some(m) = self.mode {
            return Ok(m);
        }
        let t = trial
            .tensor(name)
            .map_err(|e| read_error(Self::NAME, step, e))?;
        for m in [Mode::Train, Mode::Eval] {
            if !t
                .steps(Some(m))
                .map_err(|e| read_error(Self::NAME, step, e))?
                .is_empty()
            {
                return Ok(m);
            }
        }
        Ok(Mode::Global)
    }
}

impl TensorRule for LossNotDecreasing {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        let p = &self.params;
        let given = &p.selection;
        // Without a selection of its own, the rule reads the `losses` collection (and names
        // containing `loss`): the hook saves `losses` for it.
        let nothing_given = given.collection_names.is_empty() && given.tensor_regex.is_empty();
        // It judges windows of `num_steps` saved values, two at least: at the rules' interval
        // the first verdict would come after 2 × num_steps × 500 steps. It asks for its losses
        // often enough to have two windows by the rules' interval.
        let interval = (RULE_SAVE_INTERVAL / (2 * p.num_steps)).max(1);
        let often = |collection: &str| {
            CaptureRequest::new(
                collection,
                SaveConfig::every(interval),
                Self::NAME.to_string(),
            )
        };
        let mut capture = Vec::new();
        if p.use_losses_collection || nothing_given {
            capture.push(often("losses"));
        }
        for c in given
            .collection_names
            .iter()
            .filter(|c| !c.trim().is_empty())
        {
            capture.push(often(c));
        }
        if !given.tensor_regex.is_empty() {
            capture.push(CaptureRequest {
                include_regex: given.tensor_regex.clone(),
                ..often(Self::NAME)
            });
        }
        let modes = match &self.mode {
            Some(m) => format!("{} steps", m.name()),
            None => "TRAIN, EVAL or GLOBAL steps".into(),
        };
        Needs {
            reads: vec![self.losses.clone()],
            capture,
            requires: Some(format!(
                "two windows of {} losses (num_steps) saved at {modes}",
                p.num_steps
            )),
            // Its windows of values are its own.
            look_back: LookBack::Steps(0),
        }
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let Some(step_mode) = mode_at(Self::NAME, trial, step)? else {
            return Ok(result);
        };
        let p = self.params.clone();
        // A step of another mode than every loss it read is followed in is not one it judges.
        let mut other_mode = false;
        for reading in self.losses.scalars_at(Self::NAME, trial, step)? {
            let (name, loss) = reading?;
            if self.tracks.get(&name).is_none_or(|t| t.mode.is_none()) {
                let m = self.pick_mode(trial, &name, step)?;
                self.tracks.entry(name.clone()).or_default().mode = Some(m);
            }
            let track = self.tracks.entry(name.clone()).or_default();
            let mode = track.mode.unwrap_or(Mode::Global);
            if mode != Mode::Global && mode != step_mode {
                other_mode = true;
                continue;
            }
            let label = format!("{name} ({})", mode.name());
            if loss.is_nan() {
                result.datapoints += 1;
                result.fire(format!("{label} is NaN at step {step}"));
                result
                    .evidence
                    .push(Evidence::new(&label, step, "loss", loss));
                continue;
            }
            let n = p.num_steps as usize;
            track.window.push(loss);
            // A value is judged with its window, against the window before, once the window
            // is whole: till then (and in the first window) it waits.
            if track.window.len() < n || track.previous.is_none() {
                result.unjudged += 1;
            } else {
                result.datapoints += n;
            }
            if track.window.len() < n {
                continue;
            }
            let current = Window::of(&track.window);
            track.window.clear();
            if let Some(previous) = track.previous {
                // Like with like: this window's mean against the one before, judged only when
                // the windows are precise enough to tell a plateau from progress.
                let decrease = (previous.mean - current.mean) / previous.mean.abs() * 100.0;
                let noise = current.noise_percent(&previous, previous.mean);
                let stuck =
                    decrease < p.diff_percent && decrease + noise < p.increase_threshold_percent;
                if stuck || decrease.is_nan() {
                    result.fire(format!(
                        "{label}: mean over the last {n} values fell {decrease:.3} % ({:.6} -> {:.6}), less than {} % (noise ± {noise:.3} %)",
                        previous.mean, current.mean, p.diff_percent
                    ));
                    result.evidence.push(
                        Evidence::new(&label, step, "decrease_percent", decrease)
                            .limit(p.diff_percent),
                    );
                }
            }
            if let Some(lowest) = track.lowest {
                // The rise beyond what noise explains, against the lowest window so far.
                let rise = (current.mean - lowest.mean) / lowest.mean.abs() * 100.0;
                let beyond_noise = rise - current.noise_percent(&lowest, lowest.mean);
                if beyond_noise > p.increase_threshold_percent {
                    result.fire(format!(
                        "{label}: mean over the last {n} values {:.6} is {rise:.2} % above its lowest window mean {:.6} ({beyond_noise:.2} % beyond noise)",
                        current.mean, lowest.mean
                    ));
                    result.evidence.push(
                        Evidence::new(&label, step, "increase_percent", beyond_noise)
                            .limit(p.increase_threshold_percent),
                    );
                }
            }
            if track.lowest.is_none_or(|l| current.mean < l.mean) {
                track.lowest = Some(current);
            }
            track.previous = Some(current);
        }
        if other_mode && result.datapoints + result.unjudged == 0 {
            result.outside = true;
        }
        Ok(result)
    }
}

/// Parameters of [`Overfit`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OverfitParams {
    /// Regexes of loss tensors. Default: none (the `losses` collection, else names containing
    /// `loss`).
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
    /// First global step to compare at. Default 0.
    #[serde(deserialize_with = "lenient::u64")]
    pub start_step: u64,
    /// Fires after this many consecutive evaluation steps over the ratio. Default 1.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
    /// Largest allowed (validation − training)/training loss. Default `0.1`.
    #[serde(deserialize_with = "lenient::f64")]
    pub ratio_threshold: f64,
    /// A validation pass improves when its mean is at least this many percent below the lowest
    /// pass mean before it, beyond noise; while it improves, a gap over `ratio_threshold` is
    /// not yet called overfitting. Default `1.0`. Not a SageMaker parameter (see [`Overfit`]).
    #[serde(deserialize_with = "lenient::f64")]
    pub improvement_percent: f64,
}

impl Default for OverfitParams {
    fn default() -> Self {
        OverfitParams {
            tensor_regex: Vec::new(),
            start_step: 0,
            patience: 1,
            ratio_threshold: 0.1,
            improvement_percent: 1.0,
        }
    }
}

#[derive(Default)]
struct Phases {
    /// (sum, count) of the TRAIN block in progress or just finished.
    train: (f64, u64),
    /// (sum, count) of the TRAIN block before the current EVAL block.
    last_train: (f64, u64),
    /// The values of the EVAL block in progress.
    eval: Vec<f64>,
    /// How many values the EVAL block before it had (0: none yet).
    last_eval_len: u64,
    /// The whole evaluation pass with the lowest mean so far.
    best_eval: Option<Window>,
    /// The last whole pass did not gain on the lowest before it (see [`Overfit`]).
    last_pass_stalled: bool,
    last_mode: Option<Mode>,
    streak: u64,
}

/// **Overfit** — from `start_step` on, compares the mean validation loss of an evaluation
/// block (the EVAL steps since the last TRAIN step) with the mean training loss of the TRAIN
/// block before it. A judged EVAL step counts towards `patience` when both hold:
///
/// - the gap is over the limit: `(val − train)/train > ratio_threshold` (SageMaker's test);
/// - the validation loss has stopped improving: neither this pass nor the whole pass before
///   it came `improvement_percent` % below the lowest whole pass mean before it, by more than
///   noise (three standard errors of the difference of the two means, from the spread of each
///   pass's values). Two passes, so that one slow epoch is not taken for a plateau.
///
/// The second condition is this crate's, not SageMaker's. A model trained on a small set keeps
/// a validation loss well above its training loss while both still fall: the candle MLP
/// example on the digits ends at 0.19 against 0.10, its validation loss 3 % lower than the
/// epoch before, and SageMaker's test alone calls every such epoch overfitting. Memorising
/// shows when the gap is wide and validation no longer gains: a net trained on 20 digits gains
/// under 1 % a pass from its 10th epoch while its training loss goes to zero. The first two
/// passes have nothing to compare with and are not judged (a NaN aside).
///
/// It fires at `patience` consecutive judged EVAL steps that count. Evaluation batches differ,
/// so a block is judged once it is whole: at each EVAL step from the one that gives it as many
/// values as the block before had (every EVAL step of the first block, and of runs that
/// evaluate once per block); a NaN validation loss is judged, and fires, at once. The same
/// loss tensor is recorded in TRAIN and EVAL modes.
///
/// When it fires: the model memorises the training set: add regularisation (weight decay,
/// dropout, augmentation), get more data, reduce the model, or stop earlier.
pub struct Overfit {
    params: OverfitParams,
    losses: TensorSelection,
    phases: HashMap<String, Phases>,
}

impl Overfit {
    /// The rule's name.
    pub const NAME: &'static str = "Overfit";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: OverfitParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.at_least("patience", params.patience, 1)?;
        check.finite("ratio_threshold", params.ratio_threshold)?;
        check.finite("improvement_percent", params.improvement_percent)?;
        Ok(Overfit {
            losses: TensorSelection::losses(Self::NAME, &[], &params.tensor_regex, true)?,
            params,
            phases: HashMap::new(),
        })
    }
}

/// `pass` is not `improvement_percent` % below `best`'s mean by more than the noise of the
/// two means: a validation pass that did not gain.
fn stalled(pass: &Window, best: &Window, improvement_percent: f64) -> bool {
    let target = best.mean - best.mean.abs() * improvement_percent / 100.0;
    pass.mean - target > pass.noise(best)
}

impl TensorRule for Overfit {
    crate::rule_identity!();

    fn needs(&self) -> Needs {
        let mut capture = vec![request("losses", Self::NAME)];
        if !self.params.tensor_regex.is_empty() {
            capture.push(CaptureRequest {
                include_regex: self.params.tensor_regex.clone(),
                ..request(Self::NAME, Self::NAME)
            });
        }
        Needs {
            reads: vec![self.losses.clone()],
            capture,
            requires: Some(format!(
                "a loss saved at EVAL steps from step {} on, after TRAIN steps that saved it too",
                self.params.start_step
            )),
            // Its training and evaluation blocks are its own.
            look_back: LookBack::Steps(0),
        }
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let Some(mode) = mode_at(Self::NAME, trial, step)? else {
            return Ok(result);
        };
        let p = &self.params;
        for name in self.losses.names(Self::NAME, trial)?.iter() {
            let ph = self.phases.entry(name.clone()).or_default();
            // Block boundaries follow the run's modes, whether or not the loss was saved here.
            if ph.last_mode != Some(mode) {
                match mode {
                    Mode::Train => ph.train = (0.0, 0),
                    Mode::Eval => {
                        ph.last_train = ph.train;
                        if !ph.eval.is_empty() {
                            ph.last_eval_len = ph.eval.len() as u64;
                            let pass = Window::of(&ph.eval);
                            ph.last_pass_stalled = ph
                                .best_eval
                                .is_some_and(|best| stalled(&pass, &best, p.improvement_percent));
                            if ph.best_eval.is_none_or(|b| pass.mean < b.mean) {
                                ph.best_eval = Some(pass);
                            }
                        }
                        ph.eval.clear();
                    }
                    _ => {}
                }
                ph.last_mode = Some(mode);
            }
            let Some(loss) = scalar_at(Self::NAME, trial, name, step, None)? else {
                continue;
            };
            match mode {
                Mode::Train => {
                    // Judged with its training block when an evaluation pass comes.
                    ph.train.0 += loss;
                    ph.train.1 += 1;
                    result.unjudged += 1;
                }
                Mode::Eval => {
                    ph.eval.push(loss);
                    // Like with like: a whole evaluation pass against the training block before
                    // it. A pass is whole when it has as many values as the pass before (the
                    // first pass is judged at every step); a NaN is judged at once.
                    let whole = ph.eval.len() as u64 >= ph.last_eval_len;
                    if step < p.start_step || ph.last_train.1 == 0 || !(whole || loss.is_nan()) {
                        result.unjudged += 1;
                        continue;
                    }
                    result.datapoints += 1;
                    let train = ph.last_train.0 / ph.last_train.1 as f64;
                    let pass = Window::of(&ph.eval);
                    let val = pass.mean;
                    let ratio = (val - train) / train;
                    // Validation has stopped gaining: neither this pass nor the one before
                    // came `improvement_percent` below the lowest pass before it.
                    let stopped = ph.last_pass_stalled
                        && ph
                            .best_eval
                            .is_some_and(|best| stalled(&pass, &best, p.improvement_percent));
                    let counts = ratio.is_nan() || (ratio > p.ratio_threshold && stopped);
                    if counts {
                        ph.streak += 1;
                    } else {
                        ph.streak = 0;
                    }
                    if ph.streak >= p.patience {
                        let best = ph.best_eval.map_or(String::new(), |best| {
                            format!(
                                ", and neither this validation pass nor the one before came {} % below the lowest pass mean {:.6}",
                                p.improvement_percent, best.mean
                            )
                        });
                        result.fire(format!(
                            "{name}: mean validation loss {val:.6} is {:.1} % above mean training loss {train:.6} (limit {} %){best} for {} evaluation steps",
                            ratio * 100.0,
                            p.ratio_threshold * 100.0,
                            ph.streak
                        ));
                        result.evidence.push(
                            Evidence::new(name, step, "val_train_ratio", ratio)
                                .limit(p.ratio_threshold),
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(result)
    }
}
