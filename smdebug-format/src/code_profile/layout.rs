//! Code-profile file names:
//! `framework/code/<YYYYMMDDHH>/<start_us>-<end_us>_<worker>-<node>.<extension>`.

use crate::system::hour_folder;

/// The storage folder of code profiles.
pub const CODE_PREFIX: &str = "framework/code";
/// The extension of a window's summary (JSON, [`CodeProfileSummary`](super::CodeProfileSummary)).
pub const SUMMARY_EXTENSION: &str = "json";
/// The extension of a window's flame graph (SVG).
pub const FLAMEGRAPH_EXTENSION: &str = "svg";
/// The extension of a window's profile in pprof's protobuf format, gzip-compressed.
pub const PPROF_EXTENSION: &str = "pb.gz";

/// The key of a window's files without the extension: the window ran from `start_us` to
/// `end_us` (microseconds since the epoch) in `worker` on `node`; the hour folder is the
/// start's.
pub fn code_profile_base_key(start_us: u64, end_us: u64, worker: u32, node: &str) -> String {
    format!(
        "{CODE_PREFIX}/{}/{start_us}-{end_us}_{worker}-{node}",
        hour_folder(start_us / 1_000_000)
    )
}

/// A code-profile window found in storage (named by any of its files).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodeProfileFile {
    /// Start of the window, microseconds since the epoch.
    pub start_us: u64,
    /// End of the window, microseconds since the epoch.
    pub end_us: u64,
    /// The node (`algo-1`, a host name).
    pub node: String,
    /// The worker (rank).
    pub worker: u32,
    /// The key without its extension.
    pub base_key: String,
}

impl CodeProfileFile {
    /// The window's name: its key's last part without the extension,
    /// `<start_us>-<end_us>_<worker>-<node>` (unique within a run).
    pub fn id(&self) -> &str {
        self.base_key.rsplit('/').next().unwrap_or(&self.base_key)
    }

    /// The summary's key.
    pub fn summary_key(&self) -> String {
        format!("{}.{SUMMARY_EXTENSION}", self.base_key)
    }

    /// The flame graph's key.
    pub fn flamegraph_key(&self) -> String {
        format!("{}.{FLAMEGRAPH_EXTENSION}", self.base_key)
    }

    /// The pprof profile's key.
    pub fn pprof_key(&self) -> String {
        format!("{}.{PPROF_EXTENSION}", self.base_key)
    }
}

/// Parses a key `.../code/.../<start>-<end>_<worker>-<node>.<ext>`: the window and the
/// extension (`json`, `svg`, `pb.gz`); `None` for anything else.
pub fn parse_code_profile_key(key: &str) -> Option<(CodeProfileFile, &str)> {
    if !key.starts_with(CODE_PREFIX) {
        return None;
    }
    let (folder, file) = key.rsplit_once('/')?;
    // Node ids hold no `.`, so the first dot after the node starts the extension.
    let (stem, extension) = file.split_once('.')?;
    let (window, token) = stem.split_once('_')?;
    let (start, end) = window.split_once('-')?;
    let (worker, node) = token.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(start) || !digits(end) || !digits(worker) || node.is_empty() {
        return None;
    }
    if ![SUMMARY_EXTENSION, FLAMEGRAPH_EXTENSION, PPROF_EXTENSION].contains(&extension) {
        return None;
    }
    let file = CodeProfileFile {
        start_us: start.parse().ok()?,
        end_us: end.parse().ok()?,
        node: node.to_owned(),
        worker: worker.parse().ok()?,
        base_key: format!("{folder}/{stem}"),
    };
    Some((file, extension))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_with_every_extension() {
        let base = code_profile_base_key(1_594_662_624_718_694, 1_594_662_630_000_000, 3, "algo-2");
        assert_eq!(
            base,
            "framework/code/2020071317/1594662624718694-1594662630000000_3-algo-2"
        );
        for extension in ["json", "svg", "pb.gz"] {
            let key = format!("{base}.{extension}");
            let (file, ext) = parse_code_profile_key(&key).unwrap();
            assert_eq!(ext, extension);
            assert_eq!((file.worker, file.node.as_str()), (3, "algo-2"));
            assert_eq!(file.start_us, 1_594_662_624_718_694);
            assert_eq!(file.end_us, 1_594_662_630_000_000);
            assert_eq!(file.summary_key(), format!("{base}.json"));
            assert_eq!(file.id(), "1594662624718694-1594662630000000_3-algo-2");
            assert_eq!(file.pprof_key(), format!("{base}.pb.gz"));
        }
    }

    #[test]
    fn other_names_are_not_code_profiles() {
        for key in [
            "framework/code/2020071317/1-2_3-algo-2.txt",
            "framework/code/2020071317/1-2_3-algo-2",
            "framework/code/2020071317/a-2_3-algo-2.json",
            "framework/code/2020071317/1-2_x-algo-2.json",
            "framework/code/2020071317/1-2_3-.json",
            "framework/code/2020071317/12_3-algo-2.json",
            "framework/pevents/2020071317/1-2_3-algo-2.json",
        ] {
            assert!(parse_code_profile_key(key).is_none(), "{key}");
        }
    }
}
