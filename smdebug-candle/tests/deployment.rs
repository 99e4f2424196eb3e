//! The deployment examples on the shipped digits: saliency maps of the misclassified held-out
//! digits (captured through the hook, read back with `Trial`, equal to the gradient recomputed
//! here, drawn as valid PNGs), and the `DataDrift` rule (fires on a washed-out copy of the
//! held-out digits and on a copy moved one pixel, quiet on the digits as they are; its
//! statistics checked against a brute-force computation); both seeded, so two trainings give
//! the same model.

#[path = "../examples/common/deploy.rs"]
#[allow(dead_code)]
mod deploy;
#[path = "../examples/common/drift.rs"]
#[allow(dead_code)]
mod drift;
#[path = "../examples/common/saliency.rs"]
#[allow(dead_code)]
mod saliency;

use std::io::BufReader;
use std::path::Path;

use candle_core::{D, Module, Tensor, Var};
use deploy::{Data, SIDE};
use drift::DataDrift;
use smdebug::prelude::*;
use smdebug::rules::{Rule, RuleRunner};

/// Decodes the PNG at `path`: its header and RGB bytes.
fn decode(path: &Path) -> (png::OutputInfo, Vec<u8>) {
    let decoder = png::Decoder::new(BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info, buf)
}

fn pixel(info: &png::OutputInfo, rgb: &[u8], (x, y): (u32, u32)) -> [u8; 3] {
    let i = ((y * info.width + x) * 3) as usize;
    [rgb[i], rgb[i + 1], rgb[i + 2]]
}

