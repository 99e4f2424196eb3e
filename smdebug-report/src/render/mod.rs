//! The page: header, table of contents, one section per entry of [`SECTIONS`], each drawn by
//! a module of its own. [`Page`] holds what every section uses: the input, the derived
//! [`View`], the rule statuses, and the helpers that write leads, notes, charts and verdicts.

mod batch_size;
mod bottlenecks;
mod code_profile;
mod data_loading;
mod data_notes;
mod debugging_rules;
mod format;
mod framework_metrics;
mod gpu_memory;
mod gpu_utilization;
mod job_summary;
mod load_balancing;
mod many;
mod rules_summary;
mod scalars;
mod step_durations;
mod system_usage;
mod top_operators;
mod view;

use std::fmt::Write as _;

use smdebug_analysis::time::utc;
use smdebug_rules::profiler::Details;
use smdebug_rules::{RuleParams, RuleStatus, Status};

use crate::html::{self, escape};
use crate::input::{NoteArea, ReportInput, SECTIONS};
use crate::rule_file::RuleFile;
use view::View;

/// Most series in one chart; more are left to the tables.
const MAX_SERIES: usize = 8;

/// The report page for `input`.
pub fn render_html(input: &ReportInput) -> String {
    let view = View::new(input);
    let mut page = Page {
        input,
        view,
        rules: input.rules.iter().map(RuleFile::of).collect(),
        out: String::with_capacity(1 << 20),
        charts: 0,
    };
    page.head();
    for (i, (id, title)) in SECTIONS.iter().enumerate() {
        let _ = write!(
            page.out,
            "<section id=\"{id}\" class=\"report-section\" data-section=\"{id}\"><h2>{}. {}</h2>",
            i + 1,
            escape(title)
        );
        match *id {
            "job-summary" => page.job_summary(),
            "system-usage" => page.system_usage(),
            "framework-metrics" => page.framework_metrics(),
            "top-operators" => page.top_operators(),
            "rules-summary" => page.rules_summary(),
            "step-durations" => page.step_durations(),
            "gpu-utilization" => page.gpu_utilization(),
            "batch-size" => page.batch_size(),
            "cpu-bottlenecks" => page.cpu_bottlenecks(),
            "io-bottlenecks" => page.io_bottlenecks(),
            "load-balancing" => page.load_balancing(),
            "gpu-memory" => page.gpu_memory(),
            "data-loading" => page.data_loading(),
            "code-profile" => page.code_profile(),
            "debugging-rules" => page.debugging_rules(),
            "scalars" => page.scalars(),
            _ => page.data_notes(),
        }
        page.out.push_str("</section>\n");
    }
    page.tail();
    page.out
}

/// The page being written.
struct Page<'a> {
    input: &'a ReportInput,
    view: View<'a>,
    /// The rule statuses as the report shows them.
    rules: Vec<RuleFile>,
    out: String,
    charts: usize,
}

impl<'a> Page<'a> {
    fn head(&mut self) {
        let title = format!("Profiling report: {}", self.input.location);
        let _ = write!(
            self.out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta name=\"generator\" content=\"smdebug-profiler {}\">\
             <title>{}</title><style>{}</style><script>{}</script></head>\n<body>",
            html::CSP,
            env!("CARGO_PKG_VERSION"),
            escape(&title),
            html::STYLE,
            html::EARLY_SCRIPT
        );
        let status = match self.input.run_complete {
            Some(true) => "finished (end marker present)",
            Some(false) => "still being written, or stopped without an end marker",
            None => "unknown",
        };
        let _ = write!(
            self.out,
            "<header><h1>Profiling report</h1><p>Run <code>{}</code> · {} · generated {}</p></header>\
             <p class=\"notice\" id=\"informational\"><strong>The findings are informational.</strong> \
             The rules judge the recorded data against their thresholds (given with each \
             finding); a finding is a hint of where to look, not a verdict on the job, and \
             whether it matters for this job is yours to decide.</p>\
             <div class=\"layout\"><nav id=\"toc\"><strong>Contents</strong><ol>",
            escape(&self.input.location),
            status,
            utc(self.input.generated_at_us)
        );
        for (id, title) in SECTIONS {
            let _ = write!(self.out, "<li><a href=\"#{id}\">{}</a></li>", escape(title));
        }
        self.out.push_str("</ol></nav><main>\n");
    }

    fn tail(&mut self) {
        let _ = writeln!(
            self.out,
            "</main></div><script>{}</script></body></html>",
            html::CHECK_SCRIPT
        );
    }

    fn lead(&mut self, text: &str) {
        let _ = write!(self.out, "<p class=\"lead\">{}</p>", escape(text));
    }

    fn missing(&mut self, text: &str) {
        let _ = write!(self.out, "<p class=\"missing\">{}</p>", escape(text));
    }

    fn advice(&mut self, text: &str) {
        let _ = write!(
            self.out,
            "<div class=\"advice\"><strong>What to change:</strong> {}</div>",
            escape(text)
        );
    }

    fn h3(&mut self, text: &str) {
        let _ = write!(self.out, "<h3>{}</h3>", escape(text));
    }

