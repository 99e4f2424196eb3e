//! Trains the example MLP on the digits, recording through smdebug, until it finishes or a rule
//! runner (in this or another process) asks it to stop through the run directory.
//!
//! ```sh
//! cargo run -p smdebug-rules --example train_until_stopped -- /tmp/run vanishing 20
//! # elsewhere:
//! smdebug rules /tmp/run --follow --rule LossNotDecreasing   # with a stop_training action
//! ```
//!
//! Arguments: run directory, bug (`none`, `vanishing`, `dead-relu`, `exploding`), epochs.
//! Prints `steps=<n> stopped=<reason>` at the end.

use smdebug_core::{Hook, SaveConfig};
use smdebug_examples::digits::{self, Digits};
use smdebug_examples::{Bug, TrainConfig, train};
use smdebug_io::stop::StopWatcher;
use smdebug_io::writer::Writer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let run = args
        .get(1)
        .ok_or("usage: train_until_stopped RUN [BUG] [EPOCHS]")?;
    let bug = match args.get(2).map(String::as_str) {
        None | Some("none") => None,
        Some(b) => Some(b.parse::<Bug>()?),
    };
    let epochs = args.get(3).map(|e| e.parse()).transpose()?.unwrap_or(20);

    let (train_set, eval_set) = Digits::load(&digits::default_path())?.split(0.2, 1);
    let writer = Writer::open(run)?;
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(writer)?;
    // The runner may live in another process: its stop request arrives through the run.
    let watcher = StopWatcher::spawn(run, hook.stop_signal())?;
    let cfg = TrainConfig {
        epochs,
        bug,
        ..Default::default()
    };
    let summary = train(&cfg, &train_set, &eval_set, Some(&mut hook));
    // With a pending stop request, close() writes the reason into the end marker.
    hook.close();
    drop(hook);
    watcher.stop();
    println!(
        "steps={} stopped={}",
        summary.steps,
        summary.stopped.map_or("-".to_owned(), |c| c.reason)
    );
    Ok(())
}
