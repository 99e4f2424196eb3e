//! Node ids: which host a sample or span came from.

use std::fmt;

use super::error::{ProfilerError, Result};

/// The id of one host in a (possibly multi-node) job, as written into file names and records.
///
/// smdebug's file names use `.` and `_` as separators
/// (`<epoch_s>.<node>.json`, `<end_us>_<node>_pythontimeline.json`), so a node id is limited to
/// ASCII letters, digits and `-`.
///
/// Python smdebug's `LocalSystemMetricsReader` only lists system files whose node is
/// SageMaker-style `algo-<n>`; use [`NodeId::algo`] when Python notebooks must read the
/// system metrics. The default, [`NodeId::from_hostname`], keeps hosts apart without any
/// configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(String);

impl NodeId {
    /// Validates `id`: non-empty, at most 128 characters, only ASCII letters, digits and `-`.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        let reason = if id.is_empty() {
            Some("it is empty")
        } else if id.len() > 128 {
            Some("it is longer than 128 characters")
        } else if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            Some(
                "only ASCII letters, digits and `-` may be used (`.` and `_` separate file-name fields)",
            )
        } else {
            None
        };
        match reason {
            Some(reason) => Err(ProfilerError::InvalidNodeId { node: id, reason }),
            None => Ok(Self(id)),
        }
    }

    /// SageMaker's name for the `n`-th host of a job: `algo-<n>` (n counts from 1). The only
    /// form Python smdebug 1.0.34's `LocalSystemMetricsReader` lists (it skips system files of
    /// any other node id without a word): the node id of files Python smdebug is to read, with
    /// `n` the host's index in the job plus one.
    pub fn algo(n: u32) -> Self {
        Self(format!("algo-{}", n.max(1)))
    }

    /// This host's name with every character outside `[A-Za-z0-9-]` replaced by `-`
    /// (`ip-10-0-0-1.ec2.internal` → `ip-10-0-0-1-ec2-internal`); `localhost` when the host
    /// name cannot be found.
    pub fn from_hostname() -> Self {
        Self::sanitized(&smdebug_io::jobs::host_name())
    }

    /// `raw` with every character outside `[A-Za-z0-9-]` replaced by `-`, cut to 128 characters;
    /// `localhost` when nothing is left.
    pub fn sanitized(raw: &str) -> Self {
        let cleaned: String = raw
            .trim()
            .chars()
            .take(128)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if cleaned.is_empty() {
            Self("localhost".to_owned())
        } else {
            Self(cleaned)
        }
    }

    /// The id as written into files.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether Python smdebug's system-metrics reader accepts this id in file names
    /// (`algo-<digits>`).
    pub fn is_sagemaker_style(&self) -> bool {
        self.0
            .strip_prefix("algo-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

impl Default for NodeId {
    fn default() -> Self {
        Self::from_hostname()
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for NodeId {
    type Err = ProfilerError;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_separators_and_accepts_sagemaker_names() {
        assert!(NodeId::new("algo_1").is_err());
        assert!(NodeId::new("a.b").is_err());
        assert!(NodeId::new("").is_err());
        assert!(NodeId::new("algo-2").unwrap().is_sagemaker_style());
        assert!(!NodeId::new("algo-").unwrap().is_sagemaker_style());
        assert_eq!(NodeId::algo(0).as_str(), "algo-1");
    }

    #[test]
    fn sanitizes_host_names() {
        assert_eq!(
            NodeId::sanitized("ip-10-0-0-1.ec2.internal\n").as_str(),
            "ip-10-0-0-1-ec2-internal"
        );
        assert_eq!(NodeId::sanitized("  ").as_str(), "localhost");
        let own = NodeId::from_hostname();
        assert!(NodeId::new(own.as_str()).is_ok(), "{own}");
    }
}