    fn notes(&mut self, area: NoteArea) {
        let input = self.input;
        for note in input.notes.iter().filter(|n| n.area == area) {
            let _ = write!(self.out, "<p class=\"note\">{}</p>", escape(&note.message));
        }
    }

    fn chart(&mut self, drawn: Result<String, String>, caption: &str) {
        match drawn {
            Ok(svg) => {
                self.charts += 1;
                let _ = write!(
                    self.out,
                    "<figure class=\"chart\" id=\"chart-{}\">{svg}<figcaption>{}</figcaption></figure>",
                    self.charts,
                    escape(caption)
                );
            }
            Err(e) => {
                let _ = write!(
                    self.out,
                    "<p class=\"note\">Chart not drawn ({}): {}</p>",
                    escape(caption),
                    escape(&e)
                );
            }
        }
    }

    /// Like [`chart`](Self::chart), for a chart that marks `marked` points a rule judged: the
    /// figure carries the count (`data-marked`), so the page can be checked against the verdict.
    fn marked_chart(&mut self, drawn: Result<String, String>, caption: &str, marked: usize) {
        let start = self.out.len();
        self.chart(drawn, caption);
        if self.out[start..].starts_with("<figure class=\"chart\"") {
            let at = start + "<figure class=\"chart\"".len();
            self.out
                .insert_str(at, &format!(" data-marked=\"{marked}\""));
        }
    }

    /// The typed details of the rule `name`, as the rule wrote them; `None` when the rule did
    /// not run or wrote none, and when they do not read (a summary written by another version
    /// of the rule, or damaged): the section then says so where it stands, with why, before
    /// what it shows without them.
    fn details(&mut self, name: &str) -> Option<Details> {
        let decoded = self.status(name)?.profiler_details();
        match decoded {
            Ok(details) => details.cloned(),
            Err(e) => {
                self.missing(&format!("{e}. What follows leaves them out."));
                None
            }
        }
    }

    /// Says `text` (that the rule `rule` gave no result) unless its findings were given but do
    /// not read: [`details`](Self::details) said that already, and "no result" would be
    /// untrue.
    fn no_result(&mut self, rule: &str, text: &str) {
        if self
            .status(rule)
            .is_none_or(|s| s.details.problem().is_none())
        {
            self.missing(text);
        }
    }

    /// The rule's status as given, by its name.
    fn status(&self, name: &str) -> Option<&'a RuleStatus> {
        let input = self.input;
        input
            .rules
            .iter()
            .find(|r| r.rule.eq_ignore_ascii_case(name))
    }

    fn rule(&self, name: &str) -> Option<&RuleFile> {
        self.rules
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
    }

    /// The parameters of the rule of parameter type `P` as it ran (the registry ties `P` to
    /// its rule), or the defaults when the rule did not run: a figure that judges what a rule
    /// judges uses the same threshold. Parameters that do not read as `P` (recorded by another
    /// version) are said where the section stands, and the defaults used.
    fn params<P: RuleParams>(&mut self) -> P {
        let Some(status) = self.status(P::RULE) else {
            return P::default();
        };
        match status.params::<P>() {
            Ok(params) => params.clone(),
            Err(e) => {
                self.missing(&format!("{e}; this section uses the rule's defaults."));
                P::default()
            }
        }
    }

    /// The verdict of the rule `name` when one was given; a quiet line when not.
    fn verdict(&mut self, name: &str) {
        let Some(rule) = self.rule(name) else {
            let _ = write!(
                self.out,
                "<div class=\"verdict absent\">No result of the {name} rule was given; the figures \
                 here come from the profiler data alone.</div>"
            );
            return;
        };
        let class = rule.status.name();
        if rule.status == Status::NoData {
            let _ = write!(
                self.out,
                "<div class=\"verdict NoData\"><strong>{}</strong> rule: <span class=\"status\">\
                 NoData</span>, nothing checked in this run (not a pass): {}</div>",
                escape(&rule.name),
                escape(&rule.message)
            );
            return;
        }
        let mut text = format!(
            "<div class=\"verdict {class}\"><strong>{}</strong> rule: <span class=\"status\">{}</span>, \
             fired {} time(s) over {} datapoint(s)",
            escape(&rule.name),
            class,
            rule.triggered,
            rule.datapoints
        );
        if let Some(step) = rule.first_fired_step {
            let _ = write!(
                text,
                ", first at {}",
                smdebug_rules::StepRef {
                    step,
                    mode: rule.first_fired_mode
                }
            );
        }
        text.push('.');
        if let Some(window) = &rule.window {
            let _ = write!(
                text,
                " <span class=\"window\">Its finding and its figures in this section cover {}.</span>",
                escape(&window.describe())
            );
        }
        if !rule.message.is_empty() {
            let _ = write!(text, " {}", escape(&rule.message));
        }
        if rule.status == Status::IssuesFound && !rule.recommendation.is_empty() {
            let _ = write!(
                text,
                "<br><strong>Recommendation:</strong> {}",
                escape(&rule.recommendation)
            );
        }
        text.push_str("</div>");
        self.out.push_str(&text);
    }
}
