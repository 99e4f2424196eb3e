//! Memory for the event files a value-by-value reader keeps
//! ([`FirstFetch::ForGood`](super::source::FirstFetch), and the files read ahead of it): blocks
//! of 2 MiB mapped with their pages made at once (`MAP_POPULATE`), the files read into them one
//! after the other.
//!
//! Such a reader keeps every event file of a run it reads (a long run of small steps: 10,000
//! files of 14 KB), each read into memory of its own; fresh memory costs a page fault a 4 KiB
//! page (about 1.7 µs on a busy machine, page faults serialised with the `mprotect` of the
//! pool threads' growing `malloc` arenas), which came to as much as opening and reading the
//! files. In a block, a file costs its share of one `mmap` that makes 512 pages at once, and no
//! `mprotect`.
//!
//! A block counts whole against the trial's heap budget
//! ([`TrialOptions::file_cache_bytes`](super::TrialOptions::file_cache_bytes)) from when it is
//! made until the last file (or value sliced from one) in it is dropped: the budget bounds the
//! memory really held, the parts of blocks no kept file uses any more included. The files in a
//! block are kept as mapped files are, without a length of their own in the budget. When the
//! budget has no room for another block, files are read as before (each into memory of its own,
//! within the budget, or by range).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// A block's size (512 pages of 4 KiB).
pub(crate) const BLOCK: usize = 2 << 20;

/// Files larger than this are not read into a block (one would leave too much of it unused).
pub(crate) const FILE_MAX: u64 = (BLOCK / 4) as u64;

/// A block of anonymous memory, its size counted in a trial's budget until it is dropped.
struct Block {
    /// The mapping, only unmapped (dropped) through this field; its bytes are reached through
    /// `ptr` (disjoint parts of it written by different threads, see [`Arena::read_into`]).
    _map: memmap2::MmapMut,
    ptr: *mut u8,
    /// The budget the block is counted in (the trial's kept bytes, see `Files`).
    budget: Arc<AtomicUsize>,
}

// SAFETY: `ptr` points into `_map`, which lives as long as the block. Each part of the block is
// written by one thread only, before it is shared ([`Arena::read_into`]), then only read.
#[allow(unsafe_code)]
unsafe impl Send for Block {}
#[allow(unsafe_code)]
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        self.budget.fetch_sub(BLOCK, Ordering::Relaxed);
    }
}

/// One file's bytes in a block (what a kept file's `Bytes` owns).
struct Part {
    block: Arc<Block>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for Part {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `start..start + len` lies within the block (see `Arena::read_into`), was
        // written before this part was made and is never written again.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.block.ptr.add(self.start), self.len)
        }
    }
}

/// The block files are read into now, and how much of it is taken.
#[derive(Default)]
pub(crate) struct Arena {
    current: Mutex<Option<(Arc<Block>, usize)>>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Arena")
    }
}

impl Arena {
    /// Reads `len` bytes (at most [`FILE_MAX`], at least one) with `read` into the current
    /// block, or a new one when it has no room left: `reserve` is asked for [`BLOCK`] bytes of
    /// `budget` first (`budget` is given them back when the block goes). `read` writes at the
    /// start of the slice it is given and says how many bytes it wrote; the bytes it wrote come
    /// back, owning their part of the block. `None` when no block can be had (no room in the
    /// budget, no memory to map): nothing was read.
    pub(crate) fn read_into<E>(
        &self,
        len: u64,
        budget: &Arc<AtomicUsize>,
        reserve: impl FnOnce(u64) -> bool,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Option<Result<Bytes, E>> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0 && l as u64 <= FILE_MAX)?;
        let taken = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            match current.as_mut() {
                Some((block, used)) if BLOCK - *used >= len => {
                    *used += len;
                    Some((block.clone(), *used - len))
                }
                _ => None,
            }
        };
        let (block, start) = match taken {
            Some(taken) => taken,
            None => {
                // Made without the lock (mapping it takes its page faults), then the current
                // block: another thread's new block, made meanwhile, is replaced (the rest of
                // it stays unused, counted until its files go).
                let block = new_block(budget, reserve)?;
                let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                *current = Some((block.clone(), len));
                (block, 0)
            }
        };
        // SAFETY: `start..start + len` lies within the block (`used` never passes `BLOCK`) and
        // was handed out just now, to this call only: nobody else reads or writes it. The
        // mapping is zeroed memory, so the slice is initialised.
        #[allow(unsafe_code)]
        let part = unsafe { std::slice::from_raw_parts_mut(block.ptr.add(start), len) };
        Some(read(part).map(|n| {
            Bytes::from_owner(Part {
                block,
                start,
                len: n.min(len),
            })
        }))
    }
}

