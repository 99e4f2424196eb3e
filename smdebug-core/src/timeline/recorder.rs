//! The [`Timeline`] itself: step boundaries, phase spans and their guards, timed data
//! iterators.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use crate::mode::Mode;
use crate::phase::Phase;
use crate::window::{Window, WindowState};

use super::config::{Profiling, TimelineConfig};
use super::sink::{SpanArgs, SpanRecord, SpanSink, WindowChange};

/// Step numbers above this cannot be kept beside the mode in one atomic word.
const STEP_MASK: u64 = (1 << 60) - 1;

fn pack(mode: Mode, step: u64) -> u64 {
    ((mode.value() as u64) << 60) | (step & STEP_MASK)
}

fn unpack(packed: u64) -> Option<(Mode, u64)> {
    let mode = Mode::from_value(i32::try_from(packed >> 60).ok()?)?;
    Some((mode, packed & STEP_MASK))
}

struct Control {
    windows: Vec<WindowState>,
    pending: Vec<Option<Window>>,
    started: bool,
    closed: bool,
}

struct Inner {
    sink: Arc<dyn SpanSink>,
    base: Instant,
    /// Bits of the profilers open at the current step.
    open: AtomicU8,
    /// The current (mode, mode step), packed; 0 before the first step.
    step: AtomicU64,
    /// When the current step's first activity happened: nanoseconds since `base`, plus one;
    /// 0 while the step has not started.
    step_start: AtomicU64,
    /// When the previous step ended (or the timeline started): nanoseconds since `base`.
    last_boundary: AtomicU64,
    control: Mutex<Control>,
}

/// The loop's timeline: which profilers are on at this step, and the spans they measure. Cheap
/// to clone (every clone is the same timeline). The default timeline is off: it measures
/// nothing and every call on it costs a branch.
#[derive(Clone, Default)]
pub struct Timeline {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            None => f.write_str("Timeline(off)"),
            Some(inner) => f
                .debug_struct("Timeline")
                .field("step", &unpack(inner.step.load(Ordering::Relaxed)))
                .field("open", &inner.open.load(Ordering::Relaxed))
                .finish(),
        }
    }
}

impl Timeline {
    /// A timeline whose spans go to `sink`, with `config`'s windows. Nothing is measured until
    /// [`start`](Self::start) (the hook calls it when it is built).
    pub fn new(config: TimelineConfig, sink: Arc<dyn SpanSink>) -> Timeline {
        let windows = Profiling::ALL
            .iter()
            .map(|p| WindowState::new(config.window(*p).clone()))
            .collect();
        Timeline {
            inner: Some(Arc::new(Inner {
                sink,
                base: Instant::now(),
                open: AtomicU8::new(0),
                step: AtomicU64::new(0),
                step_start: AtomicU64::new(0),
                last_boundary: AtomicU64::new(0),
                control: Mutex::new(Control {
                    windows,
                    pending: vec![None; Profiling::ALL.len()],
                    started: false,
                    closed: false,
                }),
            })),
        }
    }

    /// A timeline that measures nothing.
    pub fn off() -> Timeline {
        Timeline::default()
    }

