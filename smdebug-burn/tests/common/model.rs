//! The model the tests and the example train: a 64-32-10 MLP on the 8x8 digits set.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::tensor::{Device, Int, Tensor, TensorData};
use smdebug_core::timeline::Timeline;
use smdebug_examples::digits::{Digits, default_path};
use smdebug_examples::mlp::Rng;

/// The digits as burn tensors: images `(n, 64)`, labels `(n,)`.
pub struct DigitsTensors {
    pub train_x: Tensor<2>,
    pub train_y: Tensor<1, Int>,
    pub test_x: Tensor<2>,
    pub test_y: Tensor<1, Int>,
    pub n_train: usize,
}

impl DigitsTensors {
    pub fn load(device: &Device) -> std::io::Result<DigitsTensors> {
        let all = Digits::load(&default_path())?;
        let (train, test) = all.split(0.2, 7);
        let to_tensors = |d: &Digits| -> (Tensor<2>, Tensor<1, Int>) {
            let pixels: Vec<f32> = d.images.iter().copied().collect();
            let x = Tensor::from_data(TensorData::new(pixels, [d.len(), 64]), device);
            let labels: Vec<i64> = d.labels.iter().map(|&l| l as i64).collect();
            let y = Tensor::from_data(TensorData::new(labels, [d.len()]), device);
            (x, y)
        };
        let (train_x, train_y) = to_tensors(&train);
        let (test_x, test_y) = to_tensors(&test);
        Ok(DigitsTensors {
            train_x,
            train_y,
            test_x,
            test_y,
            n_train: train.len(),
        })
    }

    /// Shuffled mini-batches of the training rows, `count` of them, as index tensors.
    pub fn train_batches(&self, batch: usize, count: usize, seed: u64) -> Vec<Tensor<1, Int>> {
        let mut rng = Rng::new(seed);
        let mut out = Vec::with_capacity(count);
        let mut order: Vec<usize> = Vec::new();
        let device = self.train_x.device();
        while out.len() < count {
            if order.len() < batch {
                order = rng.permutation(self.n_train);
            }
            let idx: Vec<i64> = order.drain(..batch).map(|i| i as i64).collect();
            out.push(Tensor::from_data(TensorData::new(idx, [batch]), &device));
        }
        out
    }
}

#[derive(Module, Debug)]
pub struct Mlp {
    pub fc1: Linear,
    pub relu1: Relu,
    pub fc2: Linear,
}

impl Mlp {
    pub fn new(device: &Device) -> Mlp {
        Mlp {
            fc1: LinearConfig::new(64, 32).init(device),
            relu1: Relu::new(),
            fc2: LinearConfig::new(32, 10).init(device),
        }
    }

    /// The hidden activation (relu1's output) and the logits. Each layer's forward pass is a
    /// span of its own on `timeline` while its detailed window is open (burn's derived modules
    /// cannot be wrapped, so the model says where they run).
    pub fn forward(&self, x: Tensor<2>, timeline: &Timeline) -> (Tensor<2>, Tensor<2>) {
        let fc1 = timeline.module_scope("fc1", || self.fc1.forward(x));
        let hidden = timeline.module_scope("relu1", || self.relu1.forward(fc1));
        let logits = timeline.module_scope("fc2", || self.fc2.forward(hidden.clone()));
        (hidden, logits)
    }
}

pub fn loss(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, labels)
}

pub fn accuracy(logits: Tensor<2>, labels: Tensor<1, Int>) -> f64 {
    let n = labels.dims()[0];
    let predicted: Tensor<1, Int> = logits.argmax(1).reshape([n]);
    let hits: i64 = predicted.equal(labels).int().sum().into_scalar();
    hits as f64 / n as f64
}
