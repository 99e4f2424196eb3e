//! 11. Load balancing across GPUs.

use crate::charts;
use crate::html::{Cell, table};
use crate::stats;

use super::format::values;
use super::{MAX_SERIES, Page};

impl Page<'_> {
    pub(super) fn load_balancing(&mut self) {
        let many = self.view.many_nodes;
        let bins = 20;
        let gpus: Vec<(String, Vec<u64>)> = self
            .view
            .gpus()
            .filter_map(|g| {
                Some((
                    g.label(many),
                    stats::histogram(values(&g.util?.points), bins, 0.0, 100.0),
                ))
            })
            .filter(|(_, h)| h.iter().any(|&n| n > 0))
            .collect();
        if gpus.len() < 2 {
            self.missing(&format!(
                "Load balancing compares GPUs with each other; {} GPU with utilization data was recorded.",
                gpus.len()
            ));
            self.verdict("LoadBalancing");
            return;
        }
        let compared = compare(&gpus);
        let how = if compared.against_mean {
            format!(
                "the Jensen–Shannon distance between each GPU and the mean of all {} (too many \
                 for every pair)",
                gpus.len()
            )
        } else {
            "the Jensen–Shannon distance between every pair".to_owned()
        };
        self.lead(&format!(
            "Each GPU's utilization histogram (5% bands), and {how}: 0 for identical workloads, \
             1 for disjoint ones. The {TOP} largest distances are listed, and how many fall in \
             each band."
        ));
        let edges: Vec<f64> = (0..=bins).map(|i| i as f64 * 100.0 / bins as f64).collect();
        let shown: Vec<(String, Vec<u64>)> = gpus.iter().take(MAX_SERIES).cloned().collect();
        let drawn = charts::histogram_chart("Workload per GPU", "utilization (%)", &edges, &shown);
        self.chart(drawn, "Samples per 5% utilization band, per GPU.");
        let label = |i: Option<usize>| i.map_or("mean of all GPUs", |i| gpus[i].0.as_str());
        let rows: Vec<Vec<Cell>> = compared
            .top
            .iter()
            .map(|&(d, i, j)| {
                vec![
                    Cell::text(label(Some(i))),
                    Cell::text(label(j)),
                    Cell::num(format!("{d:.3}")),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "load-balance",
            &["GPU", "GPU", "distance"],
            &rows,
        );
        let bands: Vec<Vec<Cell>> = compared
            .bands
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| {
                let lo = b as f64 / BANDS as f64;
                vec![
                    Cell::text(format!("{lo:.1}–{:.1}", lo + 1.0 / BANDS as f64)),
                    Cell::num(n.to_string()),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "load-balance-bands",
            &["distance", "comparisons"],
            &bands,
        );
        if compared.unbalanced > 0 {
            let examples: Vec<String> = compared
                .top
                .iter()
                .filter(|t| t.0 > UNBALANCED)
                .take(EXAMPLES)
                .map(|&(_, i, j)| format!("{} vs {}", label(Some(i)), label(j)))
                .collect();
            let more = compared.unbalanced.saturating_sub(examples.len() as u64);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            self.advice(&format!(
                "Workloads differ strongly ({}{more}). Give each GPU an equal share: equal batch sizes per \
                 rank, even data sharding, and no extra work (logging, evaluation) pinned to one rank.",
                examples.join(", ")
            ));
        }
        self.verdict("LoadBalancing");
    }
}

/// Largest distances listed.
const TOP: usize = 28;

/// Comparisons named in the advice at most.
const EXAMPLES: usize = 8;

/// Bands of the distance histogram (over `[0, 1]`).
const BANDS: usize = 10;

/// A distance above which two workloads differ strongly.
const UNBALANCED: f64 = 0.5;

/// Up to this many GPUs every pair is compared; beyond, each GPU with the mean workload.
const ALL_PAIRS_UP_TO: usize = 512;

/// The comparisons, summarized: the [`TOP`] largest distances `(d, i, j)` (`j` `None`: the mean
/// workload), the count per band and how many are unbalanced. Memory is the summary's, never
/// one entry per pair.
struct Compared {
    top: Vec<(f64, usize, Option<usize>)>,
    bands: [u64; BANDS],
    unbalanced: u64,
    against_mean: bool,
}

fn compare(gpus: &[(String, Vec<u64>)]) -> Compared {
    let mut out = Compared {
        top: Vec::with_capacity(TOP + 1),
        bands: [0; BANDS],
        unbalanced: 0,
        against_mean: gpus.len() > ALL_PAIRS_UP_TO,
    };
    let mut add = |d: f64, i: usize, j: Option<usize>| {
        let band = ((d * BANDS as f64) as usize).min(BANDS - 1);
        out.bands[band] += 1;
        if d > UNBALANCED {
            out.unbalanced += 1;
        }
        if out.top.len() < TOP || d > out.top[out.top.len() - 1].0 {
            let at = out.top.partition_point(|t| t.0 >= d);
            out.top.insert(at, (d, i, j));
            out.top.truncate(TOP);
        }
    };
    if gpus.len() > ALL_PAIRS_UP_TO {
        let bins = gpus[0].1.len();
        // The mean workload: every GPU's histogram as shares, averaged (in parts per million
        // so that the distance's counts stay integers).
        let mut mean = vec![0.0f64; bins];
        for (_, h) in gpus {
            let total = h.iter().sum::<u64>().max(1) as f64;
            for (m, &n) in mean.iter_mut().zip(h) {
                *m += n as f64 / total;
            }
        }
        let mean: Vec<u64> = mean
            .iter()
            .map(|m| (m / gpus.len() as f64 * 1e6).round() as u64)
            .collect();
        for (i, (_, h)) in gpus.iter().enumerate() {
            if let Some(d) = stats::js_distance(h, &mean) {
                add(d, i, None);
            }
        }
    } else {
        for i in 0..gpus.len() {
            for j in i + 1..gpus.len() {
                if let Some(d) = stats::js_distance(&gpus[i].1, &gpus[j].1) {
                    add(d, i, Some(j));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(n: usize, band: usize) -> (String, Vec<u64>) {
        let mut h = vec![0u64; 20];
        h[band] = 10;
        (format!("gpu{n}"), h)
    }

    #[test]
    fn every_pair_summarized_in_bounded_memory() {
        // 40 GPUs: 39 alike and one disjoint from them all.
        let mut gpus: Vec<_> = (0..39).map(|n| gpu(n, 19)).collect();
        gpus.push(gpu(39, 0));
        let c = compare(&gpus);
        assert!(!c.against_mean);
        assert_eq!(c.top.len(), TOP);
        assert_eq!(c.unbalanced, 39);
        assert_eq!(c.bands.iter().sum::<u64>(), 40 * 39 / 2);
        assert_eq!(c.bands[BANDS - 1], 39);
        assert!(c.top.iter().all(|t| t.0 > 0.99 && t.2 == Some(39)));
    }

    #[test]
    fn many_gpus_compared_with_the_mean() {
        let mut gpus: Vec<_> = (0..2000).map(|n| gpu(n, 19)).collect();
        gpus.push(gpu(2000, 0));
        let c = compare(&gpus);
        assert!(c.against_mean);
        assert_eq!(c.bands.iter().sum::<u64>(), 2001);
        assert_eq!(c.top[0].1, 2000);
        assert_eq!(c.top[0].2, None);
        assert_eq!(c.unbalanced, 1);
    }
}
