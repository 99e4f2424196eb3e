//! The tensor views of a run: a tensor's distribution over steps and its 2-D view at a step,
//! from the follower's scalar summaries for a scalar (no tensor read) or through the run's
//! `Trial` for any other tensor.

use smdebug_analysis::stats::percentile;
use smdebug_read::trial::Trial;

use crate::run::Run;
use crate::series::{
    BANDS, HistogramStep, TensorGrid, TensorHistograms, TensorStep, TensorSteps, finite,
};
use smdebug_analysis::scalars::SeriesSummary;

/// Whether `name` is a scalar the follower summarizes, and how many values it has (every
/// mode's).
fn scalar_total(run: &Run, name: &str) -> Option<usize> {
    let d = run.data.read().expect("run data lock");
    Some(d.scalars.get(name)?.values().map(SeriesSummary::len).sum())
}

/// [`tensor_over_steps`] of a scalar the follower summarizes (no tensor read): its value is its
/// every reduction and quantile. The steps shown are at most `max_steps` evenly chosen among
/// its buckets' first and last values (every mode's), each a value of the files at its step.
/// `None` when `name` is not such a scalar.
pub fn scalar_over_steps(run: &Run, name: &str, max_steps: usize) -> Option<TensorSteps> {
    let d = run.data.read().expect("run data lock");
    let track = d.scalars.get(name)?;
    let total_steps = track.values().map(SeriesSummary::len).sum();
    let mut points: Vec<(u64, f64)> = track
        .values()
        .flat_map(|s| s.buckets().iter())
        .flat_map(|(_, b)| [(b.first.step, b.first.value), (b.last.step, b.last.value)])
        .collect();
    drop(d);
    points.sort_by_key(|p| p.0);
    points.dedup_by_key(|p| p.0);
    let take = max_steps.clamp(1, 500);
    let chosen: Vec<(u64, f64)> = if points.len() <= take {
        points
    } else {
        (0..take)
            .map(|i| points[i * (points.len() - 1) / (take - 1).max(1)])
            .collect()
    };
    let rows = chosen
        .iter()
        .filter(|p| p.1.is_finite())
        .map(|&(step, v)| TensorStep {
            step,
            min: Some(v),
            max: Some(v),
            mean: Some(v),
            std: Some(0.0),
            l2: Some(v.abs()),
            bands: vec![Some(v); BANDS.len()],
        })
        .collect();
    Some(TensorSteps {
        name: name.to_owned(),
        shape: Vec::new(),
        total_steps,
        steps: rows,
        band_percentiles: BANDS,
    })
}

/// [`tensor_2d`] of a scalar the follower summarizes: one cell, its value at `step` read again
/// from the run's files (by default its last step's, from the summary). `None` when `name` is
/// not such a scalar or has no value at `step`. Blocking I/O at a given step.
pub fn scalar_2d(run: &Run, name: &str, step: Option<u64>) -> Option<TensorGrid> {
    let total_steps = scalar_total(run, name)?;
    let last = {
        let d = run.data.read().expect("run data lock");
        d.scalars
            .get(name)?
            .values()
            .filter_map(SeriesSummary::last)
            .max_by_key(|p| p.step)
    };
    let (step, value) = match (step, last) {
        (None, Some(last)) => (last.step, last.value),
        (None, None) => return None,
        (Some(step), Some(last)) if step == last.step => (step, last.value),
        (Some(step), _) => {
            let read = crate::api::read_window(run, step, step)?;
            let value = read
                .iter()
                .filter(|((n, _), _)| n == name)
                .find_map(|(_, values)| values.iter().find(|v| v.0 == step))?
                .1;
            (step, value)
        }
    };
    Some(TensorGrid {
        name: name.to_owned(),
        step,
        total_steps,
        shape: Vec::new(),
        rows: 1,
        cols: 1,
        cells: vec![vec![finite(value)]],
    })
}

