//! Saliency maps of the digits the trained CNN gets wrong: for each misclassified held-out
//! image, the gradient of the predicted class's score (its logit) with respect to the input
//! pixels, captured through the hook in PREDICT steps, read back with `Trial` and drawn as a PNG
//! beside the image.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use candle_core::{D, Device, Module, Tensor, Var};
use smdebug::prelude::*;

use super::deploy::{self, Data, DigitsCnn, Result, SIDE, Trained};

/// The collection the saliency tensors are saved in, at every PREDICT step and never otherwise.
pub const COLLECTION: &str = "saliency";
/// d score_pred / d input of one image, `(1, 8, 8)` like the input.
pub const GRADIENT: &str = "saliency/gradient";
/// The image itself, `(1, 8, 8)`.
pub const IMAGE: &str = "saliency/image";
/// The true class (a scalar).
pub const LABEL: &str = "saliency/label";
/// The class the model predicted (a scalar).
pub const PREDICTED: &str = "saliency/predicted";

/// Pixels per image pixel in the pictures.
pub const CELL: u32 = 24;
const PAD: u32 = 8;
const GAP: u32 = 8;
const PANEL: u32 = SIDE as u32 * CELL;
const FRAME: [u8; 3] = [190, 190, 190];
/// Width and height of every picture: the image on the left, the saliency map on the right.
pub const PICTURE: (u32, u32) = (2 * PAD + 2 * PANEL + GAP, 2 * PAD + PANEL);

/// One picture written.
#[derive(Clone, Debug)]
pub struct Picture {
    /// The PREDICT step, which is the image's index among the held-out images.
    pub index: u64,
    pub label: u32,
    pub predicted: u32,
    pub path: PathBuf,
    /// The largest |gradient| of the map: the ends of its colour scale are ±this.
    pub max_abs: f64,
}

/// What [`run`] did.
pub struct Outcome {
    /// The run directory.
    pub run: PathBuf,
    pub trained: Trained,
    /// Held-out images, and the indices of those misclassified.
    pub held_out: usize,
    pub misclassified: Vec<u64>,
    pub pictures: Vec<Picture>,
}

/// The gradient of each image's score for `classes[i]` (its logit) with respect to the image:
/// `(n, 1, 8, 8)` for images `(n, 1, 8, 8)`. The images do not interact in the network, so the
/// gradient of the sum of the scores is each image's own.
pub fn input_gradients(model: &DigitsCnn, images: &Tensor, classes: &[u32]) -> Result<Tensor> {
    let input = Var::from_tensor(images)?;
    let logits = model.forward(input.as_tensor())?;
    let idx = Tensor::from_vec(classes.to_vec(), (classes.len(), 1), &Device::Cpu)?;
    let score = logits.gather(&idx, 1)?.sum_all()?;
    let grads = score.backward()?;
    Ok(grads
        .get(input.as_tensor())
        .ok_or("the backward pass gave the input no gradient")?
        .clone())
}

/// Trains the CNN into `out/run`, captures the saliency of every misclassified held-out image
/// into the same run (PREDICT step = the image's held-out index), then reads them back with
/// `Trial` and draws each into `out/saliency/digit<index>_label<L>_pred<P>.png`.
pub fn run(out: &Path) -> Result<Outcome> {
    let run = out.join("run");
    let pictures = out.join("saliency");
    // Of the pictures folder only this example's pictures go; the session replaces the run an
    // earlier start left (`overwrite`, its own files only).
    std::fs::create_dir_all(&pictures)?;
    for entry in std::fs::read_dir(&pictures)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && name.starts_with("digit") && name.ends_with(".png") {
            std::fs::remove_file(entry.path())?;
        }
    }
    let run_str = run.to_str().ok_or("non-UTF-8 path")?;
    let predict_only =
        SaveConfig::new(SaveConfigMode::never()).with_mode(Mode::Predict, SaveConfigMode::every(1));
    let mut session = deploy::training_session(run_str)
        .collection(
            Collection::new(COLLECTION)
                .with_regex("^saliency/")?
                .with_save_config(predict_only),
        )
        .start()?;
    let data = Data::load()?;
    let trained = deploy::train(&mut session, &data)?;

    let predicted: Vec<u32> = trained
        .model
        .forward(&data.test_x)?
        .argmax(D::Minus1)?
        .to_vec1()?;
    let labels: Vec<u32> = data.test_y.to_vec1()?;
    let misclassified: Vec<u64> = (0..labels.len())
        .filter(|&i| predicted[i] != labels[i])
        .map(|i| i as u64)
        .collect();
    let wrong_idx: Vec<u32> = misclassified.iter().map(|&i| i as u32).collect();
    let wrong_classes: Vec<u32> = wrong_idx.iter().map(|&i| predicted[i as usize]).collect();
    // (`None` when the model reads every held-out digit right: nothing to explain.)
    let wrong = if wrong_idx.is_empty() {
        None
    } else {
        let idx = Tensor::new(wrong_idx.as_slice(), &Device::Cpu)?;
        let images = data.test_x.index_select(&idx, 0)?;
        let gradients = input_gradients(&trained.model, &images, &wrong_classes)?;
        Some((images, gradients))
    };

    // One PREDICT step per held-out image, so that a step is the image's index; only the
    // misclassified ones have anything to save.
    session.set_mode(Mode::Predict)?;
    let mut next = 0;
    for (i, &label) in labels.iter().enumerate() {
        if let Some((images, gradients)) = &wrong
            && misclassified.get(next) == Some(&(i as u64))
        {
            let hook = session.hook();
            hook.save_tensor(GRADIENT, &gradients.get(next)?, &[COLLECTION])?;
            hook.save_tensor(IMAGE, &images.get(next)?, &[COLLECTION])?;
            hook.save_scalar(LABEL, f64::from(label), &[COLLECTION]);
            hook.save_scalar(PREDICTED, f64::from(predicted[i]), &[COLLECTION]);
            next += 1;
        }
        session.step()?;
    }
    let summary = session.finish()?;
    print!("{summary}");

    let pictures = draw_from_run(run_str, &pictures)?;
    Ok(Outcome {
        run,
        trained,
        held_out: labels.len(),
        misclassified,
        pictures,
    })
}

