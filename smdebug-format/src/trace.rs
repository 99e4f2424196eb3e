//! Trace file names: `framework/pevents/<YYYYMMDDHH>/<end_us>_<node token>_<suffix>`.

use crate::system::hour_folder;

/// The storage folder of framework trace files.
pub const TRACE_PREFIX: &str = "framework/pevents";
/// The suffix of Python-timeline files (the ones this crate writes).
pub const PYTHONTIMELINE_SUFFIX: &str = "pythontimeline.json";

/// The key of a trace file whose last event ends at `end_us`, written by `worker` on `node`.
///
/// The node token is `<worker>-<node>`, the shape of Python smdebug's `get_node_id()`
/// (`<rank>-<host>`), so smdebug's trace parser shows the same node and worker.
pub fn trace_file_key(end_us: u64, worker: u32, node: &str) -> String {
    format!(
        "{TRACE_PREFIX}/{}/{end_us}_{worker}-{node}_{PYTHONTIMELINE_SUFFIX}",
        hour_folder(end_us / 1_000_000)
    )
}

/// A framework trace file found in storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFileName {
    /// The file's key.
    pub key: String,
    /// End of the file's last event, microseconds since the epoch (from the name).
    pub end_us: u64,
    /// The node token as written (`0-algo-1`, `12345-myhost`).
    pub node_token: String,
    /// The node: the token without a leading `<digits>-`.
    pub node: String,
    /// The leading number of the token: the rank (or, for some Python writers, the process
    /// id).
    pub worker: Option<u32>,
    /// What follows the node token (`pythontimeline.json`, `model_timeline.json`, ...).
    pub suffix: String,
}

/// Parses a key named `.../pevents/.../<digits>_<node>_<suffix>.json`; `None` for anything else.
pub fn parse_trace_file_key(key: &str) -> Option<TraceFileName> {
    if !key.contains("pevents/") {
        return None;
    }
    let file = key.rsplit('/').next()?;
    if !file.ends_with(".json") {
        return None;
    }
    let mut parts = file.splitn(3, '_');
    let end = parts.next()?;
    let node_token = parts.next()?;
    let suffix = parts.next()?;
    if end.is_empty() || !end.bytes().all(|b| b.is_ascii_digit()) || node_token.is_empty() {
        return None;
    }
    let (worker, node) = match node_token.split_once('-') {
        Some((rank, rest)) if !rest.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()) => {
            (rank.parse().ok(), rest.to_owned())
        }
        _ => (None, node_token.to_owned()),
    };
    Some(TraceFileName {
        key: key.to_owned(),
        end_us: end.parse().ok()?,
        node_token: node_token.to_owned(),
        node,
        worker,
        suffix: suffix.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let key = trace_file_key(1_594_662_624_718_694, 3, "algo-2");
        assert_eq!(
            key,
            "framework/pevents/2020071317/1594662624718694_3-algo-2_pythontimeline.json"
        );
        let parsed = parse_trace_file_key(&key).unwrap();
        assert_eq!(parsed.worker, Some(3));
        assert_eq!(parsed.node, "algo-2");
        assert_eq!(parsed.suffix, "pythontimeline.json");
        let python = parse_trace_file_key(
            "framework/pevents/2020052602/1590461139923994_0001_model_timeline.json",
        )
        .unwrap();
        assert_eq!((python.worker, python.node.as_str()), (None, "0001"));
        assert!(parse_trace_file_key("framework/pevents/x/abc_node_pythontimeline.json").is_none());
    }
}
