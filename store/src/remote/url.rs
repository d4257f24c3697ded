//! Remote URLs: `s3://BUCKET[/PREFIX]` and `file:///ABSOLUTE/PATH`.

use std::path::PathBuf;

use super::error::{RemoteError, Result};

/// Where a remote's objects live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteUrl {
    /// An S3-compatible bucket and a key prefix (no leading or trailing `/`).
    S3 { bucket: String, prefix: String },
    /// A directory (a local or shared file system).
    File { path: PathBuf },
}

impl RemoteUrl {
    pub fn parse(url: &str) -> Result<RemoteUrl> {
        let bad = |reason: &str| RemoteError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let ok = (3..=63).contains(&bucket.len())
                && bucket.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                });
            if !ok {
                return Err(bad(
                    "the bucket name must be 3-63 lowercase letters, digits, `-` or `.`",
                ));
            }
            let prefix = prefix.trim_matches('/');
            if prefix
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
                && !prefix.is_empty()
            {
                return Err(bad("the prefix has an empty, `.` or `..` segment"));
            }
            return Ok(RemoteUrl::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
            });
        }
        if let Some(rest) = url.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(bad("a file URL needs an absolute path: file:///PATH"));
            }
            if rest.len() > 1 && rest.trim_end_matches('/').is_empty() {
                return Err(bad("empty path"));
            }
            return Ok(RemoteUrl::File {
                path: PathBuf::from(rest),
            });
        }
        Err(bad("unknown scheme"))
    }
}

impl std::fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            RemoteUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            RemoteUrl::File { path } => write!(f, "file://{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_and_file_urls() {
        assert_eq!(
            RemoteUrl::parse("s3://my-bucket/team/a/").unwrap(),
            RemoteUrl::S3 {
                bucket: "my-bucket".into(),
                prefix: "team/a".into()
            }
        );
        assert_eq!(
            RemoteUrl::parse("s3://bkt").unwrap().to_string(),
            "s3://bkt"
        );
        assert_eq!(
            RemoteUrl::parse("file:///srv/rr").unwrap(),
            RemoteUrl::File {
                path: "/srv/rr".into()
            }
        );
        for bad in [
            "http://x",
            "s3://",
            "s3://A",
            "s3://bkt/a//b",
            "file://rel",
            "s3://bkt/../x",
        ] {
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
