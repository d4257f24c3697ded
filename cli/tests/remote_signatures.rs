//! Signed recordings through the real binary: `key generate`/`key show`,
//! `push --sign` on a file:// remote (and on S3, moto), `pull
//! --require-signed-by` with the right key, a wrong key, a tampered
//! signature, an unsigned recording, two signers, the configuration's
//! `require_signed_by`, and a refused pull leaving the store as it was.

mod remote_common;

use std::path::{Path, PathBuf};

use remote_common::*;

const SIGNATURE: i32 = 21;

/// `key generate --output DIR/NAME.key --name NAME`: (key file, public key).
fn key(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(format!("{name}.key"));
    let out = ok(
        dir,
        &[
            "key",
            "generate",
            "--output",
            path.to_str().unwrap(),
            "--name",
            name,
        ],
    );
    (path, out.trim().to_string())
}

/// The key id of a public key `ed25519:HEX` (16 hex digits).
fn key_id(public: &str) -> String {
    let bytes = rrstore_format::id::parse_hex32(public.strip_prefix("ed25519:").unwrap()).unwrap();
    rrstore_format::id::hex(&blake3::hash(&bytes).as_bytes()[..8])
}

/// A store holding the reduction fixture, whose whole tree a refused pull
/// must leave as it was.
fn bystander(dir: &Path, url: &str) -> PathBuf {
    let s = dir.to_path_buf();
    import(&s, &["reduction"]);
    ok(&s, &["remote", "add", "r", url]);
    s
}

/// The store's recordings, `verify --full` passing, and its files
/// (the SQLite index's side files aside: opening may create them).
fn state(s: &Path) -> (Vec<String>, Vec<PathBuf>) {
    ok(s, &["verify", "--full"]);
    let files = tree(s)
        .into_keys()
        .filter(|p| {
            let n = p.to_string_lossy();
            !n.ends_with("-wal") && !n.ends_with("-shm")
        })
        .collect();
    (ids(s, None), files)
}

