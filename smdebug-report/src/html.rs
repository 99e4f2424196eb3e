//! HTML pieces: escaping, the page's head (policy, style) and its self-check script, tables.

use std::fmt::Write as _;

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by character references, safe inside
/// element content and quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The Content-Security-Policy of the page: nothing may be loaded; inline style and script
/// (the page's own) and `data:` images only.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
    script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

pub(crate) const STYLE: &str = r#"
:root { --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #f6f7f9; --accent: #0072b2; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
header { background: #1d2330; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #c9cfdb; font-size: 13px; }
.layout { display: flex; align-items: flex-start; }
nav#toc { position: sticky; top: 0; flex: 0 0 240px; max-height: 100vh; overflow-y: auto; padding: 18px 12px 18px 24px; font-size: 14px; }
nav#toc ol { padding-left: 18px; margin: 0; }
nav#toc a { color: var(--ink); text-decoration: none; }
nav#toc a:hover { color: var(--accent); text-decoration: underline; }
main { flex: 1; min-width: 0; padding: 12px 32px 48px 8px; }
section.report-section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 24px 20px; margin: 16px 0; }
section.report-section h2 { font-size: 19px; border-bottom: 1px solid var(--line); padding-bottom: 6px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
p.lead { color: var(--muted); margin-top: 0; }
p.missing { background: #fff8e6; border-left: 4px solid #e69f00; padding: 8px 12px; }
p.note { background: #f1f3f7; border-left: 4px solid #9aa3b5; padding: 6px 12px; font-size: 13px; }
div.advice { background: #eaf4fb; border-left: 4px solid var(--accent); padding: 8px 12px; margin: 10px 0; }
p.finding { border-left: 4px solid #6a51a3; padding: 6px 12px; }
p.notice { background: #f3f0ff; border-left: 4px solid #6a51a3; padding: 8px 12px; margin: 8px 0 16px; }
div.verdict { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
div.verdict.IssuesFound { border-left: 6px solid #d55e00; background: #fff1ea; }
div.verdict.NoIssuesFound { border-left: 6px solid #009e73; background: #eefaf5; }
div.verdict.InProgress { border-left: 6px solid #56b4e9; }
div.verdict.Error { border-left: 6px solid #a01e3c; background: #fbeef1; }
div.verdict.NoData { border-left: 6px dashed #9aa3b5; background: #f1f3f7; color: var(--muted); }
div.verdict.absent { color: var(--muted); font-size: 13px; }
span.status { font-weight: 600; }
td.status { font-weight: 600; white-space: nowrap; }
td.status.IssuesFound { color: #b34700; }
td.status.NoIssuesFound { color: #00785a; }
td.status.Error { color: #a01e3c; }
td.status.InProgress { color: #2a7fb8; }
td.status.NoData { color: var(--muted); font-weight: 400; font-style: italic; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f1f3f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.fields div { margin: 1px 0; }
td.fields .field { font-weight: 600; }
td.code, code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
.scroll { overflow-x: auto; max-width: 100%; }
figure.chart { margin: 10px 0; }
figure.chart svg { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
figure.chart figcaption { color: var(--muted); font-size: 13px; }
figure.flamegraph { margin: 10px 0; }
figure.flamegraph img { display: block; width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
figure.flamegraph figcaption { color: var(--muted); font-size: 13px; }
ul.notes li { margin: 4px 0; }
"#;

/// Records errors and policy violations from the start, then counts sections and charts once
/// the page has loaded. A chart counts as drawn when its SVG has a size and at least one shape
/// in a data colour (the palette has neither black nor white, which axes, grid and background
/// use).
pub(crate) const EARLY_SCRIPT: &str = r#"
(function () {
  var state = { errors: [], csp: [] };
  window.__reportState = state;
  window.addEventListener('error', function (e) {
    state.errors.push(String(e && e.message ? e.message : e));
    if (window.__reportCheck) { window.__reportCheck(); }
  });
  document.addEventListener('securitypolicyviolation', function (e) {
    state.csp.push(e.violatedDirective + ' ' + e.blockedURI);
    if (window.__reportCheck) { window.__reportCheck(); }
  });
})();
"#;

pub(crate) const CHECK_SCRIPT: &str = r#"
(function () {
  var neutral = { '': 1, 'none': 1, '#ffffff': 1, '#000000': 1, 'white': 1, 'black': 1 };
  function dataMarks(svg) {
    var n = 0;
    var shapes = svg.querySelectorAll('polyline, polygon, rect, circle, path, line');
    for (var i = 0; i < shapes.length; i++) {
      var fill = (shapes[i].getAttribute('fill') || '').toLowerCase();
      var stroke = (shapes[i].getAttribute('stroke') || '').toLowerCase();
      if (!neutral[fill] || !neutral[stroke]) { n++; }
    }
    return n;
  }
  function check() {
    var state = window.__reportState || { errors: ['early script missing'], csp: [] };
    var sections = document.querySelectorAll('section.report-section');
    var ids = [];
    for (var i = 0; i < sections.length; i++) { ids.push(sections[i].id); }
    var figures = document.querySelectorAll('figure.chart');
    var drawn = 0, empty = [];
    for (var j = 0; j < figures.length; j++) {
      var svg = figures[j].querySelector('svg');
      var box = svg ? svg.getBoundingClientRect() : null;
      if (svg && box.width > 0 && box.height > 0 && dataMarks(svg) > 0) { drawn++; }
      else { empty.push(figures[j].id); }
    }
    var images = document.querySelectorAll('figure.flamegraph img');
    var loaded = 0, broken = [];
    for (var k = 0; k < images.length; k++) {
      if (images[k].complete && images[k].naturalWidth > 0) { loaded++; }
      else { broken.push(images[k].parentNode.id); }
    }
    document.body.setAttribute('data-selfcheck', JSON.stringify({
      sections: sections.length, section_ids: ids, charts: figures.length,
      charts_drawn: drawn, empty_charts: empty, flamegraphs: images.length,
      flamegraphs_loaded: loaded, broken_flamegraphs: broken, errors: state.errors,
      csp_violations: state.csp
    }));
  }
  window.__reportCheck = check;
  if (document.readyState === 'complete') { check(); } else { window.addEventListener('load', check); }
})();
"#;

/// A cell of a table: text (escaped when rendered), a right-aligned number, named fields, or a
/// rule's status (drawn in its status's colour; `NoData` greyed).
pub(crate) enum Cell {
    Text(String),
    Num(String),
    Status(smdebug_rules::Status),
    /// A name that may be very long (templated kernel names): cut to 120 characters, the
    /// whole name in the cell's tooltip.
    Name(String),
    /// Named values, one a line (`threshold 0.5`, `evidence loss at step 3: …`); `-` when
    /// there are none.
    Fields(Vec<(String, String)>),
}

impl Cell {
    pub(crate) fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    pub(crate) fn num(s: impl Into<String>) -> Cell {
        Cell::Num(s.into())
    }
}

/// A table with a header row; every cell's text is escaped.
pub(crate) fn table(out: &mut String, class: &str, headers: &[&str], rows: &[Vec<Cell>]) {
    let _ = write!(
        out,
        "<div class=\"scroll\"><table class=\"{}\"><thead><tr>",
        escape(class)
    );
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = match cell {
                Cell::Text(t) => write!(out, "<td>{}</td>", escape(t)),
                Cell::Num(t) => write!(out, "<td class=\"num\">{}</td>", escape(t)),
                Cell::Status(s) => write!(
                    out,
                    "<td class=\"status {}\" title=\"{}\">{}</td>",
                    s.name(),
                    s.meaning(),
                    s.name()
                ),
                Cell::Name(t) if t.chars().count() > 120 => {
                    let short: String = t.chars().take(119).chain(['…']).collect();
                    write!(
                        out,
                        "<td class=\"code\" title=\"{}\">{}</td>",
                        escape(t),
                        escape(&short)
                    )
                }
                Cell::Name(t) => write!(out, "<td class=\"code\">{}</td>", escape(t)),
                Cell::Fields(fields) if fields.is_empty() => write!(out, "<td>-</td>"),
                Cell::Fields(fields) => {
                    out.push_str("<td class=\"fields\">");
                    for (name, value) in fields {
                        let _ = write!(
                            out,
                            "<div><span class=\"field\">{}</span> {}</div>",
                            escape(name),
                            escape(value)
                        );
                    }
                    write!(out, "</td>")
                }
            };
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn table_cells_are_escaped() {
        let mut out = String::new();
        table(
            &mut out,
            "t",
            &["<h>"],
            &[vec![
                Cell::text("<b>"),
                Cell::num("1"),
                Cell::Name("<c>".into()),
            ]],
        );
        assert!(!out.contains("<b>") && !out.contains("<c>") && !out.contains("<h>"));
        assert!(out.contains("<td class=\"num\">1</td>"));
    }
}
