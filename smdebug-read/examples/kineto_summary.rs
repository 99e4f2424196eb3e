//! Summarizes PyTorch profiler (Kineto) traces: `kineto_summary [--json] [--top N] TRACE...`.
//!
//! Prints the text tables (or the JSON report with `--json`) and, on stderr, the wall time of
//! the ingestion, so the same binary serves for measurements with `/usr/bin/time -v`.

use std::process::ExitCode;
use std::time::Instant;

use smdebug_read::kineto::{render_text, summarize_traces};

fn main() -> ExitCode {
    let mut json = false;
    let mut top = 10usize;
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--top" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => top = n,
                None => {
                    eprintln!("--top needs a number");
                    return ExitCode::from(2);
                }
            },
            _ => paths.push(a),
        }
    }
    if paths.is_empty() {
        eprintln!("usage: kineto_summary [--json] [--top N] TRACE...");
        return ExitCode::from(2);
    }
    let started = Instant::now();
    let report = match summarize_traces(&paths) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let elapsed = started.elapsed();
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", render_text(&report, top));
    }
    eprintln!(
        "ingested {} file(s) in {:.3} s",
        paths.len(),
        elapsed.as_secs_f64()
    );
    ExitCode::SUCCESS
}
