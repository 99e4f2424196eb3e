//! The followers' schedule: a few threads pass over all the runs, each run when it is due.
//!
//! A run that may still be written is looked at every poll interval (a live run's new data are
//! shown at once, and its reader's own schedule, e.g. sealed system files looked at again every
//! 25th pass, keeps its pace). A run that has ended (or whose folder is gone) waits twice as
//! long after each pass that found nothing, up to [`FINISHED_MAX_DELAY`], and is back at the
//! poll interval as soon as a pass finds something: a folder of a thousand finished runs costs
//! a few threads and a pass per run every ten seconds, not a thread per run polling five times
//! a second. A pass that stopped at its time budget with files left to read is followed by the
//! next at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smdebug_storage::StorageOptions;

use crate::run::{Cursor, Pass, Run, pass};

/// The longest wait between passes over a run that has ended or is gone.
pub(crate) const FINISHED_MAX_DELAY: Duration = Duration::from_secs(10);

/// Follower threads at most.
const MAX_THREADS: usize = 4;

/// When a run is next due, after a pass that found something (`changed`) or not, `last`
/// being its last wait; at once when the pass left a backlog.
fn next_delay(poll: Duration, last: Duration, pass: Pass, finished: bool) -> Duration {
    if pass.backlog {
        return Duration::ZERO;
    }
    if pass.changed || !finished {
        return poll;
    }
    (last * 2).clamp(poll, FINISHED_MAX_DELAY.max(poll))
}

struct Slot {
    run: Arc<Run>,
    cursor: Mutex<Cursor>,
    delay: Mutex<Duration>,
}

struct Queue {
    /// `(due, slot)`, the earliest first.
    due: Mutex<BinaryHeap<Reverse<(Instant, usize)>>>,
    wake: Condvar,
}

/// Starts the follower threads: they pass over `runs` until `stop` is set, calling
/// `changed` after each pass that found something.
pub(crate) fn spawn(
    runs: &[Arc<Run>],
    options: StorageOptions,
    poll: Duration,
    stop: Arc<AtomicBool>,
    changed: Arc<dyn Fn() + Send + Sync>,
) -> Vec<JoinHandle<()>> {
    let slots: Arc<Vec<Slot>> = Arc::new(
        runs.iter()
            .map(|run| Slot {
                run: Arc::clone(run),
                cursor: Mutex::new(Cursor::default()),
                delay: Mutex::new(poll),
            })
            .collect(),
    );
    let now = Instant::now();
    let queue = Arc::new(Queue {
        due: Mutex::new((0..slots.len()).map(|i| Reverse((now, i))).collect()),
        wake: Condvar::new(),
    });
    (0..runs.len().clamp(1, MAX_THREADS))
        .map(|n| {
            let slots = Arc::clone(&slots);
            let queue = Arc::clone(&queue);
            let stop = Arc::clone(&stop);
            let changed = Arc::clone(&changed);
            let options = options.clone();
            std::thread::Builder::new()
                .name(format!("smdebug-serve-follow-{n}"))
                .spawn(move || work(&slots, &queue, &options, poll, &stop, changed.as_ref()))
                .expect("spawn a follower thread")
        })
        .collect()
}

fn work(
    slots: &[Slot],
    queue: &Queue,
    options: &StorageOptions,
    poll: Duration,
    stop: &AtomicBool,
    changed: &(dyn Fn() + Send + Sync),
) {
    while let Some(i) = next_due(queue, stop) {
        let slot = &slots[i];
        let outcome = {
            let mut cursor = slot.cursor.lock().unwrap_or_else(|e| e.into_inner());
            pass(&slot.run, options, &mut cursor)
        };
        if outcome.changed {
            changed();
        }
        let finished = slot
            .run
            .data
            .read()
            .map(|d| d.complete || d.gone)
            .unwrap_or(false);
        let delay = {
            let mut delay = slot.delay.lock().unwrap_or_else(|e| e.into_inner());
            *delay = next_delay(poll, *delay, outcome, finished);
            *delay
        };
        let mut due = queue.due.lock().unwrap_or_else(|e| e.into_inner());
        due.push(Reverse((Instant::now() + delay, i)));
        queue.wake.notify_one();
    }
}

/// The next run due, waiting for it; `None` once `stop` is set.
fn next_due(queue: &Queue, stop: &AtomicBool) -> Option<usize> {
    let mut due = queue.due.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        let now = Instant::now();
        // Waits are short so that stopping the server is quick.
        let next = due.peek().map(|Reverse(entry)| *entry);
        let wait = match next {
            Some((at, i)) if at <= now => {
                due.pop();
                return Some(i);
            }
            Some((at, _)) => (at - now).min(Duration::from_millis(50)),
            None => Duration::from_millis(50),
        };
        due = queue
            .wake
            .wait_timeout(due, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTHING: Pass = Pass {
        changed: false,
        backlog: false,
    };

    #[test]
    fn delays_double_to_their_cap_and_reset_on_change() {
        let poll = Duration::from_millis(200);
        let mut d = poll;
        for _ in 0..20 {
            d = next_delay(poll, d, NOTHING, false);
        }
        assert_eq!(d, poll, "a live run is looked at every poll interval");
        for _ in 0..3 {
            d = next_delay(poll, d, NOTHING, true);
        }
        assert_eq!(d, poll * 8);
        for _ in 0..20 {
            d = next_delay(poll, d, NOTHING, true);
        }
        assert_eq!(d, FINISHED_MAX_DELAY);
        let found = Pass {
            changed: true,
            backlog: false,
        };
        assert_eq!(next_delay(poll, d, found, true), poll);
        // A poll interval longer than the cap is kept.
        let slow = Duration::from_secs(50);
        assert_eq!(next_delay(slow, slow, NOTHING, true), slow);
    }

    #[test]
    fn a_pass_that_left_a_backlog_is_followed_at_once() {
        let poll = Duration::from_millis(200);
        let backlog = Pass {
            changed: true,
            backlog: true,
        };
        assert_eq!(next_delay(poll, poll, backlog, false), Duration::ZERO);
        assert_eq!(next_delay(poll, poll * 8, backlog, true), Duration::ZERO);
    }
}
