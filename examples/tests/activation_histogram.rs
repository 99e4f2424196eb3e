//! The histogram-over-steps example on a real run: training at a learning rate that kills ReLUs,
//! read back through the Trial, shows the share of dead (exactly zero) activations growing.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_activation_histogram");

/// (step, zero share in percent) of every histogram row the example printed.
fn rows(stdout: &str) -> Vec<(u64, f64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("step")?;
            let mut words = rest.split_whitespace();
            let step = words.next()?.parse().ok()?;
            assert_eq!(words.next(), Some("zeros"), "{l}");
            let share = words.next()?.trim_end_matches('%').parse().ok()?;
            Some((step, share))
        })
        .collect()
}

#[test]
fn dying_relus_show_as_a_growing_share_of_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new(EXE)
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = rows(&stdout);
    // 3 epochs of 45 steps, activations saved every 10th step.
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..135).step_by(10).collect::<Vec<u64>>(),
        "{stdout}"
    );
    let first = rows[0].1;
    let late: f64 = rows[rows.len() - 5..].iter().map(|r| r.1).sum::<f64>() / 5.0;
    assert!(first < 70.0, "a fresh ReLU layer is mostly alive: {first}%");
    assert!(
        late > 90.0,
        "the dying-ReLU run ends mostly dead: {late}%\n{stdout}"
    );

    // Reading the same run again (no training) prints the same rows.
    let again = Command::new(EXE)
        .args(["--run", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(rows, self::rows(&String::from_utf8_lossy(&again.stdout)));
}

#[test]
fn a_missing_tensor_or_run_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Command::new(EXE)
        .args(["--run", dir.path().join("nothing").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("activation_histogram:"));

    let out = dir.path().join("run");
    let ok = Command::new(EXE)
        .args(["--out", out.to_str().unwrap(), "--epochs", "1"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    let bad = Command::new(EXE)
        .args(["--run", out.to_str().unwrap(), "--tensor", "no_such_tensor"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("no_such_tensor"), "{err}");
}
