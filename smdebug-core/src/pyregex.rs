//! Python's regex dialect: the patterns smdebug's users and hooks write.
//!
//! Collection `include_regex` patterns, hook configurations and rule parameters such as
//! `tensor_regex` come from Python smdebug, where they are Python `re` patterns. Its own hooks
//! write look-around into every run's collections file (PyTorch's `biases` is
//! `^(?!gradient).*bias`, XGBoost's `losses` is `^[a-zA-z]+-.+(?<!(auc|map))$`), which the
//! `regex` crate does not support. [`PyRegex`] compiles such a pattern with `fancy_regex`, which
//! hands a pattern without look-around or back-references to `regex` whole (linear time) and
//! runs the others on its backtracking engine.
//!
//! # The dialect
//!
//! A [`PyRegex`] matches where Python's `re.search(pattern, name)` finds a match: anywhere in
//! the name, as smdebug's `match_inc` (collections, `Trial.tensor_names(regex=…)`) and its rules
//! do. Supported as in Python: look-ahead `(?=…)`/`(?!…)`, look-behind `(?<=…)`/`(?<!…)`,
//! named groups `(?P<name>…)` and `(?P=name)`, back-references `\1`, atomic groups `(?>…)`,
//! possessive quantifiers, the flags `i`, `m`, `s`, `x`, `u` (global `(?i)` and scoped
//! `(?i:…)`), `{` that does not start a valid repetition taken literally, and ranges such as
//! `[a-zA-z]` (which, in both, also covers `[\]^_` and the backtick).
//!
//! Rewritten before compiling, because the Rust engines read them differently:
//!
//! - `\Z` is Python's end of the string (Rust's `\z`; `fancy_regex` reads `\Z` as "before
//!   trailing newlines").
//! - Inside a character class Python has no nesting and no set operations: `[` is a literal, so
//!   are `&&`, `~~` and `--` (Rust's intersection, symmetric difference and difference).
//! - A `]` outside a class is a literal.
//! - `(?#…)` comments are removed.
//!
//! Known differences, none of which occurs in tensor names: Python's `$` (without `(?m)`) also
//! matches before a newline that ends the name, Rust's only at the end; the flags `(?a)` and
//! `(?L)` and octal escapes (`\012`) are not supported (compiling fails, so the difference is
//! never silent); `\w`, `\d`, `\s` and case folding follow the Unicode tables of the Rust
//! engine, which differ from Python's for a few rare characters. Some patterns Python rejects
//! compile here (e.g. Rust's escapes `\h`, `\e`, global flags not at the start).

use std::borrow::Cow;
use std::fmt;

/// A compiled Python `re` pattern, matched the way `re.search` matches. See the
/// [module docs](self) for the dialect.
///
/// ```
/// use smdebug_core::pyregex::PyRegex;
/// // PyTorch's default `biases` collection: anything with `bias` that is not a gradient.
/// let biases = PyRegex::new("^(?!gradient).*bias").unwrap();
/// assert!(biases.is_match("fc1.bias"));
/// assert!(!biases.is_match("gradient/fc1.bias"));
/// // XGBoost's `losses`: `<data>-<metric>` unless the metric is auc or map.
/// let losses = PyRegex::new("^[a-zA-z]+-.+(?<!(auc|map))$").unwrap();
/// assert!(losses.is_match("train-rmse") && !losses.is_match("validation-auc"));
/// ```
#[derive(Clone)]
pub struct PyRegex {
    pattern: String,
    regex: fancy_regex::Regex,
}

/// Why a Python pattern cannot be used: the engine's reason, and the Rust form it compiled
/// when that differs from the pattern.
#[derive(Debug, thiserror::Error)]
#[error("{source}{}", rewritten.as_ref().map(|r| format!(" (compiling its Rust form `{r}`)")).unwrap_or_default())]
pub struct PyRegexError {
    rewritten: Option<String>,
    #[source]
    source: Box<fancy_regex::Error>,
}

impl PyRegex {
    /// Compiles a Python `re` pattern.
    pub fn new(pattern: &str) -> Result<PyRegex, PyRegexError> {
        let rust = to_rust_syntax(pattern);
        let regex = fancy_regex::Regex::new(&rust).map_err(|e| PyRegexError {
            rewritten: match &rust {
                Cow::Owned(r) => Some(r.clone()),
                Cow::Borrowed(_) => None,
            },
            source: Box::new(e),
        })?;
        Ok(PyRegex {
            pattern: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as given (Python syntax).
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether the pattern matches anywhere in `text` (`re.search(pattern, text) is not None`).
    ///
    /// A look-around pattern runs on a backtracking engine with a step budget (one million
    /// backtracks); a pathological pattern that exhausts it on a name counts as not matching,
    /// with a warning logged, rather than stalling the training loop or a reader.
    pub fn is_match(&self, text: &str) -> bool {
        match self.regex.is_match(text) {
            Ok(found) => found,
            Err(e) => {
                log::warn!(
                    "regex `{}` gave up on `{text}` ({e}); counted as not matching",
                    self.pattern
                );
                false
            }
        }
    }
}

impl fmt::Debug for PyRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PyRegex").field(&self.pattern).finish()
    }
}

impl fmt::Display for PyRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pattern)
    }
}

