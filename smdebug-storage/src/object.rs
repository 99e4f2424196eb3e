//! Object stores (S3, GCS, Azure, in-memory, …) through `object_store`, driven by a small tokio
//! runtime owned by the backend so that callers stay synchronous.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
#[cfg(feature = "memory")]
use object_store::memory::InMemory;
use object_store::path::Path;
#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
use object_store::{ClientOptions, RetryConfig};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use super::backend::Backend;
use super::store::{Storage, StorageOptions, check_relative, trim_prefix};
use crate::error::{Error, Result};

/// Objects larger than this are uploaded in parts (S3 caps a single PUT at 5 GiB); a multipart
/// upload is still atomic: the object appears when it completes.
const MULTIPART_THRESHOLD: usize = 64 << 20;
const MULTIPART_CHUNK: usize = 16 << 20;

/// The process-wide `memory://` stores, by name, so that a writer and a reader in one process
/// see the same objects.
#[cfg(feature = "memory")]
fn memory_store(name: &str) -> Arc<InMemory> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let mut stores = STORES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    stores
        .entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()))
        .clone()
}

/// A run in an object store.
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// The run's prefix inside the store (`run` for `s3://bucket/run`), without slashes.
    root: String,
    describe: String,
    /// The time one request may take, for the message of a store that does not answer.
    request_timeout: Option<std::time::Duration>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("location", &self.describe)
            .finish_non_exhaustive()
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // Dropping a runtime inside another runtime's async context panics; this does not.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
fn env_options(prefix: &str) -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
macro_rules! build_cloud {
    ($builder:ty, $key:ty, $env:expr, $url:expr, $opts:expr, $client:expr, $retry:expr, $invalid:expr, $check:expr) => {{
        let mut b = <$builder>::new()
            .with_client_options($client)
            .with_retry($retry);
        let env = if $opts.from_env {
            env_options($env)
        } else {
            Vec::new()
        };
        let mut unknown = Vec::new();
        for (k, v) in env.into_iter().chain($opts.options.clone()) {
            match k.to_ascii_lowercase().parse::<$key>() {
                Ok(key) => b = b.with_config(key, v),
                Err(_) => unknown.push(k.clone()),
            }
        }
        reject_unknown(&unknown, $opts, &$invalid)?;
        $check(&b).map_err(&$invalid)?;
        let store = b
            .with_url($url.as_str())
            .build()
            .map_err(|e| $invalid(e.to_string()))?;
        (
            Arc::new(store) as Arc<dyn ObjectStore>,
            $url.path().to_string(),
        )
    }};
}

impl ObjectStorage {
    /// Opens the store named by `url` (see [`open_storage`](crate::open_storage)).
    pub fn open(url: &url::Url, options: &StorageOptions) -> Result<ObjectStorage> {
        let location = url.as_str().trim_end_matches('/').to_string();
        let invalid = |reason: String| Error::InvalidLocation {
            location: location.clone(),
            reason,
        };
        // A backend this build leaves out is refused before anything else, naming the feature
        // that brings it in.
        if let Some(backend) = Backend::for_location(url.as_str())
            && !backend.is_compiled()
        {
            return Err(Error::BackendNotCompiled {
                location,
                backend: backend.name(),
                feature: backend.feature(),
            });
        }
        #[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
        let client = ClientOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_timeout(options.request_timeout);
        #[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
        let retry = RetryConfig {
            max_retries: options.max_retries,
            retry_timeout: options.retry_timeout,
            ..Default::default()
        };
        let (store, root): (Arc<dyn ObjectStore>, String) = match url.scheme() {
            #[cfg(feature = "memory")]
            "memory" => {
                let name = url.host_str().unwrap_or_default();
                (memory_store(name), url.path().to_string())
            }
            #[cfg(feature = "aws")]
            "s3" | "s3a" => {
                use object_store::aws::{AmazonS3Builder as B, AmazonS3ConfigKey as K};
                build_cloud!(
                    B,
                    K,
                    "AWS_",
                    url,
                    options,
                    client,
                    retry,
                    invalid,
                    plain_http_s3
                )
            }
            #[cfg(feature = "gcp")]
            "gs" => {
                use object_store::gcp::{GoogleCloudStorageBuilder as B, GoogleConfigKey as K};
                build_cloud!(
                    B,
                    K,
                    "GOOGLE_",
                    url,
                    options,
                    client,
                    retry,
                    invalid,
                    |_: &B| Ok(())
                )
            }
            #[cfg(feature = "azure")]
            "az" | "azure" | "abfs" | "abfss" | "adl" => {
                use object_store::azure::{AzureConfigKey as K, MicrosoftAzureBuilder as B};
                build_cloud!(
                    B,
                    K,
                    "AZURE_",
                    url,
                    options,
                    client,
                    retry,
                    invalid,
                    |_: &B| Ok(())
                )
            }
            _ => {
                // Anything else object_store knows (http(s)://, cloud https URLs).
                let (store, path) = object_store::parse_url_opts(
                    url,
                    options.options.iter().map(|(k, v)| (k, v.clone())),
                )
                .map_err(|e| invalid(e.to_string()))?;
                (Arc::from(store), path.to_string())
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("smdebug-object-store")
            .enable_all()
            .build()
            .map_err(|e| invalid(format!("cannot start the I/O runtime: {e}")))?;
        Ok(ObjectStorage {
            store,
            root: root.trim_matches('/').to_string(),
            describe: location,
            request_timeout: Some(options.request_timeout),
            runtime: Some(runtime),
        })
    }

    /// Storage over an existing `object_store` (rooted at `root` inside it); `describe` names it
    /// in errors.
    pub fn from_store(
        store: Arc<dyn ObjectStore>,
        root: &str,
        describe: &str,
    ) -> Result<ObjectStorage> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("smdebug-object-store")
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidLocation {
                location: describe.to_string(),
                reason: format!("cannot start the I/O runtime: {e}"),
            })?;
        Ok(ObjectStorage {
            store,
            root: root.trim_matches('/').to_string(),
            describe: describe.to_string(),
            request_timeout: None,
            runtime: Some(runtime),
        })
    }

