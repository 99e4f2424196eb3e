//! A model registered whole (`TchHook::layers`) on the digits: what the configuration selects is
//! written, equal to the tensors libtorch computed, and nothing else; each layer reads what the
//! one before gave; the loss's inputs give ClassImbalance and Confusion their data.

use smdebug_adapter_conformance::whole_model::{
    assert_close, assert_label_rules_judged, loss_inputs_only, relu_outputs_only, sorted_names,
    value_at,
};
use smdebug_adapter_conformance::writer;
use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig};
use smdebug_examples::digits::{Digits, default_path};
use smdebug_read::trial::Trial;
use smdebug_tch::TchHook;
use tch::nn::{self, ModuleT, OptimizerConfig};
use tch::{Kind, Tensor};

/// What one training step computed, from the weights before its update.
struct Step {
    x: Tensor,
    hidden: Tensor,
    logits: Tensor,
    labels: Tensor,
}

fn values(t: &Tensor) -> Vec<f64> {
    let flat = t.detach().to_kind(Kind::Double).reshape([-1]);
    let mut v = vec![0f64; flat.numel()];
    flat.copy_data(&mut v, flat.numel());
    v
}

/// Trains `steps` steps of 16 digits through fc1 → relu1 → fc2 registered whole, saving the
/// loss and its inputs.
fn train(dir: &std::path::Path, builder: HookBuilder, steps: usize) -> Vec<Step> {
    tch::manual_seed(7);
    let digits = Digits::load(&default_path()).unwrap();
    let mut hook = TchHook::new(builder, writer(dir)).unwrap();
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let model = hook
        .layers()
        .layer(
            "fc1",
            nn::linear(vs.root() / "fc1", 64, 32, Default::default()),
        )
        .layer("relu1", nn::func(|x| x.relu()))
        .layer(
            "fc2",
            nn::linear(vs.root() / "fc2", 32, 10, Default::default()),
        )
        .build()
        .unwrap();
    let mut opt = nn::Sgd::default().build(&vs, 0.1).unwrap();
    hook.set_mode(Mode::Train).unwrap();
    let mut computed = Vec::new();
    for s in 0..steps {
        let rows: Vec<usize> = (s * 16..s * 16 + 16).collect();
        let pixels: Vec<f32> = rows
            .iter()
            .flat_map(|&r| digits.images.row(r).to_vec())
            .collect();
        let labels: Vec<i64> = rows.iter().map(|&r| digits.labels[r] as i64).collect();
        let x = Tensor::from_slice(&pixels).reshape([16, 64]);
        let y = Tensor::from_slice(&labels);
        let hidden = tch::no_grad(|| {
            let w = vs.variables();
            x.matmul(&w["fc1.weight"].tr())
                .f_add(&w["fc1.bias"])
                .unwrap()
                .relu()
        });
        let logits = model.forward_t(&x, true);
        let loss = logits.cross_entropy_for_logits(&y);
        opt.zero_grad();
        hook.backward(&loss).unwrap();
        hook.save_loss("loss", &loss).unwrap();
        hook.save_loss_inputs("loss", &logits, &y).unwrap();
        opt.step();
        hook.step().unwrap();
        computed.push(Step {
            x,
            hidden,
            logits: logits.detach(),
            labels: y,
        });
    }
    hook.close().unwrap();
    computed
}

#[test]
fn every_layer_is_a_capture_point_and_the_configuration_picks_which_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let steps = train(dir.path(), relu_outputs_only(), 5);
    assert_eq!(sorted_names(dir.path()), ["loss", "relu1.output"]);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for step in [0u64, 2, 4] {
        let want = values(&steps[step as usize].hidden);
        assert_close(
            &value_at(&trial, "relu1.output", step),
            &want,
            "relu1.output",
        );
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
    for step in [0u64, 3] {
        let s = &steps[step as usize];
        assert_close(
            &value_at(&trial, "fc1.input", step),
            &values(&s.x),
            "fc1.input",
        );
        assert_eq!(
            value_at(&trial, "relu1.input", step),
            value_at(&trial, "fc1.output", step)
        );
        assert_close(
            &value_at(&trial, "relu1.output", step),
            &values(&s.hidden),
            "relu1",
        );
        assert_eq!(
            value_at(&trial, "fc2.input", step),
            value_at(&trial, "relu1.output", step)
        );
        assert_close(
            &value_at(&trial, "fc2.output", step),
            &values(&s.logits),
            "fc2.output",
        );
        assert_eq!(
            value_at(&trial, "loss.predictions", step),
            value_at(&trial, "fc2.output", step)
        );
        assert_close(
            &value_at(&trial, "loss.labels", step),
            &values(&s.labels),
            "labels",
        );
    }
}

#[test]
fn the_loss_inputs_give_class_imbalance_and_confusion_their_data() {
    let dir = tempfile::tempdir().unwrap();
    train(dir.path(), loss_inputs_only(), 40);
    assert_label_rules_judged(dir.path());
}

#[test]
fn two_layers_of_one_name_are_refused() {
    let mut hook = TchHook::new(Hook::builder(), smdebug_core::MemorySink::default()).unwrap();
    let err = hook
        .layers()
        .layer("act", nn::func(|x| x.relu()))
        .layer("act", nn::func(|x| x.tanh()))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`act`"), "{err}");
}
