//! The 8x8 handwritten digits set shipped in `examples/data/digits.csv.gz`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, Axis};

/// Images scaled to [0, 1] (one row of 64 pixels each) and their labels 0..9.
#[derive(Clone, Debug)]
pub struct Digits {
    pub images: Array2<f32>,
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

    pub fn len(&self) -> usize {
        self.labels.len()
    }

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
}