/// d logits[pred] / d image for one image `(1, 8, 8)`, on its own (a batch of one, the score
/// taken by index): not the batched `gather` of `saliency::input_gradients`.
fn gradient_of_one(model: &deploy::DigitsCnn, image: &Tensor, class: u32) -> Vec<f32> {
    let input = Var::from_tensor(&image.unsqueeze(0).unwrap()).unwrap();
    let logits = model.forward(input.as_tensor()).unwrap();
    let score = logits.get(0).unwrap().get(class as usize).unwrap();
    let grads = score.backward().unwrap();
    grads
        .get(input.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[test]
fn saliency_maps_of_the_misclassified_digits_are_captured_read_back_and_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = saliency::run(dir.path()).unwrap();
    let data = Data::load().unwrap();
    let model = &outcome.trained.model;

    // The misclassified digits, found again here.
    let predicted: Vec<u32> = model
        .forward(&data.test_x)
        .unwrap()
        .argmax(D::Minus1)
        .unwrap()
        .to_vec1()
        .unwrap();
    let labels: Vec<u32> = data.test_y.to_vec1().unwrap();
    let wrong: Vec<u64> = (0..labels.len())
        .filter(|&i| predicted[i] != labels[i])
        .map(|i| i as u64)
        .collect();
    assert_eq!(outcome.held_out, 359);
    assert!(
        !wrong.is_empty(),
        "the model gets every held-out digit right"
    );
    assert_eq!(outcome.misclassified, wrong);

    // One saliency tensor per misclassified digit, at the PREDICT step of its index, nothing at
    // TRAIN or EVAL steps.
    let trial = Trial::open(outcome.run.to_str().unwrap()).unwrap();
    let mode = Some(Mode::Predict);
    for name in [
        saliency::GRADIENT,
        saliency::IMAGE,
        saliency::LABEL,
        saliency::PREDICTED,
    ] {
        let t = trial.tensor(name).unwrap();
        assert_eq!(t.steps(mode).unwrap(), wrong, "{name}");
        assert!(t.steps(Some(Mode::Train)).unwrap().is_empty(), "{name}");
        assert!(t.steps(Some(Mode::Eval)).unwrap().is_empty(), "{name}");
    }
    let gradient = trial.tensor(saliency::GRADIENT).unwrap();
    let image = trial.tensor(saliency::IMAGE).unwrap();
    for &i in &wrong {
        let x = data.test_x.get(i as usize).unwrap();
        let stored = gradient.raw(i, mode, None).unwrap();
        assert_eq!(stored.shape(), x.dims(), "digit {i}: the input's shape");
        let expected = gradient_of_one(model, &x, predicted[i as usize]);
        let got = stored.to_f64_vec();
        let scale = expected.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        assert!(scale > 0.0, "digit {i}: a zero gradient");
        for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(
                (g - f64::from(*e)).abs() <= 1e-5 * scale,
                "digit {i}, pixel {k}: stored {g}, recomputed {e}"
            );
        }
        let pixels: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
        let stored_image = image.raw(i, mode, None).unwrap().to_f64_vec();
        assert_eq!(
            stored_image,
            pixels.iter().map(|&p| f64::from(p)).collect::<Vec<_>>()
        );
        let scalar = |name: &str| {
            let v = trial.tensor(name).unwrap().value(i, mode, None).unwrap();
            assert_eq!(v.shape(), &[] as &[usize], "{name} is a scalar");
            v.iter().copied().next().unwrap()
        };
        assert_eq!(scalar(saliency::LABEL), f64::from(labels[i as usize]));
        assert_eq!(
            scalar(saliency::PREDICTED),
            f64::from(predicted[i as usize])
        );
    }

    // One valid PNG per misclassified digit, of the picture's size, drawn from those values.
    let pngs: Vec<_> = std::fs::read_dir(dir.path().join("saliency"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    assert_eq!(pngs.len(), wrong.len());
    assert_eq!(outcome.pictures.len(), wrong.len());
    for p in &outcome.pictures {
        let i = p.index as usize;
        assert_eq!(
            p.path.file_name().unwrap().to_str().unwrap(),
            format!("digit{i}_label{}_pred{}.png", labels[i], predicted[i])
        );
        let (info, rgb) = decode(&p.path);
        assert_eq!((info.width, info.height), saliency::PICTURE);
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let x = image.value(p.index, mode, None).unwrap();
        let g = gradient.value(p.index, mode, None).unwrap();
        let g: Vec<f64> = g.iter().copied().collect();
        let max = saliency::max_abs(&g);
        assert_eq!(max, p.max_abs);
        for r in 0..SIDE {
            for c in 0..SIDE {
                let (at_image, at_map) = saliency::cell_centres(r, c);
                assert_eq!(pixel(&info, &rgb, at_image), saliency::grey(x[[0, r, c]]));
                assert_eq!(
                    pixel(&info, &rgb, at_map),
                    saliency::diverging(g[r * SIDE + c] / max)
                );
            }
        }
    }
}

/// The per-image mean pixel of images `(n, 1, 8, 8)`, sorted.
fn sorted_means(images: &Tensor) -> Vec<f64> {
    let mut v: Vec<f64> = images
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .flatten_from(1)
        .unwrap()
        .mean(1)
        .unwrap()
        .to_vec1()
        .unwrap();
    v.sort_by(f64::total_cmp);
    v
}

/// KS D by brute force: the largest gap between the empirical distribution functions at every
/// sample point.
fn ks_brute_force(a: &[f64], b: &[f64]) -> f64 {
    let cdf = |s: &[f64], x: f64| s.iter().filter(|&&v| v <= x).count() as f64 / s.len() as f64;
    a.iter()
        .chain(b)
        .map(|&x| (cdf(a, x) - cdf(b, x)).abs())
        .fold(0.0, f64::max)
}

#[test]
fn the_drift_rule_fires_on_shifted_digits_and_stays_quiet_on_held_out_ones() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = drift::run(dir.path()).unwrap();
    let data = Data::load().unwrap();
    let (n, m) = (data.train_y.dim(0).unwrap(), data.test_y.dim(0).unwrap());
    let train_str = outcome.train_run.to_str().unwrap();

    // The baseline in the training run: the training images as the model was served them.
    let baseline = DataDrift::from_training_run(train_str).unwrap();
    assert_eq!(baseline.baseline_samples(), n);

    assert_eq!(
        outcome.held_out.status.status,
        Status::NoIssuesFound,
        "{:?}",
        outcome.held_out.status
    );
    for shifted in [&outcome.washed_out, &outcome.translated] {
        assert_eq!(
            shifted.status.status,
            Status::IssuesFound,
            "{:?}",
            shifted.status
        );
    }

    let served_steps = m.div_ceil(drift::SERVE_BATCH);
    for (served, images) in [
        (&outcome.held_out, data.test_x.clone()),
        (
            &outcome.washed_out,
            drift::washed_out(&data.test_x).unwrap(),
        ),
        (
            &outcome.translated,
            drift::translated(&data.test_x).unwrap(),
        ),
    ] {
        // The inference run holds every request as served, read back through Trial.
        let trial = Trial::open(served.run.to_str().unwrap()).unwrap();
        let input = trial.tensor(drift::INPUT).unwrap();
        let steps = input.steps(Some(Mode::Predict)).unwrap();
        assert_eq!(steps, (0..served_steps as u64).collect::<Vec<_>>());
        let mut read = Vec::new();
        for s in &steps {
            let t = input.raw(*s, Some(Mode::Predict), None).unwrap();
            assert_eq!(&t.shape()[1..], &[1, SIDE, SIDE]);
            read.extend(t.to_f64_vec());
        }
        let expected: Vec<f32> = images.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(read.len(), expected.len());
        assert!(read.iter().zip(&expected).all(|(r, e)| *r == f64::from(*e)));

        // Judged from the 128th image on, at every step after; the last judgement covers every
        // served image and its KS D is the brute-force one of the mean intensities.
        let first = DataDrift::MIN_SAMPLES.div_ceil(drift::SERVE_BATCH) - 1;
        let judged = &served.details.judged;
        assert_eq!(judged.len(), served_steps - first);
        assert_eq!(judged[0].step, first as u64);
        let last = judged.last().unwrap();
        assert_eq!(last.samples, m);
        let ks = last.ks;
        let expected_ks = ks_brute_force(&sorted_means(&data.train_x), &sorted_means(&images));
        assert!((ks - expected_ks).abs() < 1e-12, "{ks} vs {expected_ks}");
        assert!((last.ks_critical - drift::ks_critical(n, m, 0.001)).abs() < 1e-12);
        assert_eq!(served.details.baseline_samples, n);
        assert_eq!(served.details.served_classes.iter().sum::<u64>(), m as u64);

        // The same rule run afterwards over the finished run agrees with the one that ran in the
        // serving session.
        let summary = RuleRunner::builder(&served.run)
            .write_into_run(false)
            .rule(
                Rule::tensor(DataDrift::from_training_run(train_str).unwrap()),
                vec![],
            )
            .build()
            .unwrap()
            .run_offline()
            .unwrap();
        let offline = &summary.rules[0];
        assert_eq!(offline.status, served.status.status);
        assert_eq!(offline.details, served.status.details);
    }
    // Quiet on the held-out digits: every judgement under both limits.
    for j in &outcome.held_out.details.judged {
        assert!(
            j.ks < j.ks_critical && j.psi < DataDrift::PSI_LIMIT && !j.fired,
            "{j:?}"
        );
    }
    // Fires on the washed-out digits at every judgement, from the inputs' side: the model still
    // gets most of them right, so its predicted classes hardly move.
    for j in &outcome.washed_out.details.judged {
        assert!(j.ks > j.ks_critical && j.fired, "{j:?}");
    }
    let status = &outcome.washed_out.status;
    assert!(
        status.message.starts_with("input drift: KS D"),
        "{status:?}"
    );
    assert_eq!(status.evidence[0].tensor, drift::INPUT);
    assert!(
        outcome.washed_out.accuracy > 0.8,
        "{}",
        outcome.washed_out.accuracy
    );
    // Fires on the moved digits at every judgement, from the outputs' side: their intensities are
    // those of the training images, the predictions are not.
    for j in &outcome.translated.details.judged {
        assert!(
            j.ks < j.ks_critical && j.psi > DataDrift::PSI_LIMIT && j.fired,
            "{j:?}"
        );
    }
    let status = &outcome.translated.status;
    assert!(
        status.message.starts_with("output drift: PSI"),
        "{status:?}"
    );
    assert_eq!(status.evidence[0].tensor, drift::OUTPUT);
    assert!(
        outcome.translated.accuracy < outcome.held_out.accuracy - 0.2,
        "{} vs {}",
        outcome.translated.accuracy,
        outcome.held_out.accuracy
    );
}

/// Writes a run at `dir` with `input` and `output` saved in `data_capture` at PREDICT step 0
/// (none when `None`) and a loss at TRAIN step 0.
fn crafted_run(dir: &Path, capture: Option<(&Tensor, &Tensor)>) {
    use smdebug_candle::CandleHook;
    use smdebug_core::Hook;
    let builder = Hook::builder().save_config(SaveConfig::every(1));
    let mut hook = CandleHook::new(builder, smdebug_adapter_conformance::writer(dir)).unwrap();
    hook.set_mode(Mode::Train).unwrap();
    hook.save_loss(
        "loss",
        &Tensor::new(0.5f32, &candle_core::Device::Cpu).unwrap(),
    )
    .unwrap();
    hook.step().unwrap();
    if let Some((input, output)) = capture {
        hook.set_mode(Mode::Predict).unwrap();
        hook.save_tensor(drift::INPUT, input, &[drift::COLLECTION])
            .unwrap();
        hook.save_tensor(drift::OUTPUT, output, &[drift::COLLECTION])
            .unwrap();
        hook.step().unwrap();
    }
    hook.close().unwrap();
}

#[test]
fn the_drift_rule_refuses_a_run_without_a_baseline_and_names_a_capture_of_another_shape() {
    let dev = candle_core::Device::Cpu;
    let images = Tensor::zeros((4, 1, SIDE, SIDE), candle_core::DType::F32, &dev).unwrap();
    let five = Tensor::zeros((4, 5), candle_core::DType::F32, &dev).unwrap();
    let ten = Tensor::ones((4, 10), candle_core::DType::F32, &dev).unwrap();

    // A training run without the baseline pass: a clear error naming the run and the tensor.
    let bare = tempfile::tempdir().unwrap();
    crafted_run(bare.path(), None);
    let location = bare.path().to_str().unwrap();
    let err = DataDrift::from_training_run(location)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(location) && err.contains("has no baseline"),
        "{err}"
    );
    assert!(err.contains(drift::INPUT), "{err}");

    // A baseline whose outputs are not 10 class probabilities is refused the same way.
    let odd = tempfile::tempdir().unwrap();
    crafted_run(odd.path(), Some((&images, &five)));
    let err = DataDrift::from_training_run(odd.path().to_str().unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("PREDICT step 0") && err.contains("[4, 5]"),
        "{err}"
    );

    // Served outputs of another shape end the rule in Error with the step and the shapes; a
    // good baseline is read.
    let good = tempfile::tempdir().unwrap();
    crafted_run(good.path(), Some((&images, &ten)));
    let rule = DataDrift::from_training_run(good.path().to_str().unwrap()).unwrap();
    assert_eq!(rule.baseline_samples(), 4);
    let summary = RuleRunner::builder(odd.path())
        .write_into_run(false)
        .rule(Rule::tensor(rule), vec![])
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let status = &summary.rules[0];
    assert_eq!(status.status, Status::Error, "{status:?}");
    assert!(
        status.message.contains("step 1") && status.message.contains("[4, 5]"),
        "{status:?}"
    );
}

