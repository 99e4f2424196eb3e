//! Decoding framework trace files (Chrome trace JSON in smdebug's timeline shape).

use foldhash::HashMap;

use serde_json::{Map, Value};
use smdebug_core::Mode;

use super::trace_json::{Event, EventSink, LeanArgs, Root, Scalar, read_events};
use crate::profile::error::{ProfileError, Result};
use smdebug_core::phase::Phase;
use smdebug_format::trace::TraceFileName;

/// One span read back from a trace file, with absolute times.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The phase row (`process_name` of its `pid`), e.g. `Forward`, `Step:ModeKeys.TRAIN`;
    /// `Unknown` when the file names none.
    pub phase: String,
    /// The event name.
    pub name: String,
    /// Start, microseconds since the epoch.
    pub start_us: u64,
    /// End, microseconds since the epoch.
    pub end_us: u64,
    /// The node, from the file name.
    pub node: String,
    /// The worker: `args.worker`, else the leading number of the file's node token.
    pub worker: Option<u32>,
    /// The step: `args.step_num` (a string or a number).
    pub step: Option<u64>,
    /// The mode: `args.mode`, else the mode in a `Step:ModeKeys.<MODE>` row name.
    pub mode: Option<Mode>,
    /// The event's `args` as written, less the entries read into `step`, `mode` and `worker`
    /// (each left out only when it gave that field its value).
    pub args: Map<String, Value>,
}

impl Span {
    /// The span's length in microseconds.
    pub fn duration_us(&self) -> u64 {
        self.end_us.saturating_sub(self.start_us)
    }

    /// The phase as this crate's [`Phase`].
    pub fn phase_kind(&self) -> Phase {
        Phase::from_trace_name(&self.phase)
    }
}

fn malformed(key: &str, line: usize, column: usize, message: impl Into<String>) -> ProfileError {
    ProfileError::MalformedTrace {
        key: key.to_owned(),
        line,
        column,
        message: message.into(),
    }
}

fn to_epoch_us(base: i128, ts: i128) -> u64 {
    u64::try_from((base + ts).max(0)).unwrap_or(u64::MAX)
}

/// Decodes one trace file: a JSON array of events or an object with `traceEvents`.
///
/// Complete (`X`) events and matched begin/end (`B`/`E`) pairs become spans; times are
/// made absolute with the `start_time_since_epoch_in_micros` metadata (0 when absent, as for
/// traces whose `ts` is already absolute). Other events are read past. The file is read event
/// by event (`reader/trace_json.rs`), never as a whole document.
pub fn parse_trace(file: &TraceFileName, bytes: &[u8]) -> Result<Vec<Span>> {
    parse_trace_with(file, bytes, true)
}

/// [`parse_trace`] without the events' `args` (each span's `args` is empty): only the entries
/// a span is read from (`step_num`, `mode`, `worker`, and the `process_name` rows) are looked
/// at, and nothing else of them is held. For readers that keep spans in a
/// [`SpanStore`](super::SpanStore), which keeps no `args`.
pub fn parse_trace_without_args(file: &TraceFileName, bytes: &[u8]) -> Result<Vec<Span>> {
    parse_trace_with(file, bytes, false)
}

fn parse_trace_with(file: &TraceFileName, bytes: &[u8], keep_args: bool) -> Result<Vec<Span>> {
    let key = file.key.as_str();
    let mut spans = Spans::new(file, keep_args);
    let root = read_events(bytes, &mut spans)
        .map_err(|e| malformed(key, e.line(), e.column(), e.to_string()))?;
    match root {
        Root::Array | Root::ObjectWithEvents => Ok(spans.spans),
        Root::ObjectWithoutEvents => {
            Err(malformed(key, 0, 0, "object without a `traceEvents` array"))
        }
        Root::Other => Err(malformed(key, 0, 0, "neither an array nor an object")),
    }
}

/// The spans of a file as its events arrive.
struct Spans<'f> {
    file: &'f TraceFileName,
    base: i128,
    phases: HashMap<i64, String>,
    /// Begin events waiting for their end, per (pid, tid).
    open: HashMap<(i64, i64), Vec<RawSpan>>,
    spans: Vec<Span>,
    keep_args: bool,
}

impl<'f> Spans<'f> {
    fn new(file: &'f TraceFileName, keep_args: bool) -> Spans<'f> {
        Spans {
            keep_args,
            file,
            base: 0,
            phases: HashMap::default(),
            open: HashMap::default(),
            spans: Vec::new(),
        }
    }
}

impl<'a> EventSink<'a> for Spans<'_> {
    fn restart(&mut self) {
        self.base = 0;
        self.phases.clear();
        self.open.clear();
        self.spans.clear();
    }

