//! The bounded queue between the training thread and the writer thread.
//!
//! Tensor records count against a record capacity and a byte budget; control messages (end of
//! step, collections, close, flush) are tiny and always enqueued, so a full queue never loses the
//! end of a step. With [`OverflowPolicy::Drop`] a tensor that does not fit is dropped and counted;
//! with [`OverflowPolicy::Block`] the sender waits for room.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use smdebug_core::{Record, TensorRecord};

use super::shared::{OverflowPolicy, Shared};

pub(crate) enum Msg {
    Record(Record),
    /// Answer on the channel once everything queued before has been processed.
    Flush(std::sync::mpsc::SyncSender<()>),
    /// Publish what is buffered and stop.
    Shutdown,
}

/// Whether `msg` holds data (a tensor or string tensor record): data counts against the
/// queue's capacity and may be dropped; control messages never are.
fn is_data(msg: &Msg) -> bool {
    matches!(msg, Msg::Record(Record::Tensor(_) | Record::Strings(_)))
}

/// What a queued record costs besides its data and name: its slot in the queue. Counted in the
/// byte budget, so a queue of many small records (scalars) is held to it too.
const RECORD_SLOT_BYTES: usize = std::mem::size_of::<(Msg, usize)>();

/// Slots the queue keeps once drained.
const IDLE_SLOTS: usize = 1024;

struct State {
    items: VecDeque<(Msg, usize)>,
    tensors: usize,
    bytes: usize,
    /// The writer thread has exited: nothing will drain the queue any more.
    consumer_gone: bool,
    /// The writer thread waits on `not_empty`; senders wake it only then (a wake is a system
    /// call, paid per record otherwise).
    consumer_waiting: bool,
    /// Times a sender woke the writer thread.
    wakes: u64,
    /// Senders waiting on `not_full` (`OverflowPolicy::Block`).
    producers_waiting: usize,
    /// Records the writer thread is done with, freed by the next control message's sender. The
    /// training thread allocated them; freeing them there keeps the two threads off each other's
    /// allocator locks (glibc's arenas: a cross-thread free takes the owner's arena lock).
    spent: Vec<TensorRecord>,
}

pub(crate) struct Queue {
    state: Mutex<State>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
    max_bytes: usize,
    shared: Arc<Shared>,
}

impl Queue {
    pub fn new(capacity: usize, max_bytes: usize, shared: Arc<Shared>) -> Queue {
        Queue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                tensors: 0,
                bytes: 0,
                consumer_gone: false,
                consumer_waiting: false,
                wakes: 0,
                producers_waiting: 0,
                spent: Vec::new(),
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity: capacity.max(1),
            max_bytes,
            shared,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The queue's state is consistent at every unlock; a panic elsewhere cannot break it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fits(&self, st: &State, size: usize) -> bool {
        st.tensors < self.capacity
            && (st.bytes == 0 || st.bytes.saturating_add(size) <= self.max_bytes)
    }

