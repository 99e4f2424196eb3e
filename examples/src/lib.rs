//! Shared pieces of the runnable examples: the digits data set, a hand-written MLP, and a
//! training loop that records through an smdebug [`Hook`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allreduce;
pub mod digits;
pub mod mlp;
pub mod overhead;

use ndarray::Array1;
use smdebug::Session;
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;
use smdebug_core::{Hook, Mode, StopCause, TensorView};

use crate::digits::Digits;
use crate::mlp::{Activation, Mlp, Rng};

/// A real training bug the demo can inject, for rules to catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// A deep sigmoid network with tiny initial weights: gradients of the early layers vanish.
    VanishingGradients,
    /// A large negative bias on the hidden layers: most ReLUs never fire.
    DeadRelu,
    /// A deep leaky-ReLU stack with an oversized initialisation and a learning rate ten times the
    /// default: activations and gradients grow layer over layer until the loss is NaN.
    ExplodingLoss,
}

impl std::str::FromStr for Bug {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vanishing" | "vanishing-gradients" => Ok(Bug::VanishingGradients),
            "dead-relu" | "deadrelu" => Ok(Bug::DeadRelu),
            "exploding" | "exploding-loss" => Ok(Bug::ExplodingLoss),
            _ => Err(format!(
                "unknown bug `{s}`: expected vanishing, dead-relu or exploding"
            )),
        }
    }
}

/// Training settings.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// Passes over the training set.
    pub epochs: usize,
    /// Images per training step.
    pub batch_size: usize,
    /// The SGD step size.
    pub learning_rate: f32,
    /// Widths of the hidden layers.
    pub hidden: Vec<usize>,
    /// Seeds the initialisation and the shuffling.
    pub seed: u64,
    /// A bug to plant in the model, to give the rules something to find.
    pub bug: Option<Bug>,
    /// Feed the model `side`×`side` images resampled from the 8×8 originals, with random
    /// rotation and shift while training (an input pipeline's augmentation). `None`: the raw
    /// 64 pixels.
    pub input_side: Option<usize>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 10,
            batch_size: 32,
            learning_rate: 0.1,
            hidden: vec![32],
            seed: 42,
            bug: None,
            input_side: None,
        }
    }
}

/// What a training run did.
#[derive(Clone, Debug, Default)]
pub struct TrainSummary {
    /// Training steps run.
    pub steps: u64,
    /// The loss of the last training step.
    pub final_train_loss: f32,
    /// The loss of each evaluation pass (one per epoch).
    pub eval_loss: Vec<f32>,
    /// The accuracy of each evaluation pass.
    pub eval_accuracy: Vec<f32>,
    /// Set when the run stopped because a stop was requested: the reason, and the rule and
    /// step when a rule asked.
    pub stopped: Option<StopCause>,
}

/// Builds the model a config asks for (bugs change the architecture or the initialisation).
pub fn build_model(cfg: &TrainConfig, rng: &mut Rng) -> Mlp {
    let mut widths = vec![cfg.input_side.map_or(64, |s| s * s)];
    let (activation, init_scale, bias) = match cfg.bug {
        Some(Bug::VanishingGradients) => {
            widths.extend([32; 6]);
            (Activation::Sigmoid, 0.05, 0.0)
        }
        Some(Bug::DeadRelu) => {
            widths.extend(&cfg.hidden);
            (Activation::Relu, 1.0, -4.0)
        }
        Some(Bug::ExplodingLoss) => {
            widths.extend([32; 4]);
            (Activation::LeakyRelu, 2.0, 0.0)
        }
        _ => {
            widths.extend(&cfg.hidden);
            (Activation::Relu, 1.0, 0.0)
        }
    };
    widths.push(10);
    Mlp::new(&widths, activation, init_scale, bias, rng)
}

fn activation_name(model: &Mlp, layer: usize) -> String {
    match model.activation {
        Activation::Relu => format!("relu{}.output", layer + 1),
        Activation::Sigmoid => format!("sigmoid{}.output", layer + 1),
        Activation::LeakyRelu => format!("leaky_relu{}.output", layer + 1),
    }
}

/// The names a model's tensors are recorded under, made once rather than at every step.
#[derive(Clone, Debug)]
pub struct TensorNames {
    weights: Vec<String>,
    biases: Vec<String>,
    weight_grads: Vec<String>,
    bias_grads: Vec<String>,
    activations: Vec<String>,
}

