//! The report's notebook, `profiler-report.ipynb` beside the page: a Jupyter notebook (nbformat
//! 4) whose cells read the run again with the Python package `smdebug_rs` (its profiler-data
//! readers and the rules' summary written beside it) to rerun and extend the analysis, with the
//! figures the page shows: the rules' findings, the step statistics, the system usage, forward
//! against backward, GPU memory per GPU and data loading. Its last cell prints those figures as
//! JSON, so they can be checked against the page.
//!
//! The cells after the title and the parameters are `notebook.py`, in the "percent" format
//! (`# %%` a code cell, `# %% [markdown]` a markdown cell).

use serde_json::{Value, json};

use crate::input::ReportInput;

/// The notebook's file name beside the report's usual page (`profiler-report.html`).
pub const NOTEBOOK_FILE: &str = "profiler-report.ipynb";

/// The notebook's file name beside the page named `page`: the page's name with `.ipynb` for
/// its extension (`profiler-report.html` → `profiler-report.ipynb`). Named after the page, so
/// that the report writes nothing beside it but files named after it.
pub fn notebook_name(page: &str) -> String {
    format!("{}.ipynb", page_stem(page))
}

/// The file name of the rules' summary the page was drawn from (the runner's
/// `rule_job_summary.json` form), which the notebook reads, beside the page named `page`:
/// `profiler-report.html` → `profiler-report.rules.json`.
pub fn rule_summary_name(page: &str) -> String {
    format!("{}.rules.json", page_stem(page))
}

fn page_stem(page: &str) -> &str {
    match page.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => page,
    }
}

const CELLS: &str = include_str!("notebook.py");

/// The notebook for `input`: its cells read the run at `run` and the rules' summary at
/// `rule_summary` (local paths or object-store URLs, as `smdebug_rs` opens them).
pub fn render_notebook(input: &ReportInput, run: &str, rule_summary: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    let mut cells = vec![
        markdown(&format!(
            "# Profiling report: `{}`\n\n\
             Written beside `profiler-report.html` by smdebug's ProfilerReport, from the same \
             run. Each cell reads the run again with the Python package `smdebug_rs` (`pip \
             install smdebug-rs pandas matplotlib`): the system metrics and framework spans with \
             `smdebug_rs.profiler`, the rules' statuses and typed findings with \
             `smdebug_rs.rules.read_summary`. Change the parameters below to look at another \
             run, or extend the analysis from the DataFrames.\n\n\
             **The findings are informational.** The rules judge the recorded data against \
             their thresholds; a finding is a hint of where to look, not a verdict on the job.",
            input.location.replace('`', "'")
        )),
        code(&format!(
            "# The run, and the rules' summary the HTML report was drawn from.\n\
             RUN = {}\n\
             RULE_SUMMARY = {}",
            quoted(run),
            quoted(rule_summary)
        )),
    ];
    cells.extend(percent_cells(CELLS));
    for (i, cell) in cells.iter_mut().enumerate() {
        cell["id"] = Value::String(format!("cell-{i:02}"));
    }
    let notebook = json!({
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
            "smdebug": {"run": input.location, "generator": concat!("smdebug-report ", env!("CARGO_PKG_VERSION"))},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    serde_json::to_string_pretty(&notebook).unwrap_or_default()
}

/// The cells of a percent-format script: the text before the first marker is left out.
fn percent_cells(script: &str) -> Vec<Value> {
    let mut cells = Vec::new();
    let mut current: Option<(bool, Vec<&str>)> = None;
    let flush = |cell: Option<(bool, Vec<&str>)>, cells: &mut Vec<Value>| {
        if let Some((is_markdown, lines)) = cell {
            let text = lines.join("\n");
            let text = text.trim_matches('\n');
            if !text.is_empty() {
                cells.push(if is_markdown {
                    markdown(text)
                } else {
                    code(text)
                });
            }
        }
    };
    for line in script.lines() {
        if let Some(rest) = line.strip_prefix("# %%") {
            flush(current.take(), &mut cells);
            current = Some((rest.trim() == "[markdown]", Vec::new()));
            continue;
        }
        if let Some((is_markdown, lines)) = &mut current {
            lines.push(if *is_markdown {
                line.strip_prefix("# ")
                    .or_else(|| line.strip_prefix('#'))
                    .unwrap_or(line)
            } else {
                line
            });
        }
    }
    flush(current, &mut cells);
    cells
}

/// nbformat's multiline string: the lines, each but the last with its newline.
fn source(text: &str) -> Value {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    json!(lines)
}

fn markdown(text: &str) -> Value {
    json!({"cell_type": "markdown", "metadata": {}, "source": source(text)})
}

fn code(text: &str) -> Value {
    json!({
        "cell_type": "code",
        "execution_count": null,
        "metadata": {},
        "outputs": [],
        "source": source(text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_beside_a_page_are_named_after_it() {
        assert_eq!(notebook_name("profiler-report.html"), NOTEBOOK_FILE);
        assert_eq!(notebook_name("x.y.htm"), "x.y.ipynb");
        assert_eq!(notebook_name("page"), "page.ipynb");
        assert_eq!(rule_summary_name(".html"), ".html.rules.json");
        assert_eq!(
            rule_summary_name("profiler-report.html"),
            "profiler-report.rules.json"
        );
    }

    #[test]
    fn cells_alternate_as_marked_and_the_header_is_left_out() {
        let nb: Value = serde_json::from_str(&render_notebook(
            &ReportInput {
                location: "/tmp/run`x".into(),
                ..ReportInput::default()
            },
            "/tmp/run\"x",
            "/tmp/report/profiler-report.rules.json",
        ))
        .unwrap();
        assert_eq!(nb["nbformat"], 4);
        let cells = nb["cells"].as_array().unwrap();
        let text = |c: &Value| {
            c["source"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .collect::<String>()
        };
        // The parameters are Python string literals (JSON's escapes are Python's).
        assert!(text(&cells[1]).contains(r#"RUN = "/tmp/run\"x""#));
        assert!(
            !cells
                .iter()
                .any(|c| text(c).contains("This header is not part"))
        );
        let kinds: Vec<&str> = cells
            .iter()
            .map(|c| c["cell_type"].as_str().unwrap())
            .collect();
        assert_eq!(&kinds[..4], ["markdown", "code", "code", "markdown"]);
        // Markdown lines lose their comment marks; code keeps its own.
        let md = text(&cells[3]);
        assert!(md.starts_with("## Training job summary"), "{md}");
        assert!(text(cells.last().unwrap()).starts_with("print(json.dumps(FIGURES"));
        let ids: std::collections::BTreeSet<&str> =
            cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), cells.len());
    }
}