    /// Enqueues a data record (tensor or strings) of `size` bytes under `policy`.
    pub fn push_tensor(&self, record: Record, size: usize, policy: OverflowPolicy) {
        let size = size.saturating_add(RECORD_SLOT_BYTES);
        let mut st = self.lock();
        loop {
            if st.consumer_gone {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if self.fits(&st, size) {
                break;
            }
            match policy {
                OverflowPolicy::Drop => {
                    self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                OverflowPolicy::Block => {
                    st.producers_waiting += 1;
                    st = self.not_full.wait(st).unwrap_or_else(|p| p.into_inner());
                    st.producers_waiting -= 1;
                }
            }
        }
        st.tensors += 1;
        st.bytes += size;
        st.items.push_back((Msg::Record(record), size));
        // A data record wakes the writer thread only once an eighth of the queue is taken (so
        // it is awake long before the queue is full); otherwise the control message that
        // follows does (the end of the step, a flush, the close). The writer publishes a step
        // at its end in any case, so waking it for each record of a step only woke it more
        // often, each wake taking a core from the training loop's threads.
        if st.tensors >= self.capacity.div_ceil(8) || st.bytes >= self.max_bytes / 8 {
            self.wake_consumer(st);
        }
    }

    /// Unlocks, then wakes the writer thread if it is waiting.
    fn wake_consumer(&self, mut st: MutexGuard<'_, State>) {
        let waiting = st.consumer_waiting;
        if waiting {
            st.wakes += 1;
        }
        drop(st);
        if waiting {
            self.not_empty.notify_one();
        }
    }

    /// Enqueues a control message (never dropped while the writer thread runs). Returns false
    /// when the writer thread is gone.
    pub fn push_control(&self, msg: Msg) -> bool {
        let mut st = self.lock();
        if st.consumer_gone {
            return false;
        }
        st.items.push_back((msg, 0));
        let spent: Vec<TensorRecord> = st.spent.drain(..).collect();
        self.wake_consumer(st);
        drop(spent);
        true
    }

    /// Takes the next message, waiting for one, and hands over the records in `spent` (see
    /// `State::spent`).
    pub fn pop(&self, spent: &mut Vec<TensorRecord>) -> Msg {
        let mut st = self.lock();
        st.spent.append(spent);
        loop {
            if let Some((msg, size)) = st.items.pop_front() {
                if is_data(&msg) {
                    st.tensors -= 1;
                    st.bytes -= size;
                    let waiting = st.producers_waiting > 0;
                    drop(st);
                    if waiting {
                        self.not_full.notify_all();
                    }
                }
                return msg;
            }
            // Drained: a backlog's slots (up to the record capacity's) are let go.
            if st.items.capacity() > IDLE_SLOTS {
                st.items.shrink_to(IDLE_SLOTS);
            }
            st.consumer_waiting = true;
            st = self.not_empty.wait(st).unwrap_or_else(|p| p.into_inner());
            st.consumer_waiting = false;
        }
    }

    /// Called by the writer thread when it exits: senders stop waiting and drop from now on.
    pub fn consumer_gone(&self) {
        let mut st = self.lock();
        st.consumer_gone = true;
        let dropped = st.items.iter().filter(|(m, _)| is_data(m)).count();
        st.items.clear();
        st.tensors = 0;
        st.bytes = 0;
        drop(st);
        if dropped > 0 {
            self.shared
                .dropped
                .fetch_add(dropped as u64, Ordering::Relaxed);
        }
        self.not_full.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_core::{Mode, StepKey, Tensor, TensorRecord};

    fn record(step: u64) -> Record {
        Record::Tensor(TensorRecord {
            name: "w".to_string(),
            key: StepKey {
                step,
                mode: Mode::Train,
                mode_step: step,
            },
            tensor: Tensor::from_vec(&[1.0f32; 4], vec![4]).unwrap(),
            to_events: true,
            tb_histogram: false,
            tb_scalar: false,
        })
    }

    fn waiting_consumer(queue: &Arc<Queue>) -> std::sync::mpsc::Receiver<Vec<&'static str>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let q = queue.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                let kind = match q.pop(&mut Vec::new()) {
                    Msg::Record(Record::Tensor(_)) => "tensor",
                    Msg::Record(Record::EndStep { .. }) => "end",
                    _ => "other",
                };
                got.push(kind);
                if kind != "tensor" {
                    break;
                }
            }
            let _ = tx.send(got);
        });
        rx
    }

    fn wait_for_waiting_consumer(queue: &Queue) {
        smdebug_storage::testing::wait_until(
            std::time::Duration::from_secs(60),
            "the writer thread waiting",
            || queue.lock().consumer_waiting,
        );
    }

    #[test]
    fn a_steps_records_wake_the_writer_once_at_its_end() {
        let queue = Arc::new(Queue::new(1024, 64 << 20, Arc::new(Shared::default())));
        let got = waiting_consumer(&queue);
        wait_for_waiting_consumer(&queue);
        for _ in 0..5 {
            queue.push_tensor(record(3), 16, OverflowPolicy::Drop);
        }
        assert_eq!(
            queue.lock().wakes,
            0,
            "a record of the step woke the writer"
        );
        assert!(queue.push_control(Msg::Record(Record::EndStep { step: 3 })));
        let got = got
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the writer thread took the step");
        assert_eq!(
            got,
            ["tensor", "tensor", "tensor", "tensor", "tensor", "end"]
        );
        assert_eq!(queue.lock().wakes, 1);
    }

    #[test]
    fn records_filling_an_eighth_of_the_queue_wake_the_writer_before_its_end() {
        let queue = Arc::new(Queue::new(16, 64 << 20, Arc::new(Shared::default())));
        let _got = waiting_consumer(&queue);
        wait_for_waiting_consumer(&queue);
        queue.push_tensor(record(3), 16, OverflowPolicy::Drop);
        assert_eq!(queue.lock().wakes, 0);
        queue.push_tensor(record(3), 16, OverflowPolicy::Drop);
        assert_eq!(
            queue.lock().wakes,
            1,
            "two of 16 records did not wake the writer"
        );
        // So do bytes: one record of an eighth of the byte budget.
        let queue = Arc::new(Queue::new(1024, 800, Arc::new(Shared::default())));
        let _got = waiting_consumer(&queue);
        wait_for_waiting_consumer(&queue);
        queue.push_tensor(record(3), 100, OverflowPolicy::Drop);
        assert_eq!(
            queue.lock().wakes,
            1,
            "an eighth of the bytes did not wake the writer"
        );
    }
}
