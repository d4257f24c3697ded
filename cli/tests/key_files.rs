//! Secret key files that others can read: `key show` and `push --sign`
//! use them, warning on stderr as ssh does (the file named, `chmod 600`),
//! and say nothing of a key kept private. Real binary, real files, a
//! file:// remote.

mod store_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use store_common::*;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stderr_of(store: &Path, args: &[&str]) -> String {
    let o = run(store, args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?}: {err}");
    err
}

#[test]
fn a_key_file_others_can_read_is_used_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let key = tmp.path().join("alice.key");
    let k = key.to_str().unwrap();
    ok(
        &store,
        &["key", "generate", "--output", k, "--name", "alice"],
    );
    let warned = |err: &str| {
        err.contains("warning:")
            && err.contains(k)
            && err.contains("can be read by others")
            && err.contains(&format!("chmod 600 {k}"))
    };

    // Written 0600: nothing to say.
    let err = stderr_of(&store, &["key", "show", k]);
    assert!(!err.contains("warning"), "{err}");

    for mode in [0o644, 0o640, 0o604] {
        chmod(&key, mode);
        let err = stderr_of(&store, &["key", "show", k]);
        assert!(warned(&err), "mode {mode:o}: {err}");
        assert!(err.contains(&format!("{mode:04o}")), "{err}");
    }

    // push --sign reads the key the same way; the push still happens.
    ok(
        &store,
        &[
            "import",
            fixtures().join("llvm22-host/saxpy").to_str().unwrap(),
        ],
    );
    let remote = tmp.path().join("remote");
    let url = format!("file://{}", remote.display());
    ok(&store, &["remote", "add", "r", &url]);
    chmod(&key, 0o640);
    let err = stderr_of(&store, &["push", "r", "--all", "--sign", k]);
    assert!(warned(&err), "{err}");
    chmod(&key, 0o600);
    let err = stderr_of(&store, &["push", "r", "--all", "--sign", k]);
    assert!(!err.contains("can be read by others"), "{err}");
}
