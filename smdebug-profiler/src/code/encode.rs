//! A window's stacks as files: pprof's `profile.proto` (gzip-compressed, what `go tool pprof`,
//! speedscope and Grafana Pyroscope open) and an inferno flame graph (SVG).

use std::collections::HashMap;
use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message as _;

use super::stacks::{FrameSymbol, Stack};

// pprof's profile.proto (github.com/google/pprof/proto/profile.proto), the fields written here.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    /// Innermost inlined function first; the last line is the function they were inlined into.
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// The string table: index 0 is the empty string, as the format requires.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut strings = Strings::default();
        strings.id("");
        strings
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), id);
        id
    }
}

/// What a profile says about its window besides the stacks.
pub(crate) struct ProfileWindow<'a> {
    pub(crate) start_us: u64,
    pub(crate) end_us: u64,
    pub(crate) frequency_hz: u32,
    pub(crate) comment: &'a str,
}

/// The stacks as a pprof `Profile`: sample types `samples/count` and `cpu/nanoseconds`, a
/// `thread` label per sample, one location per frame (its inlined functions as lines).
pub(crate) fn profile(stacks: &[Stack], window: &ProfileWindow<'_>) -> Profile {
    let mut strings = Strings::new();
    let mut functions: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<(String, String, Option<String>), u64> = HashMap::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut location_ids: HashMap<Vec<(u64, u32)>, u64> = HashMap::new();
    let period_ns = 1_000_000_000 / i64::from(window.frequency_hz.max(1));
    let thread_key = strings.id("thread");
    let mut function_id = |strings: &mut Strings, symbol: &FrameSymbol| -> u64 {
        let key = (
            symbol.name.clone(),
            symbol.system_name.clone(),
            symbol.file.clone(),
        );
        if let Some(&id) = function_ids.get(&key) {
            return id;
        }
        let id = functions.len() as u64 + 1;
        functions.push(Function {
            id,
            name: strings.id(&symbol.name),
            system_name: strings.id(&symbol.system_name),
            filename: strings.id(symbol.file.as_deref().unwrap_or("")),
        });
        function_ids.insert(key, id);
        id
    };
    let mut samples = Vec::with_capacity(stacks.len());
    for stack in stacks {
        let mut location_id = Vec::with_capacity(stack.frames.len());
        for frame in &stack.frames {
            let lines: Vec<(u64, u32)> = frame
                .iter()
                .map(|symbol| (function_id(&mut strings, symbol), symbol.line))
                .collect();
            let next = locations.len() as u64 + 1;
            let id = *location_ids.entry(lines.clone()).or_insert_with(|| {
                locations.push(Location {
                    id: next,
                    line: lines
                        .iter()
                        .map(|&(function_id, line)| Line {
                            function_id,
                            line: i64::from(line),
                        })
                        .collect(),
                });
                next
            });
            location_id.push(id);
        }
        let count = i64::try_from(stack.count).unwrap_or(i64::MAX);
        samples.push(Sample {
            location_id,
            value: vec![count, count.saturating_mul(period_ns)],
            label: vec![Label {
                key: thread_key,
                str: strings.id(&stack.thread),
            }],
        });
    }
    let samples_type = ValueType {
        r#type: strings.id("samples"),
        unit: strings.id("count"),
    };
    let cpu_type = ValueType {
        r#type: strings.id("cpu"),
        unit: strings.id("nanoseconds"),
    };
    let comment = vec![strings.id(window.comment)];
    let micros = |us: u64| i64::try_from(us).unwrap_or(i64::MAX).saturating_mul(1000);
    Profile {
        sample_type: vec![samples_type, cpu_type.clone()],
        sample: samples,
        location: locations,
        function: functions,
        string_table: strings.table,
        time_nanos: micros(window.start_us),
        duration_nanos: micros(window.end_us.saturating_sub(window.start_us)),
        period_type: Some(cpu_type),
        period: period_ns,
        comment,
    }
}

