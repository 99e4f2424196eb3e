//! Showing names from other people's files on a terminal, and durations in the unit that fits.

use std::borrow::Cow;

/// `name` with every character that could act on a terminal instead of being shown written as
/// an escape (`\u{1b}`, `\n`): C0 and C1 controls, DEL, and the Unicode bidirectional and
/// zero-width formatting characters that reorder or hide the text around them. Anything else,
/// backslashes included, is kept as it is, so ordinary names print unchanged.
///
/// For text output only; JSON output has its own escaping.
///
/// ```
/// use smdebug_core::text::escape_controls;
/// assert_eq!(escape_controls("fc1.weight"), "fc1.weight");
/// assert_eq!(escape_controls("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
/// assert_eq!(escape_controls("x\u{202e}y\u{9b}"), "x\\u{202e}y\\u{9b}");
/// ```
pub fn escape_controls(name: &str) -> Cow<'_, str> {
    if !name.chars().any(acts_on_terminal) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if matches!(c, '\n' | '\t' | '\r' | '\0') {
            out.extend(c.escape_debug());
        } else if acts_on_terminal(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A duration in seconds in the unit that fits it, three significant digits: `412 µs`,
/// `1.3 ms`, `12.5 ms`, `3.20 s`, `2 min 05 s`, `1 h 02 min` (never `0.000 s` for a
/// sub-millisecond step). The dashboard's `dur` (smdebug-serve's `lib.js`) writes the same.
///
/// ```
/// use smdebug_core::text::duration;
/// assert_eq!(duration(0.000412), "412 µs");
/// assert_eq!(duration(0.0013), "1.3 ms");
/// assert_eq!(duration(0.0009996), "1 ms");
/// assert_eq!(duration(3.2), "3.20 s");
/// assert_eq!(duration(125.0), "2 min 05 s");
/// assert_eq!(duration(3720.0), "1 h 02 min");
/// assert_eq!(duration(179.6), "3 min 00 s");
/// assert_eq!(duration(0.0), "0 s");
/// assert_eq!(duration(-0.002), "-2 ms");
/// assert_eq!(duration(f64::NAN), "NaN s");
/// ```
pub fn duration(seconds: f64) -> String {
    if seconds.is_nan() {
        return "NaN s".into();
    }
    if seconds.is_infinite() {
        return if seconds > 0.0 { "+Inf s" } else { "-Inf s" }.into();
    }
    let a = seconds.abs();
    if a == 0.0 {
        return "0 s".into();
    }
    // Three significant digits, trailing zeros after the point dropped.
    let three = |x: f64| {
        let digits = 2 - x.abs().log10().floor() as i32;
        let t = format!("{:.*}", digits.max(0) as usize, x);
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    };
    // A value that rounds to 1000 of a unit is shown in the next one.
    let fits = |x: f64| {
        three(x)
            .trim_start_matches('-')
            .parse::<f64>()
            .unwrap_or(0.0)
            < 1000.0
    };
    if a < 1e-3 && fits(seconds * 1e6) {
        return format!("{} µs", three(seconds * 1e6));
    }
    if a < 1.0 && fits(seconds * 1e3) {
        return format!("{} ms", three(seconds * 1e3));
    }
    if a < 120.0 {
        return format!("{seconds:.2} s");
    }
    let sign = if seconds < 0.0 { "-" } else { "" };
    let total = a.round() as u64;
    let (m, rest) = (total / 60, total % 60);
    let h = m / 60;
    if h > 0 {
        return format!("{sign}{h} h {:02} min", m % 60);
    }
    format!("{sign}{m} min {rest:02} s")
}

fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}
