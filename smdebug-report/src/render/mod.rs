//! The page: header, table of contents, one section per entry of [`SECTIONS`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Map;
use smdebug_core::Mode;
use smdebug_profiler::reader::Span;
use smdebug_profiler::spans::Phase;
use smdebug_profiler::system::vocab;
use smdebug_rules::{Status, find_builtin};

use crate::charts::{self, Series, XAxis, clock};
use crate::html::{self, Cell, escape, table};
use crate::output::RuleFile;
use crate::stats::{self, Summary};
use crate::{MetricSeries, NoteArea, ReportInput, SECTIONS};

/// Most series in one chart; more are left to the tables.
const MAX_SERIES: usize = 8;
/// Longest gap between a CPU sample and the GPU sample paired with it, µs.
const PAIRING_TOLERANCE_US: u64 = 2_000_000;

pub(crate) fn render(input: &ReportInput) -> String {
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
            "cpu-bottlenecks" => page.bottleneck(Bottleneck::Cpu),
            "io-bottlenecks" => page.bottleneck(Bottleneck::Io),
            "load-balancing" => page.load_balancing(),
            "gpu-memory" => page.gpu_memory(),
            "data-loading" => page.data_loading(),
            "debugging-rules" => page.debugging_rules(),
            "scalars" => page.scalars(),
            _ => page.data_notes(),
        }
        page.out.push_str("</section>\n");
    }
    page.tail();
    page.out
}

// ---------------------------------------------------------------------------------------------
// Derived data

struct GpuView<'a> {
    node: String,
    name: String,
    util: Option<&'a MetricSeries>,
    mem: Option<&'a MetricSeries>,
}

impl GpuView<'_> {
    fn label(&self, many_nodes: bool) -> String {
        if many_nodes {
            format!("{} {}", self.node, self.name)
        } else {
            self.name.clone()
        }
    }
}

struct NodeView<'a> {
    node: String,
    /// CPU busy % over all cores: the `total` record, else the mean of the cores per time.
    cpu: Vec<(u64, f64)>,
    io_wait: Vec<(u64, f64)>,
    cores: Vec<&'a MetricSeries>,
    memory: Option<&'a MetricSeries>,
    gpus: Vec<GpuView<'a>>,
    /// Mean utilization of the node's GPUs per sample time.
    gpu_mean: Vec<(u64, f64)>,
    traffic: Vec<&'a MetricSeries>,
}

struct View<'a> {
    nodes: Vec<NodeView<'a>>,
    t0_us: Option<u64>,
    t1_us: Option<u64>,
    steps: Vec<&'a Span>,
    many_nodes: bool,
}

/// The trailing number of a name (`cpu12` → 12), for natural ordering.
fn trailing_number(name: &str) -> u64 {
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(u64::MAX)
}

/// Mean per timestamp over several series.
fn mean_per_time<'s>(series: impl IntoIterator<Item = &'s MetricSeries>) -> Vec<(u64, f64)> {
    let mut acc: BTreeMap<u64, (f64, u32)> = BTreeMap::new();
    for s in series {
        for &(t, v) in &s.points {
            let e = acc.entry(t).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }
    acc.into_iter()
        .map(|(t, (sum, n))| (t, sum / f64::from(n)))
        .collect()
}

impl<'a> View<'a> {
    fn new(input: &'a ReportInput) -> View<'a> {
        let mut by_node: BTreeMap<&str, Vec<&MetricSeries>> = BTreeMap::new();
        for s in &input.metrics {
            by_node.entry(s.node.as_str()).or_default().push(s);
        }
        let nodes = by_node
            .into_iter()
            .map(|(node, series)| {
                let find = |t: &str, n: &str, d: &str| {
                    series
                        .iter()
                        .copied()
                        .find(|s| s.metric_type == t && s.name == n && s.dimension == d)
                };
                let mut cores: Vec<&MetricSeries> = series
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.metric_type == vocab::TYPE_CPU
                            && s.name != vocab::CPU_TOTAL
                            && s.dimension == vocab::CPU_UTILIZATION
                    })
                    .collect();
                cores.sort_by_key(|s| trailing_number(&s.name));
                let cpu = find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION)
                    .map(|s| s.points.clone())
                    .unwrap_or_else(|| mean_per_time(cores.iter().copied()));
                let io_wait = find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::IO_WAIT_PERCENTAGE)
                    .map(|s| s.points.clone())
                    .unwrap_or_else(|| {
                        mean_per_time(series.iter().copied().filter(|s| {
                            s.metric_type == vocab::TYPE_CPU
                                && s.dimension == vocab::IO_WAIT_PERCENTAGE
                        }))
                    });
                let mut gpu_names: Vec<&str> = series
                    .iter()
                    .filter(|s| s.metric_type == vocab::TYPE_GPU)
                    .map(|s| s.name.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                gpu_names.sort_by_key(|n| (trailing_number(n), n.to_string()));
                let gpus: Vec<GpuView> = gpu_names
                    .into_iter()
                    .map(|name| GpuView {
                        node: node.to_owned(),
                        name: name.to_owned(),
                        util: find(vocab::TYPE_GPU, name, vocab::GPU_UTILIZATION),
                        mem: find(vocab::TYPE_GPU, name, vocab::GPU_MEMORY_UTILIZATION),
                    })
                    .filter(|g| g.util.is_some() || g.mem.is_some())
                    .collect();
                let gpu_mean = mean_per_time(gpus.iter().filter_map(|g| g.util));
                NodeView {
                    node: node.to_owned(),
                    cpu,
                    io_wait,
                    cores,
                    memory: find(vocab::TYPE_MEMORY, vocab::MEMORY_USED_PERCENT, ""),
                    gpus,
                    gpu_mean,
                    traffic: series
                        .iter()
                        .copied()
                        .filter(|s| {
                            s.metric_type == vocab::TYPE_IO && s.name != vocab::IOPS
                                || s.metric_type == vocab::TYPE_NETWORK
                        })
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let metric_times = input
            .metrics
            .iter()
            .filter_map(|s| Some((s.points.first()?.0, s.points.last()?.0)));
        let span_times = input.spans.iter().map(|s| (s.start_us, s.end_us));
        let (mut t0, mut t1) = (None::<u64>, None::<u64>);
        for (a, b) in metric_times.chain(span_times) {
            t0 = Some(t0.map_or(a, |t| t.min(a)));
            t1 = Some(t1.map_or(b, |t| t.max(b)));
        }
        let steps = input
            .spans
            .iter()
            .filter(|s| matches!(s.phase_kind(), Phase::Step(_)))
            .collect();
        let many_nodes = nodes.len() > 1;
        View {
            nodes,
            t0_us: t0,
            t1_us: t1,
            steps,
            many_nodes,
        }
    }

    fn gpus(&self) -> impl Iterator<Item = &GpuView<'a>> {
        self.nodes.iter().flat_map(|n| n.gpus.iter())
    }

    /// Seconds since the job start.
    fn elapsed(&self, us: u64) -> f64 {
        let t0 = self.t0_us.unwrap_or(0);
        (us as f64 - t0 as f64) / 1e6
    }

    fn timeline(&self, points: &[(u64, f64)]) -> Vec<(f64, f64)> {
        points.iter().map(|&(t, v)| (self.elapsed(t), v)).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting

fn fmt_time(us: u64) -> String {
    i64::try_from(us)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

fn fmt_secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{s:.1} s ({})", clock(s))
    } else {
        format!("{s:.3} s")
    }
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

fn pct(share: f64) -> String {
    if share.is_finite() {
        format!("{:.1}%", share * 100.0)
    } else {
        "-".to_owned()
    }
}

fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".to_owned();
    }
    if unit == "B" || unit == "B/s" {
        let suffix = if unit == "B/s" { "/s" } else { "" };
        let a = v.abs();
        let (scaled, prefix) = if a >= 1024f64.powi(3) {
            (v / 1024f64.powi(3), "GiB")
        } else if a >= 1024f64.powi(2) {
            (v / 1024f64.powi(2), "MiB")
        } else if a >= 1024.0 {
            (v / 1024.0, "KiB")
        } else {
            (v, "B")
        };
        format!("{scaled:.2} {prefix}{suffix}")
    } else {
        format!("{v:.2}")
    }
}

fn type_rank(t: &str) -> u8 {
    match t {
        vocab::TYPE_CPU => 0,
        vocab::TYPE_GPU => 1,
        vocab::TYPE_MEMORY => 2,
        vocab::TYPE_IO => 3,
        vocab::TYPE_NETWORK => 4,
        vocab::TYPE_PROCESS => 5,
        _ => 6,
    }
}

fn metric_label(s: &MetricSeries) -> String {
    let parts: Vec<&str> = [s.name.as_str(), s.dimension.as_str()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    format!("{}: {}", s.metric_type, parts.join(" "))
}

fn mode_name(mode: Option<Mode>) -> &'static str {
    mode.map_or("unknown mode", Mode::name)
}

fn values(points: &[(u64, f64)]) -> impl Iterator<Item = f64> + '_ {
    points.iter().map(|p| p.1)
}

