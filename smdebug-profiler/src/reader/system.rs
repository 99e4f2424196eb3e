//! Decoding system-metrics files (JSON lines).

use crate::system::{ProfilerError, Result, SystemSample, parse_system_file_key};

/// A lenient read of one system-metrics file: the good records and the lines left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemLines {
    /// The records that decoded, in file order.
    pub samples: Vec<SystemSample>,
    /// The bad lines, in file order: the 1-based line number and why it is not a record.
    pub bad: Vec<(usize, String)>,
}

/// Decodes one system-metrics file, keeping every good record.
///
/// Blank lines are skipped. A last line without its newline that does not parse is a record
/// still being appended (SageMaker's monitor appends in place): skipped, not a bad line. When
/// `key` is a system-metrics file name, a sample stamped outside the file's window is a bad
/// line ([`SystemFileName::holds`](crate::system::SystemFileName::holds)).
pub fn parse_system_lines_lenient(key: &str, bytes: &[u8]) -> SystemLines {
    let file = parse_system_file_key(key);
    let mut out = SystemLines::default();
    let ends_complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    for (index, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<SystemSample>(line) {
            Ok(sample) => match file.as_ref().and_then(|f| f.misplaced(sample.timestamp)) {
                None => out.samples.push(sample),
                Some(why) => out.bad.push((index + 1, why)),
            },
            Err(_) if index == last && !ends_complete => {}
            Err(e) => out.bad.push((index + 1, e.to_string())),
        }
    }
    out
}

/// Decodes one system-metrics file strictly: as [`parse_system_lines_lenient`], but the first
/// bad line is an error naming the file and line.
pub fn parse_system_lines(key: &str, bytes: &[u8]) -> Result<Vec<SystemSample>> {
    let mut read = parse_system_lines_lenient(key, bytes);
    match read.bad.drain(..).next() {
        Some((line, message)) => Err(ProfilerError::MalformedSystemLine {
            key: key.to_owned(),
            line,
            message,
        }),
        None => Ok(read.samples),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1.6,"NodeId":"algo-1","Timestamp":1591748109.2321954}"#;

    #[test]
    fn skips_a_torn_last_line_but_reports_a_bad_middle_line() {
        let torn = format!("{LINE}\n{LINE}\n{{\"Type\":\"cp");
        assert_eq!(parse_system_lines("f", torn.as_bytes()).unwrap().len(), 2);
        let bad = format!("{LINE}\nnot json\n{LINE}\n");
        let err = parse_system_lines("sys/f.json", bad.as_bytes()).unwrap_err();
        assert!(
            matches!(err, ProfilerError::MalformedSystemLine { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("sys/f.json"));
    }

    #[test]
    fn a_sample_outside_its_files_window_is_a_bad_line() {
        let key = "system/incremental/2020061000/1591748100.algo-1.json";
        let good = format!("{LINE}\n");
        assert_eq!(parse_system_lines(key, good.as_bytes()).unwrap().len(), 1);
        for stamp in ["0", "-1e308", "1e308", "1591740000.5", "1591752000"] {
            let line = LINE.replace("1591748109.2321954", stamp);
            let text = format!("{LINE}\n{line}\n");
            let err = parse_system_lines(key, text.as_bytes()).unwrap_err();
            assert!(
                matches!(&err, ProfilerError::MalformedSystemLine { line: 2, message, .. }
                    if message.contains("window")),
                "{stamp}: {err}"
            );
        }
    }

    #[test]
    fn lenient_lines_keep_good_records_and_skip_a_torn_tail() {
        let key = "system/incremental/2020061000/1591748100.algo-1.json";
        let text = format!("{LINE}\nnot json\n{LINE}\n{{\"Type\":\"cp");
        let read = parse_system_lines_lenient(key, text.as_bytes());
        assert_eq!((read.samples.len(), read.bad.len()), (2, 1));
        assert_eq!(read.bad[0].0, 2);
        let stamped_zero = format!("{LINE}\n{}\n", LINE.replace("1591748109.2321954", "0"));
        let read = parse_system_lines_lenient(key, stamped_zero.as_bytes());
        assert_eq!((read.samples.len(), read.bad.len()), (1, 1));
        assert!(read.bad[0].1.contains("window"));
    }

    #[test]
    fn name_is_optional() {
        let line =
            r#"{"Type":"memory","Dimension":"","Value":6.5,"NodeId":"algo-1","Timestamp":1.5}"#;
        let samples = parse_system_lines("f", line.as_bytes()).unwrap();
        assert_eq!(samples[0].name, "");
        assert_eq!(samples[0].value, 6.5);
    }
}
