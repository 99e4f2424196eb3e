//! Where a run lives, decided once: a folder on local disk or an object-store URL.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::Backend;
use crate::error::{Error, Result};

/// A run's location, parsed: every "is this on local disk?" question is answered from it, not
/// from the text (a `file://` URL is local disk; `s3:/bucket` with one slash is refused rather
/// than taken for a folder named `s3:`).
///
/// ```
/// use smdebug_storage::{Backend, Location};
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

/// What a run's location can be given as, everywhere one is opened: text (a path or a URL,
/// parsed by [`Location::parse`]), a path (always local disk, never read as a URL), or a
/// [`Location`] already parsed, which is not parsed again.
///
/// ```
/// use smdebug_storage::{IntoLocation, Location};
///
/// let dir = std::path::Path::new("/tmp/s3:/x");
/// assert_eq!(dir.into_location().unwrap(), Location::Local(dir.into()));
/// assert!("s3:/x".into_location().is_err());
/// let url = Location::parse("memory://doc/run").unwrap();
/// assert_eq!((&url).into_location().unwrap(), url);
/// ```
pub trait IntoLocation {
    /// The location, or [`Error::InvalidLocation`] for text that names none.
    fn into_location(self) -> Result<Location>;
}

impl IntoLocation for Location {
    fn into_location(self) -> Result<Location> {
        Ok(self)
    }
}

impl IntoLocation for &Location {
    fn into_location(self) -> Result<Location> {
        Ok(self.clone())
    }
}

impl IntoLocation for &str {
    fn into_location(self) -> Result<Location> {
        Location::parse(self)
    }
}

impl IntoLocation for &String {
    fn into_location(self) -> Result<Location> {
        Location::parse(self)
    }
}

impl IntoLocation for String {
    fn into_location(self) -> Result<Location> {
        Location::parse(&self)
    }
}

impl IntoLocation for &Path {
    fn into_location(self) -> Result<Location> {
        Ok(Location::Local(self.to_path_buf()))
    }
}

impl IntoLocation for &PathBuf {
    fn into_location(self) -> Result<Location> {
        Ok(Location::Local(self.clone()))
    }
}

impl IntoLocation for PathBuf {
    fn into_location(self) -> Result<Location> {
        Ok(Location::Local(self))
    }
}

/// The URL schemes a location may name: local disk (`file`), the in-process store
/// (`memory`) and the object stores `object_store` opens (each behind its [`Backend`]).
const SCHEMES: [&str; 12] = [
    "file", "memory", "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https",
];

/// Where `location` lives: `Some(path)` on local disk (a plain path or a `file://` URL),
/// `None` for a URL of a scheme an object store opens ([`Location::parse`] is the public
/// face of it). A location that looks like a URL but is not a well-formed
/// one of a known scheme (`s3:/bucket/run` with one slash, `s3:bucket`, `foo://x`) is refused
/// rather than taken as a local folder named `s3:`; `./s3:/x` is such a folder.
pub(super) fn local_path(location: &str) -> Result<Option<std::path::PathBuf>> {
    let invalid = |reason: String| Error::InvalidLocation {
        location: location.to_string(),
        reason,
    };
    let scheme = location.split_once(':').map(|(s, _)| s).filter(|s| {
        // A drive letter (`C:\runs`) is a path; a scheme has two characters or more.
        s.len() > 1
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let Some(scheme) = scheme else {
        return Ok(Some(location.into()));
    };
    let lower = scheme.to_ascii_lowercase();
    let known = SCHEMES.contains(&lower.as_str());
    let rest = &location[scheme.len() + 1..];
    if !rest.starts_with("//") {
        return Err(invalid(if known {
            format!(
                "`{scheme}:` must be followed by `//` (`{lower}://{}`); a local folder whose \
                 name ends in `:` is written `./{location}`",
                rest.trim_start_matches('/')
            )
        } else {
            format!(
                "`{scheme}:` looks like a URL scheme but is not one smdebug opens; a local \
                 folder whose name ends in `:` is written `./{location}`"
            )
        }));
    }
    if !known {
        return Err(invalid(format!(
            "unknown scheme `{scheme}://`: use a path, file://, memory://, s3://, gs://, \
             az:// (abfs[s]://, adl://) or http(s)://"
        )));
    }
    if lower != "file" {
        return Ok(None);
    }
    file_url_path(&rest[2..]).map(Some).map_err(invalid)
}

/// The local path of a `file://` URL, given what follows `file://`: an empty host or
/// `localhost`, then an absolute path whose `%XX` escapes are decoded (`file:///tmp/my%20run`
/// is `/tmp/my run`). Decoded by hand with `percent-encoding` rather than with `url`, whose
/// IDNA tables the lean training build leaves out (`url` decides the same for these).
fn file_url_path(after_scheme: &str) -> std::result::Result<std::path::PathBuf, String> {
    if after_scheme.contains(['?', '#']) {
        return Err("a file:// location has no query or fragment (`?`, `#`)".to_string());
    }
    let (host, path) = match after_scheme.find('/') {
        Some(slash) => after_scheme.split_at(slash),
        None => (after_scheme, ""),
    };
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(format!(
            "not a local file path: host `{host}` (a local file URL is file:///path)"
        ));
    }
    if path.is_empty() {
        return Err("not a local file path: no path after the host".to_string());
    }
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    #[cfg(unix)]
    let path = {
        use std::os::unix::ffi::OsStringExt;
        std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes))
    };
    #[cfg(not(unix))]
    let path = std::path::PathBuf::from(
        String::from_utf8(bytes).map_err(|_| "the path is not UTF-8 once decoded".to_string())?,
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_are_local_paths_decoded() {
        let cases = [
            ("file:///tmp/run", "/tmp/run"),
            ("file:///tmp/my%20run", "/tmp/my run"),
            ("file://localhost/tmp/run", "/tmp/run"),
            ("FILE:///tmp/r%C3%A9sum%C3%A9", "/tmp/résumé"),
            ("file:///tmp/100%25", "/tmp/100%"),
        ];
        for (location, path) in cases {
            assert_eq!(
                local_path(location).unwrap(),
                Some(std::path::PathBuf::from(path)),
                "{location}"
            );
            // What `url` makes of the same location.
            #[cfg(feature = "object-store")]
            assert_eq!(
                url::Url::parse(location).unwrap().to_file_path().unwrap(),
                std::path::PathBuf::from(path),
                "{location}"
            );
        }
        for bad in ["file://host/tmp/run", "file://", "file:///tmp/run?x=1"] {
            let err = local_path(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidLocation { .. }), "{bad}: {err}");
        }
        assert_eq!(local_path("s3://bucket/run").unwrap(), None);
        assert_eq!(
            local_path("./s3:/x").unwrap(),
            Some(std::path::PathBuf::from("./s3:/x"))
        );
    }
}