#[test]
fn the_statistics_match_their_textbook_values() {
    // c(0.05) = 1.358 for the two-sample KS test; equal samples give D = 0, disjoint ones 1.
    let c = drift::ks_critical(100, 100, 0.05) / (0.02f64).sqrt();
    assert!((c - 1.3581).abs() < 1e-4, "{c}");
    let a = [0.1, 0.2, 0.3, 0.4];
    assert_eq!(drift::ks_statistic(&a, &a), 0.0);
    assert_eq!(drift::ks_statistic(&a, &[0.5, 0.6]), 1.0);
    let b = [0.15, 0.25, 0.9];
    assert!((drift::ks_statistic(&a, &b) - ks_brute_force(&a, &b)).abs() < 1e-15);
    // PSI: 0 for the same counts; for shares (0.5, 0.5) against (0.9, 0.1), with counts large
    // enough that the ½ added to each hardly matters: 0.4·ln(1.8) + 0.4·ln(5) = 0.879.
    assert_eq!(drift::psi(&[10, 20, 30], &[10, 20, 30]), 0.0);
    assert!(drift::psi(&[10_000, 20_000], &[20_000, 40_000]).abs() < 1e-8);
    let p = drift::psi(&[500_000, 500_000], &[900_000, 100_000]);
    assert!((p - 0.8789).abs() < 1e-3, "{p}");
}

#[test]
fn training_is_seeded_so_two_trainings_give_the_same_model() {
    let data = Data::load().unwrap();
    let weights = |dir: &Path| {
        let mut session = deploy::training_session(dir.to_str().unwrap())
            .start()
            .unwrap();
        let trained = deploy::train(&mut session, &data).unwrap();
        session.finish().unwrap();
        let vars = trained.vm.data().lock().unwrap();
        let mut all: Vec<(String, Vec<f32>)> = vars
            .iter()
            .map(|(name, v)| (name.clone(), v.flatten_all().unwrap().to_vec1().unwrap()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        (all, trained.test_accuracy)
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = weights(a.path());
    let second = weights(b.path());
    assert_eq!(first.0.len(), 6);
    assert_eq!(first, second);
}
