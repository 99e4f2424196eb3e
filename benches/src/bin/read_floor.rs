//! What reading a run one value per call costs at the least, whatever the reader: the floor
//! under Python's `tensor(name).value(step)` loop (BENCHMARKS.md, "From Python").
//!
//! ```text
//! cargo run --release -p smdebug-benches --bin read_floor -- RUN [ROUNDS]
//! ```
//!
//! Such a loop visits every step's event file on the calling thread, and hands the caller every
//! value in memory of its own that the caller keeps (numpy arrays; Python smdebug does the
//! same). Two costs follow from that alone, timed here without any decoding:
//! - `files`: opening and mapping every event file of the run (what the Trial does on a first
//!   visit), and, beside it, opening and closing only, and opening and reading into new memory;
//! - `fresh`: copying every value (as the Trial reads it) into new memory that is kept, and
//!   the same copies into one buffer whose pages were written before: the difference is what
//!   the kernel charges for new pages.

use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let run = args.next().ok_or("usage: read_floor RUN [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(3), |r| r.parse())?;
    let files: Vec<PathBuf> = smdebug_storage::open_storage(&run)?
        .list("events")?
        .into_iter()
        .filter(|p| p.ends_with(".tfevents"))
        .map(|p| Path::new(&run).join(p))
        .collect();
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()?;
    // The values as the Trial reads them, to copy out below.
    let trial = smdebug_read::trial::Trial::open(&run)?;
    let mut values = Vec::new();
    for step in trial.read_steps(None, None)? {
        for v in step?.values {
            values.push(v.value?.data);
        }
    }
    let value_bytes: usize = values.iter().map(|v| v.len()).sum();
    println!(
        "{} event files ({:.0} MiB), {} values ({:.0} MiB)",
        files.len(),
        bytes as f64 / (1 << 20) as f64,
        values.len(),
        value_bytes as f64 / (1 << 20) as f64
    );
    for round in 1..=rounds {
        let per_file = |secs: f64| secs * 1e6 / files.len() as f64;
        let t = Instant::now();
        for f in &files {
            drop(std::fs::File::open(f)?);
        }
        let open = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut maps = Vec::with_capacity(files.len());
        for f in &files {
            let file = std::fs::File::open(f)?;
            // SAFETY: read-only maps of files nothing writes to while this runs.
            #[allow(unsafe_code)]
            let map = unsafe { memmap2::MmapOptions::new().populate().map(&file)? };
            maps.push(map);
        }
        let map = t.elapsed().as_secs_f64();
        drop(maps);
        let t = Instant::now();
        let mut read = Vec::with_capacity(files.len());
        for f in &files {
            read.push(std::fs::read(f)?);
        }
        let fetched = t.elapsed().as_secs_f64();
        drop(read);
        println!(
            "round {round} files: open+close {open:.3} s ({:.1} us/file), open+map {map:.3} s \
             ({:.1} us/file), open+read into new memory {fetched:.3} s ({:.1} us/file)",
            per_file(open),
            per_file(map),
            per_file(fetched)
        );
        let t = Instant::now();
        let kept: Vec<Vec<u8>> = values.iter().map(|v| v.to_vec()).collect();
        let fresh = t.elapsed().as_secs_f64();
        let check: usize = kept.iter().map(Vec::len).sum();
        assert_eq!(check, value_bytes);
        drop(kept);
        // The same copies into one buffer whose pages were all written before the clock.
        let mut buffer = vec![1u8; value_bytes];
        let t = Instant::now();
        let mut at = 0;
        for v in &values {
            buffer[at..at + v.len()].copy_from_slice(v);
            at += v.len();
        }
        let touched = t.elapsed().as_secs_f64();
        assert_eq!(at, buffer.len());
        drop(buffer);
        let per_value = |secs: f64| secs * 1e6 / values.len() as f64;
        println!(
            "round {round} fresh: every value copied into new memory, kept {fresh:.3} s ({:.2} \
             us/value); into memory already written {touched:.3} s ({:.2} us/value)",
            per_value(fresh),
            per_value(touched)
        );
    }
    Ok(())
}