/// A new block counted in `budget` (when `reserve` makes room for it).
fn new_block(budget: &Arc<AtomicUsize>, reserve: impl FnOnce(u64) -> bool) -> Option<Arc<Block>> {
    if !reserve(BLOCK as u64) {
        return None;
    }
    // Its pages made at once (`MAP_POPULATE`), not a page fault each as files are read into
    // it: a third less time spent on them here. (Transparent huge pages, `MADV_HUGEPAGE`, were
    // slower still: clearing a huge page took longer than the faults of its 512 small ones.)
    let Ok(mut map) = memmap2::MmapOptions::new().len(BLOCK).populate().map_anon() else {
        budget.fetch_sub(BLOCK, Ordering::Relaxed);
        return None;
    };
    let ptr = map.as_mut_ptr();
    Some(Arc::new(Block {
        _map: map,
        ptr,
        budget: budget.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget of `limit` bytes, as `Files::reserve` takes from it.
    fn reserve_within(budget: &Arc<AtomicUsize>, limit: usize) -> impl FnOnce(u64) -> bool + '_ {
        move |len| {
            budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
                    kept.checked_add(len as usize).filter(|&k| k <= limit)
                })
                .is_ok()
        }
    }

    fn fill(byte: u8, n: usize) -> impl FnOnce(&mut [u8]) -> Result<usize, ()> {
        move |buf| {
            buf[..n].fill(byte);
            Ok(n)
        }
    }

    /// Files go one after the other into a block counted whole in the budget, each `Bytes` the
    /// bytes its read wrote (fewer than asked for when the read was short); a file that does
    /// not fit in the rest of the block goes into a new one; the budget gets a block back when
    /// the last file in it (or a slice of one) is dropped.
    #[test]
    fn files_share_blocks_counted_whole_until_their_last_file_goes() {
        let arena = Arena::default();
        let budget = Arc::new(AtomicUsize::new(0));
        let read = |len: u64, byte: u8, n: usize| {
            arena
                .read_into(
                    len,
                    &budget,
                    reserve_within(&budget, 4 * BLOCK),
                    fill(byte, n),
                )
                .unwrap()
                .unwrap()
        };
        let a = read(1000, b'a', 1000);
        let b = read(FILE_MAX, b'b', 10);
        assert_eq!(budget.load(Ordering::Relaxed), BLOCK, "one block");
        assert_eq!(&a[..], &[b'a'; 1000][..]);
        assert_eq!(&b[..], &[b'b'; 10][..], "a short read gives what it read");
        let fillers = [read(FILE_MAX, b'f', 1), read(FILE_MAX, b'f', 1)];
        let rest = BLOCK - 1000 - 3 * FILE_MAX as usize;
        let c = read(rest as u64, b'c', rest);
        assert_eq!(
            budget.load(Ordering::Relaxed),
            BLOCK,
            "the block's last bytes"
        );
        let d = read(1, b'd', 1);
        assert_eq!(budget.load(Ordering::Relaxed), 2 * BLOCK, "a second block");
        let slice = c.slice(5..10);
        drop((a, b, c, fillers));
        assert_eq!(budget.load(Ordering::Relaxed), 2 * BLOCK, "held by a slice");
        assert_eq!(&slice[..], b"ccccc");
        drop(slice);
        assert_eq!(
            budget.load(Ordering::Relaxed),
            BLOCK,
            "the first block went"
        );
        drop(d);
        assert_eq!(
            budget.load(Ordering::Relaxed),
            BLOCK,
            "the current block stays"
        );
        drop(arena);
        assert_eq!(budget.load(Ordering::Relaxed), 0);
    }

    /// Nothing is read (and nothing taken from the budget) when the budget has no room for a
    /// block, for an empty file or one larger than `FILE_MAX`; a failed read is its error.
    #[test]
    fn no_block_no_read() {
        let arena = Arena::default();
        let budget = Arc::new(AtomicUsize::new(0));
        let never = |_: &mut [u8]| -> Result<usize, ()> { panic!("read without a block") };
        assert!(
            arena
                .read_into(10, &budget, reserve_within(&budget, BLOCK - 1), never)
                .is_none()
        );
        assert!(
            arena
                .read_into(0, &budget, reserve_within(&budget, BLOCK), never)
                .is_none()
        );
        assert!(
            arena
                .read_into(FILE_MAX + 1, &budget, reserve_within(&budget, BLOCK), never)
                .is_none()
        );
        assert_eq!(budget.load(Ordering::Relaxed), 0);
        let failed = arena.read_into(10, &budget, reserve_within(&budget, BLOCK), |_| {
            Err::<usize, _>("no such file")
        });
        assert_eq!(failed.unwrap().unwrap_err(), "no such file");
    }
}
