//! The code profiler's two background threads. The control thread owns pprof-rs's
//! process-wide sampler and does nothing but install and remove the `SIGPROF` timer as windows
//! open and close, so a window is sampled when it was asked for. The writer thread symbolizes
//! each closed window's stacks and writes its files (summary, flame graph, pprof profile),
//! however long that takes. Built with the `code-profile` feature on Linux.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_storage::Storage;

use crate::code::config::CodeProfileConfig;
use crate::code::counters::{CodeProfileReport, MAX_PENDING_WINDOWS};
use crate::code::encode::{ProfileWindow, flamegraph_svg, pprof_gz};
use crate::code::stacks::{FrameSymbol, Stack, summarize};
use crate::system::{ProfilerError, Result};
use smdebug_format::code_profile::{CodeProfileFile, code_profile_base_key};
use smdebug_format::code_profile::{
    CodeProfileFiles, CodeProfileSummary, SUMMARY_VERSION, WindowStep,
};

/// Set while a window is open anywhere in the process (pprof-rs's sampler is a global).
static PROCESS_WINDOW: AtomicBool = AtomicBool::new(false);

/// Counters and flags shared by the training thread's handle and the writer thread.
#[derive(Default)]
struct Shared {
    in_window: AtomicBool,
    sampling: AtomicBool,
    pending: AtomicU64,
    windows: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
    samples: AtomicU64,
    files: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Set by the control thread once pprof-rs is ready to sample at once (see `warm_up`),
    /// and when it ends.
    ready: Mutex<bool>,
    ready_signal: Condvar,
    /// Set by the control thread when it ends (a panic included).
    done: Mutex<bool>,
    done_signal: Condvar,
}

impl Shared {
    fn report(&self) -> CodeProfileReport {
        CodeProfileReport {
            windows: self.windows.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            samples: self.samples.load(Ordering::Relaxed),
            files: self.files.load(Ordering::Relaxed),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }

    fn fail(&self, message: String) {
        if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
            log::warn!("smdebug-profiler: code-profile window failed: {message}");
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(message);
        }
    }

    fn set_ready(&self) {
        if let Ok(mut ready) = self.ready.lock() {
            *ready = true;
        }
        self.ready_signal.notify_all();
    }

    /// Whether the sampler has been readied (see `warm_up`).
    fn is_ready(&self) -> bool {
        self.ready.lock().map(|r| *r).unwrap_or(false)
    }

    /// Waits up to `timeout` for the control thread to be ready; whether it is.
    fn wait_ready(&self, timeout: Duration) -> bool {
        let Ok(ready) = self.ready.lock() else {
            return false;
        };
        self.ready_signal
            .wait_timeout_while(ready, timeout, |ready| !*ready)
            .map(|(ready, _)| *ready)
            .unwrap_or(false)
    }

    /// Waits up to `timeout` for the writer thread to end; whether it did.
    fn wait_done(&self, timeout: Duration) -> bool {
        let Ok(done) = self.done.lock() else {
            return false;
        };
        self.done_signal
            .wait_timeout_while(done, timeout, |done| !*done)
            .map(|(done, _)| *done)
            .unwrap_or(false)
    }
}

/// Marks the writer thread done when it returns or unwinds.
struct DoneOnExit(Arc<Shared>);

impl Drop for DoneOnExit {
    fn drop(&mut self) {
        self.0.set_ready();
        self.0.sampling.store(false, Ordering::Release);
        if let Ok(mut done) = self.0.done.lock() {
            *done = true;
        }
        self.0.done_signal.notify_all();
    }
}

/// Libraries whose code is never unwound from: a sample landing in them is dropped. The
/// unwinder itself takes locks in libc and libgcc, and a signal arriving while they are
/// held must not unwind through them (pprof-rs's advice).
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];
/// How long the writer retries when the sampler is held outside this crate.
const BUSY_RETRY: Duration = Duration::from_secs(2);
/// Longest wait for another profiler of this process to hand the sampler over: its window
/// has ended (a new one could not begin otherwise), so its writer is only installing or
/// removing the timer.
const HANDOVER_WAIT: Duration = Duration::from_secs(120);

/// Set while a writer thread of this process installs, holds or removes pprof-rs's
/// sampler. A window's `end` releases [`PROCESS_WINDOW`] at once, but its writer may still
/// hold the timer for a moment; the next window's writer waits for it here.
static SAMPLER_HELD: AtomicBool = AtomicBool::new(false);

