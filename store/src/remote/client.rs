//! An open remote, [`Remote`]: the object store behind it (`object_store`:
//! AmazonS3 or LocalFileSystem), driven from sync code by a small tokio
//! runtime it owns. Transfers run with bounded concurrency; bytes moved are
//! counted for the push/pull reports. A `file://` remote never goes
//! through `object_store` (whose LocalFileSystem follows symbolic links):
//! every request is served by `remote::dirfs`, which follows no link below
//! the remote's directory, and objects are written through its `tmp/`
//! directory (`remote::temp`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
#[cfg(feature = "s3")]
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::config::RemoteConfig;
use super::dirfs::FsError;
use super::error::{RemoteError, Result};
use super::options::RemoteOptions;
use super::temp;
use super::trace::Trace;
use super::url::RemoteUrl;

/// Requests in flight at once.
pub const CONCURRENCY: usize = 16;
/// Bodies larger than this go to S3 as multipart uploads of
/// [`MULTIPART_PART`] bytes, [`MULTIPART_IN_FLIGHT`] parts at once.
pub const MULTIPART_OVER: usize = 8 << 20;
pub const MULTIPART_PART: usize = 8 << 20;
pub const MULTIPART_IN_FLIGHT: usize = 4;

pub struct Remote {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) store: Arc<dyn ObjectStore>,
    /// Key prefix inside the bucket: "" or "a/b/".
    base: String,
    /// A file:// remote's directory.
    pub(super) root: Option<PathBuf>,
    pub name: String,
    pub url: String,
    /// Payload bytes uploaded / downloaded.
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// Requests made (a LIST counts one per 1,000 keys, as S3 pages them;
    /// a multipart upload counts its create, parts and complete).
    pub requests: AtomicU64,
    /// Version 3: a pack is closed once it holds this many bytes.
    pub pack_target: u64,
    /// Request tracing (`trace`), on when the options ask for it.
    pub(super) trace: Trace,
    /// What the caller set when it opened the remote.
    pub options: RemoteOptions,
}

fn runtime(name: &str, url: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RemoteError::Setup {
            remote: name.to_string(),
            url: url.to_string(),
            reason: format!("cannot start the I/O runtime: {e}"),
        })
}

