//! Test harness for remotes: a real S3-compatible server (moto's
//! `moto_server`, from PyPI: `python3 -m pip install 'moto[server]'`)
//! started on a free loopback port and killed when dropped, raw HTTP
//! helpers to create buckets and tamper with objects, and helpers to run
//! the real `rrstore` binary with a remote configured.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../store_common/mod.rs"]
mod store_common;

pub const INSTALL: &str = "python3 -m pip install 'moto[server]'";

/// A moto S3 server on 127.0.0.1; killed on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    /// Start a server. `auth`: moto checks access keys against its (empty)
    /// IAM user list, so every signed request is refused (wrong credentials).
    pub fn start(auth: bool) -> Moto {
        let port = free_port();
        let mut cmd = Command::new("moto_server");
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if auth {
            cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!(
                "cannot start moto_server ({e}): the S3 remote tests need moto's S3 server on PATH; install it with: {INSTALL}"
            ),
        };
        let mut m = Moto { child, port };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = m.child.try_wait() {
                panic!(
                    "moto_server exited ({status}) before listening; is it installed? {INSTALL}"
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto_server did not listen on port {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        m
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Unsigned request (moto accepts them when auth is off); returns the
    /// status code and body.
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        // moto's development server can refuse or reset a connection while
        // it is busy (a full listen backlog under concurrent pushes, or a
        // loaded machine): retry the whole exchange briefly. The requests
        // sent this way (create a bucket, put or read an object) are
        // idempotent.
        let start = Instant::now();
        let resp = loop {
            match self.exchange(method, path, body) {
                Ok(resp) => break resp,
                Err(_) if start.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("moto_server on port {}: {method} {path}: {e}", self.port),
            }
        };
        let text = String::from_utf8_lossy(&resp);
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = resp
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| resp[i + 4..].to_vec())
            .unwrap_or_default();
        (code, body)
    }

    /// One HTTP/1.1 request on a fresh connection; the whole response.
    fn exchange(&self, method: &str, path: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        if resp.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "empty response",
            ));
        }
        Ok(resp)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let (code, body) = self.raw("PUT", &format!("/{bucket}"), b"");
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Signed S3 call through boto3 (installed with moto): `op` is `put`
    /// (body from stdin) or `delete`.
    fn boto(&self, op: &str, bucket: &str, key: &str, body: &[u8]) {
        let script = r#"
import sys, boto3
op, ep, bucket, key = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
if op == "put":
    s3.put_object(Bucket=bucket, Key=key, Body=sys.stdin.buffer.read())
else:
    s3.delete_object(Bucket=bucket, Key=key)
"#;
        let mut child = Command::new("python3")
            .args(["-c", script, op, &self.endpoint(), bucket, key])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(body).unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "boto3 {op} {bucket}/{key} failed; {INSTALL}"
        );
    }

    pub fn put_object(&self, bucket: &str, key: &str, body: &[u8]) {
        self.boto("put", bucket, key, body)
    }

    pub fn delete_object(&self, bucket: &str, key: &str) {
        self.boto("delete", bucket, key, b"")
    }

    /// Keys of a bucket (first 1000), via an unsigned ListObjectsV2.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (code, body) = self.raw(
            "GET",
            &format!("/{bucket}?list-type=2&prefix={prefix}"),
            b"",
        );
        assert_eq!(code, 200);
        let text = String::from_utf8_lossy(&body).into_owned();
        text.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The LLVM 22 host recordings.
pub fn fixtures() -> PathBuf {
    rrstore_tests::fixtures().join("llvm22-host")
}

/// `rrstore --store STORE args...` with test AWS credentials in the
/// environment.
pub fn rr(store: &Path, args: &[&str]) -> Command {
    let mut c = store_common::command();
    c.arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RRSTORE_DIR")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_PROFILE")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1");
    c
}

pub fn run(store: &Path, args: &[&str]) -> Output {
    rr(store, args).output().unwrap()
}

pub fn ok(store: &Path, args: &[&str]) -> String {
    store_common::expect_ok(run(store, args), args)
}

/// Exit code and stderr of a command expected to fail.
pub fn fails(store: &Path, args: &[&str]) -> (i32, String) {
    store_common::expect_failure(run(store, args), args)
}

pub fn json(store: &Path, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(store, args)).unwrap()
}

