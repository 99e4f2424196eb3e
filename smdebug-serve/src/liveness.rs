//! Whether a run is fresh: live, stalled since when, or crashed, and how fast it goes. Decided
//! afresh each time the run's state is sent (every push, and the stream's heartbeat when
//! nothing changed), from what the follower's last pass read, so that a run that stops is
//! seen to stop by an open page without a reload.
//!
//! - *Crashed*: an identity file (`jobs/<worker>/<process>.json`, smdebug-io's
//!   [`JobIdentity`]) names a process of this host that is gone (its id runs nothing, or a
//!   process started after the session) and is not marked finished, and the run has no end
//!   marker. Only said on the host that ran it: the dashboard can look up its process ids.
//! - *Stalled since T*: no end marker and nothing advanced for [`STALLED_AFTER_S`] (or five
//!   typical step intervals by the progress files, when steps are slower than that), or every unfinished process of
//!   another host has stopped beating for [`STALE_AFTER`]. T is when the run last advanced, by
//!   the times its files record (the newest progress file, written as steps end) or, when
//!   later, when this server saw new steps arrive.
//! - The step rate behind the ETA is measured over a trailing window of wall time after the
//!   warm-up steps, and only an even rate gives an ETA.

use smdebug_format::jobs::{STALE_AFTER, utc};

use crate::processes::ProcessView;
use crate::run_data::RunData;
use crate::views::Phase;

/// Nothing advanced for this long (or five typical step intervals, when longer): stalled. A
/// minute: a saving job writes a progress file as steps end (at most once a second) and step
/// spans as they close; a step slower than twelve seconds raises the bar with it.
pub const STALLED_AFTER_S: f64 = 60.0;

/// Typical step intervals without news after which a slow job is stalled.
const STALLED_AFTER_STEPS: f64 = 5.0;

/// No step for this long (or three step intervals, when longer): the ETA is withheld before
/// the run counts as stalled.
pub const QUIET_AFTER_S: f64 = 10.0;

/// The trailing window of wall time the step rate is measured over.
pub const RATE_WINDOW_S: f64 = 120.0;

/// Steps left out as warm-up before the rate is measured (the first steps compile, allocate
/// and fill caches).
pub const WARMUP_STEPS: f64 = 5.0;

/// The fewest steps in the window for a rate.
const RATE_MIN_STEPS: f64 = 4.0;

/// The two halves of the window must agree this closely (slower over faster) for an ETA.
const STEADY_RATIO: f64 = 0.67;

/// A step rate and why there is no ETA from it, when there is none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Steps a second over the window (even when unsteady).
    pub rate: Option<f64>,
    /// Steps in the window.
    pub steps: f64,
    /// The window's length, seconds.
    pub window_s: f64,
    /// The rate is even enough for an ETA.
    pub steady: bool,
    /// Why not, when not.
    pub note: Option<&'static str>,
}

/// The step rate over `points` (wall time in seconds, steps done; in time order): over the
/// last [`RATE_WINDOW_S`] after the first [`WARMUP_STEPS`] steps, steady when the window's two
/// halves agree within [`STEADY_RATIO`].
pub fn stable_rate(points: &[(f64, f64)]) -> Rate {
    let none = |note| Rate {
        rate: None,
        steps: 0.0,
        window_s: 0.0,
        steady: false,
        note: Some(note),
    };
    let Some(&(_, first_steps)) = points.first() else {
        return none("no steps yet");
    };
    let warm: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(t, s)| t.is_finite() && s >= first_steps + WARMUP_STEPS)
        .collect();
    let Some(&(t1, s1)) = warm.last() else {
        return none("no rate yet: still in the warm-up steps");
    };
    let window: Vec<(f64, f64)> = warm
        .iter()
        .copied()
        .filter(|&(t, _)| t >= t1 - RATE_WINDOW_S)
        .collect();
    let (t0, s0) = window[0];
    if s1 - s0 < RATE_MIN_STEPS || t1 <= t0 {
        return none("no rate yet: too few steps since the warm-up");
    }
    let rate = (s1 - s0) / (t1 - t0);
    // The steps done at the window's middle: the last point at or before it.
    let mid = t0 + (t1 - t0) / 2.0;
    let (tm, sm) = window
        .iter()
        .copied()
        .take_while(|&(t, _)| t <= mid)
        .last()
        .unwrap_or((t0, s0));
    let steady = tm > t0 && t1 > tm && {
        let (a, b) = ((sm - s0) / (tm - t0), (s1 - sm) / (t1 - tm));
        a > 0.0 && b > 0.0 && a.min(b) / a.max(b) >= STEADY_RATIO
    };
    Rate {
        rate: Some(rate),
        steps: s1 - s0,
        window_s: t1 - t0,
        steady,
        note: (!steady).then_some("ETA unknown: the step rate is unsteady"),
    }
}