impl Remote {
    /// Open remote `name` with `options`. A file:// directory is created
    /// when `create`.
    pub fn open(
        name: &str,
        cfg: &RemoteConfig,
        create: bool,
        options: RemoteOptions,
    ) -> Result<Remote> {
        let url = RemoteUrl::parse(&cfg.url)?;
        let setup = |reason: String| RemoteError::Setup {
            remote: name.to_string(),
            url: cfg.url.clone(),
            reason,
        };
        let root = match &url {
            RemoteUrl::File { path } => Some(path.clone()),
            RemoteUrl::S3 { .. } => None,
        };
        let (store, base): (Arc<dyn ObjectStore>, String) = match &url {
            RemoteUrl::File { path } => {
                if create {
                    std::fs::create_dir_all(path)
                        .map_err(|e| setup(format!("cannot create {}: {e}", path.display())))?;
                }
                if !path.is_dir() {
                    return Err(setup(format!(
                        "{} is not a directory (push creates it)",
                        path.display()
                    )));
                }
                // Never used (requests go to `dirfs`): were one made by
                // mistake, it could not reach the disk.
                (
                    Arc::new(object_store::memory::InMemory::new()),
                    String::new(),
                )
            }
            RemoteUrl::S3 { bucket, prefix } => {
                let s3 = s3_store(bucket, cfg).map_err(|e| match e {
                    S3Setup::NoFeature => RemoteError::NoS3(cfg.url.clone()),
                    S3Setup::Other(reason) => setup(reason),
                })?;
                let base = if prefix.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}/")
                };
                (s3, base)
            }
        };
        Ok(Remote {
            rt: runtime(name, &cfg.url)?,
            store,
            base,
            root,
            name: name.to_string(),
            url: cfg.url.clone(),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            pack_target: options
                .pack_bytes
                .filter(|&n| n > 0)
                .unwrap_or_else(|| pack_target(cfg)),
            trace: Trace::new(options.trace),
            options,
        })
    }

    /// Run a file:// remote's `dirfs` call off the runtime's workers.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, FsError> + Send + 'static,
    ) -> std::result::Result<T, FsError> {
        tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
            Err(FsError::Io {
                path: String::new(),
                source: std::io::Error::other(e.to_string()),
            })
        })
    }

    pub(super) fn count(&self, n: u64) {
        self.requests.fetch_add(n, Ordering::Relaxed);
    }

    /// Length of the key prefix inside the bucket.
    pub(super) fn base_len(&self) -> usize {
        self.base.len()
    }

    pub(super) fn path(&self, key: &str) -> ObjPath {
        ObjPath::from(format!("{}{key}", self.base))
    }

    /// Wrap an object_store error, with a hint for the common causes.
    pub fn err(&self, what: impl Into<String>, e: object_store::Error) -> RemoteError {
        let msg = format!("{e:?}");
        let hint = if msg.contains("NoSuchBucket") {
            " (the bucket does not exist: create it, or fix the URL with `rrstore remote rm` + `remote add`)"
        } else if matches!(
            e,
            object_store::Error::Unauthenticated { .. }
                | object_store::Error::PermissionDenied { .. }
        ) || msg.contains("InvalidAccessKeyId")
            || msg.contains("SignatureDoesNotMatch")
            || msg.contains("AccessDenied")
        {
            " (the credentials were refused: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        } else if msg.contains("connect") || msg.contains("dns error") || msg.contains("timed out")
        {
            " (cannot reach the endpoint: check the endpoint the remote was added with (or AWS_ENDPOINT_URL) and that the server runs)"
        } else {
            ""
        };
        RemoteError::Request {
            remote: self.name.clone(),
            url: self.url.clone(),
            what: what.into(),
            detail: condense(&e),
            hint,
        }
    }

    /// A local file error of a file:// remote.
    pub(super) fn io_err(&self, what: String, e: std::io::Error) -> RemoteError {
        RemoteError::Request {
            remote: self.name.clone(),
            url: self.url.clone(),
            what,
            detail: e.to_string(),
            hint: "",
        }
    }

    /// An error of a file:// remote's directory (`dirfs`): a link or
    /// special file met is [`RemoteError::Unsafe`].
    pub(super) fn fs_err(&self, what: String, e: FsError) -> RemoteError {
        match e {
            FsError::Unsafe { path, what: is } => RemoteError::Unsafe {
                remote: self.name.clone(),
                url: self.url.clone(),
                key: path,
                reason: is.to_string(),
            },
            FsError::Io { path, source } if path.is_empty() => self.io_err(what, source),
            FsError::Io { path, source } => self.io_err(format!("{what} ({path})"), source),
        }
    }

    /// Remove the temporary files interrupted pushes left on a file://
    /// remote (none on S3, whose PUTs leave nothing behind); returns how
    /// many were removed.
    pub fn remove_stale_temporaries(&self) -> Result<u64> {
        match &self.root {
            Some(root) => temp::remove_stale(root)
                .map_err(|e| self.fs_err("removing stale temporary files".into(), e)),
            None => Ok(0),
        }
    }

    /// Write an object (atomically: readers see the old or the whole new one).
    pub fn put(&self, key: &str, body: Vec<u8>) -> Result<()> {
        self.put_all(std::iter::once(Ok((key.to_string(), body))), &mut |_| {})
    }

    /// Upload every (key, body) the iterator yields, up to [`CONCURRENCY`]
    /// at once; `progress` gets each body's length once it is stored. Stops
    /// at the first error (objects already stored stay: they are immutable
    /// and a later push skips them).
    pub fn put_all<I>(&self, items: I, progress: &mut dyn FnMut(u64)) -> Result<()>
    where
        I: Iterator<Item = Result<(String, Vec<u8>)>>,
    {
        self.put_all_with(items, CONCURRENCY, progress)
    }

    /// [`Remote::put_all`] with `concurrency` uploads at once; bodies over
    /// [`MULTIPART_OVER`] go to S3 as multipart uploads.
    pub fn put_all_with<I>(
        &self,
        items: I,
        concurrency: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()>
    where
        I: Iterator<Item = Result<(String, Vec<u8>)>>,
    {
        self.rt.block_on(async {
            let uploads = futures::stream::iter(items).map(|item| async move {
                let (key, body) = item?;
                let n = body.len() as u64;
                self.upload(&key, body).await?;
                self.sent.fetch_add(n, Ordering::Relaxed);
                Ok::<u64, RemoteError>(n)
            });
            let mut uploads = uploads.buffer_unordered(concurrency.max(1));
            while let Some(r) = uploads.next().await {
                progress(r?);
            }
            Ok(())
        })
    }

    async fn upload(&self, key: &str, body: Vec<u8>) -> Result<()> {
        let (mark, n) = (self.trace.begin(), body.len() as u64);
        self.upload_untraced(key, body).await?;
        self.trace.end(mark, "PUT", key, None, n);
        Ok(())
    }

    async fn upload_untraced(&self, key: &str, body: Vec<u8>) -> Result<()> {
        if let Some(root) = &self.root {
            self.count(1);
            let (root, k) = (root.clone(), key.to_string());
            return self
                .blocking(move || temp::write_object(&root, &k, &body, false))
                .await
                .map(drop)
                .map_err(|e| self.fs_err(format!("writing {key}"), e));
        }
        if body.len() <= MULTIPART_OVER {
            self.count(1);
            return self
                .store
                .put(&self.path(key), PutPayload::from(body))
                .await
                .map_err(|e| self.err(format!("writing {key}"), e))
                .map(|_| ());
        }
        let werr = |e| self.err(format!("writing {key}"), e);
        let upload = self
            .store
            .put_multipart(&self.path(key))
            .await
            .map_err(werr)?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, MULTIPART_PART);
        let parts = body.len().div_ceil(MULTIPART_PART) as u64;
        self.count(2 + parts);
        let mut at = 0;
        while at < body.len() {
            let end = (at + MULTIPART_PART).min(body.len());
            if let Err(e) = w.wait_for_capacity(MULTIPART_IN_FLIGHT).await {
                return Err(werr(e));
            }
            w.write(&body[at..end]);
            at = end;
        }
        w.finish().await.map(|_| ()).map_err(werr)
    }
}

