//! Drift of the data a deployed model serves, against the data it was trained on.
//!
//! The training run ends with a baseline pass: the trained model over its own training images
//! in PREDICT steps, its inputs and outputs captured through the hook (collection
//! `data_capture`, SageMaker Model Monitor's name for it). A served model captures its inputs
//! and outputs the same way into an inference run of its own. [`DataDrift`], a custom
//! `TensorRule`, reads the baseline from the training run with `Trial` when it is built, and
//! over the inference run compares, on every served image so far:
//!
//! - the inputs: the per-image mean pixel intensity, by the two-sample Kolmogorov–Smirnov
//!   statistic D (the largest gap between the two empirical distribution functions), against
//!   the test's critical value at `alpha` = 0.001, c(α)·√((n+m)/(n·m)) with
//!   c(α) = √(−ln(α/2)/2) = 1.95: distribution-free, no binning, and a threshold that accounts
//!   for how many images were served;
//! - the outputs: the histogram of predicted classes, by the population stability index
//!   PSI = Σ (aᵢ − eᵢ)·ln(aᵢ/eᵢ) over the 10 classes (eᵢ the baseline's share, aᵢ the served
//!   share, each count plus ½ so that an empty class stays finite), against the usual limit of
//!   0.25 ("significant shift"; < 0.1 is "no shift"). Without drift PSI is about
//!   (k−1)·(1/n + 1/m) (a χ² with k−1 = 9 degrees of freedom scaled by 1/n + 1/m): 0.03 for
//!   the 359 held-out images, 0.08 at the `min_samples` = 128 the rule waits for, so 0.25 is
//!   beyond chance there (p < 0.001).
//!
//! It fires when either exceeds its limit. The two catch different drifts: washed-out scans move
//! every image's intensity (KS D = 1) while the model still gets most of them right, so its
//! predicted classes hardly move; digits moved by a pixel keep their intensities while the
//! predictions fall apart (PSI far above 0.25). SageMaker Model Monitor's data-quality baseline
//! compares feature distributions the same way (a KS-style distance per feature, from the
//! training data's statistics); the classifier's output histogram is its model-quality side.

use std::path::{Path, PathBuf};

use candle_core::{D, Module, Tensor};
use candle_nn::ops::softmax;
use smdebug::prelude::*;
use smdebug::rules::{Evidence, Needs, Rule, RuleResult, TensorRule, TensorSelection, value_at};
use smdebug_candle::CandleHook;

use super::deploy::{self, CLASSES, Data, DigitsCnn, Result, SIDE, Trained};

/// The collection of the served inputs and outputs, saved at every PREDICT step.
pub const COLLECTION: &str = "data_capture";
/// A served batch, `(n, 1, 8, 8)`.
pub const INPUT: &str = "data_capture/input";
/// The model's class probabilities for it, `(n, 10)`.
pub const OUTPUT: &str = "data_capture/output";
/// Images per served request (one PREDICT step each).
pub const SERVE_BATCH: usize = 32;

/// A shifted copy of the digits: washed-out scans, every pixel `0.35 + 0.65·x` (grey paper,
/// fainter ink). The inputs' intensities move; the shapes stay.
pub fn washed_out(images: &Tensor) -> candle_core::Result<Tensor> {
    images.affine(0.65, 0.35)
}

/// A shifted copy of the digits: each image moved one pixel to the right, a blank column coming
/// in on the left (the digits' own margins are mostly blank, so little ink is lost). The
/// intensities stay; what the model sees moves.
pub fn translated(images: &Tensor) -> candle_core::Result<Tensor> {
    images.pad_with_zeros(3, 1, 0)?.narrow(3, 0, SIDE)
}

/// Serves `images` with `model` in PREDICT steps of [`SERVE_BATCH`], capturing each request's
/// input and output through the session's hook. Returns the predicted classes.
pub fn serve(
    session: &mut Session<CandleHook>,
    model: &DigitsCnn,
    images: &Tensor,
) -> Result<Vec<u32>> {
    session.set_mode(Mode::Predict)?;
    let n = images.dim(0)?;
    let mut predicted = Vec::with_capacity(n);
    for start in (0..n).step_by(SERVE_BATCH) {
        let x = images.narrow(0, start, SERVE_BATCH.min(n - start))?;
        let probabilities = session.forward(|| softmax(&model.forward(&x)?, D::Minus1))?;
        let hook = session.hook();
        hook.save_tensor(INPUT, &x, &[COLLECTION])?;
        hook.save_tensor(OUTPUT, &probabilities, &[COLLECTION])?;
        predicted.extend(probabilities.argmax(D::Minus1)?.to_vec1::<u32>()?);
        session.step()?;
    }
    Ok(predicted)
}

