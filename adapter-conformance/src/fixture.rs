//! What an adapter supplies ([`Fixture`]) and what every behaviour test shares: the digits
//! data, the run writer, the training loop, and checks of a run against the model's own tensors.

use std::collections::BTreeMap;
use std::path::Path;

use smdebug_core::adapter::{AdapterHook, Framework};
use smdebug_core::{
    Capture, DType, Hook, HookBuilder, MemorySink, Mode, Reduction, ReductionOp, Sink, TensorView,
};
use smdebug_examples::digits::{Digits, default_path};
use smdebug_examples::mlp::Rng;
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_read::trial::Trial;

/// A tensor as the test's own reference: its shape and every element as `f64`.
pub type Own = (Vec<usize>, Vec<f64>);

/// What a run should hold: (tensor name, global step) -> the model's own tensor.
pub type Expected = BTreeMap<(String, u64), Own>;

/// The framework tensor type of a fixture.
pub type TensorOf<F> = <<F as Fixture>::Framework as Framework>::Tensor;

/// The adapter's error type of a fixture.
pub type ErrorOf<F> = <<F as Fixture>::Framework as Framework>::Error;

/// What one forward pass (and, in training, backward pass) of the fixture's model gives back.
pub struct Pass<T> {
    /// The loss, a one-element framework tensor.
    pub loss: T,
    /// The loss as the model computed it, as `f64`.
    pub loss_value: f64,
    /// The share of the batch classified right.
    pub accuracy: f64,
    /// When asked for: the model's own tensors as the adapter should have recorded them in this
    /// step, by name: `relu1.output`, and in training `fc1.weight`, `fc1.bias`, `fc2.weight`,
    /// `fc2.bias` (before the optimizer step) and their `gradient/…`.
    pub own: BTreeMap<String, Own>,
}

/// One framework's side of the suite.
pub trait Fixture {
    /// The adapter's framework, as smdebug-core's adapter kit sees it.
    type Framework: Framework;
    /// The adapter's hook: the kit's [`AdapterHook`] through `AsRef`/`AsMut` (what
    /// `smdebug_core::adapter_hook_methods!` gives it), driven by a session through [`Capture`].
    type Hook: AsRef<AdapterHook<Self::Framework>> + AsMut<AdapterHook<Self::Framework>> + Capture;
    /// A 64-32-10 MLP (`fc1`, `relu1`, `fc2`) on 8x8 digits, with its optimizer.
    type Model;

    /// The adapter's hook over `sink`.
    fn hook(
        &self,
        builder: HookBuilder,
        sink: impl Sink + 'static,
    ) -> Result<Self::Hook, ErrorOf<Self>>;

    /// A fresh model. Its ReLU's output is recorded as `relu1.output` (in `outputs`) when due,
    /// however the adapter does that (a wrapped module, or a call in [`pass`](Self::pass)).
    fn model(&self, hook: &mut Self::Hook) -> Self::Model;

    /// One pass over the batch `x` (`labels.len()` rows of 64 pixels) the way a loop does it
    /// with no timing code: the forward pass as the step's forward span (a wrapped model, or the
    /// kit's `forward` scope), with the [`timed_modules`](Self::timed_modules) inside it, and the
    /// loss; in training also the adapter's `backward` call, its `save_parameters` and
    /// `save_gradients`, and an SGD step inside the kit's `optimizer` scope. The relu1 output is
    /// recorded; the loss, metrics and `step` are left to the suite. With `own`, the model's
    /// tensors are returned as [`Pass::own`].
    fn pass(
        &self,
        model: &mut Self::Model,
        hook: &mut Self::Hook,
        x: &[f32],
        labels: &[i64],
        train: bool,
        own: bool,
    ) -> Pass<TensorOf<Self>>;

    /// A float tensor of `shape` holding `values`, in the model's float dtype.
    fn tensor(&self, values: &[f32], shape: &[usize]) -> TensorOf<Self>;

