//! Reading the API's JSON Schema (`smdebug_serve::api_schema`, `assets/api.schema.json`): the
//! alternatives a schema stands for, and whether a response conforms to it.

use serde_json::Value;

/// The schema of what `GET /api/{route}` answers (its body, or each event's data).
pub fn route<'a>(schema: &'a Value, route: &str) -> Option<&'a Value> {
    let answer = &schema["routes"][format!("GET /api/{route}")];
    [&answer["json"], &answer["events"]]
        .into_iter()
        .find(|s| !s.is_null())
}

/// The alternatives `s` stands for: its `$ref` followed (into `defs`, the schema's `$defs`),
/// `anyOf`/`oneOf` opened, `null` left out.
pub fn variants<'a>(defs: &'a Value, s: &'a Value) -> Vec<&'a Value> {
    if let Some(r) = s["$ref"].as_str() {
        return variants(defs, &defs[r.trim_start_matches("#/$defs/")]);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(xs) = s[key].as_array() {
            return xs.iter().flat_map(|x| variants(defs, x)).collect();
        }
    }
    if s["type"] == "null" {
        Vec::new()
    } else {
        vec![s]
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// Where `v` does not conform to `s` (the keywords schemars writes: `$ref`, `anyOf`, `oneOf`,
/// `type`, `enum`, `properties` (closed: a key no property names is reported), `required`,
/// `items`, `additionalProperties`), each as `path: what`.
pub fn mismatches(defs: &Value, s: &Value, v: &Value, path: &str) -> Vec<String> {
    if let Some(r) = s["$ref"].as_str() {
        return mismatches(defs, &defs[r.trim_start_matches("#/$defs/")], v, path);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(xs) = s[key].as_array() {
            let each: Vec<Vec<String>> = xs.iter().map(|x| mismatches(defs, x, v, path)).collect();
            return match each.iter().find(|m| m.is_empty()) {
                Some(_) => Vec::new(),
                None => vec![format!(
                    "{path}: {v} is none of {key} ({})",
                    each.concat().join("; ")
                )],
            };
        }
    }
    let mut out = Vec::new();
    let types: Vec<&str> = match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(v, t)) {
        return vec![format!("{path}: {v} is not {types:?}")];
    }
    if let Some(allowed) = s["enum"].as_array()
        && !allowed.contains(v)
    {
        out.push(format!("{path}: {v} is not one of {allowed:?}"));
    }
    if let Value::Object(map) = v {
        let props = s["properties"].as_object();
        for key in s["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(key) {
                out.push(format!("{path}: no {key}"));
            }
        }
        for (k, x) in map {
            let at = format!("{path}.{k}");
            match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                (Some(p), _) => out.extend(mismatches(defs, p, x, &at)),
                (None, Some(extra)) if extra.is_object() => {
                    out.extend(mismatches(defs, extra, x, &at))
                }
                (None, _) if props.is_some() => out.push(format!("{at}: not in the schema")),
                _ => {}
            }
        }
    }
    if let (Value::Array(xs), Some(item)) = (v, s.get("items")) {
        for (i, x) in xs.iter().enumerate() {
            out.extend(mismatches(defs, item, x, &format!("{path}[{i}]")));
        }
    }
    out
}