/// The save configuration of the `data_capture` collection: every PREDICT step, nothing else.
pub fn capture_collection() -> smdebug_core::Result<Collection> {
    Ok(Collection::new(COLLECTION)
        .with_regex("^data_capture/")?
        .with_save_config(
            SaveConfig::new(SaveConfigMode::never())
                .with_mode(Mode::Predict, SaveConfigMode::every(1)),
        ))
}

/// The two-sample Kolmogorov–Smirnov statistic of two sorted samples: the largest distance
/// between their empirical distribution functions. 0 when either is empty.
pub fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    d
}

/// The critical value of the two-sample KS test at level `alpha` for samples of `n` and `m`
/// (the asymptotic one): c(α)·√((n+m)/(n·m)), c(α) = √(−ln(α/2)/2).
pub fn ks_critical(n: usize, m: usize, alpha: f64) -> f64 {
    let (n, m) = (n as f64, m as f64);
    (-(alpha / 2.0).ln() / 2.0).sqrt() * ((n + m) / (n * m)).sqrt()
}

/// The population stability index of `actual` counts against `expected` counts over the same
/// bins, each count plus ½.
pub fn psi(expected: &[u64], actual: &[u64]) -> f64 {
    let total = |c: &[u64]| c.iter().sum::<u64>() as f64 + 0.5 * c.len() as f64;
    let (te, ta) = (total(expected), total(actual));
    expected
        .iter()
        .zip(actual)
        .map(|(&e, &a)| {
            let (e, a) = ((e as f64 + 0.5) / te, (a as f64 + 0.5) / ta);
            (a - e) * (a / e).ln()
        })
        .sum()
}

/// Each image's mean pixel and predicted class, from a captured input `(n, 1, 8, 8)` and output
/// `(n, 10)` as `Trial` reads them.
fn features(
    input: &ndarray::ArrayD<f64>,
    output: &ndarray::ArrayD<f64>,
) -> std::result::Result<(Vec<f64>, Vec<usize>), String> {
    let pixels = SIDE * SIDE;
    let n = input.shape().first().copied().unwrap_or(0);
    if input.len() != n * pixels || output.shape() != [n, CLASSES] {
        return Err(format!(
            "expected an input of [n, 1, {SIDE}, {SIDE}] and an output of [n, {CLASSES}], got {:?} and {:?}",
            input.shape(),
            output.shape()
        ));
    }
    let x: Vec<f64> = input.iter().copied().collect();
    let y: Vec<f64> = output.iter().copied().collect();
    let means = x
        .chunks_exact(pixels)
        .map(|img| img.iter().sum::<f64>() / pixels as f64)
        .collect();
    let classes = y
        .chunks_exact(CLASSES)
        .map(|p| {
            (0..CLASSES)
                .max_by(|&i, &j| p[i].total_cmp(&p[j]).then(j.cmp(&i)))
                .unwrap_or(0)
        })
        .collect();
    Ok((means, classes))
}

/// One judgement of the served images so far.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Judgement {
    pub step: u64,
    /// Served images so far.
    pub samples: usize,
    /// KS D of the per-image mean intensity, and its critical value.
    pub ks: f64,
    pub ks_critical: f64,
    /// PSI of the predicted-class histogram.
    pub psi: f64,
    pub fired: bool,
}

/// What [`DataDrift`] found, as its `details` in the rule's status.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriftDetails {
    /// Images in the baseline.
    pub baseline_samples: usize,
    /// Predicted classes in the baseline, and among the images served so far.
    pub baseline_classes: [u64; CLASSES],
    pub served_classes: [u64; CLASSES],
    /// Every judgement, in step order.
    pub judged: Vec<Judgement>,
}

/// Fires when the served inputs' per-image mean intensity (two-sample KS at `alpha`) or the
/// served outputs' predicted-class histogram (PSI above `psi_limit`) has drifted from the
/// training run's baseline; judges once at least `min_samples` images were served, then at every
/// step, over everything served so far. See the module's documentation for why these.
pub struct DataDrift {
    baseline: String,
    alpha: f64,
    psi_limit: f64,
    min_samples: usize,
    baseline_means: Vec<f64>,
    baseline_classes: [u64; CLASSES],
    served_means: Vec<f64>,
    served_classes: [u64; CLASSES],
    judged: Vec<Judgement>,
}

