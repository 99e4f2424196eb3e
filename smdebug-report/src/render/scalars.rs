//! Scalar curves (losses, metrics).

use std::fmt::Write as _;

use crate::charts::{self, Curve, XAxis};
use crate::html::escape;
use crate::input::NoteArea;

use super::Page;

impl Page<'_> {
    pub(super) fn scalars(&mut self) {
        self.notes(NoteArea::Tensors);
        if self.input.scalars.is_empty() {
            self.missing("No scalar tensors (losses, metrics) were found in this run.");
            return;
        }
        self.lead("Every scalar tensor saved by the hook (the losses and metrics collections, and any other single-value tensor), one line per mode over global steps.");
        let input = self.input;
        for s in &input.scalars {
            let lines: Vec<Curve> = s
                .modes
                .iter()
                .map(|(m, points)| {
                    let points: Vec<(f64, f64)> =
                        points.iter().map(|&(step, v)| (step as f64, v)).collect();
                    Curve::of_points(m.name(), &points)
                })
                .collect();
            let last: Vec<String> = s
                .modes
                .iter()
                .filter_map(|(m, p)| {
                    p.last()
                        .map(|(step, v)| format!("{} {v:.6} at step {step}", m.name()))
                })
                .collect();
            let _ = write!(self.out, "<h3 class=\"scalar\">{}</h3>", escape(&s.name));
            let drawn = charts::line_chart(&s.name, XAxis::Plain, "value", &lines, None);
            self.chart(drawn, &format!("Last values: {}.", last.join("; ")));
        }
    }
}
