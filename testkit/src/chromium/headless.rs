//! Chromium run headless: the flags every run starts with, and one run on the command line.

use std::path::Path;
use std::process::Command;

/// The flags every headless run starts with: no sandbox or GPU, and nothing that reaches the
/// network or a user profile on its own.
pub(super) const HEADLESS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
];

/// Runs Chromium once with its profile in `profile`, `args` after the headless flags (with its
/// log on stderr and 10 s of virtual time for the page's scripts): its stdout and stderr. Panics
/// when it fails.
pub fn run_headless(binary: &Path, profile: &Path, args: &[String]) -> (String, String) {
    let output = Command::new(binary)
        .args(HEADLESS)
        .args(["--enable-logging=stderr", "--virtual-time-budget=10000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "chromium failed ({}): {stderr}",
        output.status
    );
    (stdout, stderr)
}
