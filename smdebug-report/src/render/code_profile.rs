//! Section 14, the code profile: the sampled CPU stacks of code-profiling windows, as top
//! functions and a flame graph per window.

use std::fmt::Write as _;

use base64::Engine as _;
use smdebug_analysis::time::utc;
use smdebug_format::code_profile::FunctionSamples;

use crate::html::{Cell, escape, table};
use crate::input::{CODE_PROFILE_WINDOWS_SHOWN, CodeProfile, NoteArea};

use super::Page;
use super::format::pct;

/// Functions listed per table.
const TOP_ROWS: usize = 15;
/// Largest flame graph embedded in the page; a larger one is named, not embedded.
const MAX_EMBEDDED_SVG_BYTES: usize = 4 << 20;

impl Page<'_> {
    pub(super) fn code_profile(&mut self) {
        self.notes(NoteArea::CodeProfiles);
        let input = self.input;
        let windows = &input.code_profiles;
        if windows.is_empty() {
            self.missing(
                "No code profile was recorded (nothing under framework/code/). Open a \
                 code-profiling window (smdebug-profiler's CodeProfiler, or the session's \
                 PythonProfilingConfig window) to see where the CPU time goes, function by \
                 function.",
            );
            return;
        }
        self.lead(
            "Sampled CPU stacks of the training process in its code-profiling windows (the \
             counterpart of SageMaker's Python profiling). The sampler counts the CPU time of \
             the whole process, every thread. Self: the sampled instruction was in the function; \
             total: the function was anywhere on the sampled stack. Shares are of the window's \
             samples.",
        );
        if windows.len() > 1 {
            let rows: Vec<Vec<Cell>> = windows
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let s = &w.summary;
                    vec![
                        Cell::num((i + 1).to_string()),
                        Cell::text(utc(s.start_time_since_epoch_in_micros)),
                        Cell::text(s.steps_label()),
                        Cell::text(format!("{}, worker {}", s.node_id, s.worker)),
                        Cell::num(format!("{:.2}", s.duration_seconds())),
                        Cell::num(s.samples.to_string()),
                        Cell::Name(
                            s.top_self
                                .first()
                                .map_or_else(|| "-".to_owned(), |f| f.function.clone()),
                        ),
                    ]
                })
                .collect();
            table(
                &mut self.out,
                "code-windows",
                &[
                    "window",
                    "start",
                    "steps",
                    "node",
                    "seconds",
                    "samples",
                    "most self samples",
                ],
                &rows,
            );
        }
        let first_shown = windows.len().saturating_sub(CODE_PROFILE_WINDOWS_SHOWN);
        if first_shown > 0 {
            self.lead(&format!(
                "The last {CODE_PROFILE_WINDOWS_SHOWN} windows are shown in full; the {first_shown} \
                 earlier ones are in the table above and in the run."
            ));
        }
        for (i, window) in windows.iter().enumerate().skip(first_shown) {
            self.code_window(i + 1, windows.len(), window);
        }
    }

    fn code_window(&mut self, number: usize, of: usize, window: &CodeProfile) {
        let s = &window.summary;
        let steps = s.steps_label();
        let mut title = format!("Window {number} of {of}");
        if !steps.is_empty() {
            let _ = write!(title, ": {steps}");
        }
        let _ = write!(title, " · node {}, worker {}", s.node_id, s.worker);
        self.h3(&title);
        let cpu = s.process_cpu_seconds.map_or(String::new(), |c| {
            format!(" ({c:.2} CPU seconds of the process)")
        });
        let threads: Vec<String> = s
            .threads
            .iter()
            .take(6)
            .map(|t| format!("{} {}", t.thread, t.samples))
            .collect();
        self.lead(&format!(
            "{:.2} s from {}; {} samples at {} Hz{cpu}; {} functions seen. Samples per thread: {}.",
            s.duration_seconds(),
            utc(s.start_time_since_epoch_in_micros),
            s.samples,
            s.frequency_hz,
            s.functions,
            if threads.is_empty() {
                "none".to_owned()
            } else {
                threads.join(", ")
            }
        ));
        if s.samples == 0 {
            self.missing(
                "No sample was taken in this window: the process used (almost) no CPU time \
                 while it was open.",
            );
            return;
        }
        let rows = |functions: &[FunctionSamples]| -> Vec<Vec<Cell>> {
            functions
                .iter()
                .take(TOP_ROWS)
                .map(|f| {
                    vec![
                        Cell::Name(f.function.clone()),
                        Cell::num(f.samples.to_string()),
                        Cell::num(pct(f.share)),
                    ]
                })
                .collect()
        };
        self.out
            .push_str("<p><strong>Top functions by self samples</strong></p>");
        table(
            &mut self.out,
            "code-top-self",
            &["function", "self samples", "share"],
            &rows(&s.top_self),
        );
        let hidden = match s.shared_root_functions {
            0 => String::new(),
            n => format!(
                " ({n} functions of the start-up chain that every sample shared are left out)"
            ),
        };
        let _ = write!(
            self.out,
            "<p><strong>Top functions by total samples</strong>{}</p>",
            escape(&hidden)
        );
        table(
            &mut self.out,
            "code-top-total",
            &["function", "total samples", "share"],
            &rows(&s.top_total),
        );
        let files = format!(
            "The interactive flame graph (search, zoom) is {} in the run; the pprof profile, {} \
             (go tool pprof, speedscope).",
            window.file.flamegraph_key(),
            window.file.pprof_key()
        );
        match &window.flamegraph {
            Some(svg) if svg.len() <= MAX_EMBEDDED_SVG_BYTES => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(svg);
                let _ = write!(
                    self.out,
                    "<figure class=\"flamegraph\" id=\"flamegraph-{number}\"><img alt=\"{}\" \
                     src=\"data:image/svg+xml;base64,{encoded}\"><figcaption>{}</figcaption></figure>",
                    escape(&format!("Flame graph of window {number}")),
                    escape(&format!(
                        "Flame graph of window {number}: callers below, callees above, width \
                         proportional to samples. {files}"
                    ))
                );
            }
            Some(svg) => self.missing(&format!(
                "The flame graph is {} bytes, too large to embed. {files}",
                svg.len()
            )),
            None => self.missing(&format!("No flame graph was read for this window. {files}")),
        }
    }
}