/// The run's step points and where they come from: the step spans of every mode (a job's plan
/// counts every mode's steps: TRAIN, EVAL, PREDICT), one point a step at its first start
/// (several workers' spans of a step are one step; the first and the latest steps kept,
/// [`StepClock`](crate::profile_model::StepClock)), else the progress files' history.
pub(crate) fn step_points(d: &RunData) -> (Vec<(f64, f64)>, &'static str) {
    let points = d.step_spans.clock.points();
    if points.len() >= 2 {
        return (points, "step spans");
    }
    (progress_points(d), "progress files")
}

/// The average step rate over the whole run after the warm-up: an ended run's (its last
/// minutes' rate says nothing of the run as a whole).
pub fn average_rate(points: &[(f64, f64)]) -> Rate {
    let Some(&(_, first_steps)) = points.first() else {
        return Rate {
            rate: None,
            steps: 0.0,
            window_s: 0.0,
            steady: false,
            note: Some("no steps"),
        };
    };
    let warm: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(t, s)| t.is_finite() && s >= first_steps + WARMUP_STEPS)
        .collect();
    // A run too short for a warm-up: all its steps.
    let over = if warm.len() >= 2 { &warm[..] } else { points };
    let (t0, s0) = over[0];
    let (t1, s1) = over[over.len() - 1];
    let rate = (t1 > t0 && s1 > s0).then(|| (s1 - s0) / (t1 - t0));
    Rate {
        rate,
        steps: s1 - s0,
        window_s: (t1 - t0).max(0.0),
        steady: rate.is_some(),
        note: rate.is_none().then_some("too few steps for a rate"),
    }
}

/// The progress files' course as step points.
fn progress_points(d: &RunData) -> Vec<(f64, f64)> {
    d.progress_history
        .iter()
        .map(|&(t, s)| (t, s as f64))
        .collect()
}

/// Where a run stands now, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Freshness {
    /// The header's pill.
    pub phase: Phase,
    /// What the phase rests on (which process is gone, what was last heard), when not live.
    pub note: Option<String>,
    /// When the run last advanced, seconds since the epoch.
    pub last_advanced: Option<f64>,
    /// Seconds since then (or since this server first read it all, when that is unknown).
    pub idle_s: Option<f64>,
    /// When stalled (or crashed): since when.
    pub stalled_since: Option<f64>,
    /// The stall threshold in force, seconds.
    pub stalled_after_s: f64,
}

