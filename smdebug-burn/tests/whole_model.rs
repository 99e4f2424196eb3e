//! A model registered whole (`BurnHook::layers`) on the digits: every module of the MLP is found
//! by its path, what the configuration selects is written, equal to what burn computed, and
//! nothing else; each layer reads what the one before gave; the loss's inputs give
//! ClassImbalance and Confusion their data.

mod common;

use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Int, Tensor};
use common::model::{DigitsTensors, Mlp, loss};
use smdebug_adapter_conformance::whole_model::{
    assert_close, assert_label_rules_judged, loss_inputs_only, relu_outputs_only, sorted_names,
    value_at,
};
use smdebug_adapter_conformance::writer;
use smdebug_burn::{BurnHook, Layers};
use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig};
use smdebug_read::trial::Trial;

#[allow(deprecated)] // burn 0.22 steers CPU users to `flex`; the workspace builds ndarray
fn device() -> Device {
    Device::ndarray().autodiff()
}

/// The MLP's forward pass with each module's call through the registered layers.
fn forward(mlp: &Mlp, layers: &Layers, x: Tensor<2>) -> Tensor<2> {
    let x = layers.forward("fc1", x, |x| mlp.fc1.forward(x));
    let x = layers.forward("relu1", x, |x| mlp.relu1.forward(x));
    layers.forward("fc2", x, |x| mlp.fc2.forward(x))
}

/// What one training step computed: the batch, the hidden activation, logits and labels.
struct Step {
    x: Vec<f64>,
    hidden: Vec<f64>,
    logits: Vec<f64>,
    labels: Vec<f64>,
}

fn values<const D: usize>(t: &Tensor<D>) -> Vec<f64> {
    t.to_data().iter::<f64>().collect()
}

fn train(dir: &std::path::Path, builder: HookBuilder, steps: usize) -> Vec<Step> {
    let device = device();
    let data = DigitsTensors::load(&device).unwrap();
    let mut hook = BurnHook::new(builder, writer(dir)).unwrap();
    let mut mlp = Mlp::new(&device);
    let layers = hook.layers(&mlp);
    assert_eq!(layers.names(), ["fc1", "fc2", "relu1"]);
    let mut optim = SgdConfig::new().init();
    hook.set_mode(Mode::Train).unwrap();
    let mut computed = Vec::new();
    for idx in data.train_batches(16, steps, 3) {
        let x = data.train_x.clone().select(0, idx.clone());
        let y: Tensor<1, Int> = data.train_y.clone().select(0, idx);
        let hidden = burn::tensor::activation::relu(mlp.fc1.forward(x.clone()));
        let logits = forward(&mlp, &layers, x.clone());
        let l = loss(logits.clone(), y.clone());
        let grads = GradientsParams::from_grads(hook.backward(&l), &mlp);
        hook.save_loss("loss", &l).unwrap();
        hook.save_loss_inputs("loss", &logits, &y).unwrap();
        mlp = optim.step(0.1, mlp, grads);
        hook.step().unwrap();
        computed.push(Step {
            x: values(&x),
            hidden: values(&hidden),
            logits: values(&logits),
            labels: values(&y.float()),
        });
    }
    assert!(layers.unknown().is_empty(), "{:?}", layers.unknown());
    hook.close().unwrap();
    computed
}

#[test]
fn every_module_is_a_capture_point_and_the_configuration_picks_which_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let steps = train(dir.path(), relu_outputs_only(), 5);
    assert_eq!(sorted_names(dir.path()), ["loss", "relu1.output"]);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for step in [0u64, 2, 4] {
        assert_close(
            &value_at(&trial, "relu1.output", step),
            &steps[step as usize].hidden,
            "relu1.output",
        );
    }
}

#[test]
fn with_everything_selected_each_module_reads_what_the_one_before_gave() {
    let dir = tempfile::tempdir().unwrap();
    let steps = train(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(3)),
        4,
    );
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for step in [0u64, 3] {
        let s = &steps[step as usize];
        assert_close(&value_at(&trial, "fc1.input", step), &s.x, "fc1.input");
        assert_eq!(
            value_at(&trial, "relu1.input", step),
            value_at(&trial, "fc1.output", step)
        );
        assert_close(
            &value_at(&trial, "relu1.output", step),
            &s.hidden,
            "relu1.output",
        );
        assert_eq!(
            value_at(&trial, "fc2.input", step),
            value_at(&trial, "relu1.output", step)
        );
        assert_close(
            &value_at(&trial, "fc2.output", step),
            &s.logits,
            "fc2.output",
        );
        assert_eq!(
            value_at(&trial, "loss.predictions", step),
            value_at(&trial, "fc2.output", step)
        );
        assert_eq!(value_at(&trial, "loss.labels", step), s.labels);
    }
}

#[test]
fn the_loss_inputs_give_class_imbalance_and_confusion_their_data() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), loss_inputs_only(), 40);
    assert_label_rules_judged(dir.path());
}

#[test]
fn a_module_the_model_does_not_have_runs_uncaptured_and_is_named() {
    let device = device();
    let mlp = Mlp::new(&device);
    let mut hook = BurnHook::new(
        Hook::builder().save_config(SaveConfig::every(1)),
        smdebug_core::MemorySink::default(),
    )
    .unwrap();
    let layers = hook.layers(&mlp);
    let x: Tensor<2> = Tensor::ones([2, 64], &device);
    let out = layers.forward("fc_1", x, |x| mlp.fc1.forward(x));
    assert_eq!(out.dims(), [2, 32]);
    assert_eq!(layers.unknown(), ["fc_1"]);
}
