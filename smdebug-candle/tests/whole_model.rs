//! A model registered whole (`CandleHook::layers`) on the digits: what the configuration selects
//! is written, equal to the tensors the model computed, and nothing else; the loss's inputs
//! give ClassImbalance and Confusion their data.

mod common;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Activation, Optimizer, SGD};
use common::model::{DigitsTensors, loss, reseed, varmap};
use smdebug_adapter_conformance::whole_model::{
    assert_close, assert_label_rules_judged, loss_inputs_only, relu_outputs_only, sorted_names,
    value_at,
};
use smdebug_adapter_conformance::writer;
use smdebug_candle::{CandleHook, Layers};
use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig};
use smdebug_read::trial::Trial;

/// fc1 → relu1 → fc2 on the 8×8 digits, registered whole with `hook`.
fn model(hook: &mut CandleHook, vb: candle_nn::VarBuilder) -> Layers {
    hook.layers()
        .layer("fc1", candle_nn::linear(64, 32, vb.pp("fc1")).unwrap())
        .layer("relu1", Activation::Relu)
        .layer("fc2", candle_nn::linear(32, 10, vb.pp("fc2")).unwrap())
        .build()
        .unwrap()
}

/// What one training step computed, layer by layer, from the weights before its update.
struct Step {
    x: Tensor,
    hidden_pre: Tensor,
    hidden: Tensor,
    logits: Tensor,
    labels: Tensor,
}

/// Trains `steps` steps of 16 images through the registered model, saving the loss and its
/// inputs; returns what each step computed, worked out again from the weights without the
/// model's layers.
fn train(dir: &std::path::Path, builder: HookBuilder, steps: usize) -> Vec<Step> {
    let data = DigitsTensors::load(DType::F32, &Device::Cpu).unwrap();
    let mut hook = CandleHook::new(builder, writer(dir)).unwrap();
    let (vm, vb) = varmap(DType::F32, &Device::Cpu);
    let model = model(&mut hook, vb);
    reseed(&vm, 7).unwrap();
    let mut sgd = SGD::new(vm.all_vars(), 0.1).unwrap();
    hook.set_mode(Mode::Train).unwrap();
    let mut computed = Vec::new();
    for idx in data.train_batches(16, steps, 3).unwrap() {
        let x = data.train_x.index_select(&idx, 0).unwrap();
        let y = data.train_y.index_select(&idx, 0).unwrap();
        let var = |n: &str| vm.data().lock().unwrap()[n].as_tensor().clone();
        let hidden_pre = x
            .matmul(&var("fc1.weight").t().unwrap())
            .unwrap()
            .broadcast_add(&var("fc1.bias"))
            .unwrap();
        let hidden = hidden_pre.relu().unwrap();
        let logits = model.forward(&x).unwrap();
        let l = loss(&logits, &y).unwrap();
        let grads = hook.backward(&l).unwrap();
        hook.save_loss("loss", &l).unwrap();
        hook.save_loss_inputs("loss", &logits, &y).unwrap();
        sgd.step(&grads).unwrap();
        hook.step().unwrap();
        computed.push(Step {
            x,
            hidden_pre,
            hidden,
            logits,
            labels: y,
        });
    }
    hook.close().unwrap();
    computed
}

fn values(t: &Tensor) -> Vec<f64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[test]
fn every_layer_is_a_capture_point_and_the_configuration_picks_which_are_written() {
    // DeadRelu's collection alone (and the losses, always): of the six layer tensors only the
    // ReLU's output is written; the loss's inputs are not selected either.
    let dir = tempfile::tempdir().unwrap();
    let steps = train(dir.path(), relu_outputs_only(), 5);
    assert_eq!(sorted_names(dir.path()), ["loss", "relu1.output"]);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let relu = trial.tensor("relu1.output").unwrap();
    assert_eq!(relu.steps(None).unwrap(), [0, 2, 4]);
    for step in [0, 2, 4] {
        let got = relu.value(step, None, None).unwrap();
        assert_eq!(got.shape(), [16, 32]);
        let got: Vec<f64> = got.iter().copied().collect();
        assert_close(&got, &values(&steps[step as usize].hidden), "relu1.output");
    }
}

#[test]
fn with_everything_selected_each_layer_reads_what_the_one_before_gave() {
    let dir = tempfile::tempdir().unwrap();
    let steps = train(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(3)),
        4,
    );
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let at = |name: &str, step: u64| value_at(&trial, name, step);
    for step in [0u64, 3] {
        let s = &steps[step as usize];
        assert_close(&at("fc1.input", step), &values(&s.x), "fc1.input");
        assert_close(
            &at("fc1.output", step),
            &values(&s.hidden_pre),
            "fc1.output",
        );
        assert_eq!(at("relu1.input", step), at("fc1.output", step));
        assert_close(
            &at("relu1.output", step),
            &values(&s.hidden),
            "relu1.output",
        );
        assert_eq!(at("fc2.input", step), at("relu1.output", step));
        assert_close(&at("fc2.output", step), &values(&s.logits), "fc2.output");
        assert_eq!(at("loss.predictions", step), at("fc2.output", step));
        assert_close(&at("loss.labels", step), &values(&s.labels), "loss.labels");
    }
    let collections = trial.collections().unwrap();
    let collection = |name: &str| -> Vec<String> {
        let c = collections.iter().find(|c| c.name() == name).unwrap();
        c.tensor_names().iter().cloned().collect()
    };
    assert_eq!(
        collection("inputs"),
        ["fc1.input", "fc2.input", "relu1.input"]
    );
    assert_eq!(
        collection("outputs"),
        ["fc1.output", "fc2.output", "relu1.output"]
    );
    assert_eq!(collection("labels"), ["loss.labels"]);
    assert_eq!(collection("predictions"), ["loss.predictions"]);
}

#[test]
fn the_loss_inputs_give_class_imbalance_and_confusion_their_data() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), loss_inputs_only(), 40);
    assert_label_rules_judged(dir.path());
}

#[test]
fn two_layers_of_one_name_are_refused() {
    let mut hook = CandleHook::new(Hook::builder(), smdebug_core::MemorySink::default()).unwrap();
    let err = hook
        .layers()
        .layer("act", Activation::Relu)
        .layer("act", Activation::Gelu)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`act`"), "{err}");
}