/// The remote's configured pack size (the options' test hook
/// `pack_bytes` replaces it).
fn pack_target(cfg: &RemoteConfig) -> u64 {
    u64::from(
        cfg.pack_size_mib
            .unwrap_or(super::config::DEFAULT_PACK_SIZE_MIB),
    ) << 20
}

/// The useful part of an object_store error: an S3 error's code and
/// message, else the innermost cause.
fn condense(e: &object_store::Error) -> String {
    let full = e.to_string();
    let tag = |t: &str| {
        let open = format!("<{t}>");
        let start = full.find(&open)? + open.len();
        let end = full[start..].find(&format!("</{t}>"))? + start;
        Some(full[start..end].to_string())
    };
    if let (Some(code), Some(msg)) = (tag("Code"), tag("Message")) {
        return format!("{code}: {msg}");
    }
    let mut inner: &dyn std::error::Error = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    let last = inner.to_string();
    if last.is_empty() || std::ptr::eq(inner as *const _ as *const u8, e as *const _ as *const u8) {
        full
    } else {
        last
    }
}

/// Starts the reason of the setup error for a plain-HTTP endpoint that the
/// remote does not allow (the CLI recognises it to add its flag).
pub const PLAIN_HTTP: &str = "plain HTTP refused";

#[cfg(feature = "s3")]
fn is_plain_http(endpoint: &str) -> bool {
    endpoint
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
}

enum S3Setup {
    #[allow(dead_code)]
    NoFeature,
    #[allow(dead_code)]
    Other(String),
}

/// Connection timeouts and retries: fail in seconds, not minutes, when the
/// endpoint is down.
#[cfg(feature = "s3")]
fn s3_store(
    bucket: &str,
    cfg: &RemoteConfig,
) -> std::result::Result<Arc<dyn ObjectStore>, S3Setup> {
    use object_store::aws::AmazonS3Builder;
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let has_creds = [
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|k| env(k).is_some());
    if !has_creds && env("AWS_SKIP_SIGNATURE").is_none() {
        return Err(S3Setup::Other(
            "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        ));
    }
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(e) = &cfg.endpoint {
        b = b.with_endpoint(e);
    }
    if let Some(r) = &cfg.region {
        b = b.with_region(r);
    } else if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
        b = b.with_region("us-east-1");
    }
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 3,
        retry_timeout: Duration::from_secs(30),
    };
    // Client options replace the builder's (from_env's AWS_ALLOW_HTTP too),
    // so allow_http is resolved here: the remote's flag, else the variable.
    let allow_http = cfg.allow_http.unwrap_or_else(|| {
        env("AWS_ALLOW_HTTP").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    });
    // The client would refuse every request with a bare "URL scheme is not
    // allowed"; say which endpoint and why, once, here.
    let endpoint = cfg
        .endpoint
        .clone()
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| env("AWS_ENDPOINT"));
    if let Some(e) = endpoint.filter(|e| is_plain_http(e)) {
        if !allow_http {
            return Err(S3Setup::Other(format!(
                "{PLAIN_HTTP}: endpoint {e} is plain http://, which this remote does not allow"
            )));
        }
    }
    let opts = ClientOptions::new()
        .with_allow_http(allow_http)
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(120));
    // Lock objects (spec/REMOTE.md, "Removal") are created with
    // `If-None-Match: *`.
    b.with_retry(retry)
        .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
        .with_client_options(opts)
        .build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| S3Setup::Other(e.to_string()))
}

#[cfg(not(feature = "s3"))]
fn s3_store(
    _bucket: &str,
    _cfg: &RemoteConfig,
) -> std::result::Result<Arc<dyn ObjectStore>, S3Setup> {
    Err(S3Setup::NoFeature)
}
