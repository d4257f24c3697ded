//! A small forged index object that claims millions of entries
//! (spec/REMOTE.md, "Index object bounds"): an "RRX3" object of a few KB
//! whose zstd frame (run-length blocks) expands to 2 million entries. On a
//! file:// remote and on a real S3 server on loopback, a pull rejects it at
//! once, naming its key, brings the recordings the honest index lists, and
//! leaves no large cache file behind.

mod remote_common;

use std::path::Path;
use std::time::{Duration, Instant};

use remote_common::*;

const ENTRIES: u64 = 2_000_000;
const ENTRY: u64 = 49;

/// A zstd frame of `head` (a raw block) then `zeros` zero bytes (RLE
/// blocks of 128 KiB): ~4 bytes per 128 KiB regenerated.
fn zstd_rle(head: &[u8], zeros: u64) -> Vec<u8> {
    const BLOCK: u64 = 128 << 10;
    // Magic; descriptor: no content size, no checksum, not single
    // segment; window 2^(10+7) = 128 KiB.
    let mut f = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3];
    let block = |f: &mut Vec<u8>, last: bool, kind: u32, size: u64| {
        let h = u32::from(last) | (kind << 1) | ((size as u32) << 3);
        f.extend_from_slice(&h.to_le_bytes()[..3]);
    };
    block(&mut f, zeros == 0, 0, head.len() as u64);
    f.extend_from_slice(head);
    let mut left = zeros;
    while left > 0 {
        let n = left.min(BLOCK);
        left -= n;
        block(&mut f, left == 0, 1, n);
        f.push(0);
    }
    f
}

/// "RRX3" | zstd(1 pack | 2 million all-zero entries); (key, body).
fn forged_index() -> (String, Vec<u8>) {
    let mut head = 1u32.to_le_bytes().to_vec();
    head.extend_from_slice(&[7u8; 32]);
    head.extend_from_slice(&ENTRIES.to_le_bytes());
    let mut body = b"RRX3".to_vec();
    body.extend_from_slice(&zstd_rle(&head, ENTRIES * ENTRY));
    let key = format!("index/{}", blake3::hash(&body).to_hex());
    (key, body)
}

/// Bytes of `store`'s remote caches.
fn cache_bytes(store: &Path) -> u64 {
    std::fs::read_dir(store.join("remote-cache"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// Pull everything into `store` (`env` added): it succeeds fast, warns
/// that the forged object `key` was left out, and caches little.
fn pull_rejects(store: &Path, key: &str, env: &[(&str, String)]) -> serde_json::Value {
    let mut c = rr(store, &["pull", "r", "--all", "--json"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let t = Instant::now();
    let o = c.output().unwrap();
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("index object {key} left out"))
            && err.contains("a forged index object"),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    let cached = cache_bytes(store);
    assert!(cached < 4 << 20, "a {cached}-byte cache");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_forged_index_object_on_a_file_remote_costs_a_pull_nothing() {
    let f = file_remote(&["saxpy", "globals"]);
    ok(&f.a, &["push", "r", "--all"]);
    let (key, body) = forged_index();
    assert!(body.len() < 8 << 10, "{} bytes", body.len());
    std::fs::write(f.rdir.join(&key), &body).unwrap();
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let r = pull_rejects(&f.b, &key, &[]);
    assert_eq!(r["recordings"], f.all.len(), "{r}");
    assert_eq!(ids(&f.b, None), f.all);
    // A push reading the whole index rejects it the same way.
    let out = rr(&f.b, &["push", "r", "--all"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&key));
}

#[cfg(feature = "s3")]
#[test]
fn a_forged_index_object_on_s3_costs_a_pull_nothing() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-test");
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    import(&a, &["saxpy"]);
    let all = ids(&a, None);
    let env = [
        ("AWS_ENDPOINT_URL", moto.endpoint()),
        ("AWS_ALLOW_HTTP", "true".to_string()),
    ];
    for s in [&a, &b] {
        ok(s, &["remote", "add", "r", "s3://rr-test/x"]);
    }
    let o = rr(&a, &["push", "r", "--all"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (key, body) = forged_index();
    moto.put_object("rr-test", &format!("x/{key}"), &body);
    let r = pull_rejects(&b, &key, &env);
    assert_eq!(r["recordings"], 1, "{r}");
    assert_eq!(ids(&b, None), all);
}