    fn keeps_args(&self) -> bool {
        self.keep_args
    }

    fn event(&mut self, event: Event<'a>) {
        let pid = event.pid.as_i64().unwrap_or(0);
        let tid = event.tid.as_i64().unwrap_or(0);
        let args = event.args.unwrap_or_default();
        let lean = event.lean.unwrap_or_else(|| LeanArgs::of(&args));
        let parsed = SpanArgs::of(&lean);
        let ts = event.ts.number_i128();
        match event.ph.as_str() {
            Some("M") if event.name.as_str() == Some("process_name") => {
                if let Some(phase) = lean.name.as_ref().and_then(Scalar::as_str) {
                    self.phases.insert(pid, phase.to_owned());
                }
                if let Some(start) = lean
                    .start_time_since_epoch_in_micros
                    .as_ref()
                    .and_then(Scalar::number_i128)
                {
                    self.base = start;
                }
            }
            Some("X") => {
                let Some(ts) = ts else { return };
                let dur = event.dur.number_i128().unwrap_or(0).max(0);
                let raw = RawSpan {
                    name: event.name.into_string().unwrap_or_default(),
                    start: ts,
                    end: ts + dur,
                    args,
                    parsed,
                };
                let span = raw.into_span(self.file, &self.phases, pid, self.base);
                self.spans.push(span);
            }
            Some("B") => {
                if let Some(ts) = ts {
                    self.open.entry((pid, tid)).or_default().push(RawSpan {
                        name: event.name.into_string().unwrap_or_default(),
                        start: ts,
                        end: ts,
                        args,
                        parsed,
                    });
                }
            }
            Some("E") => {
                let (Some(ts), Some(mut raw)) =
                    (ts, self.open.get_mut(&(pid, tid)).and_then(Vec::pop))
                else {
                    return;
                };
                raw.end = ts.max(raw.start);
                raw.args.extend(args);
                raw.parsed.extend(parsed);
                let span = raw.into_span(self.file, &self.phases, pid, self.base);
                self.spans.push(span);
            }
            _ => {}
        }
    }
}

/// What a span takes from its event's `args`: for each entry, whether it is there (the outer
/// `Option`) and what it gives.
#[derive(Clone, Copy, Debug, Default)]
struct SpanArgs {
    /// `step_num`: a number, or a string holding one.
    step: Option<Option<u64>>,
    /// `mode`: a mode's name.
    mode: Option<Option<Mode>>,
    /// `worker`: a number.
    worker: Option<Option<u32>>,
}

impl SpanArgs {
    fn of(lean: &LeanArgs<'_>) -> SpanArgs {
        SpanArgs {
            step: lean.step_num.as_ref().map(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            }),
            mode: lean
                .mode
                .as_ref()
                .map(|v| v.as_str().and_then(Mode::from_name)),
            worker: lean
                .worker
                .as_ref()
                .map(|v| v.as_u64().and_then(|w| u32::try_from(w).ok())),
        }
    }

    /// `later`'s entries over these, as an end event's `args` go over its begin event's.
    fn extend(&mut self, later: SpanArgs) {
        if later.step.is_some() {
            self.step = later.step;
        }
        if later.mode.is_some() {
            self.mode = later.mode;
        }
        if later.worker.is_some() {
            self.worker = later.worker;
        }
    }
}

/// An event's name, times relative to the file's base, and args (empty unless kept).
struct RawSpan {
    name: String,
    start: i128,
    end: i128,
    args: Map<String, Value>,
    parsed: SpanArgs,
}

impl RawSpan {
    fn into_span(
        self,
        file: &TraceFileName,
        phases: &HashMap<i64, String>,
        pid: i64,
        base: i128,
    ) -> Span {
        let RawSpan {
            name,
            start,
            end,
            args,
            parsed,
        } = self;
        let phase = phases
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| "Unknown".to_owned());
        let step = parsed.step.flatten();
        let mode = parsed
            .mode
            .flatten()
            .or_else(|| phase.strip_prefix("Step:").and_then(Mode::from_name));
        let worker = parsed.worker.flatten().or(file.worker);
        Span {
            args: without_read_entries(args, &parsed),
            phase,
            name,
            start_us: to_epoch_us(base, start),
            end_us: to_epoch_us(base, end),
            node: file.node.clone(),
            worker,
            step,
            mode,
        }
    }
}