/// The value of the point of `series` (time-ordered) nearest to `t`, within the tolerance.
fn nearest(series: &[(u64, f64)], t: u64) -> Option<f64> {
    let i = series.partition_point(|p| p.0 < t);
    let candidates = [i.checked_sub(1), Some(i)];
    candidates
        .into_iter()
        .flatten()
        .filter_map(|j| series.get(j))
        .filter(|p| p.0.abs_diff(t) <= PAIRING_TOLERANCE_US)
        .min_by_key(|p| p.0.abs_diff(t))
        .map(|p| p.1)
}

/// Merged, sorted intervals of a set of spans, for "was this phase running at time t".
fn merged(spans: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = spans.collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn contains(intervals: &[(u64, u64)], t: u64) -> bool {
    let i = intervals.partition_point(|iv| iv.0 <= t);
    i > 0 && intervals[i - 1].1 >= t
}

// ---------------------------------------------------------------------------------------------
// The page

struct Page<'a> {
    input: &'a ReportInput,
    view: View<'a>,
    /// The rule statuses as the report shows them.
    rules: Vec<RuleFile>,
    out: String,
    charts: usize,
}

/// Steps are grouped by node, worker and mode.
type StepGroup = (String, Option<u32>, Option<Mode>);

enum Bottleneck {
    Cpu,
    Io,
}