impl TensorNames {
    /// `fc1.weight`, `fc1.bias`, `gradient/fc1.weight`, …, `relu1.output`, … for `model`.
    pub fn for_model(model: &Mlp) -> TensorNames {
        let layers = &model.layers;
        TensorNames {
            weights: layers
                .iter()
                .map(|l| format!("{}.weight", l.name))
                .collect(),
            biases: layers.iter().map(|l| format!("{}.bias", l.name)).collect(),
            weight_grads: layers
                .iter()
                .map(|l| format!("gradient/{}.weight", l.name))
                .collect(),
            bias_grads: layers
                .iter()
                .map(|l| format!("gradient/{}.bias", l.name))
                .collect(),
            activations: (0..layers.len().saturating_sub(1))
                .map(|i| activation_name(model, i))
                .collect(),
        }
    }
}

/// Records the model's parameters, gradients and activations through the hook. Only what is
/// due is copied: `save_tensor` borrows the arrays and returns at once when nothing is due.
pub fn record_train_step(
    hook: &mut Hook,
    names: &TensorNames,
    model: &Mlp,
    fwd: &mlp::Forward,
    grads: &mlp::Gradients,
    loss: f32,
    accuracy: f32,
) {
    for (i, layer) in model.layers.iter().enumerate() {
        hook.save_tensor(
            &names.weights[i],
            &TensorView::from_ndarray(&layer.weight),
            &["weights"],
        );
        hook.save_tensor(
            &names.biases[i],
            &TensorView::from_ndarray(&layer.bias),
            &["biases"],
        );
        hook.save_tensor(
            &names.weight_grads[i],
            &TensorView::from_ndarray(&grads.weight[i]),
            &["gradients"],
        );
        hook.save_tensor(
            &names.bias_grads[i],
            &TensorView::from_ndarray(&grads.bias[i]),
            &["gradients"],
        );
        if let Some(act) = names.activations.get(i) {
            hook.save_tensor(act, &TensorView::from_ndarray(&fwd.act[i]), &["outputs"]);
        }
    }
    hook.save_tensor(
        "fc1.input",
        &TensorView::from_ndarray(&fwd.inputs[0]),
        &["inputs"],
    );
    hook.save_scalar("loss", f64::from(loss), &["losses"]);
    hook.save_scalar("accuracy", f64::from(accuracy), &["metrics"]);
}

/// Saves the loss's inputs (`loss.predictions`: the logits, `loss.labels`) when due: what
/// ClassImbalance and Confusion read. Saved in evaluation only: the predictions of held-out
/// data, after training began, are the model's quality; a training batch's at step 0 are
/// those of random weights, where every classifier "confuses" every class.
fn save_loss_inputs(hook: &mut Hook, fwd: &mlp::Forward, labels: &Array1<usize>) {
    if !hook.anything_due() {
        return;
    }
    let Some(logits) = fwd.pre.last() else { return };
    let labels = labels.mapv(|c| c as i64);
    hook.save_loss_inputs(
        "loss",
        &TensorView::from_ndarray(logits),
        &TensorView::from_ndarray(&labels),
    );
}

/// Trains the MLP on `train`, evaluating on `eval` after each epoch. With a hook, records weights,
/// biases, gradients, activations, inputs, loss and accuracy; stops early when the hook reports a
/// stop request.
pub fn train(
    cfg: &TrainConfig,
    train: &Digits,
    eval: &Digits,
    hook: Option<&mut Hook>,
) -> TrainSummary {
    run(cfg, train, eval, hook, &Timeline::off())
}

/// [`train`] inside a [`Session`]: the session's hook records the tensors, and its timeline
/// the loop's phases (each step, its data loading, forward, backward, capture and optimizer
/// parts, in TRAIN and EVAL mode) with no timing code here. Stops when the session is asked to
/// (a rule, the dashboard's Stop, another job).
pub fn train_in_session(
    cfg: &TrainConfig,
    train: &Digits,
    eval: &Digits,
    session: &mut Session,
) -> TrainSummary {
    let timeline = session.timeline().clone();
    run(cfg, train, eval, Some(session.hook()), &timeline)
}

