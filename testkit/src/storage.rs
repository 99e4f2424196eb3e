//! Storage a test puts between a reader or writer and the run: [`Intercepted`] passes every
//! call on to the storage it wraps, but for the calls its [`Intercept`] takes over: counting
//! the reads of event files by thread ([`EventReads`]), holding writes at a gate until the test
//! opens it ([`WriteGate`]), or changing what a listing holds (a test's own [`Intercept`]).

use std::fmt::Debug;
use std::ops::{Deref, Range};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smdebug_storage::Result;
use smdebug_storage::Storage;

/// The calls of a [`Storage`] a test takes over; each is given the wrapped storage, and by
/// default passes the call on to it unchanged.
pub trait Intercept: Debug + Send + Sync {
    /// A write.
    fn put_parts(&self, inner: &dyn Storage, path: &str, parts: Vec<Bytes>) -> Result<()> {
        inner.put_parts(path, parts)
    }

    /// A read of part of a file.
    fn get_range(&self, inner: &dyn Storage, path: &str, range: Range<u64>) -> Result<Bytes> {
        inner.get_range(path, range)
    }

    /// A listing of the paths under `prefix`.
    fn list(&self, inner: &dyn Storage, prefix: &str) -> Result<Vec<String>> {
        inner.list(prefix)
    }

    /// A listing of the paths under `prefix` after `offset`.
    fn list_after(&self, inner: &dyn Storage, prefix: &str, offset: &str) -> Result<Vec<String>> {
        inner.list_after(prefix, offset)
    }
}

/// A storage passing every call on to `inner`, but those `with` takes over. It has no local
/// root (a reader that would go to the disk directly goes through it) and cannot append. It
/// derefs to `with`, so a test asks it what `with` counted or opens `with`'s gate through it.
#[derive(Debug)]
pub struct Intercepted<T> {
    inner: Arc<dyn Storage>,
    with: T,
}

impl<T: Intercept> Intercepted<T> {
    /// `inner` with the calls `with` takes over.
    pub fn new(inner: Arc<dyn Storage>, with: T) -> Arc<Intercepted<T>> {
        Arc::new(Intercepted { inner, with })
    }
}

impl<T> Deref for Intercepted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.with
    }
}

impl<T: Intercept> Storage for Intercepted<T> {
    fn describe(&self) -> &str {
        self.inner.describe()
    }
    fn put_parts(&self, path: &str, parts: Vec<Bytes>) -> Result<()> {
        self.with.put_parts(&*self.inner, path, parts)
    }
    fn get(&self, path: &str) -> Result<Bytes> {
        self.inner.get(path)
    }
    fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes> {
        self.with.get_range(&*self.inner, path, range)
    }
    fn size(&self, path: &str) -> Result<Option<u64>> {
        self.inner.size(path)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.with.list(&*self.inner, prefix)
    }
    fn list_after(&self, prefix: &str, offset: &str) -> Result<Vec<String>> {
        self.with.list_after(&*self.inner, prefix, offset)
    }
    fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path)
    }
}

/// Counts the reads of event files (`get_range` on `events/...`): those made by the thread
/// that made the counter, and those made by other threads (a pool reading ahead).
#[derive(Debug)]
pub struct EventReads {
    caller: ThreadId,
    by_caller: AtomicUsize,
    by_others: AtomicUsize,
}

impl EventReads {
    /// No reads yet; the calling thread is the caller.
    pub fn new() -> EventReads {
        EventReads {
            caller: std::thread::current().id(),
            by_caller: AtomicUsize::new(0),
            by_others: AtomicUsize::new(0),
        }
    }

    /// The event-file reads the caller made.
    pub fn by_caller(&self) -> usize {
        self.by_caller.load(Ordering::Relaxed)
    }

    /// The event-file reads other threads made.
    pub fn by_others(&self) -> usize {
        self.by_others.load(Ordering::Relaxed)
    }

    /// Every event-file read, whichever thread made it.
    pub fn total(&self) -> usize {
        self.by_caller() + self.by_others()
    }
}

impl Default for EventReads {
    fn default() -> EventReads {
        EventReads::new()
    }
}

impl Intercept for EventReads {
    fn get_range(&self, inner: &dyn Storage, path: &str, range: Range<u64>) -> Result<Bytes> {
        if path.starts_with("events/") {
            let count = if std::thread::current().id() == self.caller {
                &self.by_caller
            } else {
                &self.by_others
            };
            count.fetch_add(1, Ordering::Relaxed);
        }
        inner.get_range(path, range)
    }
}

/// Holds every write at a gate until the test opens it, counting the writers held there.
#[derive(Debug, Default)]
pub struct WriteGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    waiting: usize,
}

impl WriteGate {
    /// Waits until a writer is held at the gate; panics after 10 s (a writer that never
    /// reaches storage is a broken build, not a slow one).
    pub fn wait_for_writer(&self) {
        let mut state = self.state.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while state.waiting == 0 {
            assert!(
                Instant::now() < deadline,
                "the writer never reached storage"
            );
            state = self
                .changed
                .wait_timeout(state, Duration::from_millis(50))
                .unwrap()
                .0;
        }
    }

    /// Opens the gate: the writers held there go on, and later writes pass.
    pub fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.changed.notify_all();
    }
}

impl Intercept for WriteGate {
    fn put_parts(&self, inner: &dyn Storage, path: &str, parts: Vec<Bytes>) -> Result<()> {
        {
            let mut state = self.state.lock().unwrap();
            state.waiting += 1;
            self.changed.notify_all();
            while !state.open {
                state = self.changed.wait(state).unwrap();
            }
            state.waiting -= 1;
        }
        inner.put_parts(path, parts)
    }
}
