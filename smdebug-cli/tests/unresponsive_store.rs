//! The reading commands on an object store that accepts connections and never answers (a
//! frozen server): they give up within `--storage-timeout` with an error that says so, and exit
//! non-zero, where they used to wait five minutes in silence.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

/// A listener that accepts every connection and never answers, held open for the test.
fn frozen_store() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().take(64) {
            match conn {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
    });
    (port, thread)
}

#[test]
fn info_on_a_store_that_never_answers_fails_within_its_timeout() {
    let (port, _held) = frozen_store();
    for command in ["info", "steps", "tensors"] {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_smdebug"))
            .args([command, "s3://bucket/run", "--storage-timeout", "3"])
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