fn run(
    cfg: &TrainConfig,
    train: &Digits,
    eval: &Digits,
    mut hook: Option<&mut Hook>,
    timeline: &Timeline,
) -> TrainSummary {
    let mut rng = Rng::new(cfg.seed);
    let mut model = build_model(cfg, &mut rng);
    let names = TensorNames::for_model(&model);
    let lr = match cfg.bug {
        Some(Bug::ExplodingLoss) => cfg.learning_rate * 10.0,
        _ => cfg.learning_rate,
    };
    let mut summary = TrainSummary::default();
    let mut aug_rng = Rng::new(cfg.seed ^ 0xA5A5);
    'epochs: for _epoch in 0..cfg.epochs {
        if let Some(h) = hook.as_deref_mut() {
            h.set_mode(Mode::Train);
        }
        let order = rng.permutation(train.len());
        let batches = order
            .chunks(cfg.batch_size)
            .map(|batch| match cfg.input_side {
                Some(side) => train.resampled_batch(batch, side, Some((&mut aug_rng, 10.0, 1.0))),
                None => train.batch(batch),
            });
        // The batches are built on this thread in ordinary (pageable) memory: not pinned.
        for (x, y) in timeline.data(batches).pin_memory(false) {
            let fwd = timeline.scope(Phase::Forward, || model.forward_on(&x, timeline));
            let (loss, acc) = Mlp::loss_and_accuracy(&fwd, &y);
            let grads = timeline.scope(Phase::Backward, || model.backward(&fwd, &y));
            if let Some(h) = hook.as_deref_mut() {
                timeline.scope(Phase::Custom("Capture".into()), || {
                    record_train_step(h, &names, &model, &fwd, &grads, loss, acc)
                });
            }
            timeline.scope(Phase::Optimizer, || model.sgd(&grads, lr));
            summary.final_train_loss = loss;
            summary.steps += 1;
            if let Some(h) = hook.as_deref_mut() {
                h.step();
                if let Some(cause) = h.stop_requested() {
                    summary.stopped = Some(cause);
                    break 'epochs;
                }
            }
        }
        let (loss, acc) = evaluate(&model, eval, cfg, hook.as_deref_mut(), timeline);
        summary.eval_loss.push(loss);
        summary.eval_accuracy.push(acc);
    }
    summary
}

/// Mean loss and accuracy over `data`, recording each batch's loss in EVAL mode.
fn evaluate(
    model: &Mlp,
    data: &Digits,
    cfg: &TrainConfig,
    mut hook: Option<&mut Hook>,
    timeline: &Timeline,
) -> (f32, f32) {
    if let Some(h) = hook.as_deref_mut() {
        h.set_mode(Mode::Eval);
    }
    let (mut loss_sum, mut acc_sum, mut n) = (0.0, 0.0, 0.0);
    let indices: Vec<usize> = (0..data.len()).collect();
    let batches = indices.chunks(cfg.batch_size).map(|batch| {
        let (x, y): (_, Array1<usize>) = match cfg.input_side {
            Some(side) => data.resampled_batch(batch, side, None),
            None => data.batch(batch),
        };
        (x, y, batch.len())
    });
    for (x, y, len) in timeline.data(batches).pin_memory(false) {
        let fwd = timeline.scope(Phase::Forward, || model.forward_on(&x, timeline));
        let (loss, acc) = Mlp::loss_and_accuracy(&fwd, &y);
        let w = len as f32;
        loss_sum += loss * w;
        acc_sum += acc * w;
        n += w;
        if let Some(h) = hook.as_deref_mut() {
            h.save_scalar("loss", f64::from(loss), &["losses"]);
            save_loss_inputs(h, &fwd, &y);
            h.save_scalar("accuracy", f64::from(acc), &["metrics"]);
            h.step();
        }
    }
    (loss_sum / n, acc_sum / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_training_learns_the_digits() {
        let data = Digits::load(&digits::default_path()).unwrap();
        assert_eq!(data.len(), 1797);
        let (tr, ev) = data.split(0.2, 1);
        let s = train(&TrainConfig::default(), &tr, &ev, None);
        let acc = *s.eval_accuracy.last().unwrap();
        assert!(acc > 0.9, "held-out accuracy {acc}");
        assert!(s.eval_loss.first() > s.eval_loss.last());
    }

    #[test]
    fn injected_bugs_break_training_the_way_they_should() {
        let data = Digits::load(&digits::default_path()).unwrap();
        let (tr, ev) = data.split(0.2, 1);
        let cfg = |bug| TrainConfig {
            epochs: 2,
            bug: Some(bug),
            ..Default::default()
        };
        let exploding = train(&cfg(Bug::ExplodingLoss), &tr, &ev, None);
        assert!(
            exploding.final_train_loss.is_nan(),
            "{}",
            exploding.final_train_loss
        );
        let vanishing = train(&cfg(Bug::VanishingGradients), &tr, &ev, None);
        assert!(*vanishing.eval_accuracy.last().unwrap() < 0.3);
    }
}
