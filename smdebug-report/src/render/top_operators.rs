//! 4. Top CPU and GPU operators from Kineto traces.

use crate::charts;
use crate::html::{Cell, table};
use crate::input::NoteArea;

use super::format::{ms, pct};
use super::{MAX_SERIES, Page};

impl Page<'_> {
    pub(super) fn top_operators(&mut self) {
        self.notes(NoteArea::Traces);
        if self.input.traces.is_empty() {
            self.missing("No PyTorch profiler (Kineto) trace was given, so there are no operator or kernel breakdowns. Pass the trace files of a torch.profiler / libtorch run to the report.");
            return;
        }
        self.lead("From the Kineto traces, per rank: the ten operators and kernels with the most total time. CPU operator times are inclusive (a nested operator's time counts in its parent too).");
        let input = self.input;
        for r in input.traces.iter().take(MAX_SERIES) {
            self.h3(&format!("Rank {} ({})", r.rank, r.file));
            let op_rows = |ops: &[smdebug_read::kineto::OpStats]| -> Vec<Vec<Cell>> {
                ops.iter()
                    .take(10)
                    .map(|o| {
                        vec![
                            Cell::Name(o.name.clone()),
                            Cell::num(o.count.to_string()),
                            Cell::num(ms(o.total_us)),
                            Cell::num(format!("{:.1}", o.mean_us)),
                            Cell::num(format!("{:.1}", o.max_us)),
                            Cell::num(pct(o.share)),
                        ]
                    })
                    .collect()
            };
            let headers = ["name", "count", "total ms", "mean µs", "max µs", "share"];
            if r.cpu_operators.is_empty() {
                self.missing("This trace has no CPU operators (cpu_op events).");
            } else {
                self.out.push_str("<p><strong>CPU operators</strong></p>");
                table(
                    &mut self.out,
                    "top-cpu",
                    &headers,
                    &op_rows(&r.cpu_operators),
                );
            }
            if r.gpu_kernels.is_empty() {
                self.missing("This trace has no GPU kernels: it was recorded without CUDA activity (a CPU-only run).");
            } else {
                self.out.push_str("<p><strong>GPU kernels</strong></p>");
                table(&mut self.out, "top-gpu", &headers, &op_rows(&r.gpu_kernels));
            }
            let (title, ops) = if r.gpu_kernels.is_empty() {
                ("Top CPU operators by total time", &r.cpu_operators)
            } else {
                ("Top GPU kernels by total time", &r.gpu_kernels)
            };
            let bars: Vec<(String, f64)> = ops
                .iter()
                .take(10)
                .map(|o| (o.name.clone(), o.total_us / 1000.0))
                .collect();
            if !bars.is_empty() {
                let drawn = charts::bar_chart(&format!("{title}, rank {}", r.rank), "ms", &bars);
                self.chart(drawn, "Total milliseconds per name.");
            }
        }
        if input.traces.len() > MAX_SERIES {
            self.lead(&format!(
                "{} more ranks are not shown.",
                input.traces.len() - MAX_SERIES
            ));
        }
    }
}