impl DataDrift {
    pub const NAME: &'static str = "DataDrift";
    /// The KS test's level.
    pub const ALPHA: f64 = 0.001;
    /// The PSI above which the predicted classes have shifted.
    pub const PSI_LIMIT: f64 = 0.25;
    /// Served images before the first judgement.
    pub const MIN_SAMPLES: usize = 128;

    /// Reads the baseline (every PREDICT step's `data_capture` input and output) from the
    /// training run at `location` with `Trial`.
    pub fn from_training_run(location: &str) -> Result<DataDrift> {
        let trial = Trial::open(location)?;
        let mode = Some(Mode::Predict);
        let tensor = |name: &str| {
            trial.tensor(name).map_err(|e| {
                format!("{location} has no baseline: {e} (its baseline pass saves {name} at PREDICT steps)")
            })
        };
        let (input, output) = (tensor(INPUT)?, tensor(OUTPUT)?);
        let mut baseline_means = Vec::new();
        let mut baseline_classes = [0; CLASSES];
        for step in input.steps(mode)? {
            let (means, classes) = features(
                &input.value(step, mode, None)?,
                &output.value(step, mode, None)?,
            )
            .map_err(|e| format!("{location}, PREDICT step {step}: {e}"))?;
            baseline_means.extend(means);
            classes.into_iter().for_each(|c| baseline_classes[c] += 1);
        }
        if baseline_means.is_empty() {
            return Err(
                format!("{location} has no baseline: no PREDICT step saved {INPUT}").into(),
            );
        }
        baseline_means.sort_by(f64::total_cmp);
        Ok(DataDrift {
            baseline: location.to_string(),
            alpha: Self::ALPHA,
            psi_limit: Self::PSI_LIMIT,
            min_samples: Self::MIN_SAMPLES,
            baseline_means,
            baseline_classes,
            served_means: Vec::new(),
            served_classes: [0; CLASSES],
            judged: Vec::new(),
        })
    }

    /// Images in the baseline.
    pub fn baseline_samples(&self) -> usize {
        self.baseline_means.len()
    }
}

impl TensorRule for DataDrift {
    smdebug::rules::rule_identity!(name: Self::NAME, params: [baseline, alpha, psi_limit, min_samples]);

    fn needs(&self) -> Needs {
        let mut needs = Needs::of(
            self.name(),
            &TensorSelection::exact(&[INPUT, OUTPUT]),
            COLLECTION,
        )
        .step_by_step()
        .requiring(format!(
            "{INPUT} and {OUTPUT} at PREDICT steps, {} images in all",
            self.min_samples
        ));
        // Every served request, not the rules' default interval.
        for request in &mut needs.capture {
            request.save_config = SaveConfig::new(SaveConfigMode::never())
                .with_mode(Mode::Predict, SaveConfigMode::every(1));
        }
        needs
    }

    fn invoke_at_step(&mut self, trial: &Trial, step: u64) -> smdebug::rules::Result<RuleResult> {
        let mut result = RuleResult::new(step);
        let (Some(input), Some(output)) = (
            value_at(self.name(), trial, INPUT, step)?,
            value_at(self.name(), trial, OUTPUT, step)?,
        ) else {
            return Ok(result);
        };
        let (means, classes) =
            features(&input, &output).map_err(|e| smdebug::rules::Error::BadRule {
                rule: self.name().to_string(),
                reason: format!("step {step}: {e}"),
            })?;
        self.served_means.extend(means);
        classes
            .into_iter()
            .for_each(|c| self.served_classes[c] += 1);
        let m = self.served_means.len();
        if m < self.min_samples {
            result.unjudged += 2;
            return Ok(result);
        }
        result.datapoints += 2;
        let mut served = self.served_means.clone();
        served.sort_by(f64::total_cmp);
        let n = self.baseline_means.len();
        let ks = ks_statistic(&self.baseline_means, &served);
        let ks_critical = ks_critical(n, m, self.alpha);
        let psi = psi(&self.baseline_classes, &self.served_classes);
        let mut findings = Vec::new();
        if ks > ks_critical {
            findings.push(format!(
                "input drift: KS D = {ks:.3} > {ks_critical:.3} on the per-image mean intensity ({m} served, {n} in the baseline, alpha {})",
                self.alpha
            ));
            result.add_evidence(
                Evidence::new(INPUT, step, "ks_mean_intensity", ks).limit(ks_critical),
            );
        }
        if psi > self.psi_limit {
            findings.push(format!(
                "output drift: PSI = {psi:.3} > {} on the predicted classes",
                self.psi_limit
            ));
            result.add_evidence(
                Evidence::new(OUTPUT, step, "psi_predicted_class", psi).limit(self.psi_limit),
            );
        }
        if !findings.is_empty() {
            result.fire(findings.join("; "));
        }
        self.judged.push(Judgement {
            step,
            samples: m,
            ks,
            ks_critical,
            psi,
            fired: result.fired,
        });
        Ok(result)
    }

