//! A small transformer trained on the digits set with one layer's attention selected by an
//! `include_regex` collection: the run, read back with `Trial`, holds exactly that layer's probes,
//! equal to the tensors of the forward pass, and the heat maps drawn from it are valid PNGs.

mod common;

use std::io::BufReader;
use std::path::Path;

use candle_core::{DType as CDType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use common::heatmap::{self, Grid, Layout};
use common::model::{DigitsTensors, accuracy, loss, varmap};
use common::transformer::{Config, SEQ, Transformer, probe_names};
use smdebug_candle::CandleHook;
use smdebug_core::{Hook, HookBuilder, Mode, SaveConfig, SaveConfigMode};
use smdebug_read::trial::Trial;

const SMALL: Config = Config {
    d_model: 16,
    heads: 2,
    layers: 2,
    ffn: 32,
};
const BATCH: usize = 8;
const PATTERN: &str = r"^layer0/attn/(scores|query|key)$";

fn hook_at(dir: &Path, builder: HookBuilder) -> CandleHook {
    CandleHook::new(builder, smdebug_adapter_conformance::writer(dir)).unwrap()
}

/// Shape and every element as f64 (exact for f32).
fn own(t: &Tensor) -> (Vec<usize>, Vec<f64>) {
    let v = t
        .flatten_all()
        .unwrap()
        .to_dtype(CDType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    (t.dims().to_vec(), v)
}

/// The probes' tensors of one forward pass, per layer: query, key, scores.
type Traces = Vec<[(Vec<usize>, Vec<f64>); 3]>;

/// Trains `model` for `steps` steps of `batch`; returns each step's attention tensors of every
/// layer, taken from the forward pass itself.
fn train(
    hook: &mut CandleHook,
    model: &Transformer,
    vm: &VarMap,
    data: &DigitsTensors,
    steps: usize,
    batch: usize,
) -> Vec<Traces> {
    let mut opt = AdamW::new(
        vm.all_vars(),
        ParamsAdamW {
            lr: 3e-3,
            ..Default::default()
        },
    )
    .unwrap();
    hook.set_mode(Mode::Train).unwrap();
    let mut per_step = Vec::new();
    for idx in data.train_batches(batch, steps, 5).unwrap() {
        let x = data.train_x.index_select(&idx, 0).unwrap();
        let y = data.train_y.index_select(&idx, 0).unwrap();
        let out = model.forward(&x).unwrap();
        let l = loss(&out.logits, &y).unwrap();
        let grads = l.backward().unwrap();
        hook.save_parameters(vm).unwrap();
        hook.save_gradients(vm, &grads).unwrap();
        hook.save_loss("loss", &l).unwrap();
        per_step.push(
            out.attention
                .iter()
                .map(|a| [own(&a.query), own(&a.key), own(&a.scores)])
                .collect(),
        );
        opt.step(&grads).unwrap();
        hook.step().unwrap();
    }
    per_step
}

/// Records `steps` training steps of the small model, attention of layer 0 selected by regex,
/// everything due every `interval` steps.
fn record(dir: &Path, steps: usize, interval: u64) -> Vec<Traces> {
    let builder = Hook::builder()
        .save_config(SaveConfig::every(interval))
        .include_regex("attention", PATTERN);
    let mut hook = hook_at(dir, builder);
    let dev = Device::Cpu;
    let data = DigitsTensors::load(CDType::F32, &dev).unwrap();
    let (vm, vb) = varmap(CDType::F32, &dev);
    let model = Transformer::new(SMALL, vb, &mut hook).unwrap();
    let traces = train(&mut hook, &model, &vm, &data, steps, BATCH);
    hook.close().unwrap();
    traces
}

fn read(trial: &Trial, name: &str, step: u64) -> (Vec<usize>, Vec<f64>) {
    let t = trial
        .tensor(name)
        .unwrap()
        .raw(step, Some(Mode::Train), None)
        .unwrap();
    (t.shape().to_vec(), t.to_f64_vec())
}

#[test]
fn the_regex_collection_records_exactly_one_layers_attention_as_computed() {
    let dir = tempfile::tempdir().unwrap();
    let traces = record(dir.path(), 3, 2);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let names = trial.tensor_names().unwrap();
    let layer0 = probe_names(0);
    for n in &layer0 {
        assert!(names.contains(n), "{n} missing from {names:?}");
    }
    // Layer 1 has the same probes and its parameters are recorded, but none of its probes is.
    for n in probe_names(1) {
        assert!(!names.contains(&n), "{n} was recorded");
    }
    assert!(names.contains(&"layer1.attn.query.weight".to_string()));
    assert!(names.iter().all(|n| !n.starts_with("layer1/")));
    let collections = trial.collections().unwrap();
    let attention = collections
        .iter()
        .find(|c| c.name() == "attention")
        .unwrap();
    let mut want = layer0.to_vec();
    want.sort();
    assert_eq!(
        attention.tensor_names().iter().cloned().collect::<Vec<_>>(),
        want
    );
    assert_eq!(attention.include_regex(), [PATTERN]);

    let d = SMALL.d_model;
    let h = SMALL.heads;
    for n in &layer0 {
        assert_eq!(
            trial.tensor(n).unwrap().steps(Some(Mode::Train)).unwrap(),
            vec![0, 2]
        );
    }
    for step in [0u64, 2] {
        let computed = &traces[step as usize];
        // The layers' tensors differ, so matching layer 0's says which layer was recorded.
        assert_ne!(computed[0][2].1, computed[1][2].1);
        for (i, n) in layer0.iter().enumerate() {
            let (shape, values) = read(&trial, n, step);
            let want_shape = if n.ends_with("scores") {
                vec![BATCH, h, SEQ, SEQ]
            } else {
                vec![BATCH, SEQ, d]
            };
            assert_eq!(shape, want_shape, "{n} at step {step}");
            assert_eq!((&shape, &values), (&computed[0][i].0, &computed[0][i].1));
        }
        let (_, scores) = read(&trial, &layer0[2], step);
        for (r, row) in scores.chunks(SEQ).enumerate() {
            let sum: f64 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "row {r} sums to {sum}");
            assert!(row.iter().all(|&p| (0.0..=1.0).contains(&p)));
        }
        // The recorded scores are the softmax of the recorded query and key of the same pass:
        // q·kᵀ/√d_head of each image on its own, through the heat maps' own helper.
        let (_, query) = read(&trial, &layer0[0], step);
        let (_, key) = read(&trial, &layer0[1], step);
        let per_image = SEQ * d;
        for b in 0..BATCH {
            let range = b * per_image..(b + 1) * per_image;
            let logits =
                heatmap::head_logits(&[1, SEQ, d], &query[range.clone()], &key[range], h).unwrap();
            for (head, grid) in logits.iter().enumerate() {
                for i in 0..SEQ {
                    let row: Vec<f64> = (0..SEQ).map(|j| grid.at(i, j)).collect();
                    let max = row.iter().cloned().fold(f64::MIN, f64::max);
                    let exp: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
                    let total: f64 = exp.iter().sum();
                    for (j, e) in exp.iter().enumerate() {
                        let at = ((b * h + head) * SEQ + i) * SEQ + j;
                        let want = e / total;
                        assert!(
                            (scores[at] - want).abs() < 1e-5,
                            "image {b} head {head} ({i}, {j}): {} vs {want}",
                            scores[at]
                        );
                    }
                }
            }
        }
    }
}

fn decode(path: &Path) -> (png::OutputInfo, Vec<u8>) {
    let file = BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info, buf)
}

