//! One figure per fact, checked on a written report: every profiler rule's verdict on the page
//! quotes only figures its own section shows (in its tables and leads), names the window they
//! cover, and says what the rule's status and its file beside the page say. Used by
//! `one_verdict.rs` (a crafted run with GPUs) and by the examples' demo test (a real run).

use std::path::Path;

use serde_json::Value;
use smdebug_rules::{RuleInput, Status, Summary};

/// The page's text with its tags dropped and its entities read, charts left out.
pub fn text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // An SVG's labels are the chart's, not the section's figures.
        if rest.starts_with("<svg") {
            let end = rest
                .find("</svg>")
                .map_or(rest.len(), |e| e + "</svg>".len());
            rest = &rest[end..];
            out.push(' ');
            continue;
        }
        let end = rest.find('>').map_or(rest.len(), |e| e + 1);
        rest = &rest[end..];
        out.push(' ');
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The numbers written in `text` (`12`, `49.8`, `0.640`), as written.
pub fn numbers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let decimal_point =
            c == '.' && !current.is_empty() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || decimal_point {
            current.push(c);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The `<section>` of the page holding `needle`, and where `needle` is in it.
fn section_of<'h>(html: &'h str, needle: &str) -> Option<(&'h str, usize)> {
    let at = html.find(needle)?;
    let start = if needle.starts_with("<section") {
        at
    } else {
        html[..at].rfind("<section")?
    };
    let end = at + html[at..].find("</section>")?;
    Some((&html[start..end], at - start))
}

/// Checks every profiler rule of `summary` on the page `html`, and against its rule file in
/// `rule_files` (the folder the report wrote them into). Returns the rules whose message quoted
/// figures, each with how many, so a caller can say which rules it expects to have some.
pub fn check_page(html: &str, summary: &Summary, rule_files: &Path) -> Vec<(String, usize)> {
    let job = section_of(html, "<section id=\"job-summary\"")
        .map(|(s, _)| text(s))
        .expect("a job summary");
    let mut quoted = Vec::new();
    for rule in &summary.rules {
        if rule.kind != RuleInput::Profiler || rule.rule == "ProfilerReport" {
            continue;
        }
        let name = &rule.rule;
        // The rule's file beside the page says what its status says.
        let file: Value = serde_json::from_slice(
            &std::fs::read(rule_files.join(format!("{name}.json")))
                .unwrap_or_else(|e| panic!("{name}'s rule file: {e}")),
        )
        .unwrap();
        assert_eq!(file["message"], rule.message.as_str(), "{name}'s file");
        assert_eq!(
            file.get("window").cloned().unwrap_or(Value::Null),
            serde_json::to_value(rule.window).unwrap(),
            "{name}'s file"
        );
        let marker = format!(
            "<div class=\"verdict {}\"><strong>{name}</strong>",
            rule.status.name()
        );
        let Some((section, at)) = section_of(html, &marker) else {
            panic!("no verdict of {name} on the page");
        };
        let verdict_end = at + section[at..].find("</div>").unwrap() + "</div>".len();
        let verdict = text(&section[at..verdict_end]);
        let rest = text(&format!("{}{}", &section[..at], &section[verdict_end..]));
        assert!(
            verdict.contains(rule.message.as_str()),
            "{name}: the page's verdict `{verdict}` does not carry the status's message `{}`",
            rule.message
        );
        if matches!(rule.status, Status::NoData | Status::Error) {
            continue;
        }
        // The window is named beside the verdict, and its length is the job's as the summary
        // shows it.
        let window = rule
            .window
            .unwrap_or_else(|| panic!("{name} judged data without a window"));
        assert!(
            verdict.contains(&window.describe()),
            "{name}: the verdict `{verdict}` does not name its window `{}`",
            window.describe()
        );
        assert!(
            window.whole_run,
            "{name}: an offline report covers the whole run"
        );
        let seconds = format!("{:.3}", window.seconds());
        assert!(
            numbers(&job).contains(&seconds),
            "{name}: the window's {seconds} s is not the job's duration: {job}"
        );
        // Its step spans are those the job summary counts per mode.
        let per_mode = job
            .split("Step spans")
            .nth(1)
            .and_then(|t| t.split("Nodes").next())
            .unwrap_or("");
        let counted: u64 = numbers(per_mode)
            .iter()
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert_eq!(window.step_spans, counted, "{name}: step spans: {job}");
        // Every figure of the message is a figure of the section.
        let shown = numbers(&rest);
        let figures = numbers(&rule.message);
        for figure in &figures {
            assert!(
                shown.contains(figure),
                "{name}: the message quotes {figure}, which its section does not show.\n\
                 message: {}\nsection: {rest}",
                rule.message
            );
        }
        quoted.push((name.clone(), figures.len()));
    }
    quoted
}
