//! Real runs for the rule tests: the example MLP trained on the 8x8 digits, recorded through the
//! real hook and background writer into a temporary directory.
#![allow(dead_code)] // each test binary uses part of this module

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{OnceLock, mpsc};

use ndarray::{Array1, Array2, Axis};
use smdebug_core::{Hook, Mode, SaveConfig, TensorView};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::mlp::{Activation, Mlp, Rng};
use smdebug_examples::{Bug, TrainConfig, TrainSummary, train};
use smdebug_rules::{RuleRunner, RuleSpec, Summary};

/// The digits, split once into (train, held-out).
pub fn data() -> &'static (Digits, Digits) {
    static DATA: OnceLock<(Digits, Digits)> = OnceLock::new();
    DATA.get_or_init(|| {
        let d = Digits::load(&digits::default_path()).expect("digits data");
        d.split(0.2, 1)
    })
}

/// A hook writing every tensor: the writer waits for room instead of dropping (a test's rules
/// judge every step, and a loaded machine made the default policy drop whole EVAL steps).
pub fn hook_for(dir: &Path, save: SaveConfig) -> Hook {
    smdebug_testkit::runs::blocking_hook(dir, Hook::builder().save_config(save))
}

/// Trains the example's own loop (`smdebug_examples::train`), saving every step.
pub fn example_run(dir: &Path, epochs: usize, bug: Option<Bug>) -> TrainSummary {
    let (tr, ev) = data();
    let mut hook = hook_for(dir, SaveConfig::every(1));
    let cfg = TrainConfig {
        epochs,
        bug,
        ..Default::default()
    };
    let summary = train(&cfg, tr, ev, Some(&mut hook));
    hook.close();
    drop(hook);
    summary
}

/// A training loop over the example MLP with knobs for bugs the example does not have, and
/// extra tensors (pre-activations, labels, predictions) some rules read.
#[derive(Clone, Debug)]
pub struct Loop {
    pub hidden: Vec<usize>,
    pub activation: Activation,
    pub init_scale: f32,
    pub bias: f32,
    pub lr: f32,
    pub epochs: usize,
    pub batch: usize,
    pub seed: u64,
    /// Standardise inputs to zero mean, unit variance per pixel.
    pub normalize: bool,
    /// Train on only the first `n` training samples.
    pub train_subset: Option<usize>,
    /// Keep only this share of the samples of class `.0` (training and held-out sets).
    pub thin_class: Option<(usize, f64)>,
}

fn thin(d: &Digits, class: usize, keep: f64) -> Digits {
    let total = d.labels.iter().filter(|l| **l == class).count();
    let mut seen = 0usize;
    let idx: Vec<usize> = (0..d.len())
        .filter(|&i| {
            if d.labels[i] != class {
                return true;
            }
            seen += 1;
            (seen as f64) <= keep * total as f64
        })
        .collect();
    let (images, labels) = d.batch(&idx);
    Digits { images, labels }
}

impl Default for Loop {
    fn default() -> Self {
        Loop {
            hidden: vec![32],
            activation: Activation::Relu,
            init_scale: 1.0,
            bias: 0.0,
            lr: 0.1,
            epochs: 2,
            batch: 32,
            seed: 42,
            normalize: false,
            train_subset: None,
            thin_class: None,
        }
    }
}

/// What the loop did, from the training side: ground truth for the tests.
#[derive(Clone, Debug, Default)]
pub struct LoopRecord {
    /// (global step, training loss) of each TRAIN step.
    pub train_loss: Vec<(u64, f64)>,
    /// (global step, validation loss) of each EVAL step (one per epoch, whole held-out set).
    pub eval_loss: Vec<(u64, f64)>,
    /// The first global step at which a tensor the loop saved held NaN or ±Inf.
    pub first_nonfinite: Option<u64>,
}

fn standardize(x: &Array2<f32>, mean: &Array1<f32>, std: &Array1<f32>) -> Array2<f32> {
    (x - mean) / std
}