    /// The dtype the model's tensors are recorded in.
    fn dtype(&self) -> DType {
        DType::F32
    }

    /// How far a reduction computed on the device may be from the host's, relative to the sum
    /// of the magnitudes of the tensor's finite elements (to `|value|` for min and max).
    fn reduction_tolerance(&self) -> f64;

    /// The modules whose forward passes are spans of their own (named so) while the detailed
    /// window is open, in the order one forward pass runs them: wrapped modules, or modules the
    /// model times itself where the framework's cannot be wrapped.
    fn timed_modules(&self) -> &'static [&'static str];
}

/// The digits set as rows of 64 pixels and labels, split 80/20 into training and test rows.
pub(crate) struct Data {
    train_x: Vec<f32>,
    train_y: Vec<i64>,
    test_x: Vec<f32>,
    test_y: Vec<i64>,
}

impl Data {
    pub(crate) fn load() -> Data {
        let all = Digits::load(&default_path()).expect("the digits set ships with the examples");
        let (train, test) = all.split(0.2, 7);
        let rows = |d: &Digits| -> (Vec<f32>, Vec<i64>) {
            let x = d.images.iter().copied().collect();
            let y = d.labels.iter().map(|&l| l as i64).collect();
            (x, y)
        };
        let (train_x, train_y) = rows(&train);
        let (test_x, test_y) = rows(&test);
        Data {
            train_x,
            train_y,
            test_x,
            test_y,
        }
    }

    /// `count` shuffled training batches of `batch` rows.
    pub(crate) fn train_batches(
        &self,
        batch: usize,
        count: usize,
        seed: u64,
    ) -> Vec<(Vec<f32>, Vec<i64>)> {
        let n = self.train_y.len();
        let mut rng = Rng::new(seed);
        let mut order: Vec<usize> = Vec::new();
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            if order.len() < batch {
                order = rng.permutation(n);
            }
            let rows: Vec<usize> = order.drain(..batch).collect();
            let x = rows
                .iter()
                .flat_map(|&r| self.train_x[r * 64..(r + 1) * 64].iter().copied())
                .collect();
            let y = rows.iter().map(|&r| self.train_y[r]).collect();
            out.push((x, y));
        }
        out
    }

    /// The test rows in batches of `batch`.
    pub(crate) fn test_batches(&self, batch: usize) -> Vec<(&[f32], &[i64])> {
        self.test_y
            .chunks(batch)
            .zip(self.test_x.chunks(batch * 64))
            .map(|(y, x)| (x, y))
            .collect()
    }
}

/// A writer into the run directory `dir`, with back-pressure rather than dropping under load:
/// the tests read back every tensor.
pub fn writer(dir: &Path) -> Writer {
    let storage = smdebug_storage::open_storage(dir.to_str().unwrap()).unwrap();
    Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap()
}

pub(crate) fn hook_at<F: Fixture>(fx: &F, dir: &Path, builder: HookBuilder) -> F::Hook {
    ok(fx.hook(builder, writer(dir)))
}

