//! System-metric lines of their usual shape read in one pass without serde: a one-hour run has
//! two million of them, and serde_json's general reader was most of the time to load one.
//!
//! The path accepts exactly what this crate's writer and SageMaker's monitor write: an object
//! with `Type`, `Dimension`, `NodeId` (strings), `Value`, `Timestamp` (numbers) and an optional
//! `Name` (a string), each key once, in any order, with any JSON whitespace; strings without
//! escapes or control characters. Anything else (an escape, another key, a key twice, a number
//! written as a string or out of `f64`'s range, trailing bytes, bad UTF-8) is not judged here:
//! the caller hands the line to serde_json, which reads it or says why not. Numbers are read
//! by `str::parse::<f64>`, correctly rounded as serde_json is with its `float_roundtrip`
//! feature (on in the workspace), so both give the same bits. Tests hold both paths to the
//! same answer over this crate's lines, SageMaker's layout, every one-byte change and
//! truncation of them, and random numbers.

/// One line read in place: a [`SystemSample`](crate::system::SystemSample)'s fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct FastLine<'a> {
    pub metric_type: &'a str,
    pub name: &'a str,
    pub dimension: &'a str,
    pub value: f64,
    pub node_id: &'a str,
    pub timestamp: f64,
}

/// The bytes of a line and where the reading is.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Takes `byte` after whitespace.
    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (*self.bytes.get(self.at)? == byte).then(|| self.at += 1)
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
        self.at += len + 1;
        std::str::from_utf8(text).ok()
    }

    /// A number as JSON writes one, when it is a finite `f64`.
    fn number(&mut self) -> Option<f64> {
        self.skip_space();
        let rest = &self.bytes[self.at..];
        let digits = |from: usize| {
            rest[from.min(rest.len())..]
                .iter()
                .position(|b| !b.is_ascii_digit())
                .map_or(rest.len(), |n| from + n)
        };
        let mut end = usize::from(rest.first() == Some(&b'-'));
        let int_end = digits(end);
        // One digit at least, and no leading zero before another digit.
        if int_end == end || (rest[end] == b'0' && int_end > end + 1) {
            return None;
        }
        end = int_end;
        if rest.get(end) == Some(&b'.') {
            let frac_end = digits(end + 1);
            if frac_end == end + 1 {
                return None;
            }
            end = frac_end;
        }
        if let Some(b'e' | b'E') = rest.get(end) {
            end += 1;
            if let Some(b'+' | b'-') = rest.get(end) {
                end += 1;
            }
            let exp_end = digits(end);
            if exp_end == end {
                return None;
            }
            end = exp_end;
        }
        // ASCII by construction.
        let value: f64 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
        self.at += end;
        value.is_finite().then_some(value)
    }
}

/// `line` read as a system-metric record, when it has the usual shape (see the module docs);
/// `None` otherwise, whatever it holds.
pub(super) fn parse(line: &[u8]) -> Option<FastLine<'_>> {
    let mut scan = Scan { bytes: line, at: 0 };
    scan.eat(b'{')?;
    let (mut kind, mut name, mut dimension, mut value, mut node, mut time) =
        (None, None, None, None, None, None);
    loop {
        let key = scan.string()?;
        scan.eat(b':')?;
        match key.as_bytes() {
            b"Type" if kind.is_none() => kind = Some(scan.string()?),
            b"Name" if name.is_none() => name = Some(scan.string()?),
            b"Dimension" if dimension.is_none() => dimension = Some(scan.string()?),
            b"Value" if value.is_none() => value = Some(scan.number()?),
            b"NodeId" if node.is_none() => node = Some(scan.string()?),
            b"Timestamp" if time.is_none() => time = Some(scan.number()?),
            _ => return None,
        }
        scan.skip_space();
        match scan.bytes.get(scan.at)? {
            b',' => scan.at += 1,
            b'}' => {
                scan.at += 1;
                break;
            }
            _ => return None,
        }
    }
    scan.skip_space();
    if scan.at != line.len() {
        return None;
    }
    Some(FastLine {
        metric_type: kind?,
        name: name.unwrap_or(""),
        dimension: dimension?,
        value: value?,
        node_id: node?,
        timestamp: time?,
    })
}

#[cfg(test)]
#[path = "system_fast_tests.rs"]
mod tests;
