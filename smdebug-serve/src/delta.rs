//! A page's cursor into each run's [`Journal`], and the delta a push sends it: everything the
//! page has not seen, merged into one message however many follower passes it covers (a slow
//! page gets one larger delta, never a backlog), or the `refetch` flag when the page is new,
//! the run's view was reset, the journal no longer holds what the page missed, or more is new
//! than [`MAX_STEPS`] or [`MAX_SAMPLES`].

use std::collections::HashMap;

use smdebug_format::system::vocab;

use crate::journal::{Journal, SampleEntry, StepEntry};
use crate::push_views::{RunDelta, SampleDelta, StepDelta};
use crate::run_data::RunData;
use crate::series::finite;

/// Step spans one push carries at most.
pub(crate) const MAX_STEPS: usize = 2_000;
/// System samples one push carries at most.
pub(crate) const MAX_SAMPLES: usize = 20_000;

/// What one page has seen of one run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// The page has had a push about the run.
    started: bool,
    /// The run's resets then.
    resets: u64,
    steps: u64,
    samples: u64,
    rules: u64,
}

impl Seen {
    fn catch_up(&mut self, d: &RunData) {
        let j = &d.journal;
        *self = Seen {
            started: true,
            resets: d.resets,
            steps: j.steps.end(),
            samples: j.samples.end(),
            rules: j.rule_changes,
        };
    }
}

/// The delta of run `id` for a page that has seen `seen` of it; `seen` moves to now.
pub(crate) fn delta(id: usize, d: &RunData, seen: &mut Seen) -> RunDelta {
    let refetch = |seen: &mut Seen, why: &'static str| {
        seen.catch_up(d);
        RunDelta {
            id,
            refetch: true,
            refetch_reason: Some(why),
            ..RunDelta::default()
        }
    };
    if !seen.started {
        return refetch(seen, "the page connected");
    }
    if seen.resets != d.resets {
        return refetch(seen, "the run's view was reset");
    }
    let j = &d.journal;
    let (Some(steps), Some(samples)) = (j.steps.since(seen.steps), j.samples.since(seen.samples))
    else {
        return refetch(seen, "the page missed more than the server keeps");
    };
    if j.steps.end() - seen.steps > MAX_STEPS as u64
        || j.samples.end() - seen.samples > MAX_SAMPLES as u64
    {
        return refetch(seen, "more is new than one push carries");
    }
    let new_steps = step_deltas(steps);
    let new_samples = sample_deltas(j, samples);
    let changed_rules = if j.rule_changes > seen.rules {
        crate::verdicts::rule_views(d)
            .into_iter()
            .filter(|v| j.rules.get(&v.name).is_some_and(|(n, _)| *n > seen.rules))
            .collect()
    } else {
        Vec::new()
    };
    seen.catch_up(d);
    RunDelta {
        id,
        refetch: false,
        refetch_reason: None,
        new_steps,
        new_samples,
        changed_rules,
    }
}

/// Entries grouped by `key`, groups in the order of their first entry: `new` starts a group,
/// `add` puts an entry in it.
fn grouped<'a, E: 'a, K: std::hash::Hash + Eq, G>(
    entries: impl Iterator<Item = &'a E>,
    key: impl Fn(&E) -> K,
    new: impl Fn(&E) -> G,
    add: impl Fn(&mut G, &E),
) -> Vec<G> {
    let mut groups: Vec<G> = Vec::new();
    let mut at: HashMap<K, usize> = HashMap::new();
    for e in entries {
        let i = *at.entry(key(e)).or_insert_with(|| {
            groups.push(new(e));
            groups.len() - 1
        });
        add(&mut groups[i], e);
    }
    groups
}

fn step_deltas<'a>(steps: impl Iterator<Item = &'a StepEntry>) -> Vec<StepDelta> {
    grouped(
        steps,
        |s| (s.mode, s.node.clone(), s.worker),
        |s| StepDelta {
            mode: s.mode.name(),
            node: s.node.clone(),
            worker: s.worker,
            step: Vec::new(),
            start: Vec::new(),
            duration: Vec::new(),
        },
        |d, s| {
            d.step.push(s.step);
            d.start.push(s.start_us as f64 / 1e6);
            d.duration.push(s.duration_us as f64 / 1e6);
        },
    )
}

