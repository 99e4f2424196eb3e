//! 13. Data loading.

use std::collections::BTreeMap;

use smdebug_profiler::reader::SpanRef;
use smdebug_profiler::spans::Phase;

use crate::charts;
use crate::html::{Cell, table};
use crate::stats::{self, Summary};

use super::Page;
use super::format::{DURATION_COLUMNS, duration_cells};

impl Page<'_> {
    pub(super) fn data_loading(&mut self) {
        let loads: Vec<SpanRef<'_>> = self
            .input
            .spans()
            .iter()
            .filter(|s| s.phase_kind() == Phase::DataLoading)
            .collect();
        if loads.is_empty() {
            self.missing("No data-loading spans were recorded. Wrap the fetch of each batch in SpanRecorder::data_loading to see how long the loop waits for data.");
            self.verdict("Dataloader");
            return;
        }
        self.lead("Time the loop spent waiting for batches, per node and worker, and how many loads overlapped (parallel loaders) against the node's cores.");
        let mut groups: BTreeMap<(&str, Option<u32>), Vec<SpanRef<'_>>> = BTreeMap::new();
        for &s in &loads {
            groups.entry((s.node, s.worker)).or_default().push(s);
        }
        let mut step_time: BTreeMap<(&str, Option<u32>), u64> = BTreeMap::new();
        for s in &self.view.steps {
            *step_time.entry((s.node, s.worker)).or_default() += s.duration_us();
        }
        let cores: BTreeMap<&str, usize> = self
            .view
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.cores.len()))
            .collect();
        let mut rows = Vec::new();
        let mut heavy = Vec::new();
        for ((node, worker), spans) in &groups {
            let Some(sum) = Summary::of(spans.iter().map(|s| s.duration_us() as f64)) else {
                continue;
            };
            let total: u64 = spans.iter().map(|s| s.duration_us()).sum();
            // Most loads in flight at once: sweep over starts (+1) and ends (−1).
            let mut events: Vec<(u64, i32)> = spans
                .iter()
                .flat_map(|s| [(s.start_us, 1), (s.end_us, -1)])
                .collect();
            events.sort_by_key(|e| (e.0, e.1));
            let (mut now, mut most) = (0i32, 0i32);
            for (_, d) in events {
                now += d;
                most = most.max(now);
            }
            let share = step_time
                .get(&(*node, *worker))
                .filter(|&&t| t > 0)
                .map(|&t| total as f64 / t as f64);
            if share.is_some_and(|s| s > 0.2) {
                heavy.push(format!(
                    "{node}{}",
                    worker.map_or(String::new(), |w| format!(" worker {w}"))
                ));
            }
            let mut row = vec![
                Cell::text(match worker {
                    Some(w) => format!("{node} worker {w}"),
                    None => (*node).to_owned(),
                }),
                Cell::num(sum.count.to_string()),
            ];
            row.extend(duration_cells(&sum, total as f64, share));
            row.push(Cell::num(most.to_string()));
            row.push(Cell::num(
                cores
                    .get(node)
                    .filter(|&&c| c > 0)
                    .map_or("-".into(), |c| c.to_string()),
            ));
            rows.push(row);
        }
        table(
            &mut self.out,
            "data-loading",
            &[
                &["node / worker", "loads"][..],
                &DURATION_COLUMNS,
                &["most in parallel", "cores"],
            ]
            .concat(),
            &rows,
        );
        let durations: Vec<f64> = loads
            .iter()
            .map(|s| s.duration_us() as f64 / 1000.0)
            .collect();
        if let Some(all) = Summary::of(durations.iter().copied()) {
            let bins = 30;
            let (lo, hi, edges) = all.bin_edges(bins);
            let series = vec![(
                "data loading".to_owned(),
                stats::histogram(durations.iter().copied(), bins, lo, hi),
            )];
            let drawn = charts::histogram_chart(
                "Data-loading times",
                "load duration (ms)",
                &edges,
                &series,
            );
            self.chart(drawn, "How many batch loads took how long, all workers.");
        }
        if !heavy.is_empty() {
            self.advice(&format!(
                "Waiting for data takes more than 20% of step time on {}. Load in parallel and ahead \
                 of time: more loader workers (up to about the number of cores), prefetching, \
                 pinned memory for host-to-GPU copies, and a faster storage format.",
                heavy.join(", ")
            ));
        }
        self.verdict("Dataloader");
    }
}
