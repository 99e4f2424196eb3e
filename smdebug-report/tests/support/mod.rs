//! What the report's tests share: system metrics written as the sampler writes them, and one
//! section of a written page. (`figures.rs` beside it, the figure checks, is also read by the
//! examples' demo test.)
#![allow(dead_code)] // each test binary uses part of this module

use std::path::Path;

use smdebug_format::system::system_file_key;
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

/// One system metric of a sample: its type, name, dimension and value (`("gpu", "gpu0",
/// "GPUUtilization", 5.0)`).
pub type Metric = (&'static str, &'static str, &'static str, f64);

/// Writes the system-metrics file of `node` into the run at `run`, named for `start_s` (whole
/// seconds): for each `(t, metrics)` of `samples`, one line a metric stamped `t` (seconds).
pub fn write_system_file(
    run: &Path,
    start_s: u64,
    node: &str,
    samples: impl IntoIterator<Item = (f64, Vec<Metric>)>,
) {
    let mut text = String::new();
    for (t, metrics) in samples {
        for (kind, name, dimension, value) in metrics {
            text.push_str(&format!(
                "{{\"Type\":\"{kind}\",\"Name\":\"{name}\",\"Dimension\":\"{dimension}\",\
                 \"Value\":{value},\"NodeId\":\"{node}\",\"Timestamp\":{t}}}\n"
            ));
        }
    }
    LocalStorage::new(run)
        .unwrap()
        .put(&system_file_key(start_s, node), text.into_bytes().into())
        .unwrap();
}

/// The HTML of one section, from its opening tag to its end.
pub fn section<'h>(html: &'h str, id: &str) -> &'h str {
    let start = html
        .find(&format!("<section id=\"{id}\""))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = start + html[start..].find("</section>").unwrap();
    &html[start..end]
}