fn sample_deltas<'a>(
    j: &Journal,
    samples: impl Iterator<Item = &'a SampleEntry>,
) -> Vec<SampleDelta> {
    grouped(
        samples,
        |s| s.series,
        |s| {
            let k = &j.series[s.series as usize];
            SampleDelta {
                node: k.node.clone(),
                r#type: k.metric_type.clone(),
                name: k.name.clone(),
                dimension: k.dimension.clone(),
                unit: vocab::unit(&k.metric_type, &k.name, &k.dimension),
                t: Vec::new(),
                v: Vec::new(),
            }
        },
        |d, s| {
            d.t.push(s.t);
            d.v.push(finite(s.v));
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_core::Mode;
    use smdebug_read::profile::Span;

    fn step_span(step: u64) -> Span {
        Span {
            phase: "Step:ModeKeys.TRAIN".into(),
            name: "Step".into(),
            start_us: 1_000_000 * step,
            end_us: 1_000_000 * step + 500,
            node: "algo-1".into(),
            worker: Some(0),
            step: Some(step),
            mode: Some(Mode::Train),
            args: Default::default(),
        }
    }

    fn pass(d: &mut RunData, steps: std::ops::Range<u64>) {
        let spans: Vec<Span> = steps.clone().map(step_span).collect();
        d.journal.add_spans(&spans);
    }

    fn steps_of(delta: &RunDelta) -> Vec<u64> {
        delta
            .new_steps
            .iter()
            .flat_map(|s| s.step.clone())
            .collect()
    }

    #[test]
    fn a_page_that_lags_gets_one_merged_delta_then_only_what_is_new() {
        let mut d = RunData::default();
        let mut seen = Seen::default();
        pass(&mut d, 0..3);
        let first = delta(0, &d, &mut seen);
        assert!(first.refetch, "a new page fetches its panels");
        assert!(first.new_steps.is_empty());
        // Three follower passes while the page did not read: one delta with all of them.
        pass(&mut d, 3..5);
        pass(&mut d, 5..6);
        pass(&mut d, 6..9);
        let merged = delta(0, &d, &mut seen);
        assert!(!merged.refetch);
        assert_eq!(steps_of(&merged), (3..9).collect::<Vec<_>>());
        let idle = delta(0, &d, &mut seen);
        assert!(idle.new_steps.is_empty() && !idle.refetch);
        pass(&mut d, 9..10);
        assert_eq!(steps_of(&delta(0, &d, &mut seen)), [9]);
    }

    #[test]
    fn a_page_too_far_behind_or_after_a_reset_is_told_to_fetch_again() {
        let mut d = RunData::default();
        let mut seen = Seen::default();
        delta(0, &d, &mut seen);
        pass(&mut d, 0..(MAX_STEPS as u64 + 1));
        let big = delta(0, &d, &mut seen);
        assert!(
            big.refetch && big.new_steps.is_empty(),
            "{:?}",
            big.refetch_reason
        );
        assert_eq!(
            big.refetch_reason,
            Some("more is new than one push carries")
        );
        // Caught up: the next pass is a delta again.
        pass(&mut d, 5000..5002);
        assert_eq!(steps_of(&delta(0, &d, &mut seen)), [5000, 5001]);
        // Beyond what the journal keeps.
        for i in 0..5 {
            pass(&mut d, 10_000 + i * 2000..10_000 + (i + 1) * 2000);
        }
        let lost = delta(0, &d, &mut seen);
        assert_eq!(
            lost.refetch_reason,
            Some("the page missed more than the server keeps")
        );
        d.resets += 1;
        assert_eq!(
            delta(0, &d, &mut seen).refetch_reason,
            Some("the run's view was reset")
        );
    }
}
