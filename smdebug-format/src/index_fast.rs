//! Index files of their usual shape read in one pass without serde: a long run has one a step,
//! and serde_json's general reader was an eighth of the time to follow a 100,000-step run.
//!
//! The path accepts exactly what Python smdebug's hooks and this crate's writer write: an object
//! with `meta` (`mode` a mode's name, `mode_step` a plain integer, `event_file_name` a string),
//! `tensor_payload` (objects of `tensorname`, `start_idx` and `length`, plain integers) and an
//! empty `shape_payload`, each key once, with any JSON whitespace; strings without escapes or
//! control characters. Anything else (a string with an escape, a number written as a string or
//! with a fraction, another key, a key twice, trailing bytes, bad UTF-8) is not judged here:
//! [`read`] hands it to serde_json (`IndexRef::parse`), which reads it or reports where it is
//! wrong. A test holds both to the same answer over Python smdebug's index
//! files and every one-byte change and truncation of them.

use std::borrow::Cow;

use smdebug_core::Mode;

use super::index::{IndexMetaRef, IndexRef, TensorLocationRef};
use crate::error::Result;

/// An index file read in place: in one pass when it has the usual shape (see the module
/// docs), else through serde_json; `path` names it in errors.
pub fn read<'a>(bytes: &'a [u8], path: &str) -> Result<IndexRef<'a>> {
    Ok(read_with_template(bytes, path)?.0)
}

/// [`read`], and, when the file has the usual shape with a `mode_step` and an
/// `event_file_name`, the file as a [`Template`] for the files of the steps after it.
pub fn read_with_template<'a>(
    bytes: &'a [u8],
    path: &str,
) -> Result<(IndexRef<'a>, Option<Template>)> {
    match parse_spans(bytes) {
        Some((index, spans)) => {
            let index = index.checked(path)?;
            let template = spans.map(|(mode_step, event_file)| Template {
                bytes: bytes.to_vec(),
                mode_step,
                event_file,
            });
            Ok((index, template))
        }
        None => Ok((IndexRef::parse(bytes, path)?, None)),
    }
}

/// An index file of the usual shape and where its `mode_step` (the integer's digits) and its
/// `event_file_name` (the string's text) are in it. A writer's index files differ from step to
/// step only in those two: a file that has every other byte of the template, a `mode_step` of
/// digits (a JSON integer, in a `u64`) and an `event_file_name` that differs only where both
/// have a digit, reads as the template does but for those two values, which
/// [`Template::numbers_of`] gives without reading the file again.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    mode_step: std::ops::Range<usize>,
    event_file: std::ops::Range<usize>,
}

impl Template {
    /// `bytes`' `mode_step` and `event_file_name` when `bytes` differs from the template only
    /// in them (see [`Template`]); `None` otherwise (the file is then read as any other).
    pub fn numbers_of<'a>(&self, bytes: &'a [u8]) -> Option<(u64, &'a str)> {
        let t = &self.bytes[..];
        let (m, e) = (self.mode_step.clone(), self.event_file.clone());
        if bytes.len() != t.len() {
            return None;
        }
        let (first, second) = if m.start < e.start {
            (m.clone(), e.clone())
        } else {
            (e.clone(), m.clone())
        };
        if bytes[..first.start] != t[..first.start]
            || bytes[first.end..second.start] != t[first.end..second.start]
            || bytes[second.end..] != t[second.end..]
        {
            return None;
        }
        // The bytes around the integer are the template's (none a digit), so it is all of it.
        let digits = &bytes[m];
        if digits.len() > 1 && digits[0] == b'0' {
            return None;
        }
        let mut mode_step: u64 = 0;
        for &digit in digits {
            if !digit.is_ascii_digit() {
                return None;
            }
            mode_step = mode_step
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        // Digits in place of digits: no quote, escape or control character, and the text stays
        // UTF-8 as the template's was.
        let name = &bytes[e.clone()];
        let same_but_digits = name
            .iter()
            .zip(&t[e])
            .all(|(a, b)| a == b || (a.is_ascii_digit() && b.is_ascii_digit()));
        if !same_but_digits {
            return None;
        }
        Some((mode_step, std::str::from_utf8(name).ok()?))
    }
}

/// The text of an index file (its UTF-8 checked once, as a whole) and where the reading is.
struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    /// Where `mode_step`'s digits and `event_file_name`'s text are, once read.
    mode_step_at: Option<std::ops::Range<usize>>,
    event_file_at: Option<std::ops::Range<usize>>,
}