    /// Runs a future on the backend's runtime and waits for it. Spawning (rather than
    /// `block_on`) keeps this usable from a thread that is itself inside a tokio runtime.
    fn run<F, T>(&self, op: &'static str, path: &str, fut: F) -> Result<T>
    where
        F: Future<Output = Result<T, object_store::Error>> + Send + 'static,
        T: Send + 'static,
    {
        let rt = self.runtime.as_ref().expect("runtime lives until drop");
        let joined = futures::executor::block_on(rt.spawn(fut));
        match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.err(op, path, e)),
            Err(join) => Err(Error::Failed {
                location: self.describe.clone(),
                op,
                path: path.to_string(),
                source: Box::new(join),
            }),
        }
    }

    fn err(&self, op: &'static str, path: &str, e: object_store::Error) -> Error {
        let text = error_chain(&e);
        // S3 answers a missing bucket with 404 like a missing object: say which it is, and
        // never take it for "no such file" (which readers skip).
        if text.contains("NoSuchBucket") {
            return Error::Failed {
                location: self.describe.clone(),
                op,
                path: path.to_string(),
                source: format!(
                    "no such bucket: the store has no bucket named in `{}` ({text})",
                    self.describe
                )
                .into(),
            };
        }
        if let object_store::Error::NotFound { .. } = e {
            return Error::NotFound {
                location: self.describe.clone(),
                path: path.to_string(),
            };
        }
        let lower = text.to_ascii_lowercase();
        let reason = if lower.contains("builder error") {
            // reqwest refuses a plain-HTTP request when HTTP is not allowed.
            Some(format!(
                "the store's endpoint is plain http://, which is refused unless allowed: set \
                 AWS_ALLOW_HTTP=true (or the storage option `aws_allow_http`, \
                 `allow_http` for other stores) ({text})"
            ))
        } else if lower.contains("timed out") || lower.contains("timeout") {
            Some(match self.request_timeout {
                Some(t) => format!(
                    "the store did not answer within {} s, the storage request timeout ({text})",
                    t.as_secs_f64()
                ),
                None => format!("the store did not answer in time ({text})"),
            })
        } else {
            None
        };
        Error::Failed {
            location: self.describe.clone(),
            op,
            path: path.to_string(),
            source: match reason {
                Some(r) => r.into(),
                None => Box::new(e),
            },
        }
    }

    fn full(&self, path: &str) -> String {
        if self.root.is_empty() {
            path.to_string()
        } else if path.is_empty() {
            self.root.clone()
        } else {
            format!("{}/{path}", self.root)
        }
    }

    fn object_path(&self, op: &'static str, path: &str) -> Result<Path> {
        check_relative(&self.describe, path)?;
        Path::parse(self.full(path)).map_err(|e| Error::Failed {
            location: self.describe.clone(),
            op,
            path: path.to_string(),
            source: Box::new(e),
        })
    }

    fn prefix_path(&self, prefix: &str) -> Result<Option<Path>> {
        let prefix = trim_prefix(prefix);
        if !prefix.is_empty() {
            check_relative(&self.describe, prefix)?;
        }
        let full = self.full(prefix);
        if full.is_empty() {
            return Ok(None);
        }
        Path::parse(&full).map(Some).map_err(|e| Error::Failed {
            location: self.describe.clone(),
            op: "list",
            path: prefix.to_string(),
            source: Box::new(e),
        })
    }

    fn relative(&self, location: &Path) -> Option<String> {
        let s = location.as_ref();
        if self.root.is_empty() {
            Some(s.to_string())
        } else {
            s.strip_prefix(&self.root)?
                .strip_prefix('/')
                .map(str::to_string)
        }
    }

    fn list_impl(&self, prefix: &str, offset: Option<&str>) -> Result<Vec<String>> {
        let prefix_path = self.prefix_path(prefix)?;
        let offset_path = match offset {
            Some(o) => Some(Path::parse(self.full(o)).map_err(|e| Error::Failed {
                location: self.describe.clone(),
                op: "list",
                path: o.to_string(),
                source: Box::new(e),
            })?),
            None => None,
        };
        let store = self.store.clone();
        let metas = self.run("list", prefix, async move {
            let stream = match &offset_path {
                Some(off) => store.list_with_offset(prefix_path.as_ref(), off),
                None => store.list(prefix_path.as_ref()),
            };
            stream.try_collect::<Vec<_>>().await
        })?;
        let mut out: Vec<String> = metas
            .iter()
            .filter_map(|m| self.relative(&m.location))
            .filter(|p| offset.is_none_or(|o| p.as_str() > o))
            .collect();
        out.sort_unstable();
        Ok(out)
    }
}

