//! What the dashboard marks on a scalar chart from a series' summary
//! ([`smdebug_analysis::scalars`]): the steps whose values were not finite.

use schemars::JsonSchema;
use serde::Serialize;
use smdebug_analysis::scalars::SeriesSummary;

/// Steps of a series whose values were not finite: marked on its chart.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NonFiniteSteps {
    /// The first such step.
    pub from: u64,
    /// The last (steps between them may hold finite values when the series' buckets are wider
    /// than a step: then `count` says how many were not).
    pub to: u64,
    /// Values that were not finite.
    pub count: u32,
    /// `NaN`, `Inf`, or `NaN and Inf` (`Inf` for -Inf too).
    pub kind: &'static str,
}

/// At most this many runs of non-finite steps are marked on a chart.
pub const NON_FINITE_MARKS: usize = 50;

impl NonFiniteSteps {
    /// A series' runs of non-finite values within steps `from..=to`.
    pub fn of(summary: &SeriesSummary, from: Option<f64>, to: Option<f64>) -> Vec<NonFiniteSteps> {
        summary
            .non_finite(from, to, NON_FINITE_MARKS)
            .into_iter()
            .map(|r| NonFiniteSteps {
                from: r.from,
                to: r.to,
                count: r.count,
                kind: match (r.nan, r.inf) {
                    (true, true) => "NaN and Inf",
                    (false, true) => "Inf",
                    (true, false) => "NaN",
                    // Neither seen among the bucket's kept points: a value between them.
                    (false, false) => "NaN or Inf",
                },
            })
            .collect()
    }
}