/// `args` without the entries the span's own fields were read from (`step_num`, `mode`,
/// `worker`, each when it gave a value), so that they are not held twice: in SageMaker's
/// traces every event has the three, and a map of them took ~1 KB of a ~2 KB span.
fn without_read_entries(mut args: Map<String, Value>, parsed: &SpanArgs) -> Map<String, Value> {
    if args.is_empty() {
        return args;
    }
    for (key, read) in [
        ("step_num", parsed.step.flatten().is_some()),
        ("mode", parsed.mode.flatten().is_some()),
        ("worker", parsed.worker.flatten().is_some()),
    ] {
        if read {
            args.remove(key);
        }
    }
    // An emptied map may still hold its first node.
    if args.is_empty() { Map::new() } else { args }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_format::trace::parse_trace_file_key;

    fn file() -> TraceFileName {
        parse_trace_file_key(
            "framework/pevents/2020071317/1594662624718694_7-algo-1_pythontimeline.json",
        )
        .unwrap()
    }

    #[test]
    fn reads_python_relative_times_and_string_steps() {
        let text = r#"[
{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1000000}},
{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Step:ModeKeys.TRAIN"}},
{"name": "Step:ModeKeys.TRAIN", "pid": 0, "ph": "X", "ts": 250, "dur": 100, "args": {"pid": 42, "step_num": "3"}},
{"name": "x", "pid": 1, "ph": "B", "ts": 400},
{"name": "x", "pid": 1, "ph": "E", "ts": 450}
]"#;
        let spans = parse_trace(&file(), text.as_bytes()).unwrap();
        assert_eq!(spans.len(), 2);
        let step = &spans[0];
        assert_eq!((step.start_us, step.end_us), (1_000_250, 1_000_350));
        assert_eq!(
            (step.step, step.mode, step.worker),
            (Some(3), Some(Mode::Train), Some(7))
        );
        assert_eq!(step.node, "algo-1");
        assert_eq!(spans[1].phase, "Unknown");
        assert_eq!(spans[1].duration_us(), 50);
    }

    #[test]
    fn args_keep_what_the_fields_did_not_take() {
        let text = r#"[
{"name": "a", "pid": 0, "ph": "X", "ts": 1, "dur": 1, "args": {"step_num": "3", "mode": "TRAIN", "worker": 2}},
{"name": "b", "pid": 0, "ph": "X", "ts": 1, "dur": 1, "args": {"step_num": "x", "mode": "NOPE", "worker": -1, "cat": "kernel"}},
{"name": "c", "pid": 0, "ph": "B", "ts": 5, "args": {"worker_id": 1}},
{"name": "c", "pid": 0, "ph": "E", "ts": 9, "args": {"step_num": 4}}
]"#;
        let spans = parse_trace(&file(), text.as_bytes()).unwrap();
        // Read into `step`, `mode` and `worker`: not held twice.
        assert!(spans[0].args.is_empty(), "{:?}", spans[0].args);
        assert_eq!(
            (spans[0].step, spans[0].mode, spans[0].worker),
            (Some(3), Some(Mode::Train), Some(2))
        );
        // Entries that gave no value stay, as written.
        let b = &spans[1];
        assert_eq!((b.step, b.mode, b.worker), (None, None, Some(7)));
        assert_eq!(b.args["step_num"], "x");
        assert_eq!(b.args["mode"], "NOPE");
        assert_eq!(b.args["worker"], -1);
        assert_eq!(b.args["cat"], "kernel");
        // A begin/end pair: the end's step taken, the begin's other entry kept.
        let c = &spans[2];
        assert_eq!(c.step, Some(4));
        assert_eq!(c.args.len(), 1);
        assert_eq!(c.args["worker_id"], 1);
    }

    #[test]
    fn accepts_trace_event_objects_and_reports_bad_json_position() {
        let object = r#"{"traceEvents": [{"name": "a", "ph": "X", "pid": 0, "ts": 5, "dur": 1}]}"#;
        assert_eq!(
            parse_trace(&file(), object.as_bytes()).unwrap()[0].start_us,
            5
        );
        let err = parse_trace(&file(), b"[\n{\"name\": ").unwrap_err();
        assert!(
            matches!(err, ProfileError::MalformedTrace { line: 2, .. }),
            "{err}"
        );
        assert!(parse_trace(&file(), b"{\"other\": 1}").is_err());
    }
}