    /// Whether this timeline has a sink (it may still have every window closed).
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether `profiling` is on at the current step: one atomic load.
    #[inline]
    pub fn is_open(&self, profiling: Profiling) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.open.load(Ordering::Relaxed) & profiling.bit() != 0)
    }

    /// The current step: its mode and the step counted within the mode.
    pub fn current_step(&self) -> Option<(Mode, u64)> {
        self.inner
            .as_ref()
            .and_then(|i| unpack(i.step.load(Ordering::Relaxed)))
    }

    /// Replaces `profiling`'s window from the next step boundary on (a window opened on a
    /// running job by an edited profiler configuration file). Its open parts settle at that
    /// boundary.
    pub fn set_window(&self, profiling: Profiling, window: Window) {
        if let Some(inner) = &self.inner
            && let Ok(mut c) = inner.control.lock()
        {
            c.pending[profiling as usize] = Some(window);
        }
    }

    /// The windows in force (pending replacements included).
    pub fn windows(&self) -> Option<TimelineConfig> {
        let inner = self.inner.as_ref()?;
        let c = inner.control.lock().ok()?;
        let mut config = TimelineConfig::default();
        for p in Profiling::ALL {
            let w = c.pending[p as usize]
                .clone()
                .unwrap_or_else(|| c.windows[p as usize].window().clone());
            config.set(p, w);
        }
        Some(config)
    }

    /// Starts the timeline at `(mode, mode_step)`, global step `global`: the windows are
    /// settled for this step. The hook calls it when it is built.
    pub fn start(&self, mode: Mode, mode_step: u64, global: u64) {
        let Some(inner) = &self.inner else { return };
        inner.step.store(pack(mode, mode_step), Ordering::Relaxed);
        if let Ok(mut c) = inner.control.lock()
            && !c.started
        {
            c.started = true;
            inner
                .last_boundary
                .store(inner.since_base(Instant::now()), Ordering::Relaxed);
            let at = Some((mode, mode_step));
            inner.settle(&mut c, global, at, at);
        }
    }

    /// The mode changed without a step boundary (nothing was saved in the step yet).
    pub fn set_mode(&self, mode: Mode, mode_step: u64) {
        if let Some(inner) = &self.inner {
            inner.step.store(pack(mode, mode_step), Ordering::Relaxed);
        }
    }

    /// The step boundary: `ended` (mode, mode step) is over, `next` begins at global step
    /// `next_global`. Records the ended step's span and settles the windows for the next step,
    /// telling the sink which opened or closed.
    ///
    /// A step's span starts at its first measured activity (a data-loading `next()`, a phase
    /// span), as Python smdebug's step spans start at the forward pass; a step with none starts
    /// where the previous one ended (or where the timeline started).
    pub fn boundary(&self, ended: (Mode, u64), next: (Mode, u64), next_global: u64) {
        let Some(inner) = &self.inner else { return };
        let now = Instant::now();
        let started = inner.step_start.swap(0, Ordering::Relaxed);
        let previous = inner
            .last_boundary
            .swap(inner.since_base(now), Ordering::Relaxed);
        if self.is_open(Profiling::Phases) {
            let from = if started != 0 { started - 1 } else { previous };
            let start = inner.base + std::time::Duration::from_nanos(from);
            inner.sink.record(SpanRecord {
                phase: Phase::Step(ended.0),
                name: Phase::Step(ended.0).default_event_name(),
                start,
                end: now,
                step: Some(ended),
                args: Vec::new(),
            });
        }
        inner.step.store(pack(next.0, next.1), Ordering::Relaxed);
        if let Ok(mut c) = inner.control.lock() {
            inner.settle(&mut c, next_global, Some(ended), Some(next));
        }
    }

    /// Closes every open window (the sink stops its code profile) and measures nothing more.
    /// The hook calls it when it closes.
    pub fn close(&self, global: u64) {
        let Some(inner) = &self.inner else { return };
        if let Ok(mut c) = inner.control.lock() {
            if c.closed {
                return;
            }
            c.closed = true;
        }
        let was = inner.open.swap(0, Ordering::Relaxed);
        let step = unpack(inner.step.load(Ordering::Relaxed));
        for p in Profiling::ALL {
            if was & p.bit() != 0 {
                inner.sink.window_changed(WindowChange {
                    profiling: p,
                    open: false,
                    global_step: global,
                    step,
                });
            }
        }
    }

    /// Marks the current step as started now, if it has not started yet. Every measured
    /// activity does this; a loop may call it where its step begins.
    #[inline]
    pub fn mark_step_start(&self) {
        if let Some(inner) = &self.inner
            && inner.step_start.load(Ordering::Relaxed) == 0
        {
            inner.mark(Instant::now());
        }
    }

    /// Runs `f` inside a span of `phase` when `phase`'s profiler is on; just runs it otherwise.
    /// Data-loading phases follow [`Profiling::DataLoading`], every other phase
    /// [`Profiling::Phases`].
    pub fn scope<R>(&self, phase: Phase, f: impl FnOnce() -> R) -> R {
        let guard = self.span(phase);
        let out = f();
        drop(guard);
        out
    }

    /// Runs a module's forward pass `f` inside a span named `module` when detailed profiling
    /// is on (adapters call this from wrapped modules).
    pub fn module_scope<R>(&self, module: &str, f: impl FnOnce() -> R) -> R {
        if !self.is_open(Profiling::Detailed) {
            return f();
        }
        let start = Instant::now();
        let out = f();
        self.record(
            Phase::Custom(Cow::Borrowed(MODULE_ROW)),
            Cow::Owned(module.to_string()),
            start,
            Vec::new(),
        );
        out
    }

    /// A span of `phase` that ends when the guard drops (or nothing, when its profiler is off).
    pub fn span(&self, phase: Phase) -> PhaseGuard<'_> {
        let profiling = match phase {
            Phase::DataLoading => Profiling::DataLoading,
            _ => Profiling::Phases,
        };
        if !self.is_open(profiling) {
            self.mark_step_start();
            return PhaseGuard {
                timeline: self,
                open: None,
            };
        }
        let start = Instant::now();
        if let Some(inner) = &self.inner {
            inner.mark_if_unset(start);
        }
        PhaseGuard {
            timeline: self,
            open: Some((phase, start, Vec::new())),
        }
    }

    /// Wraps a data iterator: each `next()` that yields an item is a data-loading span while
    /// [`Profiling::DataLoading`] is on, and marks the start of the step.
    pub fn data<I: IntoIterator>(&self, iter: I) -> TimedIter<I::IntoIter> {
        TimedIter {
            iter: iter.into_iter(),
            timeline: self.clone(),
            args: Vec::new(),
        }
    }

    fn record(&self, phase: Phase, name: Cow<'static, str>, start: Instant, args: SpanArgs) {
        let Some(inner) = &self.inner else { return };
        let end = Instant::now();
        inner.mark_if_unset(start);
        inner.sink.record(SpanRecord {
            phase,
            name,
            start,
            end,
            step: unpack(inner.step.load(Ordering::Relaxed)),
            args,
        });
    }
}