pub(crate) fn memory_hook<F: Fixture>(fx: &F, builder: HookBuilder) -> (F::Hook, MemorySink) {
    let sink = MemorySink::default();
    let hook = fx
        .hook(builder, sink.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    (hook, sink)
}

pub(crate) fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// One training or eval step the way a loop does it: a pass, the loss and accuracy, `step()`.
pub(crate) fn run_step<F: Fixture>(
    fx: &F,
    model: &mut F::Model,
    hook: &mut F::Hook,
    x: &[f32],
    y: &[i64],
    train: bool,
    own: bool,
) -> Pass<TensorOf<F>> {
    let pass = fx.pass(model, hook, x, y, train, own);
    ok(hook.as_mut().save_loss("loss", &pass.loss));
    hook.as_mut().save_metric("accuracy", pass.accuracy);
    ok(hook.as_mut().step());
    pass
}

/// Trains `steps` steps in TRAIN mode; at the steps where `expect_at(step)` holds, records what
/// the run should contain, taken from the model itself.
pub fn train<F: Fixture>(
    fx: &F,
    hook: &mut F::Hook,
    steps: usize,
    expect_at: impl Fn(u64) -> bool,
) -> Expected {
    let data = Data::load();
    let mut model = fx.model(hook);
    let mut expected = Expected::new();
    ok(hook.as_mut().set_mode(Mode::Train));
    for (step, (x, y)) in data.train_batches(32, steps, 1).iter().enumerate() {
        let step = step as u64;
        let want = expect_at(step);
        let pass = run_step(fx, &mut model, hook, x, y, true, want);
        if want {
            for (name, own) in pass.own {
                expected.insert((name, step), own);
            }
            expected.insert(("loss".into(), step), (vec![], vec![pass.loss_value]));
            expected.insert(("accuracy".into(), step), (vec![], vec![pass.accuracy]));
        }
    }
    expected
}

/// Checks that the run in `dir` holds exactly the tensors of `expected`, equal to the model's own,
/// and is complete.
pub fn assert_run_matches(dir: &Path, expected: &Expected, dtype: DType) {
    let trial = Trial::open(dir.to_str().unwrap()).unwrap();
    let mut names: Vec<String> = trial.tensor_names().unwrap();
    names.sort();
    let mut want: Vec<String> = expected.keys().map(|(n, _)| n.clone()).collect();
    want.dedup();
    want.sort();
    assert_eq!(names, want);
    for ((name, step), (shape, values)) in expected {
        let t = trial.tensor(name).unwrap().raw(*step, None, None).unwrap();
        let scalar = name == "loss" || name == "accuracy";
        let want_dtype = if scalar { DType::F64 } else { dtype };
        assert_eq!(t.dtype(), want_dtype, "{name}");
        assert_eq!(t.shape(), shape.as_slice(), "{name} at step {step}");
        assert_eq!(&t.to_f64_vec(), values, "{name} at step {step}");
    }
    assert!(trial.is_complete().unwrap());
}

/// The tensors the hook has put in the collection `name`.
pub(crate) fn hook_members(hook: &Hook, name: &str) -> Vec<String> {
    let found = hook.config().collections.iter().find(|c| c.name() == name);
    found.unwrap().tensor_names().iter().cloned().collect()
}

pub(crate) fn collection_members(trial: &Trial, name: &str) -> Vec<String> {
    trial
        .collections()
        .unwrap()
        .iter()
        .find(|c| c.name() == name)
        .map(|c| c.tensor_names().iter().cloned().collect())
        .unwrap_or_default()
}

/// Checks a reduction computed on the device against the host's value over `values`.
pub(crate) fn assert_reduces_like_the_host(
    got: f64,
    r: Reduction,
    values: &[f64],
    rel: f64,
    what: &str,
) {
    let host = TensorView::from_slice(values, &[values.len()]).unwrap();
    let want = r.compute(&host);
    if want.is_nan() {
        assert!(got.is_nan(), "{what} {r}: {got} vs NaN");
        return;
    }
    if got == want {
        return;
    }
    let scale = if matches!(r.op, ReductionOp::Min | ReductionOp::Max) {
        want.abs()
    } else {
        let magnitudes: f64 = values
            .iter()
            .filter(|v| v.is_finite())
            .map(|v| v.abs())
            .sum();
        magnitudes.max(if want.is_finite() { want.abs() } else { 0.0 })
    };
    assert!(
        (got - want).abs() <= rel * scale,
        "{what} {r}: {got} vs {want}"
    );
}

/// Every reduction except the product, plain and of absolute values.
pub fn every_device_reduction() -> Vec<Reduction> {
    ReductionOp::ALL
        .into_iter()
        .filter(|op| *op != ReductionOp::Prod)
        .flat_map(|op| [Reduction::new(op), Reduction::abs(op)])
        .collect()
}
