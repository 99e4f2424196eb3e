//! Where a run lives, decided once: a folder on local disk or an object-store URL.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::{Backend, local_path};
use crate::error::{Error, Result};

/// A run's location, parsed: every "is this on local disk?" question is answered from it, not
/// from the text (a `file://` URL is local disk; `s3:/bucket` with one slash is refused rather
/// than taken for a folder named `s3:`).
///
/// ```
/// use smdebug_io::storage::{Backend, Location};
///
/// let local: Location = "file:///tmp/my%20run".parse().unwrap();
/// assert_eq!(local.local_path(), Some(std::path::Path::new("/tmp/my run")));
/// let s3 = Location::parse("s3://bucket/jobs/run").unwrap();
/// assert_eq!((s3.local_path(), s3.backend()), (None, Some(Backend::Aws)));
/// assert!(Location::parse("s3:/bucket/run").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A folder on local disk: a plain path, or a `file://` URL decoded.
    Local(PathBuf),
    /// An object-store URL (`s3://bucket/run`, `memory://name/run`), as written.
    Store {
        /// The URL.
        url: String,
        /// The backend that opens it.
        backend: Backend,
    },
}

impl Location {
    /// Parses `location`: a path or `file://` URL is [`Location::Local`], a URL of a scheme an
    /// object store opens is [`Location::Store`]; anything that looks like a URL but is not a
    /// well-formed one of those is [`Error::InvalidLocation`].
    pub fn parse(location: &str) -> Result<Location> {
        match local_path(location)? {
            Some(path) => Ok(Location::Local(path)),
            None => match Backend::for_location(location) {
                Some(backend) => Ok(Location::Store {
                    url: location.to_string(),
                    backend,
                }),
                None => Err(Error::InvalidLocation {
                    location: location.to_string(),
                    reason: "not a local path or an object-store URL".to_string(),
                }),
            },
        }
    }

    /// The folder, for a location on local disk.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            Location::Store { .. } => None,
        }
    }

    /// Whether the location is on local disk.
    pub fn is_local(&self) -> bool {
        matches!(self, Location::Local(_))
    }

    /// The object-store backend, for a URL.
    pub fn backend(&self) -> Option<Backend> {
        match self {
            Location::Local(_) => None,
            Location::Store { backend, .. } => Some(*backend),
        }
    }

    /// Whether `location` (text) is on local disk; a location that does not parse is not.
    pub fn is_local_text(location: &str) -> bool {
        Location::parse(location).is_ok_and(|l| l.is_local())
    }
}

impl FromStr for Location {
    type Err = Error;

    fn from_str(location: &str) -> Result<Location> {
        Location::parse(location)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Store { url, .. } => f.write_str(url),
        }
    }
}
