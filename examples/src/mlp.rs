//! A small multi-layer perceptron over ndarray, with hand-written backward pass and SGD: the
//! "plain Rust training loop" that smdebug must serve without any framework.

use ndarray::{Array1, Array2, Axis};
use smdebug_core::timeline::{Profiling, Timeline};

/// A deterministic pseudo-random generator (SplitMix64) so runs are reproducible without a crate.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed` (the same seed gives the same numbers).
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-7);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }

    /// A random permutation of 0..n.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        p
    }
}

/// The hidden layers' activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// max(x, 0).
    Relu,
    /// max(x, 0.01 x): units never die, so a bad step size shows up as divergence.
    LeakyRelu,
    /// 1 / (1 + e^-x).
    Sigmoid,
}

/// One dense layer `y = x W + b`.
#[derive(Clone, Debug)]
pub struct Linear {
    /// The layer's name (`fc1`), the prefix of its tensors' names.
    pub name: String,
    /// Weights, inputs × outputs.
    pub weight: Array2<f32>,
    /// Biases, one per output.
    pub bias: Array1<f32>,
}

/// What one forward pass produced, kept for the backward pass and for capture.
#[derive(Clone, Debug)]
pub struct Forward {
    /// Input of each layer.
    pub inputs: Vec<Array2<f32>>,
    /// Pre-activation of each layer (the last one is the logits).
    pub pre: Vec<Array2<f32>>,
    /// Activation output of each hidden layer.
    pub act: Vec<Array2<f32>>,
    /// Softmax probabilities.
    pub probs: Array2<f32>,
}

/// Gradients of every parameter, in layer order.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// Weight gradients, one per layer.
    pub weight: Vec<Array2<f32>>,
    /// Bias gradients, one per layer.
    pub bias: Vec<Array1<f32>>,
}

/// A multi-layer perceptron with softmax cross-entropy loss.
#[derive(Clone, Debug)]
pub struct Mlp {
    /// The layers, input first.
    pub layers: Vec<Linear>,
    /// The activation between hidden layers.
    pub activation: Activation,
}

