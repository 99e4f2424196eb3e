//! Which object-store backends a build includes (cargo features of smdebug-storage, forwarded by smdebug-io).

/// An object-store backend that is a cargo feature of smdebug-storage (and of smdebug-io, which forwards it), off by default: local disk is
/// always there; the in-process store needs object_store's client and a tokio runtime, and S3,
/// Google Cloud Storage, Azure and plain HTTP(S) stores an HTTP and TLS stack besides, so a
/// build includes only the ones it names (`smdebug-io = { features = ["aws"] }`). Opening a
/// location whose backend is left out is an
/// [`Error::BackendNotCompiled`](crate::Error::BackendNotCompiled) that names the feature.
///
/// ```
/// use smdebug_storage::Backend;
///
/// assert_eq!(Backend::for_location("s3://bucket/run"), Some(Backend::Aws));
/// assert_eq!(Backend::for_location("https://acct.blob.core.windows.net/c/run"), Some(Backend::Azure));
/// assert_eq!(Backend::for_location("memory://doc/run"), Some(Backend::Memory));
/// assert_eq!(Backend::for_location("/tmp/run"), None);
/// assert_eq!(Backend::for_location("file:///tmp/run"), None);
/// assert_eq!(Backend::Aws.feature(), "aws");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The in-process store: `memory://name/...`, shared by every handle opened on `name` in
    /// this process. Feature `memory`.
    Memory,
    /// Amazon S3 and S3-compatible stores: `s3://`, `s3a://`, S3 `https://` hosts. Feature `aws`.
    Aws,
    /// Google Cloud Storage: `gs://`. Feature `gcp`.
    Gcp,
    /// Azure Blob Storage and Data Lake: `az://`, `abfs[s]://`, `adl://`, Azure `https://`
    /// hosts. Feature `azure`.
    Azure,
    /// Any other `http://` or `https://` server (WebDAV-style). Feature `http`.
    Http,
}

impl Backend {
    /// Every backend, in feature order.
    pub const ALL: [Backend; 5] = [
        Backend::Memory,
        Backend::Aws,
        Backend::Gcp,
        Backend::Azure,
        Backend::Http,
    ];

    /// The smdebug-storage cargo feature that compiles this backend in: `memory`, `aws`, `gcp`,
    /// `azure`, `http`.
    pub fn feature(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Aws => "aws",
            Backend::Gcp => "gcp",
            Backend::Azure => "azure",
            Backend::Http => "http",
        }
    }

    /// The backend's name for people: `Amazon S3`, `Google Cloud Storage`, ….
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "the in-process memory store",
            Backend::Aws => "Amazon S3",
            Backend::Gcp => "Google Cloud Storage",
            Backend::Azure => "Azure Blob Storage",
            Backend::Http => "HTTP",
        }
    }

    /// Whether this build includes the backend.
    pub fn is_compiled(self) -> bool {
        match self {
            Backend::Memory => cfg!(feature = "memory"),
            Backend::Aws => cfg!(feature = "aws"),
            Backend::Gcp => cfg!(feature = "gcp"),
            Backend::Azure => cfg!(feature = "azure"),
            Backend::Http => cfg!(feature = "http"),
        }
    }

    /// The backend a location needs; `None` for local paths, `file://` and anything that is not
    /// an object-store URL.
    ///
    /// Worked out from the scheme and, for `https://`, the host, as object_store tells its
    /// clouds apart (`ObjectStoreScheme::parse`), without parsing the URL with `url`: a build
    /// without object stores must still name the feature a location needs. A test holds the
    /// two to the same answers.
    pub fn for_location(location: &str) -> Option<Backend> {
        let (scheme, rest) = location.split_once("://")?;
        Some(match scheme.to_ascii_lowercase().as_str() {
            "memory" => Backend::Memory,
            "s3" | "s3a" => Backend::Aws,
            "gs" => Backend::Gcp,
            "az" | "azure" | "abfs" | "abfss" | "adl" => Backend::Azure,
            "http" => Backend::Http,
            "https" => {
                let host = host_of(rest);
                let ends = |suffix: &str| host.ends_with(suffix);
                if ends("dfs.core.windows.net")
                    || ends("blob.core.windows.net")
                    || ends("dfs.fabric.microsoft.com")
                    || ends("blob.fabric.microsoft.com")
                {
                    Backend::Azure
                } else if ends("amazonaws.com") || ends("r2.cloudflarestorage.com") {
                    Backend::Aws
                } else {
                    Backend::Http
                }
            }
            _ => return None,
        })
    }
}

/// The host of a URL's part after `scheme://`: up to the path, query or fragment, without the
/// user information and the port, in lower case.
fn host_of(after_scheme: &str) -> String {
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.rsplit_once(':') {
        // A port, not the inside of an IPv6 literal (`[::1]`).
        Some((h, port)) if !port.contains(']') => h,
        _ => host,
    };
    host.to_ascii_lowercase()
}

#[cfg(all(test, feature = "object-store"))]
mod tests {
    use super::*;

    /// The hand-made scheme reading agrees with object_store's own for every kind of location
    /// it knows (and `memory://` with a name, which object_store's parse leaves to the caller).
    #[test]
    fn agrees_with_object_stores_reading_of_the_scheme() {
        use object_store::ObjectStoreScheme as S;
        let locations = [
            "s3://bucket/run",
            "S3://Bucket/run",
            "s3a://bucket/a/b",
            "gs://bucket/run",
            "az://container/run",
            "azure://container/run",
            "abfs://fs@acct.dfs.core.windows.net/run",
            "abfss://fs@acct.dfs.core.windows.net/run",
            "adl://acct/run",
            "http://127.0.0.1:9000/run",
            "http://user:pw@example.com/run",
            "https://example.com/run",
            "https://example.com:8443/run?x=1",
            "https://acct.blob.core.windows.net/container/run",
            "https://acct.dfs.core.windows.net/container/run",
            "https://ws.dfs.fabric.microsoft.com/x/run",
            "https://ws.blob.fabric.microsoft.com/x/run",
            "https://s3.us-east-1.amazonaws.com/bucket/run",
            "https://bucket.s3.eu-west-1.amazonaws.com/run",
            "https://acct.r2.cloudflarestorage.com/bucket/run",
            "https://[::1]:9000/run",
            "file:///tmp/run",
        ];
        for location in locations {
            let url = url::Url::parse(location).unwrap();
            let theirs = match S::parse(&url).unwrap().0 {
                S::AmazonS3 => Some(Backend::Aws),
                S::GoogleCloudStorage => Some(Backend::Gcp),
                S::MicrosoftAzure => Some(Backend::Azure),
                S::Http => Some(Backend::Http),
                S::Memory => Some(Backend::Memory),
                _ => None,
            };
            assert_eq!(Backend::for_location(location), theirs, "{location}");
        }
        assert_eq!(
            Backend::for_location("memory://doc/run"),
            Some(Backend::Memory)
        );
        assert_eq!(Backend::for_location("./s3:/x"), None);
        assert_eq!(Backend::for_location("ftp://host/run"), None);
    }
}
