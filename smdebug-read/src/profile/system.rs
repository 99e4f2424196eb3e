//! Decoding system-metrics files (JSON lines).

use std::borrow::Cow;

use serde::Deserialize;

use super::system_fast;
use super::system_samples::SystemSamples;
use crate::profile::error::{ProfileError, Result};
use smdebug_format::system::{SystemSample, parse_system_file_key};

/// A lenient read of one system-metrics file: the good records and the lines left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemLines {
    /// The records that decoded, in file order.
    pub samples: Vec<SystemSample>,
    /// The bad lines, in file order: the 1-based line number and why it is not a record.
    pub bad: Vec<(usize, String)>,
}

/// The longest line of a system-metrics file that is read (a record is a few hundred bytes);
/// a longer one is skipped by the follower and refused by the strict reader, without being
/// held whole.
pub const MAX_SYSTEM_LINE_BYTES: usize = 1 << 20;

/// The most bytes of a system-metrics file fetched at once: more than a line's limit, so that
/// a line within it always fits in one fetch.
pub const SYSTEM_READ_CHUNK: u64 = 4 * MAX_SYSTEM_LINE_BYTES as u64;

/// The first line of `bytes` longer than `limit` (its start, and its newline if there is one
/// in `bytes`): a line without a newline counts once it is longer.
pub(crate) fn long_line(bytes: &[u8], limit: usize) -> Option<(usize, Option<usize>)> {
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', bytes) {
        if nl - start > limit {
            return Some((start, Some(nl)));
        }
        start = nl + 1;
    }
    (bytes.len() - start > limit).then_some((start, None))
}

/// What [`parse_system_chunk`] read of a piece of a system-metrics file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemChunk {
    /// The good records, grouped by series, in file order.
    pub samples: SystemSamples,
    /// The bad lines, in file order: the 1-based line number (from the file's start) and why
    /// it is not a record.
    pub bad: Vec<(usize, String)>,
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
/// line ([`SystemFileName::holds`](smdebug_format::system::SystemFileName::holds)).
pub fn parse_system_lines_lenient(key: &str, bytes: &[u8]) -> SystemLines {
    let chunk = parse_system_chunk(key, bytes, 0);
    SystemLines {
        samples: chunk.samples.to_samples(),
        bad: chunk.bad,
    }
}

/// Decodes the bytes of a system-metrics file that follow its first `newlines_before` lines
/// (as [`parse_system_lines_lenient`] decodes a whole file), and says how much of them was
/// taken: a follower reads the file on from `consumed` next time.
///
/// A line of the usual shape is read in one pass (`system_fast.rs`), any other by serde_json
/// into borrowed fields; either way its four names are copied only for a series not met
/// before in the chunk ([`SystemSamples`]).
pub fn parse_system_chunk(key: &str, bytes: &[u8], newlines_before: usize) -> SystemChunk {
    let file = parse_system_file_key(key);
    let mut out = SystemChunk::default();
    out.samples
        .reserve(memchr::memchr_iter(b'\n', bytes).count());
    // The UTF-8 of the bytes is checked once, not line by line: the lines within the valid
    // part are read as text.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut offset = 0usize;
    let mut number = newlines_before;
    while offset < bytes.len() {
        let (line, torn_tail, end) = match memchr::memchr(b'\n', &bytes[offset..]) {
            Some(at) => (&bytes[offset..offset + at], false, offset + at + 1),
            None => (&bytes[offset..], true, bytes.len()),
        };
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            if !torn_tail {
                out.consumed = end;
                out.newlines += 1;
            }
            offset = end;
            continue;
        }
        let mut take = |names: [&str; 4], value: f64, timestamp: f64| match file
            .as_ref()
            .and_then(|f| f.misplaced(timestamp))
        {
            None => out.samples.push(names, value, timestamp),
            Some(why) => out.bad.push((number, why)),
        };
        let fast = match text.get(offset..offset + line.len()) {
            Some(line) => system_fast::parse_text(line),
            None => system_fast::parse(line),
        };
        let read = match fast {
            Some(s) => {
                take(
                    [s.node_id, s.metric_type, s.name, s.dimension],
                    s.value,
                    s.timestamp,
                );
                Ok(())
            }
            None => serde_json::from_slice::<SampleLine<'_>>(line).map(|s| {
                let names = [&*s.node_id, &*s.metric_type, &*s.name, &*s.dimension];
                take(names, s.value, s.timestamp)
            }),
        };
        match read {
            Ok(()) => {}
            Err(_) if torn_tail => break,
            Err(e) => out.bad.push((number, e.to_string())),
        }
        out.consumed = end;
        out.newlines += usize::from(!torn_tail);
        offset = end;
    }
    out
}