/// Reductions and a distribution of a tensor over (at most `max_steps` evenly chosen) steps.
pub fn tensor_over_steps(
    trial: &Trial,
    name: &str,
    max_steps: usize,
) -> Result<TensorSteps, String> {
    let tensor = trial.tensor(name).map_err(|e| e.to_string())?;
    let steps = tensor.steps(None).map_err(|e| e.to_string())?;
    let chosen = evenly(&steps, max_steps.clamp(1, 500));
    let mut rows = Vec::new();
    let mut shape = Vec::new();
    let mut first_error = None;
    for step in chosen {
        let value = match tensor.value(step, None, None) {
            Ok(v) => v,
            // Over the server's budget: the view is refused, saying why (the other steps of a
            // tensor have its size too).
            Err(e @ smdebug_read::Error::Format(smdebug_format::Error::TensorTooLarge { .. })) => {
                return Err(e.to_string());
            }
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        shape = value.shape().to_vec();
        let mut xs: Vec<f64> = value.iter().copied().filter(|x| x.is_finite()).collect();
        if xs.is_empty() {
            continue;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let std = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        let l2 = xs.iter().map(|x| x * x).sum::<f64>().sqrt();
        rows.push(TensorStep {
            step,
            min: finite(xs[0]),
            max: finite(xs[xs.len() - 1]),
            mean: finite(mean),
            std: finite(std),
            l2: finite(l2),
            bands: BANDS.iter().map(|&p| finite(percentile(&xs, p))).collect(),
        });
    }
    if let (true, Some(e)) = (rows.is_empty(), first_error) {
        return Err(e.to_string());
    }
    Ok(TensorSteps {
        name: name.to_owned(),
        shape,
        total_steps: steps.len(),
        steps: rows,
        band_percentiles: BANDS,
    })
}

/// At most `take` of `steps`, evenly spread, the first and last among them.
fn evenly(steps: &[u64], take: usize) -> Vec<u64> {
    if steps.len() <= take {
        return steps.to_vec();
    }
    (0..take)
        .map(|i| steps[i * (steps.len() - 1) / (take - 1).max(1)])
        .collect()
}

/// A tensor's values at (at most `max_steps`, 200 at most, evenly chosen) steps, each step's
/// counted into the same `bins` (2 to 100) equal bins between the lowest and the highest finite
/// value of the steps shown. Each step is read twice (its range, then its counts), so no more
/// than one step's values are held at a time.
pub fn tensor_histograms(
    trial: &Trial,
    name: &str,
    max_steps: usize,
    bins: usize,
) -> Result<TensorHistograms, String> {
    let tensor = trial.tensor(name).map_err(|e| e.to_string())?;
    let steps = tensor.steps(None).map_err(|e| e.to_string())?;
    let chosen = evenly(&steps, max_steps.clamp(1, 200));
    let bins = bins.clamp(2, 100);
    let read = |step: u64| match tensor.value(step, None, None) {
        Ok(v) => Ok(Some(v)),
        Err(e @ smdebug_read::Error::Format(smdebug_format::Error::TensorTooLarge { .. })) => {
            Err(e.to_string())
        }
        // A step that cannot be read is left out, as the distribution leaves it out.
        Err(_) => Ok(None),
    };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut readable = Vec::new();
    for &step in &chosen {
        let Some(value) = read(step)? else { continue };
        for &x in value.iter().filter(|x| x.is_finite()) {
            lo = lo.min(x);
            hi = hi.max(x);
        }
        readable.push(step);
    }
    if readable.is_empty() && !chosen.is_empty() {
        return Err(format!("no step of {name} could be read"));
    }
    let edges = (lo <= hi).then(|| {
        // One value throughout: a bin around it.
        let (lo, hi) = if lo < hi {
            (lo, hi)
        } else if lo == 0.0 {
            (-0.5, 0.5)
        } else {
            (lo - lo.abs() * 0.05, hi + hi.abs() * 0.05)
        };
        let mut edges: Vec<f64> = (0..bins)
            .map(|i| lo + (hi - lo) * i as f64 / bins as f64)
            .collect();
        edges.push(hi);
        edges
    });
    let mut shape = Vec::new();
    let mut rows = Vec::new();
    for step in readable {
        let Some(value) = read(step)? else { continue };
        shape = value.shape().to_vec();
        let mut counts = vec![0u64; bins];
        let mut non_finite = 0;
        for &x in value.iter() {
            match &edges {
                Some(edges) if x.is_finite() => {
                    // The bin whose lower edge is the last one at or below `x`.
                    let i = edges.partition_point(|e| *e <= x).saturating_sub(1);
                    counts[i.min(bins - 1)] += 1;
                }
                _ => non_finite += 1,
            }
        }
        rows.push(HistogramStep {
            step,
            counts,
            non_finite,
        });
    }
    Ok(TensorHistograms {
        name: name.to_owned(),
        shape,
        total_steps: steps.len(),
        edges,
        steps: rows,
    })
}

/// A tensor at one step as a 2-D grid (rows × the last dimension), averaged down to at most
/// `max_side` × `max_side` cells.
pub fn tensor_2d(
    trial: &Trial,
    name: &str,
    step: Option<u64>,
    max_side: usize,
) -> Result<TensorGrid, String> {
    let tensor = trial.tensor(name).map_err(|e| e.to_string())?;
    let steps = tensor.steps(None).map_err(|e| e.to_string())?;
    let step = match step {
        Some(s) => s,
        None => *steps.last().ok_or("the tensor has no steps")?,
    };
    let value = tensor.value(step, None, None).map_err(|e| e.to_string())?;
    let shape = value.shape().to_vec();
    let cols = *shape.last().unwrap_or(&1);
    let rows = value.len().checked_div(cols).unwrap_or(0);
    let flat: Vec<f64> = value.iter().copied().collect();
    let side = max_side.clamp(1, 512);
    let out_rows = rows.min(side);
    let out_cols = cols.min(side);
    let mut grid = vec![vec![0.0f64; out_cols]; out_rows];
    let mut count = vec![vec![0u32; out_cols]; out_rows];
    for r in 0..rows {
        for c in 0..cols {
            let x = flat[r * cols + c];
            if x.is_finite() {
                let (gr, gc) = (r * out_rows / rows, c * out_cols / cols);
                grid[gr][gc] += x;
                count[gr][gc] += 1;
            }
        }
    }
    let cells = grid
        .iter()
        .zip(&count)
        .map(|(g, c)| {
            g.iter()
                .zip(c)
                .map(|(s, &n)| (n > 0).then(|| finite(s / f64::from(n))).flatten())
                .collect()
        })
        .collect();
    Ok(TensorGrid {
        name: name.to_owned(),
        step,
        total_steps: steps.len(),
        shape,
        rows,
        cols,
        cells,
    })
}