#[test]
fn heat_maps_of_the_read_back_scores_are_pngs_of_the_expected_size_and_colours() {
    let dir = tempfile::tempdir().unwrap();
    let traces = record(dir.path(), 1, 1);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let (shape, values) = read(&trial, "layer0/attn/scores", 0);
    let grids = heatmap::head_means(&shape, &values).unwrap();
    assert_eq!(grids.len(), SMALL.heads);
    // The batch mean, worked out here from the forward pass's own tensor.
    let (_, computed) = &traces[0][0][2];
    for (head, grid) in grids.iter().enumerate() {
        assert_eq!((grid.rows, grid.cols), (SEQ, SEQ));
        for i in 0..SEQ {
            for j in 0..SEQ {
                let mean = (0..BATCH)
                    .map(|b| computed[((b * SMALL.heads + head) * SEQ + i) * SEQ + j])
                    .sum::<f64>()
                    / BATCH as f64;
                assert!((grid.at(i, j) - mean).abs() < 1e-12);
            }
        }
    }
    let range = heatmap::common_range(&grids).unwrap();
    assert!(0.0 <= range.0 && range.0 < range.1 && range.1 <= 1.0);

    let cell = 20;
    let layout = Layout::new(SEQ, SEQ, cell);
    // Margins, an 8x8 grid of 20-pixel cells, the colour bar and its labels.
    assert_eq!((layout.width, layout.height), (280, 192));
    let out = tempfile::tempdir().unwrap();
    for (head, grid) in grids.iter().enumerate() {
        let path = out.path().join(format!("head{head}.png"));
        let written = heatmap::write_png(&path, grid, range, cell).unwrap();
        assert_eq!(written, (layout.width, layout.height));
        let (info, rgb) = decode(&path);
        assert_eq!((info.width, info.height), written);
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let pixel = |x: u32, y: u32| {
            let i = ((y * info.width + x) * 3) as usize;
            [rgb[i], rgb[i + 1], rgb[i + 2]]
        };
        for i in 0..SEQ {
            for j in 0..SEQ {
                let (x, y) = layout.cell_centre(i, j);
                let want = heatmap::colour(heatmap::position(grid.at(i, j), range));
                assert_eq!(pixel(x, y), want, "head {head} cell ({i}, {j})");
            }
        }
        // The colour bar runs from the top of the scale down to its bottom.
        let bar_x = layout.bar_x + 2;
        assert_eq!(pixel(bar_x, layout.grid_y), heatmap::colour(1.0));
        let bottom = layout.grid_y + SEQ as u32 * cell - 1;
        assert_eq!(pixel(bar_x, bottom), heatmap::colour(0.0));
        // Token indices are drawn above the grid: black dots in the top margin.
        let black = (0..layout.grid_y)
            .flat_map(|y| (0..info.width).map(move |x| (x, y)))
            .filter(|&(x, y)| pixel(x, y) == [0, 0, 0])
            .count();
        assert!(black > 0);
    }
}