/// One line of a system-metrics file, its strings borrowed from the line where they have no
/// escapes: [`SystemSample`]'s fields, read with the same rules and the same messages.
#[derive(Deserialize)]
#[serde(expecting = "struct SystemSample")]
struct SampleLine<'a> {
    #[serde(rename = "Type", borrow)]
    metric_type: Cow<'a, str>,
    #[serde(rename = "Name", default, borrow)]
    name: Cow<'a, str>,
    #[serde(rename = "Dimension", borrow)]
    dimension: Cow<'a, str>,
    #[serde(rename = "Value")]
    value: f64,
    #[serde(rename = "NodeId", borrow)]
    node_id: Cow<'a, str>,
    #[serde(rename = "Timestamp")]
    timestamp: f64,
}

#[cfg(test)]
impl SampleLine<'_> {
    fn into_sample(self) -> SystemSample {
        SystemSample {
            metric_type: self.metric_type.into_owned(),
            name: self.name.into_owned(),
            dimension: self.dimension.into_owned(),
            value: self.value,
            node_id: self.node_id.into_owned(),
            timestamp: self.timestamp,
        }
    }
}

/// Decodes one system-metrics file strictly: as [`parse_system_lines_lenient`], but the first
/// bad line is an error naming the file and line.
pub fn parse_system_lines(key: &str, bytes: &[u8]) -> Result<Vec<SystemSample>> {
    let mut read = parse_system_lines_lenient(key, bytes);
    match read.bad.drain(..).next() {
        Some((line, message)) => Err(ProfileError::MalformedSystemLine {
            key: key.to_owned(),
            line,
            message,
        }),
        None => Ok(read.samples),
    }
}