impl<'a> Scan<'a> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not taken.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    /// Takes `byte` after whitespace.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string with no escape and no control character, in UTF-8.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        let text = &rest[..len];
        if rest[len] != b'"' || text.iter().any(|&b| b < 0x20) {
            return None;
        }
        let start = self.at;
        self.at += len + 1;
        // Both ends are at ASCII quotes, so on character boundaries.
        self.text.get(start..start + len)
    }

    /// A non-negative integer as JSON writes one (no sign, fraction, exponent or leading zero)
    /// that fits a `u64`.
    fn integer(&mut self) -> Option<u64> {
        self.skip_space();
        let rest = &self.bytes[self.at..];
        let len = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        if len == 0 || (len > 1 && rest[0] == b'0') || len > 20 {
            return None;
        }
        let mut value: u64 = 0;
        for &digit in &rest[..len] {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        self.at += len;
        Some(value)
    }

    /// The members of an object, `member` reading each value after its key; `{` already taken.
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn meta(&mut self) -> Option<IndexMetaRef<'a>> {
        self.eat(b'{')?;
        let (mut mode, mut mode_step, mut event_file) = (None, None, None);
        self.members(|scan, key| {
            match key {
                "mode" if mode.is_none() => mode = Some(Mode::from_name(scan.string()?.trim())?),
                "mode_step" if mode_step.is_none() => {
                    scan.skip_space();
                    let from = scan.at;
                    mode_step = Some(scan.integer()?);
                    scan.mode_step_at = Some(from..scan.at);
                }
                "event_file_name" if event_file.is_none() => {
                    scan.skip_space();
                    let from = scan.at + 1;
                    let name = scan.string()?;
                    scan.event_file_at = Some(from..from + name.len());
                    event_file = Some(name);
                }
                _ => return None,
            }
            Some(())
        })?;
        Some(IndexMetaRef {
            mode: mode?,
            mode_step: mode_step?,
            event_file_name: event_file.map(Cow::Borrowed),
        })
    }

    fn entry(&mut self) -> Option<TensorLocationRef<'a>> {
        self.eat(b'{')?;
        let (mut name, mut start, mut length) = (None, None, None);
        self.members(|scan, key| {
            match key {
                "tensorname" if name.is_none() => name = Some(scan.string()?),
                "start_idx" if start.is_none() => start = Some(scan.integer()?),
                "length" if length.is_none() => length = Some(scan.integer()?),
                _ => return None,
            }
            Some(())
        })?;
        Some(TensorLocationRef {
            tensorname: Cow::Borrowed(name?),
            start_idx: Ok(start?),
            length: Ok(length?),
        })
    }

    fn entries(&mut self) -> Option<Vec<TensorLocationRef<'a>>> {
        self.eat(b'[')?;
        let mut entries = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(entries);
        }
        loop {
            entries.push(self.entry()?);
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(entries);
                }
                _ => return None,
            }
        }
    }
}

/// `bytes` read as an index file, when it has the usual shape (see the module docs); `None`
/// otherwise, whatever it holds.
pub fn parse(bytes: &[u8]) -> Option<IndexRef<'_>> {
    parse_spans(bytes).map(|(index, _)| index)
}

/// Where `mode_step`'s digits and `event_file_name`'s text are in an index file.
type Spans = (std::ops::Range<usize>, std::ops::Range<usize>);

