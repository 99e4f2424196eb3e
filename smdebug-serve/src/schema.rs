//! The dashboard API's contract as a JSON Schema (draft 2020-12), drawn from the types the
//! handlers serialize ([`crate::views`], [`crate::series`], [`crate::push_views`], ...: each
//! derives `schemars::JsonSchema` beside `serde::Serialize`, so the schema follows their serde
//! attributes) and from the routes' table ([`crate::routes::endpoints`]).
//!
//! It is committed as `assets/api.schema.json`; `tests/api_schema.rs` fails when that file is
//! not what this gives, and checks every property the page's scripts read against it.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::routes::{Answer, endpoints};
use crate::series::ApiError;

/// The API's JSON Schema: `routes` maps `METHOD /api/path` to what it answers (`json`: the
/// body's schema; `events`: the schema of each server-sent event's data; `file`: a media
/// type), `error` is the body of any failed request, and `$defs` holds the types.
pub fn api_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut routes = Map::new();
    for e in endpoints() {
        let answer = match e.answer {
            Answer::Json(schema) => json!({ "json": schema(&mut generator) }),
            Answer::Events(schema) => json!({ "events": schema(&mut generator) }),
            Answer::File(media_type) => json!({ "file": media_type }),
        };
        routes.insert(format!("{} /api{}", e.method, e.path), answer);
    }
    let error = generator.subschema_for::<ApiError>();
    let defs = generator.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "smdebug serve: the dashboard API",
        "description": "Generated from smdebug-serve's response types (smdebug_serve::api_schema); do not edit: UPDATE_API_SCHEMA=1 cargo nextest run -p smdebug-serve --test api_schema rewrites it.",
        "routes": routes,
        "error": error,
        "$defs": defs,
    })
}
