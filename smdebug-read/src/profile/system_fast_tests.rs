//! The one-pass reader held to serde_json's answer.

use super::*;
use smdebug_format::system::SystemSample;

/// A sample's fields as text, its numbers by their bits.
fn fields(kind: &str, name: &str, dimension: &str, value: f64, node: &str, time: f64) -> String {
    format!(
        "{kind:?} {name:?} {dimension:?} {:x} {node:?} {:x}",
        value.to_bits(),
        time.to_bits()
    )
}

/// serde_json's reading of a line, comparable bit for bit.
fn general(line: &[u8]) -> Option<String> {
    serde_json::from_slice::<SystemSample>(line).ok().map(|s| {
        let names = (&s.metric_type, &s.name, &s.dimension, &s.node_id);
        fields(names.0, names.1, names.2, s.value, names.3, s.timestamp)
    })
}

fn fast(line: &[u8]) -> Option<String> {
    parse(line).map(|s| {
        let names = (s.metric_type, s.name, s.dimension, s.node_id);
        fields(names.0, names.1, names.2, s.value, names.3, s.timestamp)
    })
}

/// Every truncation, one-byte change (to a few telling bytes) and byte removal of `line`:
/// whatever the fast path reads, serde_json reads alike. Returns how many copies it read.
fn agrees_under_damage(line: &[u8]) -> usize {
    let changes = [
        b' ', b'"', b'\\', b'0', b'1', b'9', b'x', b',', b':', b'}', b'{', b'-', b'+', b'.', b'e',
        b'E', b'\t', b'\r', 0, 0x1f, 0x7f, 0xc3, 0xff,
    ];
    smdebug_format::testing::agrees_under_damage(line, &changes, fast, general)
}

/// A line as SageMaker's monitor writes one (Python's `json.dumps`: a space after `,` and `:`).
const SAGEMAKER: &str = r#"{"Name": "cpu0", "Type": "cpu", "Dimension": "CPUUtilization", "Value": 1.6, "NodeId": "algo-1", "Timestamp": 1591748109.2321954}"#;
/// The usual compact line.
const COMPACT: &str = r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":40.5,"NodeId":"algo-1","Timestamp":1795781340.1}"#;

#[cfg(target_os = "linux")]
#[test]
fn lines_of_this_crates_writer_take_the_fast_path() {
    // Real records of this machine, serialized as the writer does (`serde_json::to_vec`).
    let mut probe = smdebug_profiler::testing::HostProbe::new(Some(std::process::id()));
    let mut records = Vec::new();
    probe.sample("algo-1", 1_795_781_340.125, &mut records);
    // workload: time between the two samples, so that rates have an interval.
    std::thread::sleep(std::time::Duration::from_millis(30));
    probe.sample("algo-1", 1_795_781_340.25, &mut records);
    // And every kind of value the writer can meet: integers, tiny and huge, negative zero.
    for (i, value) in [
        0.0,
        -0.0,
        1.0,
        1e-7,
        2.5e-300,
        1.7976931348623157e308,
        123456789.0,
    ]
    .into_iter()
    .enumerate()
    {
        records.push(SystemSample {
            metric_type: "process".into(),
            name: "ProcessRSSBytes".into(),
            dimension: String::new(),
            value,
            node_id: "algo-2".into(),
            timestamp: 1.795781340e9 + i as f64 / 3.0,
        });
    }
    assert!(records.len() > 10, "{records:?}");
    for record in &records {
        let line = serde_json::to_vec(record).unwrap();
        assert!(fast(&line).is_some(), "{}", String::from_utf8_lossy(&line));
        assert_eq!(fast(&line), general(&line));
    }
}

#[test]
fn sagemaker_and_test_data_lines_take_the_fast_path() {
    let mut lines = vec![SAGEMAKER.to_owned(), COMPACT.to_owned()];
    // Every system-metrics line under the workspace's test data, if there are any.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["smdebug-io/tests/data", "smdebug-profiler/tests/data"] {
        for path in json_files(&root.join(dir)) {
            if !path.to_string_lossy().contains("system") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            lines.extend(
                text.lines()
                    .filter(|l| l.contains("\"Dimension\""))
                    .map(str::to_owned),
            );
        }
    }
    for line in &lines {
        assert!(fast(line.as_bytes()).is_some(), "{line}");
        assert_eq!(fast(line.as_bytes()), general(line.as_bytes()), "{line}");
    }
    // Name is optional, keys come in any order, whitespace is JSON's.
    let other = " {\r\n\t\"Timestamp\" : 15.0e2 ,\"NodeId\":\"n\", \"Value\":-0, \"Dimension\":\"\",\"Type\":\"memory\"}\t";
    assert_eq!(parse(other.as_bytes()).unwrap().name, "");
    assert_eq!(fast(other.as_bytes()), general(other.as_bytes()));
}