/// [`parse`], with the [`Spans`] when the file has both.
fn parse_spans(bytes: &[u8]) -> Option<(IndexRef<'_>, Option<Spans>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut scan = Scan {
        text,
        bytes,
        at: 0,
        mode_step_at: None,
        event_file_at: None,
    };
    scan.eat(b'{')?;
    let (mut meta, mut entries, mut shapes) = (None, None, false);
    scan.members(|scan, key| {
        match key {
            "meta" if meta.is_none() => meta = Some(scan.meta()?),
            "tensor_payload" if entries.is_none() => entries = Some(scan.entries()?),
            "shape_payload" if !shapes => {
                scan.eat(b'[')?;
                scan.eat(b']')?;
                shapes = true;
            }
            _ => return None,
        }
        Some(())
    })?;
    scan.skip_space();
    if scan.at != bytes.len() {
        return None;
    }
    let spans = scan.mode_step_at.zip(scan.event_file_at);
    Some((
        IndexRef::from_parts(meta?, entries.unwrap_or_default()),
        spans,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde_json's reading of an index gives, comparable.
    fn general(bytes: &[u8]) -> Option<String> {
        IndexRef::parse(bytes, "i.json")
            .ok()
            .map(|i| format!("{:?} {:?}", i.meta, i.tensor_payload))
    }

    fn fast(bytes: &[u8]) -> Option<String> {
        parse(bytes).map(|i| format!("{:?} {:?}", i.meta, i.tensor_payload))
    }

    /// Every truncation and one-byte change (to a few telling bytes) of `bytes`: whatever the
    /// fast path reads, the general reader reads alike. Returns how many copies it read.
    fn agrees_under_damage(bytes: &[u8]) -> usize {
        let changes = [
            b' ', b'"', b'\\', b'0', b'1', b'x', b',', b'}', b']', b'-', 0, 0xff,
        ];
        crate::testing::agrees_under_damage(bytes, &changes, fast, general)
    }

    #[test]
    fn every_python_index_file_is_read_alike_by_both_paths() {
        let (mut files, mut fast_read) = (0, 0);
        for path in crate::test_data::files("", "json") {
            if !path.components().any(|c| c.as_os_str() == "index") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            files += 1;
            let got = fast(&bytes);
            if got.is_some() {
                fast_read += 1;
                assert_eq!(got, general(&bytes), "{}", path.display());
            }
        }
        assert!(files > 500, "{files} index files");
        assert!(
            fast_read * 10 >= files * 9,
            "{fast_read} of {files} read by the fast path"
        );
    }

    #[test]
    fn damaged_copies_are_read_alike_or_left_to_serde() {
        let python = br#"{"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/000000000003/000000000003_worker_0.tfevents"}, "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": 143}, {"tensorname": "gradients/x", "start_idx": 143, "length": 96}], "shape_payload": []}"#;
        let ours = br#"{"meta":{"mode":"EVAL","mode_step":10,"event_file_name":"events/000000000012/000000000012_worker_0.tfevents"},"tensor_payload":[{"tensorname":"a","start_idx":0,"length":88}],"shape_payload":[]}"#;
        for bytes in [&python[..], &ours[..]] {
            assert!(fast(bytes).is_some());
            assert!(agrees_under_damage(bytes) > 10);
        }
    }

    /// A file read through a template reads as the file itself does: the next steps' files of
    /// a writer (one more digit included), and any one-byte change or truncation of them, are
    /// either read alike or left to be read in full.
    #[test]
    fn files_read_through_a_template_read_as_in_full() {
        let file = |step: u64, spaced: bool| {
            let sep = if spaced { ", " } else { "," };
            format!(
                r#"{{"meta":{{"mode":"TRAIN","mode_step":{step}{sep}"event_file_name":"events/{step:012}/{step:012}_worker_0.tfevents"}}{sep}"tensor_payload":[{{"tensorname":"loss","start_idx":0,"length":88}}{sep}{{"tensorname":"m_7","start_idx":88,"length":93}}],"shape_payload":[]}}"#
            )
        };
        let in_full = |bytes: &[u8]| {
            parse(bytes).map(|i| {
                (
                    i.meta.mode_step,
                    i.meta.event_file_name.map(|n| n.into_owned()),
                )
            })
        };
        for spaced in [false, true] {
            for first in [0u64, 7, 98, 1234, 99_999] {
                let bytes = file(first, spaced).into_bytes();
                let (index, template) = read_with_template(&bytes, "i.json").unwrap();
                assert_eq!(index.meta.mode_step, first);
                let template = template.expect("the usual shape");
                for step in first..first + 12 {
                    let next = file(step, spaced).into_bytes();
                    let got = template.numbers_of(&next);
                    let same_length = next.len() == bytes.len();
                    assert_eq!(got.is_some(), same_length, "{first} -> {step}");
                    if let Some((mode_step, name)) = got {
                        assert_eq!(in_full(&next), Some((mode_step, Some(name.to_string()))));
                    }
                    let mut damaged = next.clone();
                    for i in 0..next.len() {
                        for b in [b'0', b'9', b'"', b'\\', b'x', 0, 0xff, b' '] {
                            damaged[i] = b;
                            if let Some((mode_step, name)) = template.numbers_of(&damaged) {
                                assert_eq!(
                                    in_full(&damaged),
                                    Some((mode_step, Some(name.to_string()))),
                                    "{}",
                                    String::from_utf8_lossy(&damaged)
                                );
                            }
                        }
                        damaged[i] = next[i];
                        assert!(template.numbers_of(&next[..i]).is_none());
                    }
                }
            }
        }
        // No template without both numbers, or for a file left to serde.
        let no_file =
            br#"{"meta":{"mode":"TRAIN","mode_step":3},"tensor_payload":[],"shape_payload":[]}"#;
        assert!(read_with_template(no_file, "i.json").unwrap().1.is_none());
        let string_step = br#"{"meta":{"mode":"TRAIN","mode_step":"3","event_file_name":"e"},"tensor_payload":[]}"#;
        assert!(
            read_with_template(string_step, "i.json")
                .unwrap()
                .1
                .is_none()
        );
    }

    #[test]
    fn unusual_shapes_are_left_to_serde() {
        let cases: [&[u8]; 9] = [
            br#"{"meta": {"mode": "TRAIN", "mode_step": "3"}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 3.0}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 3, "extra": 1}}"#,
            br#"{"meta": {"mode": "TR\u0041IN", "mode_step": 3}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 3}, "meta": {"mode": "TRAIN", "mode_step": 3}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 3}, "shape_payload": [{"a": 1}]}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 03}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 18446744073709551616}}"#,
            br#"{"meta": {"mode": "TRAIN", "mode_step": 3}} x"#,
        ];
        for case in cases {
            assert_eq!(fast(case), None, "{}", String::from_utf8_lossy(case));
        }
        // Whitespace anywhere JSON allows it, and a key order of its own, are read.
        let spaced = b" {\n \"tensor_payload\" : [ ] ,\t\"meta\" : { \"mode_step\" : 0 , \"mode\" : \" EVAL \" } }\r\n";
        assert_eq!(fast(spaced), general(spaced));
        assert!(fast(spaced).is_some());
    }
}