/// Takes [`SAMPLER_HELD`], waiting for another writer to release it.
fn hold_sampler() -> bool {
    let deadline = Instant::now() + HANDOVER_WAIT;
    while SAMPLER_HELD
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// What the training thread asks of the control thread. `Begin` and `End` carry the time they
/// were asked at, so a window's summary says how much of it was sampled.
enum Message {
    /// Ready pprof-rs's sampler now (see `warm_up`).
    WarmUp,
    Begin(Option<WindowStep>, u64),
    End(Option<WindowStep>, u64),
    Flush(SyncSender<()>),
    Shutdown,
}

/// What the control thread hands the writer thread.
enum Job {
    /// A closed window, or why its samples could not be read.
    Window(std::result::Result<Stopped, String>),
    /// Acknowledged once every window handed over before it is written.
    Flush(SyncSender<()>),
}

pub(crate) struct Inner {
    shared: Arc<Shared>,
    tx: Sender<Message>,
    thread: Option<JoinHandle<()>>,
    finish_timeout: Duration,
}

fn step(at: Option<(Mode, u64)>) -> Option<WindowStep> {
    at.map(|(mode, step)| WindowStep { mode, step })
}

fn stopped() -> ProfilerError {
    ProfilerError::WriterStopped {
        writer: "code profile",
    }
}

impl Inner {
    pub(crate) fn start(config: CodeProfileConfig, storage: Arc<dyn Storage>) -> Result<Inner> {
        let (tx, rx) = mpsc::channel();
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let finish_timeout = config.finish_timeout;
        let control = Control {
            frequency_hz: config.frequency_hz,
            warm_up: config.warm_up,
            shared: Arc::clone(&shared),
        };
        let writer = Writer {
            config,
            storage,
            shared: Arc::clone(&shared),
        };
        let spawn_failed = |source| ProfilerError::Thread {
            thread: "code profile",
            source,
        };
        let writer_thread = std::thread::Builder::new()
            .name("smdebug-code-write".to_owned())
            .spawn(move || writer.run(jobs_rx))
            .map_err(spawn_failed)?;
        // Without its control thread the writer ends as soon as `jobs_tx` is dropped here.
        let thread = std::thread::Builder::new()
            .name("smdebug-code".to_owned())
            .spawn(move || control.run(rx, jobs_tx, writer_thread))
            .map_err(spawn_failed)?;
        Ok(Inner {
            shared,
            tx,
            thread: Some(thread),
            finish_timeout,
        })
    }

    pub(crate) fn begin(&self, start: Option<(Mode, u64)>) -> Result<()> {
        let shared = &self.shared;
        if self.thread.is_none() {
            return Err(stopped());
        }
        if shared.in_window.load(Ordering::Acquire) {
            return Err(ProfilerError::CodeProfileBusy);
        }
        let pending = shared.pending.load(Ordering::Acquire);
        if pending >= MAX_PENDING_WINDOWS {
            return Err(ProfilerError::CodeProfileBacklog { pending });
        }
        if PROCESS_WINDOW
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ProfilerError::CodeProfileBusy);
        }
        shared.pending.fetch_add(1, Ordering::AcqRel);
        if self
            .tx
            .send(Message::Begin(step(start), epoch_us()))
            .is_err()
        {
            shared.pending.fetch_sub(1, Ordering::AcqRel);
            PROCESS_WINDOW.store(false, Ordering::Release);
            return Err(stopped());
        }
        shared.in_window.store(true, Ordering::Release);
        shared.windows.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn end(&self, last: Option<(Mode, u64)>) -> Result<()> {
        if !self.shared.in_window.swap(false, Ordering::AcqRel) {
            return Err(ProfilerError::CodeProfileNoWindow);
        }
        // The writer ends the window (and removes the timer) whichever way this goes: a
        // writer that has stopped removed it on its way out.
        let sent = self.tx.send(Message::End(step(last), epoch_us()));
        PROCESS_WINDOW.store(false, Ordering::Release);
        sent.map_err(|_| stopped())
    }

    pub(crate) fn report(&self) -> CodeProfileReport {
        self.shared.report()
    }

    pub(crate) fn warm_up(&self) -> Result<()> {
        self.tx.send(Message::WarmUp).map_err(|_| stopped())
    }

    pub(crate) fn wait_ready(&self, timeout: Duration) -> bool {
        self.shared.wait_ready(timeout)
    }

    pub(crate) fn running(&self) -> bool {
        self.thread.is_some()
    }

    pub(crate) fn in_window(&self) -> bool {
        self.shared.in_window.load(Ordering::Acquire)
    }

    pub(crate) fn is_sampling(&self) -> bool {
        self.shared.sampling.load(Ordering::Acquire)
    }

    pub(crate) fn flush(&self) -> Result<()> {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        self.tx
            .send(Message::Flush(ack_tx))
            .map_err(|_| stopped())?;
        match ack_rx.recv_timeout(self.finish_timeout) {
            Ok(()) => Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(ProfilerError::CodeProfileTimeout {
                waited: self.finish_timeout,
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
        }
    }

    /// Ends the writer (its open window written first) within the timeout, and reports.
    pub(crate) fn stop(&mut self) -> Result<CodeProfileReport> {
        let Some(thread) = self.thread.take() else {
            return Err(stopped());
        };
        let _ = self.tx.send(Message::Shutdown);
        if self.shared.in_window.swap(false, Ordering::AcqRel) {
            PROCESS_WINDOW.store(false, Ordering::Release);
        }
        if !self.shared.wait_done(self.finish_timeout) {
            // Left to finish on its own: never hang the caller.
            return Err(ProfilerError::CodeProfileTimeout {
                waited: self.finish_timeout,
            });
        }
        thread.join().map_err(|_| ProfilerError::ThreadPanicked {
            thread: "code profile",
        })?;
        Ok(self.shared.report())
    }
}

fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// CPU time the process has used, in clock ticks.
fn process_cpu_ticks() -> Option<u64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    Some(stat.utime + stat.stime)
}

/// CPU time between two readings of [`process_cpu_ticks`], seconds: the ticks are subtracted
/// as integers and divided once, so a whole second of ticks is exactly 1.0.
fn cpu_seconds_between(start: u64, end: u64) -> f64 {
    end.saturating_sub(start) as f64 / procfs::ticks_per_second() as f64
}

/// A window being sampled.
struct Open {
    guard: pprof::ProfilerGuard<'static>,
    start: Option<WindowStep>,
    start_us: u64,
    requested_start_us: u64,
    cpu_start: Option<u64>,
}

/// A window stopped, its stacks not yet resolved.
struct Stopped {
    report: pprof::UnresolvedReport,
    start: Option<WindowStep>,
    end: Option<WindowStep>,
    start_us: u64,
    end_us: u64,
    /// When `begin` and `end` were called; `None` for an end the window was not asked for
    /// (the next window's begin, the profiler's shutdown).
    requested_start_us: u64,
    requested_end_us: Option<u64>,
    cpu_seconds: Option<f64>,
}

/// The control thread: installs and removes the timer, and nothing slower.
struct Control {
    frequency_hz: u32,
    /// Ready the sampler as soon as the thread starts.
    warm_up: bool,
    shared: Arc<Shared>,
}

impl Control {
    fn run(self, rx: Receiver<Message>, jobs: Sender<Job>, writer: JoinHandle<()>) {
        let _done = DoneOnExit(Arc::clone(&self.shared));
        if self.warm_up {
            warm_up();
            self.shared.set_ready();
        }
        let mut open: Option<Open> = None;
        loop {
            let message = rx.recv().unwrap_or(Message::Shutdown);
            match message {
                Message::WarmUp => {
                    // Once per profiler; while a window is open the sampler is warm already.
                    if !self.shared.is_ready() && open.is_none() {
                        warm_up();
                    }
                    self.shared.set_ready();
                }
                Message::Begin(start, requested_us) => {
                    if let Some(previous) = open.take() {
                        self.close(previous, None, None, &jobs);
                    }
                    match self.open(start, requested_us) {
                        Ok(window) => {
                            // The sampler's table is allocated now: later windows start warm.
                            self.shared.set_ready();
                            self.shared.sampling.store(true, Ordering::Release);
                            open = Some(window);
                        }
                        Err(e) => {
                            self.shared.fail(e);
                            self.shared.pending.fetch_sub(1, Ordering::AcqRel);
                        }
                    }
                }
                Message::End(last, requested_us) => {
                    if let Some(window) = open.take() {
                        self.close(window, last, Some(requested_us), &jobs);
                    }
                }
                Message::Flush(ack) => {
                    // Answered by the writer once the windows handed over before it are written.
                    if let Err(mpsc::SendError(Job::Flush(ack))) = jobs.send(Job::Flush(ack)) {
                        let _ = ack.send(());
                    }
                }
                Message::Shutdown => {
                    if let Some(window) = open.take() {
                        self.close(window, None, None, &jobs);
                    }
                    drop(jobs);
                    // The writer ends once it has written what it was handed.
                    let _ = writer.join();
                    return;
                }
            }
        }
    }

    /// Installs the timer, once no other profiler of this process holds the sampler. A
    /// sampler held outside this crate (pprof-rs used directly) is retried for a while.
    fn open(
        &self,
        start: Option<WindowStep>,
        requested_start_us: u64,
    ) -> std::result::Result<Open, String> {
        if !hold_sampler() {
            return Err(format!(
                "another code profiler of this process held the CPU sampler for over {HANDOVER_WAIT:?}"
            ));
        }
        let opened = self.install(start, requested_start_us);
        if opened.is_err() {
            SAMPLER_HELD.store(false, Ordering::Release);
        }
        opened
    }

    fn install(
        &self,
        start: Option<WindowStep>,
        requested_start_us: u64,
    ) -> std::result::Result<Open, String> {
        let deadline = Instant::now() + BUSY_RETRY;
        loop {
            let cpu_start = process_cpu_ticks();
            let built = pprof::ProfilerGuardBuilder::default()
                .frequency(i32::try_from(self.frequency_hz).unwrap_or(i32::MAX))
                .blocklist(&BLOCKLIST)
                .build();
            match built {
                Ok(guard) => {
                    return Ok(Open {
                        guard,
                        start,
                        start_us: epoch_us(),
                        requested_start_us,
                        cpu_start,
                    });
                }
                Err(pprof::Error::Running) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("the CPU sampler could not be started: {e}")),
            }
        }
    }

    /// Stops the timer and hands the window to the writer.
    fn close(
        &self,
        window: Open,
        end: Option<WindowStep>,
        requested_end_us: Option<u64>,
        jobs: &Sender<Job>,
    ) {
        let report = window.guard.report().build_unresolved();
        let end_us = epoch_us();
        let cpu_end = process_cpu_ticks();
        drop(window.guard);
        SAMPLER_HELD.store(false, Ordering::Release);
        self.shared.sampling.store(false, Ordering::Release);
        let job = Job::Window(match report {
            Ok(report) => Ok(Stopped {
                report,
                start: window.start,
                end,
                start_us: window.start_us,
                end_us: end_us.max(window.start_us),
                requested_start_us: window.requested_start_us,
                requested_end_us,
                cpu_seconds: window
                    .cpu_start
                    .zip(cpu_end)
                    .map(|(a, b)| cpu_seconds_between(a, b)),
            }),
            Err(e) => Err(format!("the samples could not be read: {e}")),
        });
        if jobs.send(job).is_err() {
            self.shared
                .fail("the code profile's writer thread had ended".to_owned());
            self.shared.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Readies pprof-rs to sample at once. Its first timer costs a tenth of a second or more (it
/// resolves one backtrace, loading the program's symbols, then allocates its tables), which a
/// window would lose from its start: paid here, before any window. The timer is installed at
/// 1 Hz and removed at once, so no sample is taken. Skipped while another profiler of the
/// process holds the sampler (it is warm then).
fn warm_up() {
    if SAMPLER_HELD
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    if let Ok(guard) = pprof::ProfilerGuardBuilder::default().frequency(1).build() {
        drop(guard);
    }
    SAMPLER_HELD.store(false, Ordering::Release);
}

/// The writer thread: symbolizes and writes each closed window.
struct Writer {
    config: CodeProfileConfig,
    storage: Arc<dyn Storage>,
    shared: Arc<Shared>,
}

impl Writer {
    fn run(self, jobs: Receiver<Job>) {
        for job in jobs {
            match job {
                Job::Window(window) => self.finish(window),
                Job::Flush(ack) => {
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Resolves and writes one window, and counts it.
    fn finish(&self, window: std::result::Result<Stopped, String>) {
        // Symbols and encoders are other people's code: a panic there costs this window, not
        // the writer.
        let outcome = window.and_then(|stopped| {
            catch_unwind(AssertUnwindSafe(|| self.write(stopped)))
                .unwrap_or_else(|_| Err("symbolizing or writing panicked".to_owned()))
        });
        match outcome {
            Ok(samples) => {
                self.shared.written.fetch_add(1, Ordering::Relaxed);
                self.shared.samples.fetch_add(samples, Ordering::Relaxed);
            }
            Err(e) => self.shared.fail(e),
        }
        self.shared.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// Writes the profile, the flame graph and (last, so a listed summary has its files)
    /// the summary. Returns the window's samples.
    fn write(&self, window: Stopped) -> std::result::Result<u64, String> {
        let stacks = resolve(window.report);
        let figures = summarize(&stacks, self.config.top_functions);
        let node = self.config.node.as_str();
        let worker = self.config.worker;
        let file = CodeProfileFile {
            start_us: window.start_us,
            end_us: window.end_us,
            node: node.to_owned(),
            worker,
            base_key: code_profile_base_key(window.start_us, window.end_us, worker, node),
        };
        let mut summary = CodeProfileSummary {
            version: SUMMARY_VERSION,
            node_id: node.to_owned(),
            worker,
            start_time_since_epoch_in_micros: window.start_us,
            end_time_since_epoch_in_micros: window.end_us,
            start_step: window.start,
            end_step: window.end,
            requested_start_us: Some(window.requested_start_us),
            requested_end_us: window.requested_end_us,
            frequency_hz: self.config.frequency_hz,
            samples: figures.samples,
            process_cpu_seconds: window.cpu_seconds,
            functions: figures.functions,
            threads: figures.threads,
            top_self: figures.top_self,
            top_total: figures.top_total,
            shared_root_functions: figures.shared_root_functions,
            files: CodeProfileFiles::default(),
        };
        let label = match summary.steps_label() {
            l if l.is_empty() => format!("{:.1} s window", summary.duration_seconds()),
            l => l,
        };
        let description = format!(
            "{label} · {} samples at {} Hz · node {node}, worker {worker}",
            summary.samples, summary.frequency_hz
        );
        let mut errors = Vec::new();
        let pprof = pprof_gz(
            &stacks,
            &ProfileWindow {
                start_us: window.start_us,
                end_us: window.end_us,
                frequency_hz: self.config.frequency_hz,
                comment: &format!("smdebug code profile: {description}"),
            },
        );
        match pprof {
            Ok(bytes) => match self.put(&file.pprof_key(), bytes) {
                Ok(()) => summary.files.pprof = Some(file.pprof_key()),
                Err(e) => errors.push(e),
            },
            Err(e) => errors.push(format!("profile not encoded: {e}")),
        }
        match flamegraph_svg(&stacks, "Code profile", &description) {
            Ok(Some(svg)) => match self.put(&file.flamegraph_key(), svg) {
                Ok(()) => summary.files.flamegraph = Some(file.flamegraph_key()),
                Err(e) => errors.push(e),
            },
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        let json =
            serde_json::to_vec_pretty(&summary).map_err(|e| format!("summary not encoded: {e}"))?;
        self.put(&file.summary_key(), json)?;
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(summary.samples),
        }
    }

    fn put(&self, key: &str, bytes: Vec<u8>) -> std::result::Result<(), String> {
        self.storage
            .put(key, bytes.into())
            .map(|()| {
                self.shared.files.fetch_add(1, Ordering::Relaxed);
            })
            .map_err(|e| format!("{key} not written: {e}"))
    }
}

/// Resolves every sampled stack to names, files and lines; stacks that resolve alike (one
/// code path on two threads of one name) are merged.
fn resolve(report: pprof::UnresolvedReport) -> Vec<Stack> {
    let mut merged: HashMap<(String, Vec<Vec<FrameSymbol>>), u64> = HashMap::new();
    for (unresolved, count) in report.data {
        let Ok(count) = u64::try_from(count) else {
            continue;
        };
        let frames = pprof::Frames::from(unresolved);
        let thread = frames.thread_name_or_id();
        let symbols = frames
            .frames
            .iter()
            .map(|frame| {
                frame
                    .iter()
                    .map(|symbol| FrameSymbol {
                        name: symbol.name(),
                        system_name: symbol.sys_name().into_owned(),
                        file: symbol.filename.as_ref().map(|p| p.display().to_string()),
                        line: symbol.lineno(),
                    })
                    .collect()
            })
            .collect();
        *merged.entry((thread, symbols)).or_default() += count;
    }
    merged
        .into_iter()
        .map(|((thread, frames), count)| Stack {
            thread,
            frames,
            count,
        })
        .collect()
}
