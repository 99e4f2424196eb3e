//! The text of a profiling sub-config (`"{\"StartStep\": 5, \"NumSteps\": 3, }"`), which
//! smdebug reads with Python's `eval`: a Python dict literal of strings, numbers and constants.
//!
//! SageMaker's documentation and its Python SDK write these strings as Python, not JSON: the
//! SDK's `convert_json_config_to_string` leaves a trailing comma and writes strings between
//! double quotes without escaping them, so a regex's `\.` reaches the file as `\.`, which JSON
//! rejects and Python keeps. This parser reads that subset, without evaluating anything:
//!
//! - one `{...}` of `key: value` pairs, a trailing comma allowed; keys are strings;
//! - strings in `'...'` or `"..."` with Python's escapes (`\\`, `\'`, `\"`, `\n`, `\t`, `\r`,
//!   `\a`, `\b`, `\f`, `\v`, `\xhh`, `\uXXXX`, `\UXXXXXXXX`, octal `\ooo`, a backslash before a
//!   newline); any other backslash stays in the string, as in Python;
//! - numbers (`5`, `-1`, `0.5`, `1e3`, `1_000`), `True`, `False`, `None`, and JSON's `true`,
//!   `false`, `null` (smdebug lowercases the whole file before `eval`, which turns Python's
//!   constants into names it cannot evaluate: it crashes on them; they are read here);
//! - `#` comments to the end of a line, and any whitespace.
//!
//! Values come out as [`serde_json::Value`]s, so an object given directly in the file and one
//! given as a string are read by the same code.

use serde_json::{Map, Number, Value};