/// Reads system-metrics file `key` strictly, as [`parse_system_lines`] reads its bytes, but in
/// pieces of at most [`SYSTEM_READ_CHUNK`] bytes: a line longer than [`MAX_SYSTEM_LINE_BYTES`]
/// is an error naming it, found without holding it whole. A file gone since it was listed has
/// nothing to read.
pub(crate) fn read_system_file(
    storage: &dyn smdebug_storage::Storage,
    key: &str,
) -> Result<Vec<SystemSample>> {
    let mut samples = Vec::new();
    let Some(size) = storage.size(key)? else {
        return Ok(samples);
    };
    let (mut offset, mut newlines) = (0u64, 0usize);
    while offset < size {
        let end = size.min(offset + SYSTEM_READ_CHUNK);
        let bytes = storage.get_range(key, offset..end)?;
        if let Some((at, _)) = long_line(&bytes, MAX_SYSTEM_LINE_BYTES) {
            return Err(ProfileError::MalformedSystemLine {
                key: key.to_owned(),
                line: newlines + memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1,
                message: format!("a line longer than {MAX_SYSTEM_LINE_BYTES} bytes; not read"),
            });
        }
        let chunk = parse_system_chunk(key, &bytes, newlines);
        if let Some((line, message)) = chunk.bad.into_iter().next() {
            return Err(ProfileError::MalformedSystemLine {
                key: key.to_owned(),
                line,
                message,
            });
        }
        samples.extend(chunk.samples.to_samples());
        if chunk.consumed == 0 {
            // A torn last line (the chunk reached the file's end: a longer one is refused).
            break;
        }
        offset += chunk.consumed as u64;
        newlines += chunk.newlines;
    }
    Ok(samples)
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
            matches!(err, ProfileError::MalformedSystemLine { line: 2, .. }),
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
                matches!(&err, ProfileError::MalformedSystemLine { line: 2, message, .. }
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
            let mut samples = first.samples.clone();
            samples.append(rest.samples);
            let mut bad = first.bad.clone();
            bad.extend(rest.bad);
            assert_eq!(samples.to_samples(), whole.samples, "cut at {cut}");
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

    #[test]
    fn borrowed_lines_read_as_system_sample_reads_them() {
        let lines = [
            LINE,
            r#"{"Type":"c\"pu","Name":"cpu\u0030","Dimension":"\u00e9\ud83d\ude00","Value":1.6,"NodeId":"algo\\1\n","Timestamp":1591748109.2321954}"#,
            r#"{"Type":"memory","Dimension":"MemoryUsedPercent","Value":6.5,"NodeId":"algo-1","Timestamp":1591748109.5}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1.6,"NodeId":"algo-1","Timestamp":1591748109.2,"Unit":"%","Extra":[1,{"a":null}]}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":2,"NodeId":"algo-1","Timestamp":1591748109}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1.5e2,"NodeId":"algo-1","Timestamp":1.5917481092321954E9}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":-1e-7,"NodeId":"algo-1","Timestamp":15917481.09e2}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":18446744073709551615,"NodeId":"algo-1","Timestamp":-9223372036854775808}"#,
            r#"  { "NodeId" : "algo-1" , "Timestamp" : 1591748109.25 , "Value" : 0 , "Dimension" : "" , "Type" : "i/o" }  "#,
            r#"{"T\u0079pe":"gpu","Name":"gpu0","Dimension":"GPUUtilization","Value":50.0,"NodeId":"algo-1","Timestamp":1591748109.0}"#,
            // Refused, each with serde's message for `SystemSample`.
            r#"{"Type":"cpu","Name":null,"Dimension":"","Value":1.6,"NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":5,"Name":"cpu0","Dimension":"","Value":1.6,"NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":1.6,"NodeId":"algo-1"}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":"1.6","NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":null,"NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":1e400,"NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":"cpu","Type":"gpu","Name":"cpu0","Dimension":"","Value":1,"NodeId":"algo-1","Timestamp":1.5}"#,
            r#"{"Type":"cpu","Name":"cpu0","Dimension":"","Value":1,"NodeId":"algo-1","Timestamp":1.5} x"#,
            r#"{"Type":"cpu","Name":"c\qpu0","Dimension":"","Value":1,"NodeId":"algo-1","Timestamp":1.5}"#,
            "[1]",
            "5",
            "\"x\"",
            "{}",
            "not json",
        ];
        let mut good = 0;
        for line in lines {
            let new = serde_json::from_slice::<SampleLine<'_>>(line.as_bytes())
                .map(SampleLine::into_sample)
                .map_err(|e| e.to_string());
            let old =
                serde_json::from_slice::<SystemSample>(line.as_bytes()).map_err(|e| e.to_string());
            assert_eq!(new, old, "{line}");
            good += usize::from(new.is_ok());
        }
        assert_eq!(good, 10);
        // And through a whole file: the same samples, the same bad lines and messages.
        let text = lines.join("\n");
        let read = parse_system_lines_lenient("f", text.as_bytes());
        let expected: Vec<SystemSample> = lines
            .iter()
            .filter_map(|l| serde_json::from_slice(l.as_bytes()).ok())
            .collect();
        assert_eq!(read.samples, expected);
        let bad: Vec<(usize, String)> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                serde_json::from_slice::<SystemSample>(l.as_bytes())
                    .err()
                    .map(|e| (i + 1, e.to_string()))
            })
            // The last line has no newline: a torn tail, left for the next read.
            .filter(|&(n, _)| n < lines.len())
            .collect();
        assert_eq!(read.bad, bad);
        assert_eq!(read.samples[1].metric_type, "c\"pu");
        assert_eq!(read.samples[1].node_id, "algo\\1\n");
    }

    /// What a file reads as when each line goes through serde_json alone: the reference the
    /// one-pass reader is held to.
    fn through_serde(key: &str, text: &[u8]) -> SystemLines {
        let file = parse_system_file_key(key);
        let mut out = SystemLines::default();
        let pieces: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        for (i, line) in pieces.iter().enumerate() {
            let torn = i + 1 == pieces.len();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<SystemSample>(line) {
                Ok(s) => match file.as_ref().and_then(|f| f.misplaced(s.timestamp)) {
                    None => out.samples.push(s),
                    Some(why) => out.bad.push((i + 1, why)),
                },
                Err(_) if torn => {}
                Err(e) => out.bad.push((i + 1, e.to_string())),
            }
        }
        out
    }

    #[test]
    fn files_of_damaged_lines_read_as_serde_reads_each_line() {
        let key = "system/incremental/2020061000/1591748100.algo-1.json";
        let sagemaker = r#"{"Name": "cpu0", "Type": "cpu", "Dimension": "CPUUtilization", "Value": 1.6, "NodeId": "algo-1", "Timestamp": 1591748109.2321954}"#;
        let memory = r#"{"Type":"memory","Dimension":"MemoryUsedPercent","Value":6.5,"NodeId":"algo-1","Timestamp":1591748110}"#;
        let mut text = Vec::new();
        for line in [LINE, sagemaker, memory] {
            for at in 0..line.len() {
                for byte in [
                    b' ', b'"', b'\\', b'1', b'9', b'x', b',', b'}', b'-', b'e', b'\n', 0, 0xff,
                ] {
                    let mut copy = line.as_bytes().to_vec();
                    copy[at] = byte;
                    text.extend_from_slice(&copy);
                    text.push(b'\n');
                }
                text.extend_from_slice(&line.as_bytes()[..at]);
                text.push(b'\n');
            }
        }
        // And a torn tail.
        text.extend_from_slice(&LINE.as_bytes()[..40]);
        let read = parse_system_lines_lenient(key, &text);
        let want = through_serde(key, &text);
        assert_eq!(read.samples, want.samples);
        assert_eq!(read.bad, want.bad);
        assert!(read.samples.len() > 500 && read.bad.len() > 2000);
        assert!(read.bad.iter().any(|(_, why)| why.contains("window")));
        // Read in two pieces, cut anywhere in a few lines' span: the same.
        for cut in (0..2000).step_by(7) {
            let first = parse_system_chunk(key, &text[..cut], 0);
            let rest = parse_system_chunk(key, &text[first.consumed..], first.newlines);
            let mut samples = first.samples;
            samples.append(rest.samples);
            assert_eq!(samples.to_samples(), want.samples, "cut at {cut}");
            assert_eq!([first.bad, rest.bad].concat(), want.bad, "cut at {cut}");
        }
    }
}
