//! What the command-line tests share: the `smdebug` binary this crate built, run with arguments
//! (its output, or its stdout when it must succeed), and Python smdebug's golden runs.
#![allow(dead_code)] // each test binary uses part of this module

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `smdebug` binary of this build, as a command a test adds its arguments and pipes to.
pub fn smdebug_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_smdebug"))
}

/// `smdebug` run with `args` to its end: its status, stdout and stderr.
pub fn smdebug(args: &[&str]) -> Output {
    smdebug_command()
        .args(args)
        .output()
        .expect("the smdebug binary runs")
}

/// The stdout of `smdebug` run with `args`, which must succeed (the panic shows its stderr).
pub fn stdout_ok(args: &[&str]) -> String {
    let out = smdebug(args);
    assert!(
        out.status.success(),
        "smdebug {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Python smdebug's golden run `name` (`smdebug-io/tests/data/golden/`, written by its
/// FileWriter and its framework hooks).
pub fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../smdebug-io/tests/data/golden")
        .join(name)
}