/// The trace row of per-module spans ([`Timeline::module_scope`]).
pub const MODULE_ROW: &str = "Module";

impl Inner {
    fn since_base(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    fn mark(&self, at: Instant) {
        let ns = self.since_base(at);
        // Only the first activity of a step sets its start.
        let _ = self
            .step_start
            .compare_exchange(0, ns + 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn mark_if_unset(&self, at: Instant) {
        if self.step_start.load(Ordering::Relaxed) == 0 {
            self.mark(at);
        }
    }

    /// Applies pending windows and works out which profilers are open at `global`; `ended` is
    /// the step that just ended (a closing window's last), `next` the one beginning.
    fn settle(
        &self,
        c: &mut Control,
        global: u64,
        ended: Option<(Mode, u64)>,
        next: Option<(Mode, u64)>,
    ) {
        if c.closed {
            return;
        }
        let now = SystemTime::now();
        let mut bits = 0u8;
        for p in Profiling::ALL {
            let i = p as usize;
            if let Some(w) = c.pending[i].take() {
                c.windows[i] = WindowState::new(w);
            }
            if c.windows[i].contains(global, now) {
                bits |= p.bit();
            }
        }
        let was = self.open.swap(bits, Ordering::Relaxed);
        for p in Profiling::ALL {
            let (before, after) = (was & p.bit() != 0, bits & p.bit() != 0);
            if before != after {
                self.sink.window_changed(WindowChange {
                    profiling: p,
                    open: after,
                    global_step: global,
                    step: if after { next } else { ended },
                });
            }
        }
    }
}

/// A span that ends when dropped ([`Timeline::span`]).
#[must_use = "the span ends when this guard is dropped"]
pub struct PhaseGuard<'a> {
    timeline: &'a Timeline,
    open: Option<(Phase, Instant, SpanArgs)>,
}

impl PhaseGuard<'_> {
    /// Adds an argument to the span.
    pub fn arg(mut self, key: impl Into<Cow<'static, str>>, value: serde_json::Value) -> Self {
        if let Some((_, _, args)) = &mut self.open {
            args.push((key.into(), value));
        }
        self
    }
}

impl Drop for PhaseGuard<'_> {
    fn drop(&mut self) {
        if let Some((phase, start, args)) = self.open.take() {
            let name = phase.default_event_name();
            self.timeline.record(phase, name, start, args);
        }
    }
}

/// An iterator whose `next()` is timed as data loading ([`Timeline::data`]).
pub struct TimedIter<I> {
    iter: I,
    timeline: Timeline,
    args: SpanArgs,
}

impl<I> TimedIter<I> {
    /// How many worker threads or processes load the data: recorded on each data-loading span
    /// (`num_workers`), which the Dataloader rule compares with the core count.
    pub fn workers(mut self, n: usize) -> Self {
        self.args.retain(|(k, _)| k != "num_workers");
        self.args.push(("num_workers".into(), n.into()));
        self
    }

    /// Whether the loader pins its batches in page-locked memory (PyTorch's
    /// `DataLoader(pin_memory=…)`): recorded on each data-loading span (`pin_memory`), which
    /// the Dataloader rule reports and the profiling report shows as a finding when it is off.
    pub fn pin_memory(mut self, pinned: bool) -> Self {
        self.args.retain(|(k, _)| k != "pin_memory");
        self.args.push(("pin_memory".into(), pinned.into()));
        self
    }

    /// The wrapped iterator.
    pub fn into_inner(self) -> I {
        self.iter
    }
}

impl<I: Iterator> Iterator for TimedIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let start = Instant::now();
        let item = self.iter.next();
        if item.is_some() {
            if self.timeline.is_open(Profiling::DataLoading) {
                self.timeline.record(
                    Phase::DataLoading,
                    Phase::DataLoading.default_event_name(),
                    start,
                    self.args.clone(),
                );
            } else if let Some(inner) = &self.timeline.inner {
                inner.mark_if_unset(start);
            }
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}