/// Rewrites what Python and `fancy_regex` read differently (listed in the module docs); a
/// pattern without any of it is returned as is.
fn to_rust_syntax(pattern: &str) -> Cow<'_, str> {
    if !pattern.contains(['\\', '[', ']', '(']) {
        return Cow::Borrowed(pattern);
    }
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push('\\');
                match chars.next() {
                    Some('Z') if !in_class => out.push('z'),
                    Some(escaped) => out.push(escaped),
                    // A trailing backslash: left for the engine to reject.
                    None => {}
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap_or('^'));
                }
                // A `]` right after the opening is a literal in both dialects.
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str("\\]");
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            ']' => out.push_str("\\]"),
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.peek() == Some(&'-') => {
                // The first `-` keeps its meaning (range or literal), the second is a literal:
                // `[+--]` is the range `+`..`-` in Python, `\-` keeps it one in Rust.
                chars.next();
                out.push_str("-\\-");
            }
            '(' if !in_class && starts_comment(&chars) => skip_comment(&mut chars, &mut out),
            _ => out.push(c),
        }
    }
    if out == pattern {
        Cow::Borrowed(pattern)
    } else {
        Cow::Owned(out)
    }
}

fn starts_comment(rest: &std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut ahead = rest.clone();
    ahead.next() == Some('?') && ahead.next() == Some('#')
}

/// Skips `?#…)` after a `(`. Like Python, an escaped `\)` does not end the comment; an
/// unterminated comment is copied through for the engine to reject.
fn skip_comment(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, out: &mut String) {
    let mut ahead = chars.clone();
    loop {
        match ahead.next() {
            Some(')') => {
                *chars = ahead;
                return;
            }
            Some('\\') => {
                ahead.next();
            }
            Some(_) => {}
            None => {
                out.push('(');
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(pattern: &str, name: &str) -> bool {
        PyRegex::new(pattern)
            .unwrap_or_else(|e| panic!("`{pattern}` does not compile: {e}"))
            .is_match(name)
    }

    #[test]
    fn pytorch_default_collections_use_negative_look_ahead() {
        let weights = "^(?!gradient).*weight";
        let losses = "[Ll]oss_(?!input).*output";
        assert!(search(weights, "fc1.weight"));
        assert!(!search(weights, "gradient/fc1.weight"));
        assert!(search(losses, "CrossEntropyLoss_output_0"));
        assert!(!search(losses, "CrossEntropyLoss_input_0_output"));
    }

    #[test]
    fn xgboost_losses_use_negative_look_behind() {
        let losses = "^[a-zA-z]+-.+(?<!(auc|map))$";
        assert!(search(losses, "train-rmse"));
        assert!(search(losses, "validation-mlogloss"));
        assert!(!search(losses, "train-auc"));
        assert!(!search(losses, "validation-map"));
        assert!(!search(losses, "feature_importance/weight/f0"));
    }

    #[test]
    fn python_end_of_string_is_absolute() {
        // Python's `\Z` is Rust's `\z`; fancy_regex's own `\Z` would allow trailing newlines.
        assert_eq!(to_rust_syntax(r"loss\Z"), r"loss\z");
        assert!(search(r"loss\Z", "train_loss"));
        assert!(!search(r"loss\Z", "loss\n"));
        assert!(!search(r"loss\Z", "loss_total"));
    }

    #[test]
    fn brackets_and_set_operators_in_a_class_are_literals() {
        assert!(search("x[[]", "x["));
        assert!(search("^a[&&b]$", "a&"));
        assert!(search("^a[~~]$", "a~"));
        assert!(search("^[+--]$", ","));
        assert!(search("^a]$", "a]"));
        assert!(search("^[]a]$", "]"));
        assert!(search("^[^]a]$", "b") && !search("^[^]a]$", "]"));
    }

    #[test]
    fn comments_are_dropped_and_python_groups_kept() {
        assert_eq!(
            to_rust_syntax(r"fc(?# the first layer )1\.weight"),
            r"fc1\.weight"
        );
        assert!(search(r"(?P<layer>fc\d)\.(?P=layer)?weight", "fc1.weight"));
        assert!(search(r"(\w+)/\1", "relu/relu"));
        assert!(search("layer{a}", "layer{a}"));
        assert!(search("(?i)RELU_output", "relu_output_0"));
    }

    #[test]
    fn plain_patterns_are_not_rewritten() {
        for p in [
            "^gradient",
            r"layers\.0\.attn\.(q|k)_proj",
            "^average_shap/.*[^/bias]$",
        ] {
            assert!(matches!(to_rust_syntax(p), Cow::Borrowed(_)), "{p}");
        }
    }

    #[test]
    fn a_bad_pattern_says_why_and_shows_its_rust_form() {
        let plain = PyRegex::new("relu(").unwrap_err().to_string();
        assert!(!plain.contains("Rust form"), "{plain}");
        let rewritten = PyRegex::new(r"relu(\Z").unwrap_err().to_string();
        assert!(rewritten.contains(r"Rust form `relu(\z`"), "{rewritten}");
    }
}