impl Mlp {
    /// Layers of the given widths (`[64, 32, 10]`), He-initialised for ReLU and Xavier for sigmoid,
    /// scaled by `init_scale`; biases start at `bias_init`.
    pub fn new(
        widths: &[usize],
        activation: Activation,
        init_scale: f32,
        bias_init: f32,
        rng: &mut Rng,
    ) -> Mlp {
        let layers = widths
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let (fan_in, fan_out) = (w[0], w[1]);
                let std = match activation {
                    Activation::Relu | Activation::LeakyRelu => (2.0 / fan_in as f32).sqrt(),
                    Activation::Sigmoid => (1.0 / fan_in as f32).sqrt(),
                } * init_scale;
                let last = i + 2 == widths.len();
                Linear {
                    name: format!("fc{}", i + 1),
                    weight: Array2::from_shape_fn((fan_in, fan_out), |_| rng.normal() * std),
                    bias: Array1::from_elem(fan_out, if last { 0.0 } else { bias_init }),
                }
            })
            .collect();
        Mlp { layers, activation }
    }

    fn activate(&self, z: &Array2<f32>) -> Array2<f32> {
        match self.activation {
            Activation::Relu => z.mapv(|v| v.max(0.0)),
            Activation::LeakyRelu => z.mapv(|v| if v > 0.0 { v } else { 0.01 * v }),
            Activation::Sigmoid => z.mapv(|v| 1.0 / (1.0 + (-v).exp())),
        }
    }

    /// Runs the network on a batch (rows are samples).
    pub fn forward(&self, x: &Array2<f32>) -> Forward {
        self.forward_on(x, &Timeline::off())
    }

    /// [`forward`](Self::forward) with each layer in a module span of `timeline` (`fc1`,
    /// `relu1`, …, named as the layers' tensors are) while its detailed profiling window is
    /// open; outside it, the spans cost one check.
    pub fn forward_on(&self, x: &Array2<f32>, timeline: &Timeline) -> Forward {
        let mut inputs = Vec::new();
        let mut pre = Vec::new();
        let mut act = Vec::new();
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            inputs.push(h.clone());
            let z = in_module(timeline, "fc", i, || h.dot(&layer.weight) + &layer.bias);
            if i + 1 < self.layers.len() {
                h = in_module(timeline, "relu", i, || self.activate(&z));
                act.push(h.clone());
            } else {
                h = z.clone();
            }
            pre.push(z);
        }
        let probs = softmax(&h);
        Forward {
            inputs,
            pre,
            act,
            probs,
        }
    }

    /// Mean cross-entropy of the batch and the share of correct predictions.
    pub fn loss_and_accuracy(fwd: &Forward, labels: &Array1<usize>) -> (f32, f32) {
        let n = labels.len() as f32;
        let mut loss = 0.0;
        let mut correct = 0.0;
        for (row, &y) in fwd.probs.outer_iter().zip(labels.iter()) {
            // Clamp tiny probabilities so a confident mistake costs ~27.6, not Inf; but let a
            // NaN through (`f32::max` would swallow it and hide a diverged model).
            let p = row[y];
            loss -= if p.is_nan() { p } else { p.max(1e-12) }.ln();
            let argmax = row
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &p)| if p > b.1 { (i, p) } else { b })
                .0;
            if argmax == y {
                correct += 1.0;
            }
        }
        (loss / n, correct / n)
    }

    /// Gradients of the mean cross-entropy with respect to every parameter.
    pub fn backward(&self, fwd: &Forward, labels: &Array1<usize>) -> Gradients {
        let n = labels.len() as f32;
        let mut delta = fwd.probs.clone();
        for (mut row, &y) in delta.outer_iter_mut().zip(labels.iter()) {
            row[y] -= 1.0;
        }
        delta /= n;
        let mut gw = Vec::with_capacity(self.layers.len());
        let mut gb = Vec::with_capacity(self.layers.len());
        for i in (0..self.layers.len()).rev() {
            gw.push(fwd.inputs[i].t().dot(&delta));
            gb.push(delta.sum_axis(Axis(0)));
            if i > 0 {
                let upstream = delta.dot(&self.layers[i].weight.t());
                let local = match self.activation {
                    Activation::Relu => fwd.pre[i - 1].mapv(|z| if z > 0.0 { 1.0 } else { 0.0 }),
                    Activation::LeakyRelu => {
                        fwd.pre[i - 1].mapv(|z| if z > 0.0 { 1.0 } else { 0.01 })
                    }
                    Activation::Sigmoid => fwd.act[i - 1].mapv(|s| s * (1.0 - s)),
                };
                delta = upstream * local;
            }
        }
        gw.reverse();
        gb.reverse();
        Gradients {
            weight: gw,
            bias: gb,
        }
    }

    /// One SGD update.
    pub fn sgd(&mut self, grads: &Gradients, lr: f32) {
        for (layer, (gw, gb)) in self
            .layers
            .iter_mut()
            .zip(grads.weight.iter().zip(grads.bias.iter()))
        {
            layer.weight.scaled_add(-lr, gw);
            layer.bias.scaled_add(-lr, gb);
        }
    }
}

fn softmax(logits: &Array2<f32>) -> Array2<f32> {
    let mut out = logits.clone();
    for mut row in out.outer_iter_mut() {
        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row /= sum;
    }
    out
}

/// Runs `f` in the module span `<kind><i + 1>` of `timeline` while its detailed profiling window
/// is open (the name is made only then).
fn in_module<R>(timeline: &Timeline, kind: &str, i: usize, f: impl FnOnce() -> R) -> R {
    if timeline.is_open(Profiling::Detailed) {
        timeline.module_scope(&format!("{kind}{}", i + 1), f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = Rng::new(7);
        let mut m = Mlp::new(&[5, 4, 3], Activation::Sigmoid, 1.0, 0.0, &mut rng);
        let x = Array2::from_shape_fn((6, 5), |_| rng.normal());
        let y = Array1::from(vec![0, 1, 2, 0, 1, 2]);
        let g = m.backward(&m.forward(&x), &y);
        let eps = 1e-3;
        for (li, (r, c)) in [(0, (1, 2)), (1, (3, 0))] {
            let orig = m.layers[li].weight[[r, c]];
            m.layers[li].weight[[r, c]] = orig + eps;
            let up = Mlp::loss_and_accuracy(&m.forward(&x), &y).0;
            m.layers[li].weight[[r, c]] = orig - eps;
            let down = Mlp::loss_and_accuracy(&m.forward(&x), &y).0;
            m.layers[li].weight[[r, c]] = orig;
            let numeric = (up - down) / (2.0 * eps);
            assert!(
                (numeric - g.weight[li][[r, c]]).abs() < 1e-3,
                "layer {li}: numeric {numeric} vs analytic {}",
                g.weight[li][[r, c]]
            );
        }
    }
}