#[test]
fn head_means_and_logits_reject_shapes_they_cannot_read() {
    assert!(heatmap::head_means(&[2, 8, 8], &[0.0; 128]).is_err());
    assert!(heatmap::head_means(&[1, 1, 2, 2], &[0.0; 3]).is_err());
    assert!(heatmap::head_logits(&[1, 2, 3], &[0.0; 6], &[0.0; 6], 2).is_err());
    // One image, one head, d_head 1: q·kᵀ is the outer product.
    let grids = heatmap::head_logits(&[1, 2, 1], &[1.0, 2.0], &[3.0, -1.0], 1).unwrap();
    assert_eq!(
        grids,
        vec![Grid {
            rows: 2,
            cols: 2,
            values: vec![3.0, -1.0, 6.0, -2.0]
        }]
    );
}

#[test]
fn the_transformer_learns_the_digits() {
    // Capture off: this is about the model the example trains.
    let never = SaveConfig::new(SaveConfigMode::never());
    let mut hook = CandleHook::new(
        Hook::builder().save_config(never),
        smdebug_core::MemorySink::default(),
    )
    .unwrap();
    let dev = Device::Cpu;
    let data = DigitsTensors::load(CDType::F32, &dev).unwrap();
    let (vm, vb) = varmap(CDType::F32, &dev);
    let cfg = Config {
        d_model: 32,
        heads: 4,
        layers: 1,
        ffn: 64,
    };
    let model = Transformer::new(cfg, vb, &mut hook).unwrap();
    let before = accuracy(&model.forward(&data.test_x).unwrap().logits, &data.test_y).unwrap();
    train(&mut hook, &model, &vm, &data, 150, 32);
    let after = accuracy(&model.forward(&data.test_x).unwrap().logits, &data.test_y).unwrap();
    assert!(
        after > 0.8,
        "held-out accuracy {after:.3} after 150 steps (before: {before:.3})"
    );
}