/// The run's phase at `now` (seconds since the epoch).
pub(crate) fn freshness(d: &RunData, stop_rule: Option<&str>, now: f64) -> Freshness {
    let last_advanced = last_advanced(d);
    // Without a sign of when it last advanced, the time counts from when this server first read
    // it all (a dead run opened later is stalled a minute after).
    let reference = last_advanced.or(d.arrivals.caught_up_at);
    let idle_s = reference.map(|t| (now - t).max(0.0));
    // The typical step from the progress files' course (at most PROGRESS_HISTORY points: this
    // runs for every run on every push, where a walk over the step spans would not be cheap).
    let rate = stable_rate(&progress_points(d)).rate;
    let stalled_after_s = rate.filter(|r| *r > 0.0).map_or(STALLED_AFTER_S, |r| {
        STALLED_AFTER_S.max(STALLED_AFTER_STEPS / r)
    });
    let mut f = Freshness {
        phase: Phase::Live,
        note: None,
        last_advanced,
        idle_s,
        stalled_since: None,
        stalled_after_s,
    };
    if !d.exists || d.gone || d.open_error.is_some() {
        f.phase = Phase::Waiting;
        return f;
    }
    if d.complete {
        f.phase = ended_phase(d, stop_rule);
        return f;
    }
    let since = match (last_advanced, reference) {
        (Some(t), _) => format!("last advanced {}", utc(t)),
        (None, Some(t)) => format!(
            "no time of its last step in its files; nothing new since this server read it at {}",
            utc(t)
        ),
        (None, None) => "nothing read of its progress yet".to_owned(),
    };
    let gone: Vec<&ProcessView> = d.processes.iter().filter(|p| p.state == "gone").collect();
    if !gone.is_empty() {
        f.phase = Phase::Crashed;
        f.stalled_since = reference;
        let each: Vec<String> = gone
            .iter()
            .map(|p| {
                format!(
                    "{}: {} (host {})",
                    p.worker,
                    p.why.as_deref().unwrap_or("gone"),
                    p.host
                )
            })
            .collect();
        f.note = Some(format!(
            "{}; not marked finished and no end marker; {}",
            each.join("; "),
            since
        ));
        return f;
    }
    let unfinished: Vec<&ProcessView> = d
        .processes
        .iter()
        .filter(|p| p.state != "finished")
        .collect();
    let silent = !unfinished.is_empty() && unfinished.iter().all(|p| p.state == "silent");
    let idle = idle_s.is_some_and(|s| s > stalled_after_s);
    if !silent && !idle {
        return f;
    }
    f.phase = Phase::Stalled;
    f.stalled_since = reference;
    f.note = Some(format!(
        "nothing new for more than {:.0} s; {}; {}",
        stalled_after_s,
        since,
        stalled_processes(d, &unfinished, silent)
    ));
    f
}

