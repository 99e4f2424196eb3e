//! Heat maps of attention read back from a run, written as PNG.
//!
//! A picture is a grid of square cells (row = query token, column = key token, both labelled with
//! the token index), a colour bar beside it running from the low end of the scale (bottom) to the
//! high end (top), and the two ends written next to the bar. The digits are drawn with a 3x5
//! pixel font, so no font files are needed.

use std::io::{self, BufWriter};
use std::path::Path;

/// A row-major matrix of values to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<f64>,
}

impl Grid {
    pub fn at(&self, row: usize, col: usize) -> f64 {
        self.values[row * self.cols + col]
    }

    /// The smallest and largest finite value (`None` when there is none).
    pub fn range(&self) -> Option<(f64, f64)> {
        self.values
            .iter()
            .filter(|v| v.is_finite())
            .fold(None, |acc, &v| match acc {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            })
    }
}

/// The range covering all of `grids`, so that pictures drawn with it compare by colour.
pub fn common_range<'a>(grids: impl IntoIterator<Item = &'a Grid>) -> Option<(f64, f64)> {
    grids
        .into_iter()
        .filter_map(Grid::range)
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
}

/// One grid per head: the mean over the batch of a `[batch, heads, rows, cols]` tensor given as
/// its shape and its values in row-major order.
pub fn head_means(shape: &[usize], values: &[f64]) -> Result<Vec<Grid>, String> {
    let &[batch, heads, rows, cols] = shape else {
        return Err(format!("expected [batch, heads, seq, seq], got {shape:?}"));
    };
    if values.len() != batch * heads * rows * cols || batch == 0 {
        return Err(format!("{} values do not fill {shape:?}", values.len()));
    }
    let per_head = rows * cols;
    Ok((0..heads)
        .map(|h| {
            let mut sum = vec![0.0; per_head];
            for b in 0..batch {
                let start = (b * heads + h) * per_head;
                for (s, v) in sum.iter_mut().zip(&values[start..start + per_head]) {
                    *s += v;
                }
            }
            Grid {
                rows,
                cols,
                values: sum.into_iter().map(|s| s / batch as f64).collect(),
            }
        })
        .collect())
}

/// One grid per head of the scaled dot products q·kᵀ/√d_head (the attention logits before the
/// softmax), averaged over the batch, from projections of shape `[batch, seq, heads * d_head]`.
pub fn head_logits(
    shape: &[usize],
    query: &[f64],
    key: &[f64],
    heads: usize,
) -> Result<Vec<Grid>, String> {
    let &[batch, seq, d] = shape else {
        return Err(format!("expected [batch, seq, d_model], got {shape:?}"));
    };
    if heads == 0 || d % heads != 0 || batch == 0 {
        return Err(format!("{heads} heads do not split {shape:?}"));
    }
    if query.len() != batch * seq * d || key.len() != query.len() {
        return Err(format!("query and key do not fill {shape:?}"));
    }
    let dh = d / heads;
    let scale = 1.0 / (dh as f64).sqrt();
    Ok((0..heads)
        .map(|h| {
            let mut sum = vec![0.0; seq * seq];
            for b in 0..batch {
                let vec_at = |x: &'_ [f64], t: usize| {
                    let start = (b * seq + t) * d + h * dh;
                    x[start..start + dh].to_vec()
                };
                for i in 0..seq {
                    let q = vec_at(query, i);
                    for j in 0..seq {
                        let k = vec_at(key, j);
                        let dot: f64 = q.iter().zip(&k).map(|(a, b)| a * b).sum();
                        sum[i * seq + j] += dot * scale;
                    }
                }
            }
            Grid {
                rows: seq,
                cols: seq,
                values: sum.into_iter().map(|s| s / batch as f64).collect(),
            }
        })
        .collect())
}

