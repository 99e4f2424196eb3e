//! What a hook-config file listing millions of `save_steps` costs: the time and the peak memory
//! (the process's `VmHWM`) of reading and checking it, laying it over the code's settings, and
//! asking its schedule about steps.
//!
//! ```sh
//! cargo run --release -p smdebug-io --example hook_config_cost             # 3,000,000 steps as "0,1,2,…"
//! cargo run --release -p smdebug-io --example hook_config_cost -- array    # the same as a JSON list
//! cargo run --release -p smdebug-io --example hook_config_cost -- FILE     # a file of your own
//! ```

use std::path::PathBuf;
use std::time::Instant;

use smdebug_core::{HookConfig, Mode};
use smdebug_io::sagemaker::HookConfigFile;

const STEPS: u64 = 3_000_000;

/// The process's peak resident memory so far, in MB (Linux).
fn peak_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let arg = std::env::args().nth(1);
    let dir = tempfile::tempdir().unwrap();
    let path = match arg.as_deref() {
        None | Some("array") => {
            // Written a step at a time, so that making the file costs no memory of its own.
            use std::io::Write;
            let path = dir.path().join("debughookconfig.json");
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            let (open, close) = if arg.is_some() {
                ("[", "]")
            } else {
                ("\"", "\"")
            };
            write!(out, "{{\"HookParameters\": {{\"save_steps\": {open}").unwrap();
            for step in 0..STEPS {
                let sep = if step == 0 { "" } else { "," };
                write!(out, "{sep}{step}").unwrap();
            }
            write!(out, "{close}}}}}").unwrap();
            out.flush().unwrap();
            path
        }
        Some(file) => PathBuf::from(file),
    };
    let size = std::fs::metadata(&path).unwrap().len();
    let before = peak_mb();
    let started = Instant::now();
    let file = HookConfigFile::read(&path)
        .unwrap()
        .expect("the file is there");
    let config = file.over(HookConfig::default()).unwrap();
    drop(file);
    let read = started.elapsed();
    let started = Instant::now();
    let probes = 10_000u64;
    let due = (0..probes)
        .filter(|i| {
            config
                .save_config
                .should_save(Mode::Train, i * (STEPS / probes) + i % 7)
        })
        .count();
    let asked = started.elapsed();
    println!(
        "{}: {:.1} MB; read, checked and laid over the code's settings in {:.2} s; \
         {probes} steps asked in {:.3} s ({due} due); peak memory {:.0} MB ({:.0} MB before)",
        path.display(),
        size as f64 / 1e6,
        read.as_secs_f64(),
        asked.as_secs_f64(),
        peak_mb(),
        before
    );
}
