//! The `smdebug` binary on storage that fails. The reading commands on an object store that
//! accepts connections and never answers (a frozen server) give up within `--storage-timeout`
//! with an error that says so, and exit non-zero, where they used to wait five minutes in
//! silence. `profile` refuses an `--out` that takes no writes before running the command, and
//! exits non-zero when the command succeeded but its metrics were not stored.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::smdebug_command;

/// A listener that accepts every connection and never answers, held open for the test.
fn frozen_store() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().take(256) {
            match conn {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
    });
    (port, thread)
}

#[test]
fn reading_commands_on_a_store_that_never_answers_fail_within_their_timeout() {
    let (port, _held) = frozen_store();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let html = html.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["info"],
        &["steps"],
        &["tensors"],
        &["rules"],
        &["report", "-o", html],
    ];
    for args in commands {
        let command = args[0];
        let started = Instant::now();
        let out = smdebug_command()
            .args(&args[..1])
            .args(["s3://bucket/run", "--storage-timeout", "3"])
            .args(&args[1..])
            .env("AWS_ENDPOINT", format!("http://127.0.0.1:{port}"))
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("did not answer within 3 s"),
            "{command}: the error says the store did not answer: {stderr}"
        );
        assert!(
            took < Duration::from_secs(60),
            "{command} gave up after {took:?}"
        );
    }
}

/// Mounts a tmpfs with `options` on `dir`; false (with the reason printed) where mounting is not
/// permitted.
fn mount_tmpfs(dir: &Path, options: &str) -> bool {
    match Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "tmpfs"])
        .arg(dir)
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs ({}): this test needs root",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("SKIPPED: cannot run mount ({e}): this test needs root");
            false
        }
    }
}

struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

#[test]
fn profile_refuses_a_read_only_out_and_fails_when_a_full_disk_lost_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    if !mount_tmpfs(&ro, "size=1m,ro") {
        return;
    }
    let _ro = Unmount(&ro);
    // The folder exists (so it is not created) but takes no writes.
    let out = smdebug_command()
        .args(["profile", "--interval", "100", "--out"])
        .arg(&ro)
        .args(["--", "touch"])
        .arg(&ran)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be written"), "{stderr}");
    assert!(!ran.exists(), "the command was not run");

    // A disk with room for the probe and a sample or two: the command succeeds, the metrics
    // do not all fit, and the exit status says so.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    if !mount_tmpfs(&full, "size=12k") {
        return;
    }
    let _full = Unmount(&full);
    let out = smdebug_command()
        .args(["profile", "--interval", "100", "--out"])
        .arg(full.join("run"))
        .args(["--", "sh", "-c", "sleep 1.5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("records were not stored"), "{stderr}");
}