/// Sorted IDs `ls --json [NAME:]` shows.
pub fn ids(store: &Path, remote: Option<&str>) -> Vec<String> {
    let mut args = vec!["ls", "--json"];
    if let Some(r) = remote {
        args.push(r);
    }
    let mut v: Vec<String> = json(store, &args)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Import fixture directories (relative to llvm22-host) into a store.
pub fn import(store: &Path, dirs: &[&str]) {
    let paths: Vec<String> = dirs
        .iter()
        .map(|d| fixtures().join(d).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["import", "--label", "fixtures"];
    args.extend(paths.iter().map(String::as_str));
    ok(store, &args);
}

/// Every file under `dir` (relative path -> bytes).
pub fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = Default::default();
    walk(dir, dir, &mut out);
    out
}

/// Both stores hold `ids` and export them byte for byte the same, and
/// `verify --full` passes in `b`.
pub fn same_exports(a: &Path, b: &Path, ids: &[String], scratch: &Path) {
    ok(b, &["verify", "--full"]);
    for id in ids {
        let (ea, eb) = (
            scratch.join(format!("a-{id}")),
            scratch.join(format!("b-{id}")),
        );
        ok(a, &["export", id, "-o", ea.to_str().unwrap()]);
        ok(b, &["export", id, "-o", eb.to_str().unwrap()]);
        let (ta, tb) = (tree(&ea), tree(&eb));
        assert!(!ta.is_empty());
        assert_eq!(ta, tb, "export of {id} differs");
    }
}

/// A remote written by layout version 1 (rrstore before layout 2) holding
/// the `globals` fixture recording, label `v1`.
pub fn v1_remote() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote_common/v1-globals")
}

/// Copy a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    for (rel, body) in tree(from) {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
}

/// Two images for the image library: the saxpy fixture's image (also the
/// image part of that recording) and a stand-alone one (the reduction
/// fixture's image with bytes appended), added with labels `saxpy` and
/// `other`. Returns their `image ls --json` rows.
pub fn add_images(store: &Path, scratch: &Path) -> Vec<serde_json::Value> {
    let img = |d: &str| {
        std::fs::read_dir(fixtures().join(d))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "image"))
            .unwrap()
    };
    let mut other = std::fs::read(img("reduction")).unwrap();
    other.extend_from_slice(&[0x5a; 70_000]);
    let other_path = scratch.join("other.image");
    std::fs::write(&other_path, &other).unwrap();
    ok(
        store,
        &[
            "image",
            "add",
            img("saxpy").to_str().unwrap(),
            "--label",
            "saxpy",
        ],
    );
    ok(
        store,
        &[
            "image",
            "add",
            other_path.to_str().unwrap(),
            "--label",
            "other",
        ],
    );
    images(store)
}

/// `image ls --json` rows without `source` (a pulled image names the
/// remote in it), sorted by hash.
pub fn images(store: &Path) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = json(store, &["image", "ls", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("source");
            r
        })
        .collect();
    v.sort_by_key(|r| r["hash"].as_str().unwrap().to_string());
    v
}

/// The fixture sets the round-trip tests move: 11 recordings.
pub const ELEVEN: [&str; 4] = ["saxpy", "globals", "reduction", "multi"];

/// A scratch directory with store `a` holding the recordings of `sets`
/// (`all`: their sorted IDs) and the file remote `r` at `rdir` (created by
/// the first push) added to it; `b` is a second store, not created yet.
pub struct FileRemote {
    pub t: tempfile::TempDir,
    pub a: PathBuf,
    pub b: PathBuf,
    pub rdir: PathBuf,
    pub url: String,
    pub all: Vec<String>,
}

pub fn file_remote(sets: &[&str]) -> FileRemote {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, sets);
    let all = ids(&a, None);
    ok(&a, &["remote", "add", "r", &url]);
    FileRemote {
        t,
        a,
        b,
        rdir,
        url,
        all,
    }
}

/// Flip one bit in the middle of recording `id`'s manifest on the file
/// remote at `rdir`; the manifest's path.
pub fn corrupt_manifest(rdir: &Path, id: &str) -> PathBuf {
    let man = rdir.join("recordings").join(id);
    let mut m = std::fs::read(&man).unwrap();
    let k = m.len() / 2;
    m[k] ^= 0x10;
    std::fs::write(&man, &m).unwrap();
    man
}