    fn details(&self) -> serde_json::Value {
        let details = DriftDetails {
            baseline_samples: self.baseline_means.len(),
            baseline_classes: self.baseline_classes,
            served_classes: self.served_classes,
            judged: self.judged.clone(),
        };
        // Numbers, arrays and strings only: serializing cannot fail.
        serde_json::to_value(details).unwrap_or_default()
    }
}

/// One served copy of the held-out digits.
pub struct Served {
    /// The inference run.
    pub run: PathBuf,
    /// The rule's final status in the serving session.
    pub status: smdebug::rules::RuleStatus,
    /// What it found, from the status's details.
    pub details: DriftDetails,
    /// Accuracy of the served predictions.
    pub accuracy: f64,
}

/// What [`run`] did.
pub struct Outcome {
    pub train_run: PathBuf,
    pub trained: Trained,
    pub held_out: Served,
    pub washed_out: Served,
    pub translated: Served,
}

/// Trains the CNN into `out/train` (ending with the baseline pass), then serves the held-out
/// digits into `out/serve-heldout` and their two shifted copies into `out/serve-washed-out`
/// ([`washed_out`]) and `out/serve-translated` ([`translated`]), each in a session running
/// [`DataDrift`] against the training run.
pub fn run(out: &Path) -> Result<Outcome> {
    let data = Data::load()?;
    let train_run = out.join("train");
    let train_str = train_run.to_str().ok_or("non-UTF-8 path")?;
    let mut session = deploy::training_session(train_str)
        .collection(capture_collection()?)
        .start()?;
    let trained = deploy::train(&mut session, &data)?;
    // The baseline: the trained model over its own training images, captured as served.
    serve(&mut session, &trained.model, &data.train_x)?;
    print!("{}", session.finish()?);

    let serve_one = |name: &str, images: &Tensor| -> Result<Served> {
        let run = out.join(name);
        let run_str = run.to_str().ok_or("non-UTF-8 path")?;
        let rule = DataDrift::from_training_run(train_str)?;
        let mut session = Session::builder(run_str)
            .candle()
            .overwrite(true)
            .save(SaveConfig::new(SaveConfigMode::never()))
            .collection(capture_collection()?)
            .custom_rule(Rule::tensor(rule), vec![])
            .start()?;
        let predicted = serve(&mut session, &trained.model, images)?;
        let summary = session.finish()?;
        print!("{summary}");
        let status = summary
            .rules
            .into_iter()
            .find(|r| r.rule == DataDrift::NAME)
            .ok_or("the serving session has no DataDrift status")?;
        let details: DriftDetails = status
            .custom_details()
            .map_err(|e| format!("DataDrift's details in {}: {e}", run.display()))?
            .ok_or_else(|| format!("DataDrift recorded no details in {}", run.display()))?;
        let labels: Vec<u32> = data.test_y.to_vec1()?;
        let hits = predicted
            .iter()
            .zip(&labels)
            .filter(|(p, l)| p == l)
            .count();
        Ok(Served {
            run,
            status,
            details,
            accuracy: hits as f64 / labels.len() as f64,
        })
    };
    let held_out = serve_one("serve-heldout", &data.test_x)?;
    let washed_out = serve_one("serve-washed-out", &washed_out(&data.test_x)?)?;
    let translated = serve_one("serve-translated", &translated(&data.test_x)?)?;
    Ok(Outcome {
        train_run,
        trained,
        held_out,
        washed_out,
        translated,
    })
}