/// When the run last advanced: its newest progress file, or the newest arrival of steps (of
/// samples or spans too, for a run of profiler data only).
fn last_advanced(d: &RunData) -> Option<f64> {
    let files_time = d
        .progress
        .iter()
        .map(|p| p.wall_time)
        .filter(|t| t.is_finite() && *t > 0.0)
        .reduce(f64::max);
    // A run with tensor steps or progress files advances with them (its system sampler runs on
    // while the loop hangs); a run of profiler data only, with any of it (its trace files close
    // a minute apart by default: spans alone would look stalled between two).
    let has_steps = !d.steps.is_empty() || !d.progress.is_empty();
    let seen = if has_steps {
        d.arrivals.steps
    } else {
        d.arrivals
            .steps
            .into_iter()
            .chain(d.arrivals.samples)
            .reduce(f64::max)
    };
    match (files_time, seen) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The phase of a run whose end marker is there: the marker says `stopped: …` when a stop
/// request ended the job (a marker not read yet: the request in the run says it).
fn ended_phase(d: &RunData, stop_rule: Option<&str>) -> Phase {
    let stopped = match &d.end_reason {
        Some(reason) => matches!(reason, smdebug_core::EndReason::Stopped(_)),
        None => d.stop_request.is_some(),
    };
    match (stopped, stop_rule) {
        (true, Some(_)) => Phase::StoppedByRule,
        (true, None) => Phase::StoppedByPerson,
        (false, _) => Phase::Ended,
    }
}

/// What a stalled run's processes say: silent ones (their heartbeat), none known, all marked
/// finished, or which still run or beat.
fn stalled_processes(d: &RunData, unfinished: &[&ProcessView], silent: bool) -> String {
    if silent {
        let each: Vec<String> = unfinished
            .iter()
            .map(|p| {
                format!(
                    "{} on host {} last beat {}",
                    p.worker,
                    p.host,
                    utc(p.heartbeat)
                )
            })
            .collect();
        format!(
            "no heartbeat for {} s or more: {}; its process cannot be looked up from this host",
            STALE_AFTER.as_secs(),
            each.join("; ")
        )
    } else if d.processes.is_empty() {
        "the run has no identity files (jobs/): whether its process runs is unknown".to_owned()
    } else if unfinished.is_empty() {
        "its processes marked themselves finished, but no end marker was stored".to_owned()
    } else {
        let each: Vec<String> = unfinished
            .iter()
            .map(|p| match p.state {
                "running" => format!("{}'s process {} still runs on this host", p.worker, p.pid),
                _ => format!("{} on host {} still beats", p.worker, p.host),
            })
            .collect();
        format!("{} (hung, or between slow steps)", each.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_leaves_out_the_warm_up_and_an_uneven_window_gives_no_eta() {
        // Five slow warm-up steps, then 10 steps a second for 30 s.
        let mut points: Vec<(f64, f64)> =
            (0..5).map(|i| (f64::from(i) * 3.0, f64::from(i))).collect();
        points.extend((0..=300).map(|i| (15.0 + f64::from(i) / 10.0, 5.0 + f64::from(i))));
        let r = stable_rate(&points);
        assert!(r.steady, "{r:?}");
        assert!((r.rate.unwrap() - 10.0).abs() < 1e-9, "{r:?}");
        // The job slows to a step every 2 s for its last 30 s: the halves disagree.
        let last = *points.last().unwrap();
        points.extend((1..=15).map(|i| (last.0 + 2.0 * f64::from(i), last.1 + f64::from(i))));
        let r = stable_rate(&points);
        assert!(!r.steady, "{r:?}");
        assert_eq!(r.note, Some("ETA unknown: the step rate is unsteady"));
        // Only warm-up: no rate.
        assert_eq!(stable_rate(&points[..5]).rate, None);
        assert_eq!(stable_rate(&[]).rate, None);
    }

    #[test]
    fn the_window_is_the_trailing_two_minutes() {
        // 1 step/s for 10 minutes, then 4 steps/s for 3 minutes: the rate is the recent one.
        let mut points: Vec<(f64, f64)> = (0..600).map(|i| (f64::from(i), f64::from(i))).collect();
        points.extend((1..=720).map(|i| (599.0 + f64::from(i) / 4.0, 599.0 + f64::from(i))));
        let r = stable_rate(&points);
        assert!(r.steady && (r.rate.unwrap() - 4.0).abs() < 1e-9, "{r:?}");
        assert!((r.window_s - RATE_WINDOW_S).abs() < 0.5, "{r:?}");
    }

    /// The plan counts every mode's steps: the rate does too. Ten TRAIN steps a second, and
    /// after each 50 of them 50 EVAL steps at 50 a second (two workers, each step's span
    /// twice): 100 steps every 6 s. From TRAIN alone the rate was 50 steps in 6 s.
    #[test]
    fn the_rate_counts_every_modes_steps_once() {
        use smdebug_core::Mode;
        let mut spans = Vec::new();
        let mut t = 0u64; // µs
        let (mut train, mut eval) = (0u64, 0u64);
        for _ in 0..40 {
            for _ in 0..50 {
                for worker in 0..2 {
                    spans.push((t + worker * 100, Mode::Train, Some(train)));
                }
                train += 1;
                t += 100_000;
            }
            for _ in 0..50 {
                for worker in 0..2 {
                    spans.push((t + worker * 100, Mode::Eval, Some(eval)));
                }
                eval += 1;
                t += 20_000;
            }
        }
        let mut clock = crate::profile_model::StepClock::default();
        for (start, mode, step) in spans {
            clock.add(mode, step, start);
        }
        let points = clock.points();
        assert_eq!(points.len(), 4000);
        assert_eq!(points.last().map(|p| p.1), Some(3999.0));
        let r = stable_rate(&points);
        // 100 steps per 6 s cycle: 16.7 steps/s (the window's ends fall within cycles).
        assert!((r.rate.unwrap() - 100.0 / 6.0).abs() < 1.0, "{r:?}");
        // The average over the run: the same, from the first warm step to the last.
        let a = average_rate(&points);
        assert!((a.rate.unwrap() - 100.0 / 6.0).abs() < 0.3, "{a:?}");
    }

    /// An ended run's rate is its average after the warm-up, not its last window's.
    #[test]
    fn an_ended_runs_rate_is_its_average() {
        // 10 steps/s for 1,000 s, then 100 steps/s for the last minute.
        let mut points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (f64::from(i) / 10.0, f64::from(i)))
            .collect();
        points.extend((1..=6000).map(|i| (999.9 + f64::from(i) / 100.0, 9999.0 + f64::from(i))));
        let a = average_rate(&points);
        let (t0, s0) = (0.5, 5.0);
        let (t1, s1) = *points.last().unwrap();
        assert_eq!(a.rate, Some((s1 - s0) / (t1 - t0)));
        assert!(a.steady);
        assert!((a.rate.unwrap() - 15.0).abs() < 0.2, "{a:?}");
        // The trailing two minutes say something else: 55 steps/s.
        let recent = stable_rate(&points).rate.unwrap();
        assert!((recent - 55.0).abs() < 0.5, "{recent}");
    }
}