impl Page<'_> {
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
             <div class=\"layout\"><nav id=\"toc\"><strong>Contents</strong><ol>",
            escape(&self.input.location),
            status,
            fmt_time(self.input.generated_at_us)
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

    fn rule(&self, name: &str) -> Option<&RuleFile> {
        self.rules
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
    }

    /// The parameter `param` of the rule `rule` as the rule ran, or its default when the rule
    /// did not run: a figure that judges what a rule judges uses the same threshold.
    fn param(&self, rule: &str, param: &str) -> f64 {
        let given = self
            .rule(rule)
            .and_then(|r| r.parameters.get(param))
            .and_then(serde_json::Value::as_f64);
        given
            .or_else(|| {
                let built = find_builtin(rule)?.build(&Map::new()).ok()?;
                built.parameters().get(param)?.as_f64()
            })
            .unwrap_or(f64::NAN)
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
        let mut text = format!(
            "<div class=\"verdict {class}\"><strong>{}</strong> rule: <span class=\"status\">{}</span>, \
             fired {} time(s) over {} datapoint(s)",
            escape(&rule.name),
            class,
            rule.triggered,
            rule.datapoints
        );
        if let Some(step) = rule.first_fired_step {
            let _ = write!(text, ", first at step {step}");
        }
        text.push('.');
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

    // -----------------------------------------------------------------------------------------
    // 1. Training job summary

    fn job_summary(&mut self) {
        self.notes(NoteArea::Run);
        let (Some(t0), Some(t1)) = (self.view.t0_us, self.view.t1_us) else {
            self.missing(
                "No system metrics and no framework spans were found, so the job's start, end and \
                 phases cannot be dated. Record them with the system sampler and SpanRecorder.",
            );
            self.verdict("MaxInitializationTime");
            return;
        };
        self.lead(
            "The job runs from its first record (system sample or span) to its last; the training \
             loop from the start of the first step to the end of the last one. Initialization is \
             the time before the loop, finalization the time after it.",
        );
        let job = (t1 - t0) as f64 / 1e6;
        let mut rows = vec![
            vec![Cell::text("Job start"), Cell::text(fmt_time(t0))],
            vec![Cell::text("Job end"), Cell::text(fmt_time(t1))],
            vec![Cell::text("Job duration"), Cell::text(fmt_secs(job))],
        ];
        let loop_range = self
            .view
            .steps
            .iter()
            .map(|s| (s.start_us, s.end_us))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        let mut slices = Vec::new();
        if let Some((l0, l1)) = loop_range {
            let init = (l0.saturating_sub(t0)) as f64 / 1e6;
            let fin = (t1.saturating_sub(l1)) as f64 / 1e6;
            let looped = (l1 - l0) as f64 / 1e6;
            let share = |s: f64| if job > 0.0 { s / job } else { f64::NAN };
            rows.extend([
                vec![Cell::text("Training loop start"), Cell::text(fmt_time(l0))],
                vec![Cell::text("Training loop end"), Cell::text(fmt_time(l1))],
                vec![
                    Cell::text("Training loop duration"),
                    Cell::text(format!(
                        "{} ({} of the job)",
                        fmt_secs(looped),
                        pct(share(looped))
                    )),
                ],
                vec![
                    Cell::text("Initialization"),
                    Cell::text(format!(
                        "{} ({} of the job)",
                        fmt_secs(init),
                        pct(share(init))
                    )),
                ],
                vec![
                    Cell::text("Finalization"),
                    Cell::text(format!(
                        "{} ({} of the job)",
                        fmt_secs(fin),
                        pct(share(fin))
                    )),
                ],
            ]);
            slices = vec![
                ("Initialization".to_owned(), init),
                ("Training loop".to_owned(), looped),
                ("Finalization".to_owned(), fin),
            ];
        } else {
            rows.push(vec![
                Cell::text("Training loop"),
                Cell::text("unknown: no step spans were recorded"),
            ]);
        }
        let mut per_mode: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &self.view.steps {
            *per_mode.entry(mode_name(s.mode)).or_default() += 1;
        }
        if !per_mode.is_empty() {
            let text: Vec<String> = per_mode.iter().map(|(m, n)| format!("{m}: {n}")).collect();
            rows.push(vec![Cell::text("Step spans"), Cell::text(text.join(", "))]);
        }
        let nodes: BTreeSet<&str> = self
            .input
            .metrics
            .iter()
            .map(|s| s.node.as_str())
            .chain(self.input.spans.iter().map(|s| s.node.as_str()))
            .collect();
        rows.push(vec![
            Cell::text("Nodes"),
            Cell::text(nodes.into_iter().collect::<Vec<_>>().join(", ")),
        ]);
        table(&mut self.out, "summary", &["", "value"], &rows);
        if !slices.is_empty() {
            let drawn = charts::pie_chart("Where the job's time went", &slices);
            self.chart(
                drawn,
                "Initialization, training loop and finalization, share of the job's duration.",
            );
            let init = slices[0].1;
            if job > 0.0 && (init / job > 0.2 || init > 1200.0) {
                self.advice(&format!(
                    "Initialization took {} ({} of the job). Look at what runs before the first \
                     step: data download or decompression, dataset indexing, model compilation or \
                     checkpoint loading; cache or overlap them with training.",
                    fmt_secs(init),
                    pct(init / job)
                ));
            }
        }
        self.verdict("MaxInitializationTime");
    }

    // -----------------------------------------------------------------------------------------
    // 2. System usage statistics

    fn system_usage(&mut self) {
        self.notes(NoteArea::System);
        if self.input.metrics.is_empty() {
            self.missing("No system metrics to summarize: the system sampler did not run for this job, or its files could not be read.");
            self.verdict("OverallSystemUsage");
            return;
        }
        self.lead("Per node and metric over the whole job. Percentiles interpolate between ranks.");
        let mut sorted: Vec<&MetricSeries> = self.input.metrics.iter().collect();
        sorted.sort_by_key(|s| {
            (
                s.node.clone(),
                type_rank(&s.metric_type),
                s.name != vocab::CPU_TOTAL,
                trailing_number(&s.name),
                s.name.clone(),
                s.dimension.clone(),
            )
        });
        let rows: Vec<Vec<Cell>> = sorted
            .iter()
            .filter_map(|s| {
                let sum = Summary::of(values(&s.points))?;
                let unit = s.unit();
                Some(vec![
                    Cell::text(&s.node),
                    Cell::text(metric_label(s)),
                    Cell::text(unit),
                    Cell::num(fmt_value(sum.max, unit)),
                    Cell::num(fmt_value(sum.p99, unit)),
                    Cell::num(fmt_value(sum.p95, unit)),
                    Cell::num(fmt_value(sum.p50, unit)),
                    Cell::num(fmt_value(sum.min, unit)),
                    Cell::num(sum.count.to_string()),
                ])
            })
            .collect();
        table(
            &mut self.out,
            "system-usage",
            &[
                "node", "metric", "unit", "max", "p99", "p95", "p50", "min", "samples",
            ],
            &rows,
        );
        for i in 0..self.view.nodes.len() {
            self.node_charts(i);
        }
        self.verdict("OverallSystemUsage");
    }

    fn node_charts(&mut self, index: usize) {
        let many = self.view.many_nodes;
        let name = self.view.nodes[index].node.clone();
        self.h3(&format!("Node {name}"));
        let node = &self.view.nodes[index];
        let mut util = Vec::new();
        if !node.cpu.is_empty() {
            util.push(Series {
                label: "CPU (all cores)".into(),
                points: self.view.timeline(&node.cpu),
            });
        }
        if !node.io_wait.is_empty() {
            util.push(Series {
                label: "I/O wait".into(),
                points: self.view.timeline(&node.io_wait),
            });
        }
        for g in node
            .gpus
            .iter()
            .filter_map(|g| Some((g, g.util?)))
            .take(MAX_SERIES)
        {
            util.push(Series {
                label: format!("{} utilization", g.0.label(many)),
                points: self.view.timeline(&g.1.points),
            });
        }
        let mut memory = Vec::new();
        if let Some(m) = node.memory {
            memory.push(Series {
                label: "host memory".into(),
                points: self.view.timeline(&m.points),
            });
        }
        for g in node
            .gpus
            .iter()
            .filter_map(|g| Some((g, g.mem?)))
            .take(MAX_SERIES)
        {
            memory.push(Series {
                label: format!("{} memory", g.0.label(many)),
                points: self.view.timeline(&g.1.points),
            });
        }
        let traffic: Vec<Series> = node
            .traffic
            .iter()
            .take(MAX_SERIES)
            .map(|s| Series {
                label: s.name.clone(),
                points: s
                    .points
                    .iter()
                    .map(|&(t, v)| (self.view.elapsed(t), v / 1e6))
                    .collect(),
            })
            .collect();
        let cores: Vec<(String, Summary)> = node
            .cores
            .iter()
            .take(64)
            .filter_map(|s| Some((s.name.clone(), Summary::of(values(&s.points))?)))
            .collect();
        if !util.is_empty() {
            let drawn = charts::line_chart(
                &format!("CPU and GPU utilization: {name}"),
                XAxis::Elapsed,
                "%",
                &util,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Utilization over time, percent. Over long runs each line is the mean of a time slice and the light band its lowest to highest sample.");
        }
        if !memory.is_empty() {
            let drawn = charts::line_chart(
                &format!("Memory used: {name}"),
                XAxis::Elapsed,
                "% used",
                &memory,
                Some((0.0, 100.0)),
            );
            self.chart(
                drawn,
                "Host and GPU memory in use, percent of their capacity.",
            );
        }
        if !traffic.is_empty() {
            let drawn = charts::line_chart(
                &format!("Disk and network: {name}"),
                XAxis::Elapsed,
                "MB/s",
                &traffic,
                None,
            );
            self.chart(
                drawn,
                "Disk reads and writes and network traffic, megabytes per second.",
            );
        }
        if !cores.is_empty() {
            let drawn = charts::box_chart(
                &format!("CPU utilization per core: {name}"),
                "%",
                &cores,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Per core: box from p25 to p75 with the median, whiskers p5 to p95, dots at min and max.");
        }
    }

    // -----------------------------------------------------------------------------------------
    // 3. Framework metrics summary

    fn framework_metrics(&mut self) {
        self.notes(NoteArea::Spans);
        if self.input.spans.is_empty() {
            self.missing("No framework spans: there is no split of the loop's time into modes and phases. Record steps and phases with SpanRecorder.");
        } else {
            self.mode_split();
            self.phase_split();
        }
        self.h3("CPU and GPU operators");
        if self.input.traces.is_empty() {
            self.missing("CPU versus GPU operator time comes from PyTorch profiler (Kineto) traces; none was given to the report.");
        } else {
            let rows: Vec<Vec<Cell>> = self
                .input
                .traces
                .iter()
                .map(|r| {
                    let gpu_span = r.gpu_busy_us + r.gpu_idle_us;
                    vec![
                        Cell::num(r.rank.to_string()),
                        Cell::num(ms(r.cpu_operator_total_us)),
                        Cell::num(ms(r.gpu_kernel_total_us)),
                        Cell::num(ms(r.gpu_memcpy_total_us + r.gpu_memset_total_us)),
                        Cell::num(ms(r.gpu_busy_us)),
                        Cell::num(ms(r.gpu_idle_us)),
                        Cell::num(if gpu_span > 0.0 {
                            pct(r.gpu_busy_us / gpu_span)
                        } else {
                            "-".into()
                        }),
                    ]
                })
                .collect();
            table(
                &mut self.out,
                "operators-split",
                &[
                    "rank",
                    "CPU operators ms (inclusive)",
                    "GPU kernels ms",
                    "GPU memcpy+memset ms",
                    "GPU busy ms",
                    "GPU idle ms",
                    "GPU busy share",
                ],
                &rows,
            );
            let cpu: f64 = self
                .input
                .traces
                .iter()
                .map(|r| r.cpu_operator_total_us)
                .sum();
            let gpu: f64 = self
                .input
                .traces
                .iter()
                .map(|r| r.gpu_kernel_total_us + r.gpu_memcpy_total_us + r.gpu_memset_total_us)
                .sum();
            let drawn = charts::pie_chart(
                "CPU operators vs GPU activity (all ranks)",
                &[
                    ("CPU operators".into(), cpu),
                    ("GPU kernels, copies, sets".into(), gpu),
                ],
            );
            self.chart(drawn, "Total CPU operator time (nested operators count in their parents too) against total GPU activity.");
        }
        self.verdict("OverallFrameworkMetrics");
    }

    fn mode_split(&mut self) {
        let mut per_mode: BTreeMap<&str, f64> = BTreeMap::new();
        let mut per_worker: BTreeMap<(&str, Option<u32>), (u64, u64, u64)> = BTreeMap::new();
        for s in &self.view.steps {
            *per_mode.entry(mode_name(s.mode)).or_default() += s.duration_us() as f64;
            let e = per_worker
                .entry((s.node.as_str(), s.worker))
                .or_insert((s.start_us, s.end_us, 0));
            e.0 = e.0.min(s.start_us);
            e.1 = e.1.max(s.end_us);
            e.2 += s.duration_us();
        }
        if per_mode.is_empty() {
            self.missing("No step spans, so time per mode (training, evaluation) is unknown.");
            return;
        }
        let between: f64 = per_worker
            .values()
            .map(|(a, b, inside)| (b - a).saturating_sub(*inside) as f64)
            .sum();
        let mut slices: Vec<(String, f64)> = per_mode
            .iter()
            .map(|(m, us)| (format!("{m} steps"), *us / 1e6))
            .collect();
        slices.push(("between steps".into(), between / 1e6));
        let total: f64 = slices.iter().map(|s| s.1).sum();
        self.h3("Training, evaluation and other time");
        let rows: Vec<Vec<Cell>> = slices
            .iter()
            .map(|(l, s)| {
                vec![
                    Cell::text(l),
                    Cell::num(format!("{s:.3}")),
                    Cell::num(pct(s / total)),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "mode-split",
            &["part of the loop", "seconds (summed over workers)", "share"],
            &rows,
        );
        let drawn = charts::pie_chart("Time in the training loop by mode", &slices);
        self.chart(
            drawn,
            "Step time per mode, and loop time outside any step, summed over workers.",
        );
        if total > 0.0 && between / 1e6 / total > 0.2 {
            self.advice(&format!(
                "{} of the loop's time falls between steps. Something outside the step spans takes \
                 that time (logging, checkpoints, validation without spans, waiting on other \
                 workers); record it with a custom span to see what it is.",
                pct(between / 1e6 / total)
            ));
        }
    }

    fn phase_split(&mut self) {
        let mut per_phase: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for s in &self.input.spans {
            per_phase
                .entry(s.phase.as_str())
                .or_default()
                .push(s.duration_us() as f64);
        }
        let step_total: f64 = self.view.steps.iter().map(|s| s.duration_us() as f64).sum();
        let mut rows = Vec::new();
        let mut slices = Vec::new();
        let mut totals: Vec<(&str, f64)> = per_phase
            .iter()
            .map(|(p, d)| (*p, d.iter().sum()))
            .collect();
        totals.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (phase, total) in &totals {
            let Some(sum) = Summary::of(per_phase[phase].iter().copied()) else {
                continue;
            };
            let is_step = phase.starts_with("Step:");
            rows.push(vec![
                Cell::text(*phase),
                Cell::num(sum.count.to_string()),
                Cell::num(format!("{:.3}", total / 1e6)),
                Cell::num(if is_step || step_total <= 0.0 {
                    "-".into()
                } else {
                    pct(total / step_total)
                }),
                Cell::num(ms(sum.mean)),
                Cell::num(ms(sum.p50)),
                Cell::num(ms(sum.p95)),
                Cell::num(ms(sum.max)),
            ]);
            if !is_step {
                slices.push(((*phase).to_owned(), *total / 1e6));
            }
        }
        self.h3("Phases");
        table(
            &mut self.out,
            "phases",
            &[
                "phase",
                "spans",
                "total s",
                "share of step time",
                "mean ms",
                "p50 ms",
                "p95 ms",
                "max ms",
            ],
            &rows,
        );
        if slices.len() > MAX_SERIES {
            let rest: f64 = slices[MAX_SERIES - 1..].iter().map(|s| s.1).sum();
            slices.truncate(MAX_SERIES - 1);
            slices.push(("other phases".into(), rest));
        }
        if !slices.is_empty() {
            let drawn = charts::pie_chart("Time per phase", &slices);
            self.chart(drawn, "Total time of each recorded phase other than whole steps (forward, backward, data loading, optimizer, custom).");
        }
        let total_of = |kind: Phase| -> f64 {
            self.input
                .spans
                .iter()
                .filter(|s| s.phase_kind() == kind)
                .map(|s| s.duration_us() as f64)
                .sum()
        };
        let (fwd, bwd) = (total_of(Phase::Forward), total_of(Phase::Backward));
        if fwd > 0.0 && bwd > 0.0 {
            let ratio = bwd / fwd;
            let _ = write!(
                self.out,
                "<p>Forward passes took {:.3} s and backward passes {:.3} s: backward/forward = {ratio:.2}.</p>",
                fwd / 1e6,
                bwd / 1e6
            );
            if ratio > 3.0 {
                self.advice("The backward pass takes more than three times the forward pass; typical models need about twice. Look for operators without efficient gradients, gradient checkpointing recomputation, or synchronisation inside backward.");
            }
        } else {
            self.missing("Forward versus backward needs both Forward and Backward spans; at least one kind was not recorded.");
        }
    }

    // -----------------------------------------------------------------------------------------
    // 4. Top operators

    fn top_operators(&mut self) {
        self.notes(NoteArea::Traces);
        if self.input.traces.is_empty() {
            self.missing("No PyTorch profiler (Kineto) trace was given, so there are no operator or kernel breakdowns. Pass the trace files of a torch.profiler / libtorch run to the report.");
            return;
        }
        self.lead("From the Kineto traces, per rank: the ten operators and kernels with the most total time. CPU operator times are inclusive (a nested operator's time counts in its parent too).");
        let input = self.input;
        for r in input.traces.iter().take(MAX_SERIES) {
            self.h3(&format!("Rank {} ({})", r.rank, r.file));
            let op_rows = |ops: &[smdebug_profiler::kineto::OpStats]| -> Vec<Vec<Cell>> {
                ops.iter()
                    .take(10)
                    .map(|o| {
                        vec![
                            Cell::Name(o.name.clone()),
                            Cell::num(o.count.to_string()),
                            Cell::num(ms(o.total_us)),
                            Cell::num(format!("{:.1}", o.mean_us)),
                            Cell::num(format!("{:.1}", o.max_us)),
                            Cell::num(pct(o.share)),
                        ]
                    })
                    .collect()
            };
            let headers = ["name", "count", "total ms", "mean µs", "max µs", "share"];
            if r.cpu_operators.is_empty() {
                self.missing("This trace has no CPU operators (cpu_op events).");
            } else {
                self.out.push_str("<p><strong>CPU operators</strong></p>");
                table(
                    &mut self.out,
                    "top-cpu",
                    &headers,
                    &op_rows(&r.cpu_operators),
                );
            }
            if r.gpu_kernels.is_empty() {
                self.missing("This trace has no GPU kernels: it was recorded without CUDA activity (a CPU-only run).");
            } else {
                self.out.push_str("<p><strong>GPU kernels</strong></p>");
                table(&mut self.out, "top-gpu", &headers, &op_rows(&r.gpu_kernels));
            }
            let (title, ops) = if r.gpu_kernels.is_empty() {
                ("Top CPU operators by total time", &r.cpu_operators)
            } else {
                ("Top GPU kernels by total time", &r.gpu_kernels)
            };
            let bars: Vec<(String, f64)> = ops
                .iter()
                .take(10)
                .map(|o| (o.name.clone(), o.total_us / 1000.0))
                .collect();
            if !bars.is_empty() {
                let drawn = charts::bar_chart(&format!("{title}, rank {}", r.rank), "ms", &bars);
                self.chart(drawn, "Total milliseconds per name.");
            }
        }
        if input.traces.len() > MAX_SERIES {
            self.lead(&format!(
                "{} more ranks are not shown.",
                input.traces.len() - MAX_SERIES
            ));
        }
    }

    // -----------------------------------------------------------------------------------------
    // 5. Rules summary

    fn rules_summary(&mut self) {
        self.notes(NoteArea::Rules);
        if self.rules.is_empty() {
            self.missing("No rule results were given to the report, so there is no rules summary. Run the profiler and debugging rules over the run and pass their results.");
            return;
        }
        let issues = self
            .rules
            .iter()
            .filter(|r| r.status == Status::IssuesFound)
            .count();
        self.lead(&format!(
            "{} rule(s); {issues} found issues. Rules that found issues come first.",
            self.rules.len()
        ));
        let mut rules: Vec<&RuleFile> = self.rules.iter().collect();
        rules.sort_by_key(|r| r.status != Status::IssuesFound);
        let rows: Vec<Vec<Cell>> = rules
            .iter()
            .map(|r| {
                vec![
                    Cell::text(&r.name),
                    Cell::text(&r.kind),
                    Cell::text(r.status.name()),
                    Cell::num(r.triggered.to_string()),
                    Cell::num(r.datapoints.to_string()),
                    Cell::text(&r.description),
                    Cell::text(&r.recommendation),
                    Cell::Code(r.parameters.to_string()),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "rules",
            &[
                "rule",
                "kind",
                "status",
                "triggered",
                "datapoints",
                "description",
                "recommendation",
                "parameters",
            ],
            &rows,
        );
    }

    // -----------------------------------------------------------------------------------------
    // 6. Step durations

    fn step_durations(&mut self) {
        if self.view.steps.is_empty() {
            self.missing("No step spans were recorded, so there are no step durations. Wrap each step in SpanRecorder::step.");
            self.verdict("StepOutlier");
            return;
        }
        self.lead("Per node and worker (one worker per GPU in data-parallel jobs) and mode. Outliers are steps longer than the group's mean plus three standard deviations.");
        let mut groups: BTreeMap<StepGroup, Vec<&Span>> = BTreeMap::new();
        for s in &self.view.steps {
            groups
                .entry((s.node.clone(), s.worker, s.mode))
                .or_default()
                .push(s);
        }
        let label = |node: &str, worker: Option<u32>| match worker {
            Some(w) => format!("{node} worker {w}"),
            None => node.to_owned(),
        };
        let mut rows = Vec::new();
        let mut outliers: Vec<(f64, String, &Span, f64)> = Vec::new();
        for ((node, worker, mode), spans) in &groups {
            let Some(sum) = Summary::of(spans.iter().map(|s| s.duration_us() as f64)) else {
                continue;
            };
            let threshold = sum.mean + 3.0 * sum.std;
            let slow: Vec<&&Span> = spans
                .iter()
                .filter(|s| s.duration_us() as f64 > threshold && sum.std > 0.0)
                .collect();
            for s in &slow {
                outliers.push((s.duration_us() as f64, label(node, *worker), s, threshold));
            }
            rows.push(vec![
                Cell::text(label(node, *worker)),
                Cell::text(mode_name(*mode)),
                Cell::num(sum.count.to_string()),
                Cell::num(ms(sum.mean)),
                Cell::num(ms(sum.std)),
                Cell::num(ms(sum.min)),
                Cell::num(ms(sum.p50)),
                Cell::num(ms(sum.p95)),
                Cell::num(ms(sum.p99)),
                Cell::num(ms(sum.max)),
                Cell::num(slow.len().to_string()),
            ]);
        }
        table(
            &mut self.out,
            "step-stats",
            &[
                "node / worker",
                "mode",
                "steps",
                "mean ms",
                "stddev ms",
                "min ms",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "max ms",
                "outliers",
            ],
            &rows,
        );
        // The histogram and timeline show the mode with the most steps.
        let mut count_per_mode: BTreeMap<Option<Mode>, usize> = BTreeMap::new();
        for ((_, _, m), v) in &groups {
            *count_per_mode.entry(*m).or_default() += v.len();
        }
        let main_mode = count_per_mode
            .iter()
            .max_by_key(|(_, n)| **n)
            .and_then(|(m, _)| *m);
        let shown: Vec<(String, Vec<&Span>)> = groups
            .iter()
            .filter(|((_, _, m), _)| *m == main_mode)
            .take(MAX_SERIES)
            .map(|((n, w, _), v)| (label(n, *w), v.clone()))
            .collect();
        let durations: Vec<f64> = shown
            .iter()
            .flat_map(|(_, v)| v.iter().map(|s| s.duration_us() as f64 / 1000.0))
            .collect();
        if let Some(all) = Summary::of(durations.iter().copied()) {
            let bins = 30;
            let (lo, hi) = if all.max > all.min {
                (all.min, all.max)
            } else {
                (all.min - 0.5, all.max + 0.5)
            };
            let edges: Vec<f64> = (0..=bins)
                .map(|i| lo + (hi - lo) * i as f64 / bins as f64)
                .collect();
            let series: Vec<(String, Vec<u64>)> = shown
                .iter()
                .map(|(l, v)| {
                    (
                        l.clone(),
                        stats::histogram(
                            v.iter().map(|s| s.duration_us() as f64 / 1000.0),
                            bins,
                            lo,
                            hi,
                        ),
                    )
                })
                .collect();
            let mode = mode_name(main_mode);
            let drawn = charts::histogram_chart(
                &format!("Step durations, {mode}"),
                "step duration (ms)",
                &edges,
                &series,
            );
            self.chart(drawn, "How many steps took how long, per node and worker.");
            let lines: Vec<Series> = shown
                .iter()
                .map(|(l, v)| Series {
                    label: l.clone(),
                    points: v
                        .iter()
                        .map(|s| {
                            (
                                self.view.elapsed(s.start_us),
                                s.duration_us() as f64 / 1000.0,
                            )
                        })
                        .collect(),
                })
                .collect();
            let drawn = charts::line_chart(
                &format!("Step duration over time, {mode}"),
                XAxis::Elapsed,
                "ms",
                &lines,
                None,
            );
            self.chart(drawn, "Duration of each step at the time it started.");
        }
        self.h3("Outliers");
        if outliers.is_empty() {
            self.lead("No step took longer than its group's mean plus three standard deviations.");
        } else {
            outliers.sort_by(|a, b| b.0.total_cmp(&a.0));
            self.lead(&format!(
                "{} outlier step(s); the slowest ten:",
                outliers.len()
            ));
            let rows: Vec<Vec<Cell>> = outliers
                .iter()
                .take(10)
                .map(|(d, l, s, th)| {
                    vec![
                        Cell::text(l),
                        Cell::text(mode_name(s.mode)),
                        Cell::num(s.step.map_or("-".into(), |x| x.to_string())),
                        Cell::text(clock(self.view.elapsed(s.start_us))),
                        Cell::num(ms(*d)),
                        Cell::num(ms(*th)),
                    ]
                })
                .collect();
            table(
                &mut self.out,
                "step-outliers",
                &[
                    "node / worker",
                    "mode",
                    "step",
                    "started at",
                    "duration ms",
                    "threshold ms",
                ],
                &rows,
            );
            self.advice("Look at what ran at those times: checkpoints, evaluation, garbage collection, a slow batch or a stalled data loader. If the slow steps are periodic, move that work off the training loop or make it asynchronous.");
        }
        self.verdict("StepOutlier");
    }

    // -----------------------------------------------------------------------------------------
    // 7. GPU utilization

    fn gpu_utilization(&mut self) {
        let many = self.view.many_nodes;
        let gpus: Vec<(String, String, Summary, Vec<u64>)> = self
            .view
            .gpus()
            .filter_map(|g| {
                let u = g.util?;
                let sum = Summary::of(values(&u.points))?;
                Some((
                    g.label(many),
                    g.node.clone(),
                    sum,
                    stats::histogram(values(&u.points), 10, 0.0, 100.0),
                ))
            })
            .collect();
        if gpus.is_empty() {
            self.missing("No GPU utilization was recorded: the job ran without a GPU, or NVML was not available to the sampler.");
            self.verdict("LowGPUUtilization");
            return;
        }
        self.lead("Per GPU: distribution of utilization samples (box plots) and how often each utilization band occurred (workload histogram).");
        let boxes: Vec<(String, Summary)> = gpus
            .iter()
            .take(16)
            .map(|g| (g.0.clone(), g.2.clone()))
            .collect();
        let drawn = charts::box_chart("GPU utilization", "%", &boxes, Some((0.0, 100.0)));
        self.chart(
            drawn,
            "Box from p25 to p75 with the median, whiskers p5 to p95, dots at min and max.",
        );
        let nodes: BTreeSet<&str> = gpus.iter().map(|g| g.1.as_str()).collect();
        let edges: Vec<f64> = (0..=10).map(|i| f64::from(i) * 10.0).collect();
        for node in nodes {
            let series: Vec<(String, Vec<u64>)> = gpus
                .iter()
                .filter(|g| g.1 == node)
                .take(MAX_SERIES)
                .map(|g| (g.0.clone(), g.3.clone()))
                .collect();
            let drawn = charts::histogram_chart(
                &format!("GPU workload: {node}"),
                "utilization (%)",
                &edges,
                &series,
            );
            self.chart(
                drawn,
                "Number of samples in each 10% band of utilization, per GPU.",
            );
        }
        let low_p95 = self.param("LowGPUUtilization", "threshold_p95");
        let low_p5 = self.param("LowGPUUtilization", "threshold_p5");
        let mut advice = Vec::new();
        let rows: Vec<Vec<Cell>> = gpus
            .iter()
            .map(|(l, _, s, _)| {
                let finding = if s.p95 < low_p95 {
                    advice.push(format!("{l} is underused (p95 {:.0}%)", s.p95));
                    "underused"
                } else if s.p95 > low_p95 && s.p5 < low_p5 {
                    advice.push(format!(
                        "{l} fluctuates (p95 {:.0}%, p5 {:.0}%)",
                        s.p95, s.p5
                    ));
                    "fluctuating"
                } else {
                    "busy"
                };
                vec![
                    Cell::text(l),
                    Cell::num(format!("{:.1}", s.p5)),
                    Cell::num(format!("{:.1}", s.p50)),
                    Cell::num(format!("{:.1}", s.p95)),
                    Cell::num(format!("{:.1}", s.max)),
                    Cell::text(finding),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "gpu-util",
            &["GPU", "p5 %", "p50 %", "p95 %", "max %", "reading"],
            &rows,
        );
        if !advice.is_empty() {
            self.advice(&format!(
                "{}. An underused GPU waits for work: increase the batch size, feed data faster (more \
                 loader workers, prefetching) or use a smaller GPU. A fluctuating one idles between \
                 bursts: look for synchronisation points and data stalls in the step.",
                advice.join("; ")
            ));
        }
        self.verdict("LowGPUUtilization");
    }

    // -----------------------------------------------------------------------------------------
    // 8. Batch size

    fn batch_size(&mut self) {
        if self.view.nodes.is_empty() {
            self.missing("No system metrics: the batch-size check compares CPU, GPU and GPU-memory use, none of which was recorded.");
            self.verdict("BatchSize");
            return;
        }
        let limits = [
            self.param("BatchSize", "cpu_threshold_p95"),
            self.param("BatchSize", "gpu_threshold_p95"),
            self.param("BatchSize", "gpu_memory_threshold_p95"),
        ];
        self.lead(&format!(
            "When CPU p95 stays under {}%, GPU p95 under {}% and GPU memory p95 under \
             {}%, every resource has room and a larger batch would use the hardware better.",
            limits[0], limits[1], limits[2]
        ));
        let mut rows = Vec::new();
        let mut boxes = Vec::new();
        let mut low_nodes = Vec::new();
        let mut any_gpu = false;
        for n in &self.view.nodes {
            let cpu = Summary::of(values(&n.cpu));
            let gpu = Summary::of(
                n.gpus
                    .iter()
                    .filter_map(|g| g.util)
                    .flat_map(|s| values(&s.points)),
            );
            let mem = Summary::of(
                n.gpus
                    .iter()
                    .filter_map(|g| g.mem)
                    .flat_map(|s| values(&s.points)),
            );
            any_gpu |= gpu.is_some();
            let p95 = |s: &Option<Summary>| {
                s.as_ref()
                    .map_or("-".to_owned(), |s| format!("{:.1}", s.p95))
            };
            let all_low = [&cpu, &gpu, &mem]
                .iter()
                .zip(limits)
                .all(|(s, limit)| s.as_ref().is_some_and(|s| s.p95 < limit));
            if all_low {
                low_nodes.push(n.node.clone());
            }
            rows.push(vec![
                Cell::text(&n.node),
                Cell::num(p95(&cpu)),
                Cell::num(p95(&gpu)),
                Cell::num(p95(&mem)),
                Cell::text(if gpu.is_none() {
                    "needs GPU metrics"
                } else if all_low {
                    "all low: room for a larger batch"
                } else {
                    "no"
                }),
            ]);
            let prefix = if self.view.many_nodes {
                format!("{} ", n.node)
            } else {
                String::new()
            };
            for (label, s) in [("CPU", cpu), ("GPU", gpu), ("GPU memory", mem)] {
                if let Some(s) = s {
                    boxes.push((format!("{prefix}{label}"), s));
                }
            }
        }
        table(
            &mut self.out,
            "batch-size",
            &[
                "node",
                "CPU p95 %",
                "GPU p95 %",
                "GPU memory p95 %",
                "all under threshold",
            ],
            &rows,
        );
        boxes.truncate(18);
        let drawn = charts::box_chart(
            "CPU, GPU and GPU memory use",
            "%",
            &boxes,
            Some((0.0, 100.0)),
        );
        self.chart(
            drawn,
            "Distributions of utilization; all GPUs of a node pooled.",
        );
        if !any_gpu {
            self.missing("No GPU metrics were recorded, so the batch-size check cannot tell whether the GPU has room.");
        }
        if !low_nodes.is_empty() {
            self.advice(&format!(
                "On {}, CPU, GPU and GPU memory all stay low: increase the batch size (scaling the \
                 learning rate with it), or move to a smaller, cheaper instance.",
                low_nodes.join(", ")
            ));
        }
        self.verdict("BatchSize");
    }

    // -----------------------------------------------------------------------------------------
    // 9, 10. CPU and I/O bottlenecks

    fn bottleneck(&mut self, kind: Bottleneck) {
        let (rule, what, busy_param, busy_label) = match kind {
            Bottleneck::Cpu => (
                "CPUBottleneck",
                "CPU utilization",
                "cpu_threshold",
                "CPU busy",
            ),
            Bottleneck::Io => ("IOBottleneck", "I/O wait", "io_threshold", "I/O wait high"),
        };
        let busy = self.param(rule, busy_param);
        let gpu_idle = self.param(rule, "gpu_threshold");
        let series_of = |n: &NodeView| -> Vec<(u64, f64)> {
            match kind {
                Bottleneck::Cpu => n.cpu.clone(),
                Bottleneck::Io => n.io_wait.clone(),
            }
        };
        if self.view.nodes.iter().all(|n| series_of(n).is_empty()) {
            self.missing(&format!(
                "No {what} was recorded, so this check has nothing to look at."
            ));
            self.verdict(rule);
            return;
        }
        self.lead(&format!(
            "A sample is a bottleneck when the node's GPUs average under {gpu_idle}% utilization \
             while {what} is over {busy}%: the GPU waits on the {}. Each {what} sample is paired \
             with the GPU sample nearest in time.",
            match kind {
                Bottleneck::Cpu => "CPU",
                Bottleneck::Io => "disk or network",
            }
        ));
        let mut phase_intervals: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        {
            let mut by_phase: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
            for s in &self.input.spans {
                by_phase
                    .entry(s.phase.as_str())
                    .or_default()
                    .push((s.start_us, s.end_us));
            }
            for (p, v) in by_phase {
                phase_intervals.insert(p, merged(v.into_iter()));
            }
        }
        let mut rows = Vec::new();
        let mut phase_hits: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut total_bottleneck, mut total_paired) = (0u64, 0u64);
        let mut slices = [0f64; 3];
        let mut any_gpu = false;
        let mut worst: Vec<(String, f64)> = Vec::new();
        for i in 0..self.view.nodes.len() {
            let n = &self.view.nodes[i];
            let own = series_of(n);
            if own.is_empty() {
                continue;
            }
            let p95 = Summary::of(values(&own)).map_or(f64::NAN, |s| s.p95);
            if n.gpu_mean.is_empty() {
                rows.push(vec![
                    Cell::text(&n.node),
                    Cell::num(format!("{p95:.1}")),
                    Cell::num("-"),
                    Cell::num("-"),
                    Cell::text("no GPU metrics"),
                ]);
                continue;
            }
            any_gpu = true;
            let (mut paired, mut hits) = (0u64, 0u64);
            for &(t, v) in &own {
                let Some(g) = nearest(&n.gpu_mean, t) else {
                    continue;
                };
                paired += 1;
                if g < gpu_idle && v > busy {
                    hits += 1;
                    slices[0] += 1.0;
                    for (p, iv) in &phase_intervals {
                        if contains(iv, t) {
                            *phase_hits.entry(p).or_default() += 1;
                        }
                    }
                } else if g < gpu_idle {
                    slices[1] += 1.0;
                } else {
                    slices[2] += 1.0;
                }
            }
            total_paired += paired;
            total_bottleneck += hits;
            let share = if paired > 0 {
                hits as f64 / paired as f64
            } else {
                f64::NAN
            };
            worst.push((n.node.clone(), share));
            rows.push(vec![
                Cell::text(&n.node),
                Cell::num(format!("{p95:.1}")),
                Cell::num(paired.to_string()),
                Cell::num(hits.to_string()),
                Cell::text(pct(share)),
            ]);
        }
        table(
            &mut self.out,
            "bottleneck",
            &[
                "node",
                &format!("{what} p95 %"),
                "paired samples",
                "bottleneck samples",
                "share",
            ],
            &rows,
        );
        if !any_gpu {
            self.missing(&format!(
                "No GPU metrics were recorded: this check compares GPU idle time with {what}, so it cannot tell whether the GPU waited."
            ));
        } else {
            let drawn = charts::pie_chart(
                &format!("GPU idle and {busy_label}"),
                &[
                    (format!("GPU idle, {busy_label}"), slices[0]),
                    ("GPU idle, other reason".into(), slices[1]),
                    ("GPU busy".into(), slices[2]),
                ],
            );
            self.chart(drawn, "Share of paired samples in each state, all nodes.");
            let first = self
                .view
                .nodes
                .iter()
                .find(|n| !n.gpu_mean.is_empty() && !series_of(n).is_empty());
            if let Some(n) = first {
                let lines = vec![
                    Series {
                        label: what.into(),
                        points: self.view.timeline(&series_of(n)),
                    },
                    Series {
                        label: "GPU mean utilization".into(),
                        points: self.view.timeline(&n.gpu_mean),
                    },
                ];
                let drawn = charts::line_chart(
                    &format!("{what} and GPU utilization: {}", n.node),
                    XAxis::Elapsed,
                    "%",
                    &lines,
                    Some((0.0, 100.0)),
                );
                self.chart(drawn, "Both over time on the same node.");
            }
            if total_bottleneck > 0 {
                let mut hits: Vec<(&str, u64)> = phase_hits.into_iter().collect();
                hits.sort_by_key(|h| std::cmp::Reverse(h.1));
                if hits.is_empty() {
                    self.lead("No span was running during the bottleneck samples: they fall outside the recorded training loop.");
                } else {
                    self.lead("What the training loop was doing during bottleneck samples (a sample can fall in several nested phases):");
                    let rows: Vec<Vec<Cell>> = hits
                        .iter()
                        .map(|(p, n)| {
                            vec![
                                Cell::text(*p),
                                Cell::num(n.to_string()),
                                Cell::num(pct(*n as f64 / total_bottleneck as f64)),
                            ]
                        })
                        .collect();
                    table(
                        &mut self.out,
                        "bottleneck-phases",
                        &["phase", "bottleneck samples", "share"],
                        &rows,
                    );
                }
                let share = total_bottleneck as f64 / total_paired.max(1) as f64;
                self.advice(&match kind {
                    Bottleneck::Cpu => format!(
                        "In {} of the samples the GPU idled while the CPU was saturated. Take work off \
                         the CPU: more data-loader workers, lighter or precomputed augmentation, \
                         decoding on the GPU, fewer Python-side conversions per batch.",
                        pct(share)
                    ),
                    Bottleneck::Io => format!(
                        "In {} of the samples the GPU idled while the CPU waited on I/O. Read data \
                         faster: larger sequential files (sharded records instead of many small \
                         files), local copies or caching of remote data, prefetching.",
                        pct(share)
                    ),
                });
            }
        }
        self.verdict(rule);
    }

    // -----------------------------------------------------------------------------------------
    // 11. Load balancing

    fn load_balancing(&mut self) {
        let many = self.view.many_nodes;
        let bins = 20;
        let gpus: Vec<(String, Vec<u64>)> = self
            .view
            .gpus()
            .filter_map(|g| {
                Some((
                    g.label(many),
                    stats::histogram(values(&g.util?.points), bins, 0.0, 100.0),
                ))
            })
            .filter(|(_, h)| h.iter().any(|&n| n > 0))
            .collect();
        if gpus.len() < 2 {
            self.missing(&format!(
                "Load balancing compares GPUs with each other; {} GPU with utilization data was recorded.",
                gpus.len()
            ));
            self.verdict("LoadBalancing");
            return;
        }
        self.lead("Each GPU's utilization histogram (5% bands), and the Jensen–Shannon distance between every pair: 0 for identical workloads, 1 for disjoint ones.");
        let edges: Vec<f64> = (0..=bins).map(|i| i as f64 * 100.0 / bins as f64).collect();
        let shown: Vec<(String, Vec<u64>)> = gpus.iter().take(MAX_SERIES).cloned().collect();
        let drawn = charts::histogram_chart("Workload per GPU", "utilization (%)", &edges, &shown);
        self.chart(drawn, "Samples per 5% utilization band, per GPU.");
        let mut rows = Vec::new();
        let mut unbalanced = Vec::new();
        for i in 0..gpus.len() {
            for j in i + 1..gpus.len() {
                let Some(d) = stats::js_distance(&gpus[i].1, &gpus[j].1) else {
                    continue;
                };
                if d > 0.5 {
                    unbalanced.push(format!("{} vs {}", gpus[i].0, gpus[j].0));
                }
                rows.push((
                    d,
                    vec![
                        Cell::text(&gpus[i].0),
                        Cell::text(&gpus[j].0),
                        Cell::num(format!("{d:.3}")),
                    ],
                ));
            }
        }
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rows: Vec<Vec<Cell>> = rows.into_iter().take(28).map(|r| r.1).collect();
        table(
            &mut self.out,
            "load-balance",
            &["GPU", "GPU", "distance"],
            &rows,
        );
        if !unbalanced.is_empty() {
            self.advice(&format!(
                "Workloads differ strongly ({}). Give each GPU an equal share: equal batch sizes per \
                 rank, even data sharding, and no extra work (logging, evaluation) pinned to one rank.",
                unbalanced.join(", ")
            ));
        }
        self.verdict("LoadBalancing");
    }

    // -----------------------------------------------------------------------------------------
    // 12. GPU memory

    fn gpu_memory(&mut self) {
        let many = self.view.many_nodes;
        let gpus: Vec<(String, String, &MetricSeries)> = self
            .view
            .gpus()
            .filter_map(|g| Some((g.label(many), g.node.clone(), g.mem?)))
            .filter(|g| !g.2.points.is_empty())
            .collect();
        if gpus.is_empty() {
            self.missing("No GPU memory was recorded: the job ran without a GPU, or NVML was not available to the sampler.");
            self.verdict("GPUMemoryIncrease");
            return;
        }
        self.lead("GPU memory in use, percent of capacity. Growth is the rise of the 10-sample moving average above its lowest earlier value; steady growth points to a leak (tensors kept alive across steps).");
        let nodes: BTreeSet<&str> = gpus.iter().map(|g| g.1.as_str()).collect();
        for node in nodes {
            let lines: Vec<Series> = gpus
                .iter()
                .filter(|g| g.1 == node)
                .take(MAX_SERIES)
                .map(|g| Series {
                    label: g.0.clone(),
                    points: self.view.timeline(&g.2.points),
                })
                .collect();
            let drawn = charts::line_chart(
                &format!("GPU memory used: {node}"),
                XAxis::Elapsed,
                "% used",
                &lines,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Per GPU over time.");
        }
        let mut growing = Vec::new();
        let rows: Vec<Vec<Cell>> = gpus
            .iter()
            .map(|(l, _, s)| {
                let v: Vec<f64> = values(&s.points).collect();
                let window = 10.min(v.len()).max(1);
                let mut growth: f64 = 0.0;
                let mut lowest = f64::INFINITY;
                let mut sum: f64 = v[..window].iter().sum();
                for i in window..=v.len() {
                    if i > window {
                        sum += v[i - 1] - v[i - 1 - window];
                    }
                    let avg = sum / window as f64;
                    lowest = lowest.min(avg);
                    growth = growth.max(avg - lowest);
                }
                if growth > 5.0 {
                    growing.push(format!("{l} (+{growth:.1} points)"));
                }
                let head = v[..window].iter().sum::<f64>() / window as f64;
                let tail = v[v.len() - window..].iter().sum::<f64>() / window as f64;
                let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                vec![
                    Cell::text(l),
                    Cell::num(format!("{head:.1}")),
                    Cell::num(format!("{tail:.1}")),
                    Cell::num(format!("{max:.1}")),
                    Cell::num(format!("{growth:.1}")),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "gpu-memory",
            &[
                "GPU",
                "first 10 samples %",
                "last 10 samples %",
                "max %",
                "growth (points)",
            ],
            &rows,
        );
        if !growing.is_empty() {
            self.advice(&format!(
                "GPU memory grows on {}. Look for tensors kept across steps (losses accumulated \
                 with their graphs, growing caches or lists of outputs); detach or free them.",
                growing.join(", ")
            ));
        }
        self.verdict("GPUMemoryIncrease");
    }

    // -----------------------------------------------------------------------------------------
    // 13. Data loading

    fn data_loading(&mut self) {
        let loads: Vec<&Span> = self
            .input
            .spans
            .iter()
            .filter(|s| s.phase_kind() == Phase::DataLoading)
            .collect();
        if loads.is_empty() {
            self.missing("No data-loading spans were recorded. Wrap the fetch of each batch in SpanRecorder::data_loading to see how long the loop waits for data.");
            self.verdict("Dataloader");
            return;
        }
        self.lead("Time the loop spent waiting for batches, per node and worker, and how many loads overlapped (parallel loaders) against the node's cores.");
        let mut groups: BTreeMap<(&str, Option<u32>), Vec<&Span>> = BTreeMap::new();
        for s in &loads {
            groups
                .entry((s.node.as_str(), s.worker))
                .or_default()
                .push(s);
        }
        let mut step_time: BTreeMap<(&str, Option<u32>), u64> = BTreeMap::new();
        for s in &self.view.steps {
            *step_time.entry((s.node.as_str(), s.worker)).or_default() += s.duration_us();
        }
        let cores: BTreeMap<&str, usize> = self
            .view
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.cores.len()))
            .collect();
        let mut rows = Vec::new();
        let mut heavy = Vec::new();
        for ((node, worker), spans) in &groups {
            let Some(sum) = Summary::of(spans.iter().map(|s| s.duration_us() as f64)) else {
                continue;
            };
            let total: u64 = spans.iter().map(|s| s.duration_us()).sum();
            // Most loads in flight at once: sweep over starts (+1) and ends (−1).
            let mut events: Vec<(u64, i32)> = spans
                .iter()
                .flat_map(|s| [(s.start_us, 1), (s.end_us, -1)])
                .collect();
            events.sort_by_key(|e| (e.0, e.1));
            let (mut now, mut most) = (0i32, 0i32);
            for (_, d) in events {
                now += d;
                most = most.max(now);
            }
            let share = step_time
                .get(&(*node, *worker))
                .filter(|&&t| t > 0)
                .map(|&t| total as f64 / t as f64);
            if share.is_some_and(|s| s > 0.2) {
                heavy.push(format!(
                    "{node}{}",
                    worker.map_or(String::new(), |w| format!(" worker {w}"))
                ));
            }
            rows.push(vec![
                Cell::text(match worker {
                    Some(w) => format!("{node} worker {w}"),
                    None => (*node).to_owned(),
                }),
                Cell::num(sum.count.to_string()),
                Cell::num(format!("{:.3}", total as f64 / 1e6)),
                Cell::num(share.map_or("-".into(), pct)),
                Cell::num(ms(sum.mean)),
                Cell::num(ms(sum.p50)),
                Cell::num(ms(sum.p95)),
                Cell::num(ms(sum.max)),
                Cell::num(most.to_string()),
                Cell::num(
                    cores
                        .get(node)
                        .filter(|&&c| c > 0)
                        .map_or("-".into(), |c| c.to_string()),
                ),
            ]);
        }
        table(
            &mut self.out,
            "data-loading",
            &[
                "node / worker",
                "loads",
                "total s",
                "share of step time",
                "mean ms",
                "p50 ms",
                "p95 ms",
                "max ms",
                "most in parallel",
                "cores",
            ],
            &rows,
        );
        let durations: Vec<f64> = loads
            .iter()
            .map(|s| s.duration_us() as f64 / 1000.0)
            .collect();
        if let Some(all) = Summary::of(durations.iter().copied()) {
            let bins = 30;
            let (lo, hi) = if all.max > all.min {
                (all.min, all.max)
            } else {
                (all.min - 0.5, all.max + 0.5)
            };
            let edges: Vec<f64> = (0..=bins)
                .map(|i| lo + (hi - lo) * i as f64 / bins as f64)
                .collect();
            let series = vec![(
                "data loading".to_owned(),
                stats::histogram(durations.iter().copied(), bins, lo, hi),
            )];
            let drawn = charts::histogram_chart(
                "Data-loading times",
                "load duration (ms)",
                &edges,
                &series,
            );
            self.chart(drawn, "How many batch loads took how long, all workers.");
        }
        if !heavy.is_empty() {
            self.advice(&format!(
                "Waiting for data takes more than 20% of step time on {}. Load in parallel and ahead \
                 of time: more loader workers (up to about the number of cores), prefetching, \
                 pinned memory for host-to-GPU copies, and a faster storage format.",
                heavy.join(", ")
            ));
        }
        self.verdict("Dataloader");
    }

    // -----------------------------------------------------------------------------------------
    // Debugging rules, scalars, notes

    fn debugging_rules(&mut self) {
        let rules: Vec<RuleFile> = self
            .rules
            .iter()
            .filter(|r| r.kind.eq_ignore_ascii_case("debugging"))
            .cloned()
            .collect();
        if rules.is_empty() {
            self.missing("No debugging-rule results were given (rules over the saved tensors, such as LossNotDecreasing or VanishingGradient).");
            return;
        }
        for r in &rules {
            let name = r.name.clone();
            self.verdict(&name);
        }
        let rows: Vec<Vec<Cell>> = rules
            .iter()
            .map(|r| {
                vec![
                    Cell::text(&r.name),
                    Cell::text(r.status.name()),
                    Cell::num(r.triggered.to_string()),
                    Cell::num(r.first_fired_step.map_or("-".into(), |s| s.to_string())),
                    Cell::text(r.first_fired_time_us.map_or("-".into(), fmt_time)),
                    Cell::Code(r.details.to_string()),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "debugging-rules",
            &[
                "rule",
                "status",
                "triggered",
                "first step",
                "first time",
                "details",
            ],
            &rows,
        );
    }

    fn scalars(&mut self) {
        self.notes(NoteArea::Tensors);
        if self.input.scalars.is_empty() {
            self.missing("No scalar tensors (losses, metrics) were found in this run.");
            return;
        }
        self.lead("Every scalar tensor saved by the hook (the losses and metrics collections, and any other single-value tensor), one line per mode over global steps.");
        let input = self.input;
        for s in &input.scalars {
            let lines: Vec<Series> = s
                .modes
                .iter()
                .map(|(m, points)| Series {
                    label: m.name().to_owned(),
                    points: points.iter().map(|&(step, v)| (step as f64, v)).collect(),
                })
                .collect();
            let last: Vec<String> = s
                .modes
                .iter()
                .filter_map(|(m, p)| {
                    p.last()
                        .map(|(step, v)| format!("{} {v:.6} at step {step}", m.name()))
                })
                .collect();
            let _ = write!(self.out, "<h3 class=\"scalar\">{}</h3>", escape(&s.name));
            let drawn = charts::line_chart(&s.name, XAxis::Plain, "value", &lines, None);
            self.chart(drawn, &format!("Last values: {}.", last.join("; ")));
        }
    }

    fn data_notes(&mut self) {
        if self.input.notes.is_empty() {
            self.lead("Every source was read completely: nothing was missing or unreadable.");
            return;
        }
        self.lead("What was missing, unreadable or partial when this report was made.");
        self.out.push_str("<ul class=\"notes\">");
        let input = self.input;
        for n in &input.notes {
            let _ = write!(
                self.out,
                "<li><strong>{:?}</strong>: {}</li>",
                n.area,
                escape(&n.message)
            );
        }
        self.out.push_str("</ul>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_respects_the_tolerance() {
        let s = [(1_000_000, 1.0), (3_000_000, 3.0)];
        assert_eq!(nearest(&s, 1_400_000), Some(1.0));
        assert_eq!(nearest(&s, 2_600_000), Some(3.0));
        assert_eq!(nearest(&s, 9_000_000), None);
        assert_eq!(nearest(&[], 1), None);
    }

    #[test]
    fn merged_intervals_answer_containment() {
        let iv = merged([(5, 10), (1, 3), (8, 12)].into_iter());
        assert_eq!(iv, vec![(1, 3), (5, 12)]);
        assert!(contains(&iv, 2) && contains(&iv, 12) && !contains(&iv, 4) && !contains(&iv, 13));
    }

    #[test]
    fn units_and_values() {
        let s = |metric_type: &str, name: &str, dim: &str| MetricSeries {
            node: "n".into(),
            metric_type: metric_type.into(),
            name: name.into(),
            dimension: dim.into(),
            points: vec![],
        };
        assert_eq!(s("gpu", "gpu0", "GPUMemoryUtilization").unit(), "%");
        assert_eq!(s("i/o", "ReadThroughputInBytesPerSecond", "").unit(), "B/s");
        assert_eq!(s("gpu", "gpu0", "GPUMemoryUsedBytes").unit(), "B");
        assert_eq!(fmt_value(3.0 * 1024.0 * 1024.0, "B/s"), "3.00 MiB/s");
        assert_eq!(trailing_number("cpu12"), 12);
    }
}