fn json_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(json_files(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out
}

#[test]
fn damaged_lines_are_read_alike_or_left_to_serde() {
    let process = r#"{"Type":"process","Name":"ProcessRSSBytes","Dimension":"","Value":1.5e9,"NodeId":"algo-1","Timestamp":1795781340}"#;
    let memory = r#"{"Type":"memory","Dimension":"MemoryUsedPercent","Value":-0.0,"NodeId":"algo-1","Timestamp":1.7957813401E9}"#;
    for line in [SAGEMAKER, COMPACT, process, memory] {
        assert!(fast(line.as_bytes()).is_some(), "{line}");
        assert!(agrees_under_damage(line.as_bytes()) > 50, "{line}");
    }
}

#[test]
fn unusual_shapes_are_left_to_serde() {
    let cases = [
        r#"{"Type":"c\"pu","Name":"cpu0","Dimension":"","Value":1,"NodeId":"a","Timestamp":1}"#,
        r#"{"T\u0079pe":"cpu","Name":"cpu0","Dimension":"","Value":1,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":1,"NodeId":"a","Timestamp":1,"Unit":"%"}"#,
        r#"{"Type":"cpu","Type":"gpu","Dimension":"","Value":1,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Name":null,"Dimension":"","Value":1,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":"1","NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":1e400,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":01,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":1.,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":.5,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":+1,"NodeId":"a","Timestamp":1}"#,
        r#"{"Type":"cpu","Dimension":"","Value":1,"NodeId":"a"}"#,
        r#"{"Type":"cpu","Dimension":"","Value":1,"NodeId":"a","Timestamp":1} x"#,
        r#"{"Type":"cpu","Dimension":"","Value":1,"NodeId":"a","Timestamp":1,}"#,
        "{}",
        "[]",
        "",
    ];
    for case in cases {
        assert_eq!(fast(case.as_bytes()), None, "{case}");
    }
}

/// `n` random decimal digits.
fn digits(rng: &mut fastrand::Rng, n: u64) -> String {
    (0..n).map(|_| char::from(rng.u8(b'0'..=b'9'))).collect()
}

#[test]
fn random_numbers_parse_to_serdes_bits() {
    // Seeded, so a failure names a reproducible case.
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    let mut read = 0;
    for round in 0..200_000 {
        let sign = if rng.u64(..4) == 0 { "-" } else { "" };
        let int = match rng.u64(..3) {
            0 => "0".to_owned(),
            _ => {
                let first = char::from(b'1' + rng.u64(..9) as u8);
                let n = rng.u64(..25);
                format!("{first}{}", digits(&mut rng, n))
            }
        };
        let frac = match rng.u64(..3) {
            0 => String::new(),
            _ => {
                let n = 1 + rng.u64(..25);
                format!(".{}", digits(&mut rng, n))
            }
        };
        let exp = match rng.u64(..4) {
            0 => {
                let e = ["e", "E", "e+", "e-", "E-"][rng.u64(..5) as usize];
                format!("{e}{}", rng.u64(..330))
            }
            _ => String::new(),
        };
        let number = match round % 5 {
            // Random bits printed the shortest way, as writers print them.
            0 => {
                let x = f64::from_bits(rng.u64(..));
                if !x.is_finite() {
                    continue;
                }
                format!("{x:?}")
            }
            _ => format!("{sign}{int}{frac}{exp}"),
        };
        let line = format!(
            r#"{{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":{number},"NodeId":"algo-1","Timestamp":{number}}}"#
        );
        let got = fast(line.as_bytes());
        let want = general(line.as_bytes());
        if got.is_some() {
            read += 1;
            assert_eq!(got, want, "{number}");
        } else {
            // Left to serde only when out of range.
            assert!(want.is_none(), "{number} not read by the fast path");
        }
    }
    assert!(read > 150_000, "{read}");
}
