//! Which object-store backends a build includes (cargo features of smdebug-io).

/// An object-store backend that is a cargo feature of smdebug-io, off by default: local disk
/// and `memory://` are always there; S3, Google Cloud Storage, Azure and plain HTTP(S) stores
/// bring in an HTTP and TLS stack, so a build includes only the ones it names
/// (`smdebug-io = { features = ["aws"] }`). Opening a location whose backend is left out is an
/// [`Error::BackendNotCompiled`](crate::Error::BackendNotCompiled) that names the feature.
///
/// ```
/// use smdebug_io::storage::Backend;
///
/// assert_eq!(Backend::for_location("s3://bucket/run"), Some(Backend::Aws));
/// assert_eq!(Backend::for_location("https://acct.blob.core.windows.net/c/run"), Some(Backend::Azure));
/// assert_eq!(Backend::for_location("/tmp/run"), None);
/// assert_eq!(Backend::Aws.feature(), "aws");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
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
    pub const ALL: [Backend; 4] = [Backend::Aws, Backend::Gcp, Backend::Azure, Backend::Http];

    /// The smdebug-io cargo feature that compiles this backend in: `aws`, `gcp`, `azure`, `http`.
    pub fn feature(self) -> &'static str {
        match self {
            Backend::Aws => "aws",
            Backend::Gcp => "gcp",
            Backend::Azure => "azure",
            Backend::Http => "http",
        }
    }

    /// The backend's name for people: `Amazon S3`, `Google Cloud Storage`, ….
    pub fn name(self) -> &'static str {
        match self {
            Backend::Aws => "Amazon S3",
            Backend::Gcp => "Google Cloud Storage",
            Backend::Azure => "Azure Blob Storage",
            Backend::Http => "HTTP",
        }
    }

    /// Whether this build includes the backend.
    pub fn is_compiled(self) -> bool {
        match self {
            Backend::Aws => cfg!(feature = "aws"),
            Backend::Gcp => cfg!(feature = "gcp"),
            Backend::Azure => cfg!(feature = "azure"),
            Backend::Http => cfg!(feature = "http"),
        }
    }

    /// The backend a location needs; `None` for local paths, `file://`, `memory://` and
    /// anything that is not an object-store URL.
    pub fn for_location(location: &str) -> Option<Backend> {
        if !location.contains("://") {
            return None;
        }
        url::Url::parse(location)
            .ok()
            .as_ref()
            .and_then(Backend::of_url)
    }

    pub(crate) fn of_url(url: &url::Url) -> Option<Backend> {
        use object_store::ObjectStoreScheme as S;
        match S::parse(url).ok()?.0 {
            S::AmazonS3 => Some(Backend::Aws),
            S::GoogleCloudStorage => Some(Backend::Gcp),
            S::MicrosoftAzure => Some(Backend::Azure),
            S::Http => Some(Backend::Http),
            _ => None,
        }
    }
}
