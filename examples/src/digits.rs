//! The 8x8 handwritten digits set shipped in `examples/data/digits.csv.gz`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, Axis};

/// Images scaled to [0, 1] (one row of 64 pixels each) and their labels 0..9.
#[derive(Clone, Debug)]
pub struct Digits {
    /// One row of 64 pixels per image, scaled to [0, 1].
    pub images: Array2<f32>,
    /// The digit each image shows, 0..9.
    pub labels: Array1<usize>,
}

/// Where the data file is, whatever directory the example runs from.
pub fn default_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits.csv.gz")
}

impl Digits {
    /// Loads the gzip'd CSV: 64 pixel columns then the label.
    pub fn load(path: &Path) -> std::io::Result<Digits> {
        let file = std::fs::File::open(path)?;
        let reader = BufReader::new(flate2::read::GzDecoder::new(file));
        let mut pixels = Vec::new();
        let mut labels = Vec::new();
        for (n, line) in reader.lines().enumerate() {
            let line = line?;
            let bad = |what: &str| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}:{}: {what}", path.display(), n + 1),
                )
            };
            let fields: Vec<&str> = line.trim().split(',').collect();
            if fields.len() != 65 {
                return Err(bad(&format!("expected 65 fields, got {}", fields.len())));
            }
            for f in &fields[..64] {
                let v: f32 = f.parse().map_err(|_| bad("pixel is not a number"))?;
                pixels.push(v / 16.0);
            }
            labels.push(
                fields[64]
                    .parse()
                    .map_err(|_| bad("label is not a number"))?,
            );
        }
        let n = labels.len();
        Ok(Digits {
            images: Array2::from_shape_vec((n, 64), pixels).expect("64 pixels per row"),
            labels: Array1::from(labels),
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Splits a shuffled `fraction` of the rows off as a held-out set (the file is ordered by
    /// writer, so a tail split would hold out unseen handwriting only).
    pub fn split(&self, fraction: f64, seed: u64) -> (Digits, Digits) {
        let n_test = ((self.len() as f64) * fraction).round() as usize;
        let order = crate::mlp::Rng::new(seed).permutation(self.len());
        let (test, train) = order.split_at(n_test);
        let take = |idx: &[usize]| {
            let (images, labels) = self.batch(idx);
            Digits { images, labels }
        };
        (take(train), take(test))
    }

    /// The rows at `indices`, in that order.
    pub fn batch(&self, indices: &[usize]) -> (Array2<f32>, Array1<usize>) {
        (
            self.images.select(Axis(0), indices),
            self.labels.select(Axis(0), indices),
        )
    }

    /// The images at `indices` resampled to `side`×`side` pixels (bilinear), each under a random
    /// rotation of up to ±`max_degrees` and a random shift of up to ±`max_shift` source pixels:
    /// the on-the-fly augmentation of an input pipeline. Without `rng`, the images are only
    /// resampled (evaluation). Rows are `side * side` long, row-major.
    pub fn resampled_batch(
        &self,
        indices: &[usize],
        side: usize,
        augment: Option<(&mut crate::mlp::Rng, f32, f32)>,
    ) -> (Array2<f32>, Array1<usize>) {
        let mut out = Array2::<f32>::zeros((indices.len(), side * side));
        let mut augment = augment;
        let scale = 8.0 / side as f32;
        for (row, &i) in indices.iter().enumerate() {
            let (angle, dx, dy) = match augment.as_mut() {
                Some((rng, max_degrees, max_shift)) => (
                    (rng.uniform() * 2.0 - 1.0) * max_degrees.to_radians(),
                    (rng.uniform() * 2.0 - 1.0) * *max_shift,
                    (rng.uniform() * 2.0 - 1.0) * *max_shift,
                ),
                None => (0.0, 0.0, 0.0),
            };
            let (sin, cos) = angle.sin_cos();
            let src = self.images.row(i);
            let pixel = |x: isize, y: isize| -> f32 {
                if (0..8).contains(&x) && (0..8).contains(&y) {
                    src[(y * 8 + x) as usize]
                } else {
                    0.0
                }
            };
            let mut dst = out.row_mut(row);
            for oy in 0..side {
                for ox in 0..side {
                    // The output pixel's centre in source coordinates, rotated about the centre.
                    let u = (ox as f32 + 0.5) * scale - 4.0;
                    let v = (oy as f32 + 0.5) * scale - 4.0;
                    let x = cos * u - sin * v + 4.0 - 0.5 - dx;
                    let y = sin * u + cos * v + 4.0 - 0.5 - dy;
                    let (x0, y0) = (x.floor(), y.floor());
                    let (fx, fy) = (x - x0, y - y0);
                    let (x0, y0) = (x0 as isize, y0 as isize);
                    dst[oy * side + ox] = (1.0 - fy)
                        * ((1.0 - fx) * pixel(x0, y0) + fx * pixel(x0 + 1, y0))
                        + fy * ((1.0 - fx) * pixel(x0, y0 + 1) + fx * pixel(x0 + 1, y0 + 1));
                }
            }
        }
        (out, self.labels.select(Axis(0), indices))
    }
}

/// Images as consecutive rows of `side * side` pixels, and their labels.
pub type HostBatch = (Vec<f32>, Vec<usize>);

/// The CNN examples' input pipeline: the digits split 80/20 (seed 7); the held-out images
/// resampled to `side`×`side`; training batches drawn without replacement, reshuffled each pass,
/// each image resampled under a fresh random rotation (±12°) and shift (±1 source pixel).
/// Framework-free: each example turns the host batches into its own tensors.
pub struct AugmentedDigits {
    train: Digits,
    test: Digits,
    side: usize,
    rng: crate::mlp::Rng,
    order: Vec<usize>,
}

impl AugmentedDigits {
    /// Loads the shipped data set.
    pub fn load(side: usize) -> std::io::Result<AugmentedDigits> {
        let (train, test) = Digits::load(&default_path())?.split(0.2, 7);
        Ok(AugmentedDigits {
            train,
            test,
            side,
            rng: crate::mlp::Rng::new(11),
            order: Vec::new(),
        })
    }

    /// Training images.
    pub fn train_len(&self) -> usize {
        self.train.len()
    }

    /// The held-out images, resampled without augmentation.
    pub fn test(&self) -> HostBatch {
        let all: Vec<usize> = (0..self.test.len()).collect();
        let (x, y) = self.test.resampled_batch(&all, self.side, None);
        (x.into_raw_vec_and_offset().0, y.to_vec())
    }

    /// The next `size` training images, augmented. A pass's last rows that do not fill a batch
    /// are skipped and the rows reshuffled.
    pub fn batch(&mut self, size: usize) -> HostBatch {
        if self.order.len() < size {
            self.order = self.rng.permutation(self.train.len());
        }
        let idx: Vec<usize> = self.order.drain(..size).collect();
        let (x, y) = self
            .train
            .resampled_batch(&idx, self.side, Some((&mut self.rng, 12.0, 1.0)));
        (x.into_raw_vec_and_offset().0, y.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_keeps_the_picture_and_augmentation_moves_it() {
        let d = Digits::load(&default_path()).unwrap();
        let (plain, labels) = d.resampled_batch(&[0, 5], 8, None);
        // At the source resolution without augmentation, resampling is the identity.
        for (r, i) in [0usize, 5].iter().enumerate() {
            for k in 0..64 {
                assert!((plain[[r, k]] - d.images[[*i, k]]).abs() < 1e-5);
            }
        }
        assert_eq!(labels, d.labels.select(Axis(0), &[0, 5]));
        let (big, _) = d.resampled_batch(&[0], 32, None);
        assert_eq!(big.shape(), &[1, 1024]);
        // Same ink, spread over 16 times as many pixels.
        let ink8: f32 = d.images.row(0).sum();
        let ink32: f32 = big.row(0).sum() / 16.0;
        assert!((ink8 - ink32).abs() / ink8 < 0.15, "{ink8} vs {ink32}");
        let mut rng = crate::mlp::Rng::new(3);
        let (moved, _) = d.resampled_batch(&[0], 32, Some((&mut rng, 10.0, 1.0)));
        let diff: f32 = (&moved - &big).mapv(f32::abs).sum();
        assert!(diff > 1.0, "augmentation changed the image: {diff}");
    }

    #[test]
    fn augmented_batches_cover_a_pass_without_repeats_and_differ_each_time() {
        let mut data = AugmentedDigits::load(28).unwrap();
        let (n, size) = (data.train_len(), 32);
        let count = |labels: &[usize]| {
            let mut c = [0usize; 10];
            labels.iter().for_each(|&l| c[l] += 1);
            c
        };
        let mut pass = Vec::new();
        for _ in 0..n / size {
            let (x, y) = data.batch(size);
            assert_eq!((x.len(), y.len()), (size * 28 * 28, size));
            pass.extend(y);
        }
        // One pass draws each training row at most once.
        let (all, seen) = (count(data.train.labels.as_slice().unwrap()), count(&pass));
        assert!(
            all.iter().zip(&seen).all(|(a, s)| s <= a),
            "{all:?} {seen:?}"
        );
        assert_eq!(pass.len(), n - n % size);
        // The test set is the same every time; training batches are not.
        let (tx, ty) = data.test();
        assert_eq!(
            (tx.len(), ty.len()),
            (data.test.len() * 28 * 28, data.test.len())
        );
        assert_eq!(data.test(), (tx, ty));
        assert_ne!(data.batch(size).0, data.batch(size).0);
    }
}