/// [`profile`], encoded and gzip-compressed (the form `go tool pprof` reads).
pub(crate) fn pprof_gz(stacks: &[Stack], window: &ProfileWindow<'_>) -> std::io::Result<Vec<u8>> {
    let encoded = profile(stacks, window).encode_to_vec();
    let mut gz = GzEncoder::new(
        Vec::with_capacity(encoded.len() / 2),
        Compression::default(),
    );
    gz.write_all(&encoded)?;
    gz.finish()
}

/// A name as one field of a folded stack line (`;` separates frames there).
fn folded_name(name: &str) -> String {
    name.replace(';', "\u{ff1b}").replace(['\n', '\r'], " ")
}

/// The stacks as folded lines, `thread;root;…;leaf count`, inlined functions as frames of
/// their own.
pub(crate) fn folded(stacks: &[Stack]) -> Vec<String> {
    stacks
        .iter()
        .filter(|s| s.count > 0)
        .map(|stack| {
            let mut line = folded_name(&stack.thread);
            for frame in stack.frames.iter().rev() {
                for symbol in frame.iter().rev() {
                    line.push(';');
                    line.push_str(&folded_name(&symbol.name));
                }
            }
            line.push(' ');
            line.push_str(&stack.count.to_string());
            line
        })
        .collect()
}

/// The stacks as an inferno flame graph; `None` when there is no sample to draw.
pub(crate) fn flamegraph_svg(
    stacks: &[Stack],
    title: &str,
    subtitle: &str,
) -> Result<Option<Vec<u8>>, String> {
    let lines = folded(stacks);
    if lines.is_empty() {
        return Ok(None);
    }
    let mut options = pprof::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle = Some(subtitle.to_owned());
    options.count_name = "samples".to_owned();
    // Colours from the names, so two windows colour a function alike.
    options.hash = true;
    options.deterministic = true;
    let mut svg = Vec::new();
    pprof::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| format!("flame graph not drawn: {e}"))?;
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::stacks::tests::stack;

    fn window() -> ProfileWindow<'static> {
        ProfileWindow {
            start_us: 1_000_000,
            end_us: 3_000_000,
            frequency_hz: 100,
            comment: "test",
        }
    }

    #[test]
    fn the_profile_shares_functions_and_locations_and_keeps_inlined_frames() {
        let stacks = [
            stack("main", &["mul+hot", "step", "main"], 6),
            stack("main", &["step", "main"], 2),
        ];
        let p = profile(&stacks, &window());
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.sample[0].value, vec![6, 60_000_000]);
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.duration_nanos, 2_000_000_000);
        // mul, hot, step, main: four functions; three locations (the inlined pair is one).
        assert_eq!(p.function.len(), 4);
        assert_eq!(p.location.len(), 3);
        assert_eq!(p.location[0].line.len(), 2);
        let name = |id: u64| {
            let f = p.function.iter().find(|f| f.id == id).unwrap();
            p.string_table[f.name as usize].clone()
        };
        assert_eq!(name(p.location[0].line[0].function_id), "mul");
        assert_eq!(name(p.location[0].line[1].function_id), "hot");
        // The second stack reuses the first one's `step` and `main` locations.
        assert_eq!(p.sample[1].location_id, p.sample[0].location_id[1..]);
        let thread = &p.sample[0].label[0];
        assert_eq!(p.string_table[thread.key as usize], "thread");
        assert_eq!(p.string_table[thread.str as usize], "main");
    }

    #[test]
    fn folded_lines_run_from_the_thread_to_the_leaf_and_escape_separators() {
        let stacks = [stack("main", &["<[u8; 4] as F>::f+hot", "main"], 3)];
        assert_eq!(
            folded(&stacks),
            ["main;main;hot;<[u8\u{ff1b} 4] as F>::f 3"]
        );
    }

    #[test]
    fn the_flame_graph_names_every_function_and_is_absent_without_samples() {
        let stacks = [stack("main", &["hot_function", "main"], 3)];
        let svg = String::from_utf8(flamegraph_svg(&stacks, "t", "s").unwrap().unwrap()).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("hot_function"));
        assert!(flamegraph_svg(&[], "t", "s").unwrap().is_none());
    }
}