impl Loop {
    pub fn run(&self, dir: &Path) -> LoopRecord {
        let (tr, ev) = data();
        let mut train_set = Digits {
            images: tr.images.clone(),
            labels: tr.labels.clone(),
        };
        let mut eval_set = Digits {
            images: ev.images.clone(),
            labels: ev.labels.clone(),
        };
        if let Some((class, keep)) = self.thin_class {
            train_set = thin(&train_set, class, keep);
            eval_set = thin(&eval_set, class, keep);
        }
        if let Some(n) = self.train_subset {
            let idx: Vec<usize> = (0..n.min(train_set.len())).collect();
            let (images, labels) = train_set.batch(&idx);
            train_set = Digits { images, labels };
        }
        let mean = tr.images.mean_axis(Axis(0)).unwrap();
        let std = tr
            .images
            .std_axis(Axis(0), 0.0)
            .mapv(|s| if s > 1e-6 { s } else { 1.0 });
        let prep = |x: Array2<f32>| {
            if self.normalize {
                standardize(&x, &mean, &std)
            } else {
                x
            }
        };

        let mut rng = Rng::new(self.seed);
        let mut widths = vec![64];
        widths.extend(&self.hidden);
        widths.push(10);
        let mut model = Mlp::new(
            &widths,
            self.activation,
            self.init_scale,
            self.bias,
            &mut rng,
        );
        let act = match self.activation {
            Activation::Relu => "relu",
            Activation::LeakyRelu => "leaky_relu",
            Activation::Sigmoid => "sigmoid",
        };
        let mut hook = hook_for(dir, SaveConfig::every(1));
        let mut rec = LoopRecord::default();
        for _ in 0..self.epochs {
            hook.set_mode(Mode::Train);
            let order = rng.permutation(train_set.len());
            for batch in order.chunks(self.batch) {
                let (x, y) = train_set.batch(batch);
                let x = prep(x);
                let fwd = model.forward(&x);
                let (loss, acc) = Mlp::loss_and_accuracy(&fwd, &y);
                let grads = model.backward(&fwd, &y);
                let step = hook.global_step();
                rec.train_loss.push((step, f64::from(loss)));
                let finite = |a: &[f32]| a.iter().all(|v| v.is_finite());
                let all_finite = loss.is_finite()
                    && finite(x.as_slice().unwrap())
                    && model.layers.iter().all(|l| {
                        finite(l.weight.as_slice().unwrap()) && finite(l.bias.as_slice().unwrap())
                    })
                    && grads.weight.iter().all(|g| finite(g.as_slice().unwrap()))
                    && grads.bias.iter().all(|g| finite(g.as_slice().unwrap()))
                    && fwd.pre.iter().all(|a| finite(a.as_slice().unwrap()))
                    && fwd.act.iter().all(|a| finite(a.as_slice().unwrap()));
                if !all_finite && rec.first_nonfinite.is_none() {
                    rec.first_nonfinite = Some(step);
                }
                for (i, layer) in model.layers.iter().enumerate() {
                    let w = format!("{}.weight", layer.name);
                    let b = format!("{}.bias", layer.name);
                    hook.save_tensor(&w, &TensorView::from_ndarray(&layer.weight), &["weights"]);
                    hook.save_tensor(&b, &TensorView::from_ndarray(&layer.bias), &["biases"]);
                    hook.save_tensor(
                        &format!("gradient/{w}"),
                        &TensorView::from_ndarray(&grads.weight[i]),
                        &["gradients"],
                    );
                    hook.save_tensor(
                        &format!("gradient/{b}"),
                        &TensorView::from_ndarray(&grads.bias[i]),
                        &["gradients"],
                    );
                    if i + 1 < model.layers.len() {
                        hook.save_tensor(
                            &format!("{act}{}.input", i + 1),
                            &TensorView::from_ndarray(&fwd.pre[i]),
                            &["outputs"],
                        );
                        hook.save_tensor(
                            &format!("{act}{}.output", i + 1),
                            &TensorView::from_ndarray(&fwd.act[i]),
                            &["outputs"],
                        );
                    }
                }
                hook.save_tensor("fc1.input", &TensorView::from_ndarray(&x), &["inputs"]);
                hook.save_scalar("loss", f64::from(loss), &["losses"]);
                hook.save_scalar("accuracy", f64::from(acc), &["metrics"]);
                hook.step();
                model.sgd(&grads, self.lr);
            }
            // One EVAL step per epoch over the whole held-out set.
            hook.set_mode(Mode::Eval);
            let (x, y) = (prep(eval_set.images.clone()), eval_set.labels.clone());
            let fwd = model.forward(&x);
            let (loss, acc) = Mlp::loss_and_accuracy(&fwd, &y);
            rec.eval_loss.push((hook.global_step(), f64::from(loss)));
            let labels: Vec<i64> = y.iter().map(|l| *l as i64).collect();
            let preds: Vec<i64> = fwd
                .probs
                .outer_iter()
                .map(|row| {
                    row.iter()
                        .enumerate()
                        .fold(
                            (0usize, f32::MIN),
                            |b, (i, &p)| if p > b.1 { (i, p) } else { b },
                        )
                        .0 as i64
                })
                .collect();
            hook.save_scalar("loss", f64::from(loss), &["losses"]);
            hook.save_scalar("accuracy", f64::from(acc), &["metrics"]);
            hook.save_tensor(
                "labels",
                &TensorView::from_slice(&labels, &[labels.len()]).unwrap(),
                &["labels"],
            );
            hook.save_tensor(
                "predictions",
                &TensorView::from_slice(&preds, &[preds.len()]).unwrap(),
                &["predictions"],
            );
            hook.step();
        }
        hook.close();
        drop(hook);
        rec
    }
}

/// Runs one rule offline over a finished run.
pub fn check(dir: &Path, spec: &str) -> Summary {
    RuleRunner::builder(dir)
        .spec(RuleSpec::parse(spec).expect("spec"))
        .build()
        .expect("runner")
        .run_offline()
        .expect("offline run")
}

/// The global steps of a finished run in `mode`, in order, from the reader.
pub fn mode_globals(dir: &Path, mode: Mode) -> Vec<u64> {
    smdebug_read::Trial::open(dir.to_str().unwrap())
        .unwrap()
        .global_steps(Some(mode))
        .unwrap()
}

/// An HTTP server on 127.0.0.1 that answers every request with `status` and hands each body
/// over, in order.
pub fn http_server(status: u16) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
            );
            if tx.send(String::from_utf8(body).unwrap()).is_err() {
                return;
            }
        }
    });
    (url, rx)
}