/// Colour of a position `t` in [0, 1] on the scale: dark blue through teal and green to yellow
/// (anchors close to matplotlib's viridis), linearly interpolated.
pub fn colour(t: f64) -> [u8; 3] {
    const ANCHORS: [[f64; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let pos = t * (ANCHORS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(ANCHORS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (ANCHORS[i], ANCHORS[i + 1]);
    [0, 1, 2].map(|c| (a[c] + (b[c] - a[c]) * f).round() as u8)
}

/// Where `value` lies on the scale `(lo, hi)`, in [0, 1]; the middle when the scale is a point.
pub fn position(value: f64, (lo, hi): (f64, f64)) -> f64 {
    if hi > lo {
        ((value - lo) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// Colour of cells holding NaN or an infinity.
pub const NOT_FINITE: [u8; 3] = [160, 160, 160];
const BACKGROUND: [u8; 3] = [255, 255, 255];
const INK: [u8; 3] = [0, 0, 0];

/// Pixel size of one font dot; glyphs are 3x5 dots with one dot between characters.
const DOT: u32 = 2;
const GLYPH_W: u32 = 3 * DOT;
const GLYPH_H: u32 = 5 * DOT;
const ADVANCE: u32 = GLYPH_W + DOT;
const PAD: u32 = 8;
const GAP: u32 = 6;
const BAR_W: u32 = 16;
/// Characters reserved for a scale label (`-12.345`).
const LABEL_CHARS: u32 = 7;

/// Where things go in a picture of a `rows` x `cols` grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub cell: u32,
    pub rows: u32,
    pub cols: u32,
    /// Top-left corner of the grid.
    pub grid_x: u32,
    pub grid_y: u32,
    /// Left edge of the colour bar (it spans the grid's height).
    pub bar_x: u32,
    pub width: u32,
    pub height: u32,
}

impl Layout {
    pub fn new(rows: usize, cols: usize, cell: u32) -> Layout {
        let (rows, cols) = (rows as u32, cols as u32);
        let index_chars = rows.max(1).to_string().len() as u32;
        let grid_x = PAD + index_chars * ADVANCE + GAP;
        let grid_y = PAD + GLYPH_H + GAP;
        let bar_x = grid_x + cols * cell + 2 * GAP;
        let width = bar_x + BAR_W + GAP + LABEL_CHARS * ADVANCE + PAD;
        let height = grid_y + rows * cell + PAD;
        Layout {
            cell,
            rows,
            cols,
            grid_x,
            grid_y,
            bar_x,
            width,
            height,
        }
    }

    /// The pixel at the centre of cell (`row`, `col`).
    pub fn cell_centre(&self, row: usize, col: usize) -> (u32, u32) {
        (
            self.grid_x + col as u32 * self.cell + self.cell / 2,
            self.grid_y + row as u32 * self.cell + self.cell / 2,
        )
    }
}

/// An RGB picture, 8 bits per channel, row-major.
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Image {
    fn new(width: u32, height: u32) -> Image {
        Image {
            width,
            height,
            rgb: BACKGROUND.repeat((width * height) as usize),
        }
    }

    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    fn fill(&mut self, x: u32, y: u32, w: u32, h: u32, c: [u8; 3]) {
        for yy in y..(y + h).min(self.height) {
            for xx in x..(x + w).min(self.width) {
                let i = ((yy * self.width + xx) * 3) as usize;
                self.rgb[i..i + 3].copy_from_slice(&c);
            }
        }
    }

    fn text(&mut self, x: u32, y: u32, s: &str) {
        for (n, ch) in s.chars().enumerate() {
            let rows = glyph(ch);
            let left = x + n as u32 * ADVANCE;
            for (r, bits) in rows.iter().enumerate() {
                for c in 0..3 {
                    if bits & (0b100 >> c) != 0 {
                        self.fill(left + c * DOT, y + r as u32 * DOT, DOT, DOT, INK);
                    }
                }
            }
        }
    }
}

/// 3x5 dots per character, one row per entry, the high bit on the left. Characters without a
/// glyph are left blank.
fn glyph(ch: char) -> [u8; 5] {
    match ch {
        '0' => [0b111, 0b101, 0b101, 0b101, 0b111],
        '1' => [0b010, 0b110, 0b010, 0b010, 0b111],
        '2' => [0b111, 0b001, 0b111, 0b100, 0b111],
        '3' => [0b111, 0b001, 0b111, 0b001, 0b111],
        '4' => [0b101, 0b101, 0b111, 0b001, 0b001],
        '5' => [0b111, 0b100, 0b111, 0b001, 0b111],
        '6' => [0b111, 0b100, 0b111, 0b101, 0b111],
        '7' => [0b111, 0b001, 0b001, 0b001, 0b001],
        '8' => [0b111, 0b101, 0b111, 0b101, 0b111],
        '9' => [0b111, 0b101, 0b111, 0b001, 0b111],
        '.' => [0b000, 0b000, 0b000, 0b000, 0b010],
        '-' => [0b000, 0b000, 0b111, 0b000, 0b000],
        _ => [0; 5],
    }
}

/// A scale label of at most [`LABEL_CHARS`] characters.
pub fn label(v: f64) -> String {
    let s = format!("{v:.3}");
    if s.len() as u32 <= LABEL_CHARS {
        s
    } else {
        format!("{v:.0}")
    }
}

/// Draws `grid` on the scale `range` with cells of `cell` pixels.
pub fn render(grid: &Grid, range: (f64, f64), cell: u32) -> Image {
    let layout = Layout::new(grid.rows, grid.cols, cell);
    let mut img = Image::new(layout.width, layout.height);
    for r in 0..grid.rows {
        for c in 0..grid.cols {
            let v = grid.at(r, c);
            let fill = if v.is_finite() {
                colour(position(v, range))
            } else {
                NOT_FINITE
            };
            let x = layout.grid_x + c as u32 * cell;
            let y = layout.grid_y + r as u32 * cell;
            img.fill(x, y, cell, cell, fill);
        }
    }
    // Token indices: columns along the top, rows down the left side.
    for c in 0..grid.cols {
        let s = c.to_string();
        let w = s.len() as u32 * ADVANCE - DOT;
        let x = layout.grid_x + c as u32 * cell + cell.saturating_sub(w) / 2;
        img.text(x, PAD, &s);
    }
    for r in 0..grid.rows {
        let y = layout.grid_y + r as u32 * cell + cell.saturating_sub(GLYPH_H) / 2;
        img.text(PAD, y, &r.to_string());
    }
    // The colour bar: the top row of pixels is the high end, the bottom row the low end.
    let bar_h = grid.rows as u32 * cell;
    for i in 0..bar_h {
        let t = if bar_h > 1 {
            1.0 - f64::from(i) / f64::from(bar_h - 1)
        } else {
            1.0
        };
        img.fill(layout.bar_x, layout.grid_y + i, BAR_W, 1, colour(t));
    }
    let label_x = layout.bar_x + BAR_W + GAP;
    img.text(label_x, layout.grid_y, &label(range.1));
    img.text(
        label_x,
        layout.grid_y + bar_h.saturating_sub(GLYPH_H),
        &label(range.0),
    );
    img
}

/// Writes `grid` as a PNG at `path`; returns the picture's width and height.
pub fn write_png(path: &Path, grid: &Grid, range: (f64, f64), cell: u32) -> io::Result<(u32, u32)> {
    let img = render(grid, range, cell);
    let file = BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, img.width, img.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(io::Error::other)?;
    writer
        .write_image_data(&img.rgb)
        .map_err(io::Error::other)?;
    writer.finish().map_err(io::Error::other)?;
    Ok((img.width, img.height))
}
