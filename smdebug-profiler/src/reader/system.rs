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

/// What [`parse_system_chunk`] read of a piece of a system-metrics file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemChunk {
    /// The good records and the bad lines (numbered from the file's start).
    pub lines: SystemLines,
    /// Bytes taken: every complete line, and a last line without its newline when it decoded.
    /// A torn last line is left for the next read.
    pub consumed: usize,
    /// Newlines among the bytes taken.
    pub newlines: usize,
}

/// Decodes one system-metrics file, keeping every good record.
///
/// Blank lines are skipped. A last line without its newline that does not parse is a record
/// still being appended (SageMaker's monitor appends in place): skipped, not a bad line. When
/// `key` is a system-metrics file name, a sample stamped outside the file's window is a bad
/// line ([`SystemFileName::holds`](crate::system::SystemFileName::holds)).
pub fn parse_system_lines_lenient(key: &str, bytes: &[u8]) -> SystemLines {
    parse_system_chunk(key, bytes, 0).lines
}

/// Decodes the bytes of a system-metrics file that follow its first `newlines_before` lines
/// (as [`parse_system_lines_lenient`] decodes a whole file), and says how much of them was
/// taken: a follower reads the file on from `consumed` next time.
pub fn parse_system_chunk(key: &str, bytes: &[u8], newlines_before: usize) -> SystemChunk {
    let file = parse_system_file_key(key);
    let mut out = SystemChunk::default();
    let ends_complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    let mut offset = 0usize;
    for (index, line) in lines.iter().enumerate() {
        if index == last && ends_complete {
            // The nothing after the last newline.
            break;
        }
        let torn_tail = index == last && !ends_complete;
        let end = offset + line.len() + usize::from(!torn_tail);
        let number = newlines_before + index + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            if !torn_tail {
                out.consumed = end;
                out.newlines += 1;
            }
            offset = end;
            continue;
        }
        match serde_json::from_slice::<SystemSample>(line) {
            Ok(sample) => match file.as_ref().and_then(|f| f.misplaced(sample.timestamp)) {
                None => out.lines.samples.push(sample),
                Some(why) => out.lines.bad.push((number, why)),
            },
            Err(_) if torn_tail => break,
            Err(e) => out.lines.bad.push((number, e.to_string())),
        }
        out.consumed = end;
        out.newlines += usize::from(!torn_tail);
        offset = end;
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
    fn a_file_read_in_pieces_gives_what_one_read_gives() {
        let key = "system/incremental/2020061000/1591748100.algo-1.json";
        let text = format!("{LINE}\n\nnot json\n{LINE}\n{LINE}");
        let whole = parse_system_lines_lenient(key, text.as_bytes());
        for cut in 0..=text.len() {
            let first = parse_system_chunk(key, &text.as_bytes()[..cut], 0);
            let rest = parse_system_chunk(key, &text.as_bytes()[first.consumed..], first.newlines);
            let mut samples = first.lines.samples.clone();
            samples.extend(rest.lines.samples);
            let mut bad = first.lines.bad.clone();
            bad.extend(rest.lines.bad);
            assert_eq!(samples, whole.samples, "cut at {cut}");
            assert_eq!(bad, whole.bad, "cut at {cut}");
            assert_eq!(first.consumed + rest.consumed, text.len(), "cut at {cut}");
        }
        assert_eq!(whole.bad, vec![(3, whole.bad[0].1.clone())]);
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