/// Parses `text` as a dict literal; the error says what was expected and where (a character
/// offset).
pub(crate) fn parse_dict(text: &str) -> Result<Map<String, Value>, String> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
    };
    p.skip_blank();
    p.expect('{')?;
    let mut map = Map::new();
    loop {
        p.skip_blank();
        if p.eat('}') {
            break;
        }
        let key = match p.peek() {
            Some('"' | '\'') => p.string()?,
            _ => return Err(p.error("a string key or `}`")),
        };
        p.skip_blank();
        p.expect(':')?;
        p.skip_blank();
        let value = p.value()?;
        if map.insert(key.clone(), value).is_some() {
            return Err(format!("the key `{key}` is given twice"));
        }
        p.skip_blank();
        if p.eat(',') {
            continue;
        }
        p.skip_blank();
        p.expect('}')?;
        break;
    }
    p.skip_blank();
    if p.pos < p.chars.len() {
        return Err(p.error("the end after `}`"));
    }
    Ok(map)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("`{c}`")))
        }
    }

    fn error(&self, expected: &str) -> String {
        match self.peek() {
            Some(c) => format!("expected {expected} at character {}, found `{c}`", self.pos),
            None => format!(
                "expected {expected} at character {}, found the end",
                self.pos
            ),
        }
    }

    /// Whitespace and `#` comments.
    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some('"' | '\'') => self.string().map(Value::String),
            Some(c) if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => self.number(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                match word.as_str() {
                    "True" | "true" => Ok(Value::Bool(true)),
                    "False" | "false" => Ok(Value::Bool(false)),
                    "None" | "null" => Ok(Value::Null),
                    _ => {
                        self.pos = start;
                        Err(format!(
                            "expected a string, a number, True, False or None at character \
                             {start}, found `{word}`"
                        ))
                    }
                }
            }
            _ => Err(self.error("a string, a number, True, False or None")),
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.' | '_'))
        {
            // A sign only at the start or after an exponent.
            let c = self.chars[self.pos];
            if matches!(c, '-' | '+')
                && self.pos != start
                && !matches!(self.chars[self.pos - 1], 'e' | 'E')
            {
                break;
            }
            self.pos += 1;
        }
        let raw: String = self.chars[start..self.pos].iter().collect();
        let digits = raw.replace('_', "");
        let bad = || format!("`{raw}` at character {start} is not a number");
        if raw.contains("__") || raw.ends_with('_') || raw.starts_with('_') {
            return Err(bad());
        }
        if let Ok(i) = digits.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = digits.parse::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        digits
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(bad)
    }

    fn string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let quote = self.chars[self.pos];
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(format!(
                    "the string starting at character {start} is not closed"
                ));
            };
            self.pos += 1;
            match c {
                c if c == quote => return Ok(out),
                '\n' => {
                    return Err(format!(
                        "the string starting at character {start} runs past the end of its line"
                    ));
                }
                '\\' => self.escape(&mut out)?,
                c => out.push(c),
            }
        }
    }

    /// After a backslash: Python's escapes; an unknown one keeps the backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let at = self.pos - 1;
        let Some(c) = self.peek() else {
            return Err(format!("a backslash ends the text at character {at}"));
        };
        self.pos += 1;
        let simple = match c {
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            '\n' => return Ok(()),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            return Ok(());
        }
        let hex = |p: &mut Parser, n: usize| -> Result<char, String> {
            let digits: String = p
                .chars
                .get(p.pos..p.pos + n)
                .unwrap_or(&[])
                .iter()
                .collect();
            let code = (digits.len() == n)
                .then(|| u32::from_str_radix(&digits, 16).ok())
                .flatten()
                .and_then(char::from_u32)
                .ok_or_else(|| format!("bad escape `\\{c}{digits}` at character {at}"))?;
            p.pos += n;
            Ok(code)
        };
        match c {
            'x' => out.push(hex(self, 2)?),
            'u' => out.push(hex(self, 4)?),
            'U' => out.push(hex(self, 8)?),
            '0'..='7' => {
                let mut code = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            self.pos += 1;
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Value {
        Value::Object(parse_dict(text).unwrap_or_else(|e| panic!("`{text}`: {e}")))
    }

    #[test]
    fn reads_what_sagemakers_sdk_and_docs_write() {
        // The SDK's convert_json_config_to_string: a trailing comma after every pair.
        assert_eq!(
            parse(r#"{"StartStep": 5, "NumSteps": 3, "MetricsRegex": ".*", }"#),
            json!({"StartStep": 5, "NumSteps": 3, "MetricsRegex": ".*"})
        );
        assert_eq!(
            parse(r#"{"StartTimeInSecSinceEpoch": 1700000000, "Duration": 0.5, }"#),
            json!({"StartTimeInSecSinceEpoch": 1700000000, "Duration": 0.5})
        );
        // A regex as the SDK writes it: the backslash is not a JSON escape, Python keeps it.
        assert_eq!(
            parse(r#"{"MetricsRegex": "Data\.next\\d", }"#),
            json!({"MetricsRegex": "Data\\.next\\d"})
        );
        assert_eq!(parse("{}"), json!({}));
    }

    #[test]
    fn reads_python_quotes_constants_escapes_and_comments() {
        assert_eq!(
            parse(
                "{'a': 'it\\'s', \"b\": True, 'c': None, 'd': false,\n # why\n 'e': -1e3, 'f': 1_000}"
            ),
            json!({"a": "it's", "b": true, "c": null, "d": false, "e": -1000.0, "f": 1000})
        );
        assert_eq!(
            parse(r#"{"s": "\x41\u00e9\101\t"}"#),
            json!({"s": "A\u{e9}A\t"})
        );
    }

    #[test]
    fn refuses_what_is_not_a_flat_dict_literal() {
        for (text, needle) in [
            ("[1, 2]", "expected `{`"),
            ("{\"a\": 1", "expected `}`"),
            ("{\"a\" 1}", "expected `:`"),
            ("{a: 1}", "a string key"),
            ("{\"a\": [1]}", "a string, a number"),
            ("{\"a\": open}", "found `open`"),
            ("{\"a\": 1} x", "the end after"),
            ("{\"a\": \"x}", "not closed"),
            ("{\"a\": 1, \"a\": 2}", "given twice"),
            ("{\"a\": 1.2.3}", "not a number"),
            ("{\"a\": \"\\x4\"}", "bad escape"),
        ] {
            let err = parse_dict(text).unwrap_err();
            assert!(err.contains(needle), "`{text}` gave `{err}`");
        }
    }
}
