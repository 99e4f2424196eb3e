//! The allocation budget counts what a read allocates, not what the record stores: a record of
//! about 50 bytes of `bool`, `uint8` or `half` with a fill value and a shape whose stored size is
//! within the budget, but whose conversion to f64 (or to JSON numbers) is not, is refused
//! before anything is decoded, naming the file, the tensor and the size. Peak memory is measured.

use smdebug_core::DType;
use smdebug_format::layout;
use smdebug_io::crafted::fill_record_run;
use smdebug_read::Error;
use smdebug_read::trial::{Conversion, StepSelector, Trial, TrialOptions};

/// The process's peak resident memory so far (Linux `VmHWM`), in bytes; `None` elsewhere.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn assert_names(err: &Error, run_file: &str, tensor: &str, claimed: u128) {
    let text = err.to_string();
    assert!(
        matches!(err, Error::Format(smdebug_format::Error::TensorTooLarge { claimed: c, .. }) if *c == claimed),
        "{text}"
    );
    for part in [run_file, tensor, &claimed.to_string(), "f64"] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
}

/// 2^29 elements: 512 MiB stored as uint8 or bool, 1 GiB as half — inside the default 1 GiB
/// budget — but 4.5 to 5 GiB once converted to f64. `value` refuses each before decoding, and
/// the process never holds more than a small fraction of the stored size (the bound is generous:
/// it catches a decode, not a few MiB).
#[test]
fn a_fill_record_whose_f64_conversion_is_over_the_budget_is_refused_before_decoding() {
    let n: i64 = 1 << 29;
    for dtype in [DType::U8, DType::Bool, DType::F16] {
        let dir = tempfile::tempdir().unwrap();
        let (run, record_len) = fill_record_run(dir.path(), "mask", dtype, &[n]);
        assert!(record_len < 100, "{dtype}: a {record_len}-byte record");
        let trial = Trial::open(&run).unwrap();
        let stored = n as u128 * dtype.size() as u128;
        assert!(stored <= u128::from(trial.options().max_tensor_bytes));
        let before = peak_rss();
        let err = trial
            .tensor("mask")
            .unwrap()
            .value(0, None, None)
            .expect_err("over the budget as f64");
        assert_names(
            &err,
            &layout::event_file(0, "worker_0"),
            "mask",
            n as u128 * (dtype.size() as u128 + 8),
        );
        let err = trial
            .tensor("mask")
            .unwrap()
            .values(None, None)
            .expect_err("over the budget as f64");
        assert!(
            matches!(
                err,
                Error::Format(smdebug_format::Error::TensorTooLarge { .. })
            ),
            "{err}"
        );
        // The CLI's JSON: a copy, the f64s and a JSON element each.
        let err = trial
            .tensor_records("mask", StepSelector::One(0), None, None)
            .expect_err("over the budget as JSON");
        assert!(err.to_string().contains("JSON"), "{err}");
        if let (Some(before), Some(after)) = (before, peak_rss()) {
            let grown = after.saturating_sub(before);
            assert!(
                grown < 64 << 20,
                "{dtype}: peak RSS grew by {grown} bytes reading a 50-byte record"
            );
            eprintln!("{dtype}: peak RSS {before} -> {after} bytes");
        }
    }
}

/// Within the budget the same records read, filled as TensorFlow fills them: a small shape
/// gives every element the fill value, in the stored dtype and as f64; the raw read of a
/// shape whose f64 form would not fit still succeeds (it allocates the stored size only).
#[test]
fn a_fill_record_within_the_budget_reads_in_its_own_dtype_and_as_f64() {
    for (dtype, fill) in [(DType::U8, 7.0), (DType::Bool, 1.0), (DType::F16, 1.0)] {
        let dir = tempfile::tempdir().unwrap();
        let (run, _) = fill_record_run(dir.path(), "mask", dtype, &[30, 40]);
        let options = TrialOptions {
            max_tensor_bytes: 1200 * (dtype.size() as u64 + 8),
            ..TrialOptions::default()
        };
        let trial = Trial::open_with(&run, options.clone()).unwrap();
        let t = trial.tensor("mask").unwrap();
        let v = t.value(0, None, None).unwrap();
        assert_eq!(v.shape(), &[30, 40]);
        assert!(v.iter().all(|&x| x == fill), "{dtype}: {v:?}");
        let raw = t.raw(0, None, None).unwrap();
        assert_eq!((raw.dtype(), raw.shape()), (dtype, &[30usize, 40][..]));
        // One byte less and the f64 read is refused; the raw read still fits.
        let tight = TrialOptions {
            max_tensor_bytes: options.max_tensor_bytes - 1,
            ..options
        };
        let trial = Trial::open_with(&run, tight).unwrap();
        let t = trial.tensor("mask").unwrap();
        assert!(matches!(
            t.value(0, None, None),
            Err(Error::Format(smdebug_format::Error::TensorTooLarge { .. }))
        ));
        assert_eq!(t.raw(0, None, None).unwrap().dtype(), dtype);
        // The caller's own conversion is counted too: an array copy costs the dtype's size
        // again (bool and half go through a copy of their own: 2 bytes more an element).
        let array_cost = 1200 * (dtype.size() as u64 + Conversion::Array.extra_bytes(dtype));
        for (limit, fits) in [(array_cost, true), (array_cost - 1, false)] {
            let options = TrialOptions {
                max_tensor_bytes: limit,
                ..TrialOptions::default()
            };
            let trial = Trial::open_with(&run, options).unwrap();
            let read = trial.raw_value_as("mask", 0, None, None, Conversion::Array);
            assert_eq!(read.is_ok(), fits, "{dtype} within {limit}: {read:?}");
        }
    }
}
