//! `cargo run -p smdebug-profiler --features code-profile --example code_profile -- RUN_DIR`:
//! samples a busy loop in a code-profile window over steps 10–29 and prints where its files
//! went and its top functions. Open the `.svg` in a browser, or the `.pb.gz` with
//! `go tool pprof -top FILE`.

#![forbid(unsafe_code)]

use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_read::profile::ProfilerReader;
use smdebug_storage::LocalStorage;

/// Something to sample: a xorshift loop that cannot be optimised away.
#[inline(never)]
fn busy_step(rounds: u64) -> u64 {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: code_profile RUN_DIR")?;
    let storage = Arc::new(LocalStorage::new(&dir)?);
    let profiler = CodeProfiler::start(CodeProfileConfig::default(), storage.clone())?;
    let mut sink = 0u64;
    for step in 0..40u64 {
        if step == 10 {
            profiler.begin(Some((Mode::Train, step)))?;
        }
        sink ^= busy_step(20_000_000);
        if step == 29 {
            profiler.end(Some((Mode::Train, step)))?;
        }
    }
    let report = profiler.finish()?;
    println!(
        "{} window(s), {} samples ({sink:x})",
        report.written, report.samples
    );
    for window in ProfilerReader::new(storage).code_profiles()?.windows {
        let s = &window.summary;
        println!(
            "{}: {} samples, files {}.*",
            s.steps_label(),
            s.samples,
            window.file.base_key
        );
        for f in s.top_self.iter().take(5) {
            println!("  self  {:5.1}%  {}", f.share * 100.0, f.function);
        }
        for f in s.top_total.iter().take(5) {
            println!("  total {:5.1}%  {}", f.share * 100.0, f.function);
        }
    }
    Ok(())
}
