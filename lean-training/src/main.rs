//! `lean_training [RUN_DIR] [STEPS]`: trains the line with smdebug capture into RUN_DIR
//! (default `./lean-run`) for STEPS steps (default 100), or until a stop request arrives.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use smdebug::capture::EndReason;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let run = args.next().unwrap_or_else(|| "lean-run".to_string());
    let steps = match args.next().map(|s| s.parse::<u64>()) {
        None => 100,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("lean_training: STEPS: {e}");
            return ExitCode::from(2);
        }
    };
    match smdebug_lean_training::train(&run, steps, |_| {}) {
        Ok(o) => {
            // As the end marker words it: `completed`, `stopped: <reason>`.
            let end = o.stopped.map_or(EndReason::Completed, EndReason::Stopped);
            println!("{} steps into {run}, loss {:.6}, {end}", o.steps, o.loss);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lean_training: {e}");
            ExitCode::FAILURE
        }
    }
}
