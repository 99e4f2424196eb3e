//! The memory tests' counting allocator: it forwards to the system allocator and counts the
//! live bytes, of the whole process and of each thread, and their peak since the last reset.
//! A test binary installs it as its global allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: smdebug_testkit::alloc::Counting = smdebug_testkit::alloc::Counting;
//! ```
//!
//! The process's counts are every thread's: a binary that measures them holds one test (nextest
//! runs each test in a process of its own). A thread's counts ([`thread_peak_during`]) see only
//! what that thread allocates and frees.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// The counting allocator.
pub struct Counting;

/// Bytes allocated and not freed, by every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most `LIVE` has been since it was last reset.
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Bytes this thread allocated less those it freed.
    static THREAD_LIVE: Cell<isize> = const { Cell::new(0) };
    /// The most `THREAD_LIVE` has been since it was last reset.
    static THREAD_PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
    // Not available while the thread's locals are torn down: that thread is not measured then.
    let _ = THREAD_LIVE.try_with(|live| {
        let now = live.get() + by;
        live.set(now);
        let _ = THREAD_PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters only observe
// sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        grew(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes the process holds now (allocated and not freed since it started).
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes the process held at once since the last [`reset_peak`].
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from what the process holds now.
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

/// `f`'s result and the most bytes the process held at once while it ran, beyond what it held
/// before.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let base = live();
    reset_peak();
    let out = f();
    (out, peak() - base)
}

/// `f`'s result and the most bytes this thread held at once while it ran, beyond what it held
/// before: other threads' allocations are not counted.
pub fn thread_peak_during<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let base = THREAD_LIVE.with(Cell::get);
    THREAD_PEAK.with(|p| p.set(base));
    let out = f();
    (out, THREAD_PEAK.with(Cell::get) - base)
}