/// Reads every saliency map of the run at `run` with `Trial` and draws it into `dir`.
pub fn draw_from_run(run: &str, dir: &Path) -> Result<Vec<Picture>> {
    let trial = Trial::open(run)?;
    let mode = Some(Mode::Predict);
    let gradient = trial.tensor(GRADIENT)?;
    let image = trial.tensor(IMAGE)?;
    let (label, predicted) = (trial.tensor(LABEL)?, trial.tensor(PREDICTED)?);
    let mut out = Vec::new();
    for step in gradient.steps(mode)? {
        let g = gradient.value(step, mode, None)?;
        let x = image.value(step, mode, None)?;
        if g.shape() != [1, SIDE, SIDE] || x.shape() != g.shape() {
            return Err(format!(
                "step {step}: gradient {:?} and image {:?}, expected [1, {SIDE}, {SIDE}]",
                g.shape(),
                x.shape()
            )
            .into());
        }
        let class = |t: &smdebug_read::trial::TrialTensor<'_>| -> Result<u32> {
            let v = t.value(step, mode, None)?;
            Ok(*v.iter().next().ok_or("an empty scalar")? as u32)
        };
        let (l, p) = (class(&label)?, class(&predicted)?);
        let g: Vec<f64> = g.iter().copied().collect();
        let x: Vec<f64> = x.iter().copied().collect();
        let path = dir.join(format!("digit{step}_label{l}_pred{p}.png"));
        write_png(&path, &x, &g)?;
        out.push(Picture {
            index: step,
            label: l,
            predicted: p,
            path,
            max_abs: max_abs(&g),
        });
    }
    Ok(out)
}

/// The largest absolute finite value (0 when there is none).
pub fn max_abs(values: &[f64]) -> f64 {
    values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0, |m, v| m.max(v.abs()))
}

/// Grey of an image pixel in [0, 1]: ink (1) black on white paper (0).
pub fn grey(v: f64) -> [u8; 3] {
    let g = (255.0 * (1.0 - v.clamp(0.0, 1.0))).round() as u8;
    [g, g, g]
}

/// Colour of `t` in [-1, 1] on a diverging scale: blue (-1) through white (0) to red (+1).
pub fn diverging(t: f64) -> [u8; 3] {
    const WHITE: [f64; 3] = [255.0, 255.0, 255.0];
    const BLUE: [f64; 3] = [33.0, 102.0, 172.0];
    const RED: [f64; 3] = [178.0, 24.0, 43.0];
    let t = if t.is_nan() { 0.0 } else { t.clamp(-1.0, 1.0) };
    let end = if t < 0.0 { BLUE } else { RED };
    let f = t.abs();
    [0, 1, 2].map(|c| (WHITE[c] + (end[c] - WHITE[c]) * f).round() as u8)
}

/// The picture of one image (64 values in [0, 1], row-major) and its gradient: RGB bytes,
/// [`PICTURE`] in size. The map's scale is ±max|gradient|: red where more ink would raise the
/// predicted class's score, blue where it would lower it.
pub fn render(image: &[f64], gradient: &[f64]) -> Vec<u8> {
    let (w, h) = PICTURE;
    let mut rgb = [255u8; 3].repeat((w * h) as usize);
    let scale = max_abs(gradient);
    // A frame one pixel outside each panel, so white cells read against the paper.
    for x0 in [PAD, PAD + PANEL + GAP] {
        for i in 0..PANEL + 2 {
            for (x, y) in [
                (x0 - 1 + i, PAD - 1),
                (x0 - 1 + i, PAD + PANEL),
                (x0 - 1, PAD - 1 + i),
                (x0 + PANEL, PAD - 1 + i),
            ] {
                let k = ((y * w + x) * 3) as usize;
                rgb[k..k + 3].copy_from_slice(&FRAME);
            }
        }
    }
    let mut fill = |x0: u32, y0: u32, c: [u8; 3]| {
        for y in y0..y0 + CELL {
            for x in x0..x0 + CELL {
                let i = ((y * w + x) * 3) as usize;
                rgb[i..i + 3].copy_from_slice(&c);
            }
        }
    };
    for r in 0..SIDE {
        for c in 0..SIDE {
            let k = r * SIDE + c;
            let (x, y) = (c as u32 * CELL, PAD + r as u32 * CELL);
            fill(PAD + x, y, grey(image[k]));
            let t = if scale > 0.0 {
                gradient[k] / scale
            } else {
                0.0
            };
            fill(PAD + PANEL + GAP + x, y, diverging(t));
        }
    }
    rgb
}

/// Where the centre of pixel (`row`, `col`) lies in the image panel and in the map panel.
pub fn cell_centres(row: usize, col: usize) -> ((u32, u32), (u32, u32)) {
    let y = PAD + row as u32 * CELL + CELL / 2;
    let x = PAD + col as u32 * CELL + CELL / 2;
    ((x, y), (x + PANEL + GAP, y))
}

/// Writes [`render`]'s picture as an 8-bit RGB PNG.
pub fn write_png(path: &Path, image: &[f64], gradient: &[f64]) -> Result<()> {
    let file = BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, PICTURE.0, PICTURE.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&render(image, gradient))?;
    writer.finish()?;
    Ok(())
}