fn signers(s: &Path, id: &str) -> Vec<(String, String)> {
    let j = json(s, &["show", id, "--json"]);
    j["store"]["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["key_id"].as_str().unwrap().to_string(),
                x["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn key_generate_and_show() {
    let t = tempfile::tempdir().unwrap();
    let (path, public) = key(t.path(), "alice");
    assert!(
        public.starts_with("ed25519:") && public.len() == 8 + 64,
        "{public}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let p = path.to_str().unwrap();
    assert_eq!(ok(t.path(), &["key", "show", p]).trim(), public);
    // An existing key is kept unless --force.
    let before = std::fs::read(&path).unwrap();
    let (code, err) = fails(t.path(), &["key", "generate", "--output", p]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let new = ok(t.path(), &["key", "generate", "--output", p, "--force"]);
    assert_ne!(new.trim(), public);
    assert_eq!(ok(t.path(), &["key", "show", p]).trim(), new.trim());
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Bad name: 4; not a key file: 4; no such file: 3.
    let other = t.path().join("x.key");
    let o = other.to_str().unwrap();
    assert_eq!(
        fails(t.path(), &["key", "generate", "-o", o, "--name", "a\nb"]).0,
        4
    );
    assert!(!other.exists());
    std::fs::write(&other, "not a key\n").unwrap();
    assert_eq!(fails(t.path(), &["key", "show", o]).0, 4);
    assert_eq!(fails(t.path(), &["key", "show", "/nonexistent/k"]).0, 3);
    // The default file: under $XDG_CONFIG_HOME.
    let cfg = t.path().join("cfg");
    let out = rr(t.path(), &["key", "generate"])
        .env("XDG_CONFIG_HOME", &cfg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let default = cfg.join("rrstore/signing.key");
    assert_eq!(
        ok(t.path(), &["key", "show", default.to_str().unwrap()]),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn signed_pull_refusals_two_signers_and_config() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let a = root.join("a");
    let rdir = root.join("remote");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy", "globals"]);
    ok(&a, &["remote", "add", "r", &url]);
    let all = ids(&a, None);
    let id_of = |kernel_dir: &str| -> String {
        let j = json(&a, &["ls", "--json"]);
        let k = if kernel_dir == "saxpy" {
            "9ae056"
        } else {
            "9ae057"
        };
        j.as_array()
            .unwrap()
            .iter()
            .find(|r| r["kernel"].as_str().unwrap().contains(k))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (saxpy, globals) = (id_of("saxpy"), id_of("globals"));
    assert_eq!(all.len(), 2);
    let keys = root.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (alice_key, alice) = key(&keys, "alice");
    let (bob_key, bob) = key(&keys, "bob");
    let (_, eve) = key(&keys, "eve");
    // A key file that cannot be read fails the push before anything is sent.
    let (code, err) = fails(&a, &["push", "r", "--all", "--sign", "/nonexistent/k"]);
    assert_eq!(code, 3, "{err}");
    assert!(!rdir.join("recordings").exists());
    // saxpy signed by alice; globals pushed unsigned.
    let out = ok(
        &a,
        &["push", "r", &saxpy, "--sign", alice_key.to_str().unwrap()],
    );
    assert!(out.contains("signed 1 recording(s)"), "{out}");
    ok(&a, &["push", "r", &globals]);
    let sig = rdir.join(format!("signatures/{saxpy}/{}", key_id(&alice)));
    assert!(sig.is_file());
    assert_eq!(signers(&a, &saxpy), [(key_id(&alice), "alice".into())]);
    assert!(signers(&a, &globals).is_empty());

    // Right key: pulled, and `show` says who signed.
    let b = bystander(&root.join("b"), &url);
    ok(&b, &["pull", "r", &saxpy, "--require-signed-by", &alice]);
    assert!(ids(&b, None).contains(&saxpy));
    ok(&b, &["verify", "--full"]);
    let shown = ok(&b, &["show", &saxpy]);
    assert!(
        shown.contains(&format!("signed by       alice (key id {}", key_id(&alice))),
        "{shown}"
    );
    assert_eq!(signers(&b, &saxpy), [(key_id(&alice), "alice".into())]);
    // A kept signature changed on disk is reported, not believed.
    let kept = b.join(format!(
        "meta/signatures/{}/{saxpy}/{}",
        &saxpy[..2],
        key_id(&alice)
    ));
    let body = std::fs::read(&kept).unwrap();
    let mut bad = body.clone();
    bad[40] ^= 1;
    std::fs::write(&kept, &bad).unwrap();
    let o = run(&b, &["show", &saxpy]);
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("signed by"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a valid signature"));
    assert!(signers(&b, &saxpy).is_empty());
    std::fs::write(&kept, &body).unwrap();

    // Wrong key, unsigned, and a selection with one unsigned recording:
    // refused, nothing pulled, the store as it was.
    let c = bystander(&root.join("c"), &url);
    let before = state(&c);
    let (code, err) = fails(&c, &["pull", "r", &saxpy, "--require-signed-by", &eve]);
    assert_eq!(code, SIGNATURE, "{err}");
    assert!(
        err.contains("signed only by other keys") && err.contains(&key_id(&alice)),
        "{err}"
    );
    assert!(err.contains("push --sign"), "{err}");
    let (code, err) = fails(
        &c,
        &["pull", "r", &saxpy, "--require-signed-by", "ed25519:00"],
    );
    assert_eq!(code, 2, "{err}");
    let (code, err) = fails(&c, &["pull", "r", &globals, "--require-signed-by", &alice]);
    assert_eq!(code, SIGNATURE, "{err}");
    assert!(
        err.contains("it is not signed") && err.contains(&globals),
        "{err}"
    );
    let (code, err) = fails(&c, &["pull", "r", "--all", "--require-signed-by", &alice]);
    assert_eq!(code, SIGNATURE, "{err}");
    assert!(!err.contains(&format!("recording {saxpy}")), "{err}");
    assert_eq!(state(&c), before);

    // A tampered signature (one byte of the signature flipped, then one of
    // the public key): refused.
    let good = std::fs::read(&sig).unwrap();
    for at in [good.len() - 1, 10] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&sig, &bad).unwrap();
        let (code, err) = fails(&c, &["pull", "r", &saxpy, "--require-signed-by", &alice]);
        assert_eq!(code, SIGNATURE, "byte {at}: {err}");
        assert!(err.contains("is not valid"), "byte {at}: {err}");
        assert_eq!(state(&c), before);
    }
    std::fs::write(&sig, &good).unwrap();

    // A second signer of a recording already on the remote; either key
    // (comma-separated or repeated) then admits it.
    let out = ok(
        &a,
        &["push", "r", &saxpy, "--sign", bob_key.to_str().unwrap()],
    );
    assert!(out.contains("signed 1 recording(s)"), "{out}");
    let both = {
        let mut v = vec![
            (key_id(&alice), "alice".to_string()),
            (key_id(&bob), "bob".into()),
        ];
        v.sort();
        v
    };
    let d = bystander(&root.join("d"), &url);
    let either = format!("{eve},{bob}");
    ok(&d, &["pull", "r", &saxpy, "--require-signed-by", &either]);
    assert_eq!(signers(&d, &saxpy), both);
    // A pull without a requirement still keeps the valid signatures.
    let e = bystander(&root.join("e"), &url);
    ok(&e, &["pull", "r", "--all"]);
    assert_eq!(signers(&e, &saxpy), both);
    assert!(signers(&e, &globals).is_empty());

    // The configuration's default: applies, --allow-unsigned lifts it, the
    // command line's keys replace it; a bad key in it is an error (4).
    let f = bystander(&root.join("f"), &url);
    let conf = root.join("config.toml");
    std::fs::write(&conf, format!("require_signed_by = [\"{eve}\"]\n")).unwrap();
    let with_conf = |args: &[&str]| rr(&f, args).env("RRSTORE_CONFIG", &conf).output().unwrap();
    let before = state(&f);
    let o = with_conf(&["pull", "r", &saxpy]);
    assert_eq!(
        o.status.code(),
        Some(SIGNATURE),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(state(&f), before);
    let o = with_conf(&["pull", "r", &saxpy, "--require-signed-by", &bob]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = with_conf(&["pull", "r", &globals, "--allow-unsigned"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ids(&f, None).contains(&globals));
    std::fs::write(&conf, "require_signed_by = [\"ed25519:00\"]\n").unwrap();
    let o = with_conf(&["pull", "r", &saxpy]);
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("require_signed_by"));
}

#[cfg(feature = "s3")]
#[test]
fn s3_signed_push_and_pull() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-sig");
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    import(&a, &["saxpy"]);
    let id = ids(&a, None).remove(0);
    let (k, public) = key(t.path(), "alice");
    let (_, other) = key(t.path(), "mallory");
    for s in [&a, &b] {
        ok(
            s,
            &[
                "remote",
                "add",
                "lab",
                "s3://rr-sig/p",
                "--endpoint",
                &moto.endpoint(),
                "--allow-http",
            ],
        );
    }
    ok(&a, &["push", "lab", "--all", "--sign", k.to_str().unwrap()]);
    assert_eq!(
        moto.keys("rr-sig", "p/signatures/"),
        [format!("p/signatures/{id}/{}", key_id(&public))]
    );
    let (code, err) = fails(&b, &["pull", "lab", "--all", "--require-signed-by", &other]);
    assert_eq!(code, SIGNATURE, "{err}");
    assert!(ids(&b, None).is_empty());
    ok(
        &b,
        &["pull", "lab", "--all", "--require-signed-by", &public],
    );
    assert_eq!(ids(&b, None), std::slice::from_ref(&id));
    assert_eq!(signers(&b, &id), [(key_id(&public), "alice".into())]);
}

#[test]
fn rm_on_a_remote_removes_the_recordings_signatures_and_no_other() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let a = root.join("a");
    let rdir = root.join("remote");
    import(&a, &["saxpy", "globals"]);
    ok(
        &a,
        &["remote", "add", "r", &format!("file://{}", rdir.display())],
    );
    let (alice_key, alice) = key(root, "alice");
    ok(
        &a,
        &["push", "r", "--all", "--sign", alice_key.to_str().unwrap()],
    );
    let all = ids(&a, None);
    let sig = |id: &str| rdir.join(format!("signatures/{id}/{}", key_id(&alice)));
    assert!(sig(&all[0]).is_file() && sig(&all[1]).is_file());
    ok(&a, &["rm", &format!("r:{}", all[0])]);
    assert!(
        !sig(&all[0]).exists(),
        "the removed recording's signature stays"
    );
    assert!(sig(&all[1]).is_file(), "another recording's signature went");
}
