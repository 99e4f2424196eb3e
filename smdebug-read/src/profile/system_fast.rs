//! System-metric lines of their usual shape read in one pass without serde: a one-hour run has
//! two million of them, and serde_json's general reader was most of the time to load one.
//!
//! The path accepts exactly what this crate's writer and SageMaker's monitor write: an object
//! with `Type`, `Dimension`, `NodeId` (strings), `Value`, `Timestamp` (numbers) and an optional
//! `Name` (a string), each key once, in any order, with any JSON whitespace; strings without
//! escapes or control characters. Anything else (an escape, another key, a key twice, a number
//! written as a string or out of `f64`'s range, trailing bytes, bad UTF-8 anywhere in the line) is not judged here:
//! the caller hands the line to serde_json, which reads it or says why not. Numbers are read
//! correctly rounded (an exact division for short decimals, else `str::parse::<f64>`), as
//! serde_json reads them with its `float_roundtrip` feature (on in the workspace), so both give
//! the same bits. Tests hold both paths to the
//! same answer over this crate's lines, SageMaker's layout, every one-byte change and
//! truncation of them, and random numbers.

/// One line read in place: a [`SystemSample`](smdebug_format::system::SystemSample)'s fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct FastLine<'a> {
    pub metric_type: &'a str,
    pub name: &'a str,
    pub dimension: &'a str,
    pub value: f64,
    pub node_id: &'a str,
    pub timestamp: f64,
}

/// The text of a line and where the reading is.
struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

/// The keys of a record.
enum Key {
    Type,
    Name,
    Dimension,
    Value,
    NodeId,
    Timestamp,
}

/// Powers of ten `f64` holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

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

    /// A string with no escape and no control character (the text is UTF-8 already, and a
    /// quote is a character boundary).
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = memchr::memchr(b'"', &self.bytes[start..])?;
        let inside = &self.bytes[start..start + len];
        // No branch a byte: the loop is vectorized.
        if inside
            .iter()
            .fold(false, |bad, &b| bad | (b == b'\\') | (b < 0x20))
        {
            return None;
        }
        self.at = start + len + 1;
        self.text.get(start..start + len)
    }

    /// A key of the record, each known by its text up to the closing quote.
    fn key(&mut self) -> Option<Key> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let (key, len) = match rest.first()? {
            b'T' if rest.starts_with(b"Type\"") => (Key::Type, 4),
            b'T' if rest.starts_with(b"Timestamp\"") => (Key::Timestamp, 9),
            b'N' if rest.starts_with(b"Name\"") => (Key::Name, 4),
            b'N' if rest.starts_with(b"NodeId\"") => (Key::NodeId, 6),
            b'D' if rest.starts_with(b"Dimension\"") => (Key::Dimension, 9),
            b'V' if rest.starts_with(b"Value\"") => (Key::Value, 5),
            _ => return None,
        };
        self.at += len + 1;
        Some(key)
    }

    /// A number as JSON writes one, when it is a finite `f64`: digits as an integer over an
    /// exact power of ten (Clinger's fast path: one correctly rounded division) when they fit
    /// 2^53 and there is no exponent, else through `str::parse`, correctly rounded too.
    fn number(&mut self) -> Option<f64> {
        self.skip_space();
        let start = self.at;
        let bytes = self.bytes;
        let negative = bytes.get(self.at) == Some(&b'-');
        self.at += usize::from(negative);
        let (mut digits, mut count) = (0u64, 0u32);
        let mut take_digits = |at: &mut usize| {
            let from = *at;
            while let Some(&b) = bytes.get(*at).filter(|b| b.is_ascii_digit()) {
                digits = digits.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
                count += 1;
                *at += 1;
            }
            *at - from
        };
        let int_start = self.at;
        let int_len = take_digits(&mut self.at);
        // One digit at least, and no leading zero before another digit.
        if int_len == 0 || (bytes[int_start] == b'0' && int_len > 1) {
            return None;
        }
        let mut fraction = 0;
        if bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            fraction = take_digits(&mut self.at);
            if fraction == 0 {
                return None;
            }
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = bytes.get(self.at) {
            exponent = true;
            self.at += 1;
            if let Some(b'+' | b'-') = bytes.get(self.at) {
                self.at += 1;
            }
            let from = self.at;
            while bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
                self.at += 1;
            }
            if self.at == from {
                return None;
            }
        }
        let value = if !exponent && count <= 15 && fraction < EXACT_POWERS.len() {
            let magnitude = digits as f64 / EXACT_POWERS[fraction];
            if negative { -magnitude } else { magnitude }
        } else {
            self.text[start..self.at].parse().ok()?
        };
        value.is_finite().then_some(value)
    }
}

/// `line` read as a system-metric record, when it has the usual shape (see the module docs);
/// `None` otherwise, whatever it holds.
pub(super) fn parse(line: &[u8]) -> Option<FastLine<'_>> {
    parse_text(std::str::from_utf8(line).ok()?)
}

/// [`parse`] of a line whose UTF-8 was checked with the rest of its file.
pub(super) fn parse_text(text: &str) -> Option<FastLine<'_>> {
    let line = text.as_bytes();
    let mut scan = Scan {
        text,
        bytes: line,
        at: 0,
    };
    scan.eat(b'{')?;
    let (mut kind, mut name, mut dimension, mut value, mut node, mut time) =
        (None, None, None, None, None, None);
    loop {
        let key = scan.key()?;
        scan.eat(b':')?;
        match key {
            Key::Type if kind.is_none() => kind = Some(scan.string()?),
            Key::Name if name.is_none() => name = Some(scan.string()?),
            Key::Dimension if dimension.is_none() => dimension = Some(scan.string()?),
            Key::Value if value.is_none() => value = Some(scan.number()?),
            Key::NodeId if node.is_none() => node = Some(scan.string()?),
            Key::Timestamp if time.is_none() => time = Some(scan.number()?),
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
