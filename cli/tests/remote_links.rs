//! A file:// remote whose writers plant symbolic links (spec/REMOTE.md,
//! "Links and names"): `tmp/` linked to another store's packs (push's
//! stale-temporary cleanup), `signatures/<ID>` and `signatures` linked to
//! directories of documents (`rm NAME:ID`), `packs/<ab>` linked to a
//! directory (`remote prune`), and foreign plain files among the objects.
//! Every command leaves what is outside the remote (and files that are not
//! rrstore's) alone, and a link makes it stop with CORRUPT (5) naming it.

mod remote_common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use remote_common::*;

/// A directory of `files` (name, body) outside the remote, written two
/// hours ago (older than any temporary file a push may still write).
fn victims(dir: &Path, files: &[&str]) -> Vec<(PathBuf, String)> {
    std::fs::create_dir_all(dir).unwrap();
    files
        .iter()
        .map(|f| {
            let p = dir.join(f);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            let body = format!("precious {f}");
            std::fs::write(&p, &body).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(SystemTime::now() - Duration::from_secs(7200))
                .unwrap();
            (p, body)
        })
        .collect()
}

fn survive(files: &[(PathBuf, String)]) {
    for (f, body) in files {
        assert_eq!(
            std::fs::read_to_string(f).ok().as_ref(),
            Some(body),
            "{} was touched",
            f.display()
        );
    }
}

/// Replace `at` (a directory of the remote, if any) with a link to `to`.
fn plant(at: &Path, to: &Path) {
    if at.is_dir() {
        std::fs::remove_dir_all(at).unwrap();
    }
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(to, at).unwrap();
}

fn refused(err: &str, key: &str) {
    assert!(
        err.contains(key) && err.contains("symbolic link") && err.contains("remove it"),
        "{err}"
    );
}

#[test]
fn a_linked_tmp_directory_loses_no_file_of_another_store() {
    let f = file_remote(&["saxpy"]);
    ok(&f.a, &["push", "r", "--all"]);
    // Another store's packs, untouched for two hours, one named like a
    // temporary file of a push that died.
    let other = f.t.path().join("other-store/packs");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let dead = format!("{}.4194999.0", host.trim());
    let files = victims(&other, &["pack-0001", "pack-0002", &dead]);
    plant(&f.rdir.join("tmp"), &other);
    import(&f.a, &["globals"]);
    let (code, err) = fails(&f.a, &["push", "r", "--all"]);
    assert_eq!(code, 5, "{err}");
    refused(&err, "tmp");
    survive(&files);
}

#[test]
fn rm_never_empties_a_directory_linked_as_signatures() {
    let f = file_remote(&["saxpy", "globals"]);
    ok(&f.a, &["push", "r", "--all"]);
    // `signatures/<ID>` linked to documents, one named like a signature.
    let docs = f.t.path().join("docs");
    let files = victims(&docs, &["thesis.tex", "0123456789abcdef"]);
    let id = &f.all[0];
    plant(&f.rdir.join("signatures").join(id), &docs);
    let (code, err) = fails(&f.a, &["rm", &format!("r:{id}")]);
    assert_eq!(code, 5, "{err}");
    refused(&err, &format!("signatures/{id}"));
    survive(&files);
    // One level up: `signatures` itself linked to a directory that has
    // the recording's ID as a folder of documents.
    let id = &f.all[1];
    let docs2 = f.t.path().join("docs2");
    let files = victims(
        &docs2,
        &[
            &format!("{id}/notes.txt"),
            &format!("{id}/fedcba9876543210"),
        ],
    );
    plant(&f.rdir.join("signatures"), &docs2);
    let (code, err) = fails(&f.a, &["rm", &format!("r:{id}")]);
    assert_eq!(code, 5, "{err}");
    refused(&err, "signatures");
    survive(&files);
}

#[test]
fn prune_deletes_only_its_own_objects_and_follows_no_linked_fanout() {
    let f = file_remote(&["saxpy", "globals"]);
    ok(&f.a, &["push", "r", "--all"]);
    let packs = f.rdir.join("packs");
    let free = |taken: &[String]| {
        (0..=255u8)
            .map(|b| format!("{b:02x}"))
            .rev()
            .find(|x| !packs.join(x).exists() && !taken.contains(x))
            .unwrap()
    };
    // Plain files that are not rrstore's, among its objects: left alone.
    let fan = free(&[]);
    let foreign = victims(&packs.join(&fan), &["readme.txt"]);
    let foreign2 = victims(&f.rdir.join("index"), &["notes"]);
    ok(&f.a, &["remote", "prune", "r"]);
    survive(&foreign);
    survive(&foreign2);
    // A fan-out directory linked to a directory of three files.
    let mine = f.t.path().join("mine");
    let files = victims(&mine, &["a", "b", "c"]);
    let fan2 = free(&[fan]);
    plant(&packs.join(&fan2), &mine);
    let (code, err) = fails(&f.a, &["remote", "prune", "r"]);
    assert_eq!(code, 5, "{err}");
    refused(&err, &format!("packs/{fan2}"));
    survive(&files);
    // The remote itself is intact once the link is gone.
    std::fs::remove_file(packs.join(&fan2)).unwrap();
    ok(&f.a, &["remote", "prune", "r"]);
    ok(&f.b, &["remote", "add", "r", &f.url]);
    ok(&f.b, &["pull", "r", "--all"]);
    assert_eq!(ids(&f.b, None), f.all);
}