/// An error and its sources, `: `-separated (object_store's messages keep the server's answer
/// in the sources).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// An S3 endpoint on plain `http://` is refused by the HTTP client unless HTTP is allowed,
/// with only "builder error" to say so; this names the setting instead, before any request.
#[cfg(feature = "aws")]
fn plain_http_s3(b: &object_store::aws::AmazonS3Builder) -> std::result::Result<(), String> {
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey as K;
    let endpoint = b.get_config_value(&K::Endpoint).unwrap_or_default();
    let allowed = b
        .get_config_value(&K::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "true" | "1" | "yes" | "y" | "on"
            )
        });
    if endpoint.to_ascii_lowercase().starts_with("http://") && !allowed {
        return Err(format!(
            "the endpoint {endpoint} is plain http://, which is refused unless allowed: set \
             AWS_ALLOW_HTTP=true in the environment (or the storage option `aws_allow_http` to \
             `true`)"
        ));
    }
    Ok(())
}

#[cfg(any(feature = "aws", feature = "gcp", feature = "azure"))]
fn reject_unknown(
    unknown: &[String],
    options: &StorageOptions,
    invalid: &impl Fn(String) -> Error,
) -> Result<()> {
    // Unknown environment variables are normal (AWS_PROFILE, …); unknown explicit options are
    // typos the user wants to hear about.
    let bad: Vec<&String> = unknown
        .iter()
        .filter(|k| options.options.contains_key(k.as_str()))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(invalid(format!("unknown option(s) {bad:?}")))
    }
}

impl Storage for ObjectStorage {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn put_parts(&self, path: &str, parts: Vec<Bytes>) -> Result<()> {
        let p = self.object_path("put", path)?;
        let total: usize = parts.iter().map(Bytes::len).sum();
        let store = self.store.clone();
        if total <= MULTIPART_THRESHOLD {
            let payload: PutPayload = parts.into_iter().collect();
            return self.run("put", path, async move {
                store.put(&p, payload).await.map(|_| ())
            });
        }
        self.run("put", path, async move {
            let upload = store.put_multipart(&p).await?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, MULTIPART_CHUNK);
            for part in parts {
                w.wait_for_capacity(4).await?;
                w.put(part);
            }
            w.finish().await.map(|_| ())
        })
    }

    fn get(&self, path: &str) -> Result<Bytes> {
        let p = self.object_path("get", path)?;
        let store = self.store.clone();
        self.run(
            "get",
            path,
            async move { store.get(&p).await?.bytes().await },
        )
    }

    fn get_range(&self, path: &str, range: Range<u64>) -> Result<Bytes> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        let p = self.object_path("get_range", path)?;
        let store = self.store.clone();
        self.run("get_range", path, async move {
            store.get_range(&p, range).await
        })
    }

    fn size(&self, path: &str) -> Result<Option<u64>> {
        let p = self.object_path("size", path)?;
        let store = self.store.clone();
        match self.run("size", path, async move { store.head(&p).await }) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.list_impl(prefix, None)
    }

    fn list_after(&self, prefix: &str, offset: &str) -> Result<Vec<String>> {
        self.list_impl(prefix, Some(offset))
    }

    fn delete(&self, path: &str) -> Result<()> {
        let p = self.object_path("delete", path)?;
        let store = self.store.clone();
        match self.run("delete", path, async move { store.delete(&p).await }) {
            Err(Error::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}
