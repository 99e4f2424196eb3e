//! The dashboard API's contract: `assets/api.schema.json` is the JSON Schema the response
//! types give (`smdebug_serve::api_schema`), and every property the page's scripts read from
//! the API is in it.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::schema::variants;

fn assets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets")
}

#[test]
fn the_committed_api_schema_is_the_one_the_types_give() {
    let path = assets().join("api.schema.json");
    let generated = serde_json::to_string_pretty(&smdebug_serve::api_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_API_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not the schema of the API's response types: run \
         `UPDATE_API_SCHEMA=1 cargo nextest run -p smdebug-serve --test api_schema` and commit it",
        path.display()
    );
}

/// The page's own scripts, as `index.html` loads them (uPlot, vendored, reads no API).
fn scripts() -> Vec<String> {
    let page = std::fs::read_to_string(assets().join("index.html")).unwrap();
    let found: Vec<String> = regex::Regex::new(r#"<script src="/assets/([\w.-]+\.js)""#)
        .unwrap()
        .captures_iter(&page)
        .map(|c| c[1].to_owned())
        .filter(|f| f != "uPlot.iife.min.js")
        .collect();
    assert!(found.contains(&"app.js".to_owned()), "{found:?}");
    found
}

/// Snake_case names the scripts read that are not the API's: each is a property of an object
/// the page makes itself, with that object.
const PAGE_OWN: [(&str, &str); 20] = [
    // The page's status report (`status`, as `env.status` in the other scripts: published as
    // `document.body.dataset.status`, which the browser tests read).
    ("first_paint_ms", "status"),
    ("time_scales", "status"),
    ("state_text", "status"),
    ("stop_state", "status"),
    ("issues_shown", "status"),
    ("headline_zooms", "status"),
    ("last_point", "status"),
    ("window_spans", "status"),
    ("last_step_time", "status"),
    ("panel_ms", "status"),
    ("delta_steps", "status"),
    ("delta_rules", "status"),
    ("scalar_zooms", "status"),
    ("code_windows", "status"),
    ("heatmap_rows", "status"),
    ("span_sort", "status"),
    ("shown_step", "status"),
    // uPlot's own fields of a chart's axis as drawn (the room it took, its labels and ticks),
    // which the chart-craft test measures.
    ("_size", "axis"),
    ("_values", "axis"),
    ("_splits", "axis"),
];

/// A script with its comments, string and template text and regular-expression literals
/// blanked (each byte of them a space, lines kept), so that what is left is code at the same
/// byte offsets; and the `x["name"]` reads, whose names are string literals.
struct Code {
    text: String,
    bracket_reads: Vec<(usize, String)>,
}

fn blank(script: &str) -> Code {
    let src = script.as_bytes();
    let mut out = src.to_vec();
    let mut bracket_reads = Vec::new();
    let mut i = 0;
    // The last byte of code before `i` that is not white space (a `/` after it starts a
    // regular expression, not a division, when it is an operator or an opening bracket).
    let mut last = b'\n';
    // Open template literals, each with the brace depth of its `${`.
    let mut templates: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    // The end of the quoted text that starts at `from` (after its closing quote).
    let quoted = |from: usize, quote: u8| {
        let mut j = from + 1;
        while j < src.len() && src[j] != quote {
            j += if src[j] == b'\\' { 2 } else { 1 };
        }
        (j + 1).min(src.len())
    };
    // The template text from `from` up to its end (after the closing backquote) or up to its
    // next `${` (after it); true for the latter.
    let template_text = |from: usize| {
        let mut j = from;
        while j < src.len() {
            match src[j] {
                b'\\' => j += 2,
                b'`' => return (j + 1, false),
                b'$' if src.get(j + 1) == Some(&b'{') => return (j + 2, true),
                _ => j += 1,
            }
        }
        (src.len(), false)
    };
    while i < src.len() {
        let c = src[i];
        match c {
            b'/' if src.get(i + 1) == Some(&b'/') => {
                let end = script[i..].find('\n').map_or(src.len(), |n| i + n);
                wipe(&mut out, i, end);
                i = end;
                continue;
            }
            b'/' if src.get(i + 1) == Some(&b'*') => {
                let end = script[i + 2..].find("*/").map_or(src.len(), |n| i + n + 4);
                wipe(&mut out, i, end);
                i = end;
                continue;
            }
            b'/' if b"(,=:[!&|?{};+-*%<>~^\n".contains(&last)
                || code_ends_in_keyword(&src[..i]) =>
            {
                let mut j = i + 1;
                let mut class = false;
                while j < src.len() && (class || src[j] != b'/') {
                    match src[j] {
                        b'\\' => j += 1,
                        b'[' => class = true,
                        b']' => class = false,
                        _ => {}
                    }
                    j += 1;
                }
                let end = (j + 1).min(src.len());
                wipe(&mut out, i, end);
                i = end;
                last = b'/';
                continue;
            }
            b'"' | b'\'' => {
                let end = quoted(i, c);
                let member = last == b'['
                    && before_bracket_is_value(&out, i)
                    && script[end..].trim_start().starts_with(']');
                if member {
                    bracket_reads.push((i, script[i + 1..end - 1].to_owned()));
                }
                wipe(&mut out, i, end);
                i = end;
                last = b'"';
                continue;
            }
            b'`' => {
                let (end, open) = template_text(i + 1);
                wipe(&mut out, i, if open { end - 2 } else { end });
                if open {
                    templates.push(depth);
                    depth += 1;
                }
                i = end;
                last = if open { b'{' } else { b'"' };
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if templates.last() == Some(&depth) {
                    templates.pop();
                    let (end, open) = template_text(i + 1);
                    wipe(&mut out, i + 1, if open { end - 2 } else { end });
                    if open {
                        templates.push(depth);
                        depth += 1;
                    }
                    i = end;
                    last = if open { b'{' } else { b'"' };
                    continue;
                }
            }
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            last = c;
        }
        i += 1;
    }
    Code {
        text: String::from_utf8(out).expect("whole characters were blanked"),
        bracket_reads,
    }
}

/// The code ends in a keyword after which an expression starts (`return /x/`).
fn code_ends_in_keyword(code: &[u8]) -> bool {
    let s = std::str::from_utf8(code).unwrap_or("").trim_end();
    ["return", "typeof", "case", "of", "in"].iter().any(|k| {
        s.ends_with(k)
            && !s[..s.len() - k.len()]
                .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
    })
}

/// The last byte of code before `i` that is not white space.
fn prev_code(code: &[u8], i: usize) -> Option<u8> {
    code[..i]
        .iter()
        .rev()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

/// The `[` before `i` follows a value (`x["a"]`, `f()["a"]`), not an operator (`= ["a"]`).
fn before_bracket_is_value(code: &[u8], i: usize) -> bool {
    let open = code[..i].iter().rposition(|&b| b == b'[').unwrap_or(0);
    prev_code(code, open).is_some_and(|b| b.is_ascii_alphanumeric() || b"_$)]".contains(&b))
}

/// The line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// One name a script reads off an object.
struct Read {
    line: usize,
    /// The name of the object read from, when it is a plain name (`status` of `status.x`).
    object: Option<String>,
    name: String,
}

/// Every name a script reads off an object (`.name`, `?.name`, `["name"]`).
fn member_reads(code: &Code) -> Vec<Read> {
    let text = &code.text;
    let re = regex::Regex::new(r"\.\s*([A-Za-z_$][\w$]*)").unwrap();
    let mut reads = Vec::new();
    for c in re.captures_iter(text) {
        let dot = c.get(0).unwrap().start();
        // What the dot follows: a value (a name, a call, an index), not a spread's dots or a
        // number.
        let before = text[..dot].trim_end();
        let before = before.strip_suffix('?').unwrap_or(before).trim_end();
        let Some(last) = before.chars().last() else {
            continue;
        };
        if !(last.is_alphanumeric() || "_$)]".contains(last)) {
            continue;
        }
        let object: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let name = c.get(1).unwrap();
        reads.push(Read {
            line: line_of(text, name.start()),
            object: (!object.is_empty() && !object.starts_with(|c: char| c.is_ascii_digit()))
                .then_some(object),
            name: name.as_str().to_owned(),
        });
    }
    reads.extend(code.bracket_reads.iter().map(|(at, name)| Read {
        line: line_of(text, *at),
        object: None,
        name: name.clone(),
    }));
    reads
}

/// Every property name of every type in the schema.
fn schema_properties(schema: &Value) -> std::collections::BTreeSet<String> {
    schema["$defs"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|d| d["properties"].as_object())
        .flat_map(|p| p.keys().cloned())
        .collect()
}

/// The snake_case names (with an underscore: the browser's own properties are camelCase) that
/// `script` reads and no response of the API has, as `file:line: .name`.
fn unknown_reads(file: &str, script: &str, schema: &Value) -> Vec<String> {
    let known = schema_properties(schema);
    member_reads(&blank(script))
        .into_iter()
        .filter(|r| {
            let name = r.name.as_str();
            name.contains('_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && !known.contains(name)
                && !PAGE_OWN
                    .iter()
                    .any(|(own, of)| *own == name && r.object.as_deref() == Some(*of))
        })
        .map(|r| format!("{file}:{}: .{}", r.line, r.name))
        .collect()
}

#[test]
fn every_snake_case_name_the_scripts_read_is_a_property_of_the_api() {
    let schema = smdebug_serve::api_schema();
    let mut unknown = Vec::new();
    for file in scripts() {
        let script = std::fs::read_to_string(assets().join(&file)).unwrap();
        unknown.extend(unknown_reads(&file, &script, &schema));
    }
    assert!(
        unknown.is_empty(),
        "the page's scripts read properties that no response of the API has (assets/api.schema.json; \
         a name the page gives an object of its own goes into PAGE_OWN, with that object):\n{}",
        unknown.join("\n")
    );
}

/// The route a `get(...)` argument names: `"runs"`, `"kineto"`, or `"runs/" + id + "/x?..."`
/// (`runs/{id}/x`). `None` when its path is not written out (a variable).
fn route_named(arg: &str) -> Option<String> {
    let literals: Vec<&str> = regex::Regex::new(r#""([^"]*)""#)
        .unwrap()
        .captures_iter(arg)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    let path = |s: &str| s.split('?').next().unwrap_or("").to_owned();
    match literals.as_slice() {
        [first, ..] if !first.ends_with('/') && arg.trim_start().starts_with('"') => {
            Some(path(first))
        }
        ["runs/", rest, ..] if rest.starts_with('/') => Some(format!("runs/{{id}}{}", path(rest))),
        _ => None,
    }
}

/// `arg`, or when it is a name declared with a value before `before` (`const q = "runs/" + id +
/// "/x"`, or `let q = whole` and `whole`'s: the nearest declaration), that value.
fn written_out(script: &str, before: usize, arg: &str) -> String {
    let mut arg = arg.trim().to_owned();
    for _ in 0..4 {
        let declared = regex::Regex::new(&format!(
            r"\b(?:const|let|var)\s+{}\s*=\s*([^;\n]+)",
            regex::escape(&arg)
        ))
        .unwrap();
        match declared.captures_iter(&script[..before]).last() {
            Some(c)
                if arg
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '$') =>
            {
                arg = c[1].trim().to_owned();
            }
            _ => break,
        }
    }
    arg
}

/// The offset after the bracket that closes the one opened at `open` (in blanked code).
fn closing(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// One step of a chain of reads: a named property (with its offset) or an index.
enum Step {
    Name(String, usize),
    Index,
}

/// The reads chained at `at`: `.a?.b[0].c`.
fn chain(code: &str, mut at: usize) -> Vec<Step> {
    let re = regex::Regex::new(r"^\s*(?:\?\.\s*|\.\s*)([A-Za-z_$][\w$]*)|^\s*(?:\?\.)?\[").unwrap();
    let mut steps = Vec::new();
    while let Some(c) = re.captures(&code[at..]) {
        match c.get(1) {
            Some(name) => {
                steps.push(Step::Name(name.as_str().to_owned(), at + name.start()));
                at += c.get(0).unwrap().end();
            }
            None => {
                steps.push(Step::Index);
                at = closing(code.as_bytes(), at + c.get(0).unwrap().end() - 1);
            }
        }
    }
    steps
}

/// Follows `steps` through `s`: the schema they end at (`None` past a value that is not an
/// object with named properties: an array's `.length`, a map, free JSON, which are not
/// checked), or the first property read that an object of the schema does not have, with its
/// offset.
fn walk<'a>(
    defs: &'a Value,
    mut s: &'a Value,
    steps: &[Step],
) -> Result<Option<&'a Value>, (String, usize)> {
    for step in steps {
        let vs = variants(defs, s);
        match step {
            Step::Name(name, at) => {
                let objects: Vec<&Value> = vs.iter().filter_map(|v| v.get("properties")).collect();
                if objects.is_empty() {
                    return Ok(None);
                }
                match objects.iter().find_map(|p| p.get(name.as_str())) {
                    Some(next) => s = next,
                    None => return Err((name.clone(), *at)),
                }
            }
            Step::Index => match vs.iter().find_map(|v| {
                v.get("items")
                    .or_else(|| v.get("additionalProperties").filter(|a| a.is_object()))
            }) {
                Some(next) => s = next,
                None => return Ok(None),
            },
        }
    }
    Ok(Some(s))
}

/// Where a script holds an API response or a part of one: `const x = await
/// get("runs/" + id + "/overview")` (also `env.get`), `(await get("runs")).runs`, in a script
/// that opens the event stream `const x = JSON.parse(e.data)`, and `for (const y of x.a.b)`
/// over an array of one held.
struct Held<'a> {
    schema: &'a Value,
    /// The name it is bound to, or `None` for a parenthesized call read at once.
    name: Option<String>,
    /// The byte range of the code where the name holds it (its block from the binding on).
    from: usize,
    to: usize,
}

/// The end of the block that holds `at` (where the brace depth drops below its own).
fn block_end(code: &[u8], at: usize) -> usize {
    let mut depth = 0i64;
    for (i, &b) in code.iter().enumerate().skip(at) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The responses `script` holds, and the `get(...)` calls whose route is not written out.
fn held<'a>(script: &str, code: &str, schema: &'a Value) -> (Vec<Held<'a>>, Vec<String>) {
    // Every call of the page's `get` (`env.get` in the other scripts), the function's own
    // declaration left out: its route must be written out and be one of the API's.
    let any_call = regex::Regex::new(r"(?:\benv\.|(?:^|[^\w$.]))get\(").unwrap();
    let mut unresolved = Vec::new();
    for c in any_call.find_iter(code) {
        if code[..c.start() + 1].trim_end().ends_with("function") {
            continue;
        }
        let arg_end = closing(code.as_bytes(), c.end() - 1);
        let arg = &script[c.end()..arg_end - 1];
        let line = line_of(code, c.start());
        match route_named(&written_out(script, c.start(), arg)) {
            None => unresolved.push(format!(
                "line {line}: get({arg}): its route is not written out"
            )),
            Some(route) if support::schema::route(schema, &route).is_none() => {
                unresolved.push(format!(
                    "line {line}: get({arg}): the API has no JSON route {route}"
                ));
            }
            Some(_) => {}
        }
    }
    let calls = regex::Regex::new(
        r"(?:(?:const|let|var)\s+([\w$]+)\s*=\s*|(\(\s*))?await\s+(?:env\.)?get\(",
    )
    .unwrap();
    let mut out = Vec::new();
    for c in calls.captures_iter(code) {
        let whole = c.get(0).unwrap();
        let arg_end = closing(code.as_bytes(), whole.end() - 1);
        let arg = &script[whole.end()..arg_end - 1];
        let Some(s) = route_named(&written_out(script, whole.start(), arg))
            .and_then(|route| support::schema::route(schema, &route))
        else {
            continue;
        };
        if let Some(name) = c.get(1) {
            out.push(Held {
                schema: s,
                name: Some(name.as_str().to_owned()),
                from: arg_end,
                to: block_end(code.as_bytes(), arg_end),
            });
        } else if let Some(paren) = c.get(2) {
            let after = closing(code.as_bytes(), paren.start());
            out.push(Held {
                schema: s,
                name: None,
                from: after,
                to: after,
            });
        }
    }
    if script.contains(r#"new EventSource(api("events"))"#) {
        let parse =
            regex::Regex::new(r"(?:const|let)\s+([\w$]+)\s*=\s*JSON\.parse\(\s*[\w$]+\.data\s*\)")
                .unwrap();
        let s = support::schema::route(schema, "events").unwrap();
        for c in parse.captures_iter(code) {
            let end = c.get(0).unwrap().end();
            out.push(Held {
                schema: s,
                name: Some(c[1].to_owned()),
                from: end,
                to: block_end(code.as_bytes(), end),
            });
        }
    }
    (out, unresolved)
}

/// The places where `h` is used in its range, each with the chain of reads after it.
fn uses(code: &str, h: &Held) -> Vec<(usize, Vec<Step>)> {
    let starts: Vec<usize> = match &h.name {
        None => vec![h.from],
        Some(name) => regex::Regex::new(&format!(r"(^|[^\w$.])({})\b", regex::escape(name)))
            .unwrap()
            .captures_iter(&code[h.from..h.to])
            .map(|c| h.from + c.get(2).unwrap().end())
            .collect(),
    };
    starts.into_iter().map(|at| (at, chain(code, at))).collect()
}

/// The names given to a part of a held response: a loop over an array of it (`for (const y
/// of x.a.b) { ... }`: `y` an item of `x.a.b`, in the loop's body) or a declared part of it
/// (`const y = x.a;`, in the rest of its block).
fn parts<'a>(code: &str, defs: &'a Value, held: &[Held<'a>]) -> Vec<Held<'a>> {
    let re = regex::Regex::new(
        r"for\s*\(\s*(?:const|let)\s+([\w$]+)\s+of\s+([\w$]+)|\b(?:const|let)\s+([\w$]+)\s*=\s*([\w$]+)\s*[.\[]",
    )
    .unwrap();
    let mut out = Vec::new();
    for c in re.captures_iter(code) {
        let looped = c.get(1).is_some();
        let (name, base) = match (c.get(1), c.get(2), c.get(3), c.get(4)) {
            (Some(n), Some(b), _, _) | (_, _, Some(n), Some(b)) => (n, b),
            _ => continue,
        };
        let Some(h) = held.iter().find(|h| {
            h.name.as_deref() == Some(base.as_str()) && (h.from..h.to).contains(&base.start())
        }) else {
            continue;
        };
        let steps = chain(code, base.end());
        let end = steps_end(code, base.end());
        let Ok(Some(part)) = walk(defs, h.schema, &steps) else {
            continue;
        };
        let (schema, from, to) = if looped {
            let head = c.get(0).unwrap().start();
            let body = closing(code.as_bytes(), code[head..].find('(').unwrap() + head);
            if !code[body..].trim_start().starts_with('{') {
                continue;
            }
            let open = body + code[body..].find('{').unwrap();
            match variants(defs, part)
                .into_iter()
                .find_map(|v| v.get("items"))
            {
                Some(item) => (item, open, closing(code.as_bytes(), open)),
                None => continue,
            }
        } else if code[end..].trim_start().starts_with([';', ',', '\n'])
            || code[end..].starts_with('\n')
        {
            (part, end, block_end(code.as_bytes(), end))
        } else {
            continue;
        };
        out.push(Held {
            schema,
            name: Some(name.as_str().to_owned()),
            from,
            to,
        });
    }
    out
}

/// Where the chain of reads at `at` ends.
fn steps_end(code: &str, at: usize) -> usize {
    let re = regex::Regex::new(r"^\s*(?:\?\.\s*|\.\s*)[A-Za-z_$][\w$]*|^\s*(?:\?\.)?\[").unwrap();
    let mut at = at;
    while let Some(m) = re.find(&code[at..]) {
        at = if m.as_str().ends_with('[') {
            closing(code.as_bytes(), at + m.end() - 1)
        } else {
            at + m.end()
        };
    }
    at
}

/// The reads off the responses `script` holds that their schemas do not have, as
/// `file:line: x has no .name`; the number of chains of reads checked; the `get(...)` calls
/// whose route is not written out.
fn unknown_response_reads(
    file: &str,
    script: &str,
    schema: &Value,
) -> (Vec<String>, usize, Vec<String>) {
    let code = blank(script).text;
    let defs = &schema["$defs"];
    let (mut held, unresolved) = held(script, &code, schema);
    let mut next = parts(&code, defs, &held);
    while !next.is_empty() {
        let more = parts(&code, defs, &next);
        held.append(&mut next);
        next = more
            .into_iter()
            .filter(|m| !held.iter().any(|h| h.name == m.name && h.from == m.from))
            .collect();
    }
    let mut unknown = Vec::new();
    let mut checked = 0;
    for h in &held {
        for (_, steps) in uses(&code, h) {
            if steps.is_empty() {
                continue;
            }
            checked += 1;
            if let Err((name, at)) = walk(defs, h.schema, &steps) {
                let what = h.name.as_deref().unwrap_or("(response)");
                unknown.push(format!(
                    "{file}:{}: {what} has no .{name}",
                    line_of(&code, at)
                ));
            }
        }
    }
    let unresolved = unresolved
        .into_iter()
        .map(|u| format!("{file} {u}"))
        .collect();
    (unknown, checked, unresolved)
}

#[test]
fn every_property_read_off_a_response_the_scripts_hold_is_in_its_schema() {
    let schema = smdebug_serve::api_schema();
    let mut unknown = Vec::new();
    let mut checked = 0;
    let mut unresolved = Vec::new();
    for file in scripts() {
        let script = std::fs::read_to_string(assets().join(&file)).unwrap();
        let (u, n, r) = unknown_response_reads(&file, &script, &schema);
        unknown.extend(u);
        checked += n;
        unresolved.extend(r);
    }
    assert!(
        unknown.is_empty(),
        "the page's scripts read properties their responses do not have (assets/api.schema.json):\n{}",
        unknown.join("\n")
    );
    assert!(
        unresolved.is_empty(),
        "calls of the API this test cannot check (write the path out as \"runs/\" + id + \"/x?...\", \
         or name a value declared with it):\n{}",
        unresolved.join("\n")
    );
    // Not vacuous: the summary's reads off the overview are among those checked.
    eprintln!("{checked} chains of reads checked");
    assert!(checked > 40, "only {checked} chains of reads were found");
}

#[test]
fn a_read_no_response_has_is_named_with_its_script_line() {
    let schema = smdebug_serve::api_schema();
    let script = r#"async function f(r) {
  const o = await get("runs/" + r.id + "/overview");
  // o.not_read, ".in_a_string"
  const s = `${o.progress.step_rat} steps/s` + "o.last_stepz";
  for (const n of o.nodes) { n.rowz.forEach((x) => x); }
  const p = o.progress;
  if (p.eta_sx) return p.eta_s;
  return o.progress.step_rate + (await get("runs")).runz.length + o["last_stepp"] + o.loss.last_value;
}
const q = "runs/" + id + "/tensorz?name=x";
env.get(q);
"#;
    let (unknown, checked, unresolved) = unknown_response_reads("x.js", script, &schema);
    assert_eq!(
        unknown,
        [
            "x.js:4: o has no .step_rat",
            "x.js:8: (response) has no .runz",
            "x.js:5: n has no .rowz",
            "x.js:7: p has no .eta_sx",
        ],
        "{checked} chains"
    );
    assert_eq!(
        unresolved,
        [r#"x.js line 11: get(q): the API has no JSON route runs/{id}/tensorz"#]
    );
    assert_eq!(
        unknown_reads("x.js", script, &schema),
        [
            "x.js:4: .step_rat",
            "x.js:7: .eta_sx",
            "x.js:8: .last_stepp"
        ]
    );
}
