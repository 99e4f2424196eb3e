//! Showing names from other people's files on a terminal.

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

fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}
