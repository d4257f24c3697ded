//! `unpack`, `export` and `pack` write nothing where they should not: never
//! through a symbolic link planted at an output name, never over an
//! existing file without `--force`, nothing at all when the space is
//! missing or the source fails halfway. Real binary, real fixtures.

mod store_common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use rrstore_format::archive::layout::{blocks, reseal_both};
use rrstore_format::PartRole;
use store_common::*;

const STEM: &str = "__omp_offloading_fe00_9ae056_main_l13";

fn saxpy() -> PathBuf {
    fixtures().join("llvm22-host/saxpy")
}

/// `rrstore pack` of `rec_dir` into `dir/name`.
fn pack(store: &Path, rec_dir: &Path, out: &Path) {
    ok(
        store,
        &[
            "pack",
            rec_dir.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
}

/// File names directly under `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn unpack_refuses_a_planted_symlink_and_never_writes_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let rra = tmp.path().join("saxpy.rra");
    pack(&store, &saxpy(), &rra);
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let link = out.join(format!("{STEM}.memory"));
    symlink(&victim, &link).unwrap();

    let (code, err) = fails(&store, &["unpack", s(&rra), "-o", s(&out)]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains(&format!("{STEM}.memory is a symbolic link")) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(
        names(&out),
        vec![format!("{STEM}.memory")],
        "nothing else written"
    );

    // --force replaces the link itself; its target is untouched.
    ok(&store, &["unpack", s(&rra), "-o", s(&out), "--force"]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&link).unwrap(),
        std::fs::read(saxpy().join(format!("{STEM}.memory"))).unwrap()
    );
}

#[test]
fn unpack_and_export_keep_existing_files_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let rra = tmp.path().join("saxpy.rra");
    pack(&store, &saxpy(), &rra);
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let json = out.join(format!("{STEM}.json"));
    std::fs::write(&json, b"mine").unwrap();

    let (code, err) = fails(&store, &["unpack", s(&rra), "-o", s(&out)]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&json).unwrap(), b"mine");
    assert_eq!(names(&out), vec![format!("{STEM}.json")]);
    ok(&store, &["unpack", s(&rra), "-o", s(&out), "--force"]);
    assert_eq!(
        std::fs::read(&json).unwrap(),
        std::fs::read(saxpy().join(format!("{STEM}.json"))).unwrap()
    );
    assert_eq!(names(&out).len(), 5, "{:?}", names(&out));

    // export from the store: the same rules, also for a .rra and for pack.
    ok(&store, &["import", s(&saxpy())]);
    std::fs::write(&json, b"mine").unwrap();
    let (code, err) = fails(&store, &["export", "d7e4", "-o", s(&out)]);
    assert_eq!(code, 7, "{err}");
    assert_eq!(std::fs::read(&json).unwrap(), b"mine");
    ok(&store, &["export", "d7e4", "-o", s(&out), "--force"]);
    assert_ne!(std::fs::read(&json).unwrap(), b"mine");

    let x = tmp.path().join("x.rra");
    std::fs::write(&x, b"mine").unwrap();
    let (code, err) = fails(&store, &["export", "d7e4", "-o", s(&x)]);
    assert_eq!(code, 7, "{err}");
    assert_eq!(std::fs::read(&x).unwrap(), b"mine");
    let (code, err) = fails(&store, &["pack", s(&saxpy()), "-o", s(&x)]);
    assert_eq!(code, 7, "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&x).unwrap(), b"mine");
    ok(&store, &["pack", s(&saxpy()), "-o", s(&x), "--force"]);
    assert_eq!(std::fs::read(&x).unwrap(), std::fs::read(&rra).unwrap());
    ok(&store, &["export", "d7e4", "-o", s(&x), "--force"]);
    ok(&store, &["verify"]);
    // No temporary file is left anywhere.
    for d in [tmp.path(), out.as_path()] {
        assert!(
            names(d).iter().all(|n| !n.starts_with(".rrstore-tmp")),
            "{:?}",
            names(d)
        );
    }
}

#[test]
fn export_of_several_writes_none_when_one_cannot_be_written() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(&store, &["import", s(&fixtures().join("llvm22-host"))]);
    let out = tmp.path().join("run1");
    // The last recording's directory holds a file at one of its names.
    let blocked = out.join("585f6b5c9d4c");
    std::fs::create_dir_all(&blocked).unwrap();
    let mine = blocked.join("__omp_offloading_fe00_9ae058_main_l10.image");
    std::fs::write(&mine, b"mine").unwrap();
    let (code, err) = fails(&store, &["export", "d7e4", "42ba", "585f", "-o", s(&out)]);
    assert_eq!(code, 7, "{err}");
    assert_eq!(names(&out), vec!["585f6b5c9d4c".to_string()]);
    assert_eq!(
        names(&blocked),
        vec!["__omp_offloading_fe00_9ae058_main_l10.image".to_string()]
    );
    // The README's example, once nothing is in the way.
    std::fs::remove_dir_all(&out).unwrap();
    let printed = ok(&store, &["export", "d7e4", "42ba", "585f", "-o", s(&out)]);
    assert_eq!(printed.lines().count(), 15, "{printed}");
    assert_eq!(
        names(&out),
        vec!["42ba4d73f33a", "585f6b5c9d4c", "d7e476d71ebf"]
    );
}

/// Bytes available to unprivileged users on the file system of `dir`.
fn available(dir: &Path) -> u64 {
    let o = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn unpack_checks_free_space_before_writing_a_huge_claimed_part() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // saxpy with zeroed snapshots: their chunks are one repeated chunk.
    let rec = tmp.path().join("zeros");
    copy_tree(&saxpy(), &rec);
    for ext in [".memory", ".original.output"] {
        std::fs::write(rec.join(format!("{STEM}{ext}")), vec![0u8; 2097168]).unwrap();
    }
    let rra = tmp.path().join("zeros.rra");
    pack(&store, &rec, &rra);
    let bytes = std::fs::read(&rra).unwrap();
    let (_, mut m, mut i) = blocks(&bytes).unwrap();
    let row = i.parts[0].chunks[0];
    let chunk_len = u64::from(i.chunks[row as usize].3);
    // At least 8 GiB, and more than the disk has whatever its size.
    let claim = (8u64 << 30).max(2 * available(tmp.path()));
    let n = claim.div_ceil(chunk_len);
    let len = n * chunk_len;
    for role in [PartRole::Input, PartRole::Output] {
        let k = m
            .recording
            .parts
            .iter()
            .position(|p| p.role == role)
            .unwrap();
        m.recording.parts[k].len = len;
        i.parts[k].len = len;
        i.parts[k].chunks = vec![row; n as usize];
    }
    m.recording.arena.size = len;
    // The embedded descriptor says the same (the reader refuses a manifest
    // that contradicts it), so the claim itself is what unpack must check.
    let desc = String::from_utf8(m.recording.descriptor.clone()).unwrap();
    let field = desc
        .split(',')
        .find(|f| f.contains("\"DeviceMemorySize\""))
        .unwrap()
        .to_string();
    let size = field
        .rsplit(':')
        .next()
        .unwrap()
        .trim()
        .trim_end_matches('}')
        .trim();
    let edited = field.replacen(size, &len.to_string(), 1);
    m.recording.descriptor = desc.replacen(&field, &edited, 1).into_bytes();
    let needed: u64 =
        m.recording.parts.iter().map(|p| p.len).sum::<u64>() + m.recording.descriptor.len() as u64;
    let huge = tmp.path().join("huge.rra");
    let hostile = reseal_both(&bytes, |mm, ii| (*mm, *ii) = (m, i)).unwrap();
    assert!(hostile.len() < (8 << 20), "{} bytes", hostile.len());
    std::fs::write(&huge, &hostile).unwrap();

    let out = tmp.path().join("out");
    // Should the check be missing, the file size limit stops the write at
    // 64 MiB (SIGXFSZ) instead of filling the disk.
    let o = std::process::Command::new("sh")
        .args(["-c", "ulimit -f 131072 && exec \"$0\" \"$@\""])
        .arg(bin())
        .args(["--store", s(&store), "unpack", s(&huge), "-o", s(&out)])
        .env_remove("RRSTORE_DIR")
        .output()
        .unwrap();
    let (code, err) = expect_failure(o, &["unpack"]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("not enough free space") && err.contains(&format!("need {needed} bytes")),
        "{err}"
    );
    assert!(!out.exists(), "{:?}", names(&out));
}

#[test]
fn a_source_failing_in_a_later_part_leaves_no_file_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let rra = tmp.path().join("saxpy.rra");
    pack(&store, &saxpy(), &rra);
    let mut bytes = std::fs::read(&rra).unwrap();
    let (_, m, i) = blocks(&bytes).unwrap();
    // A chunk only the image (after the .json, .memory and output) uses.
    let k = m
        .recording
        .parts
        .iter()
        .position(|p| p.role == PartRole::Image)
        .unwrap();
    let row = *i.parts[k]
        .chunks
        .iter()
        .find(|r| i.parts[..k].iter().all(|p| !p.chunks.contains(r)))
        .unwrap();
    let c = &i.chunks[row as usize];
    bytes[(c.1 + u64::from(c.2) / 2) as usize] ^= 0x40;
    let bad = tmp.path().join("bad.rra");
    std::fs::write(&bad, &bytes).unwrap();

    // Into a new directory: it is not left behind either.
    let out = tmp.path().join("new/out");
    let (code, err) = fails(&store, &["unpack", s(&bad), "-o", s(&out)]);
    assert_eq!(code, 5, "{err}");
    assert!(!tmp.path().join("new").exists());

    // Into a directory with files of its own: they alone remain.
    let out = tmp.path().join("mine");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    let (code, err) = fails(&store, &["unpack", s(&bad), "-o", s(&out)]);
    assert_eq!(code, 5, "{err}");
    assert_eq!(names(&out), vec!["notes.txt"]);
    let (code, err) = fails(
        &store,
        &["unpack", s(&bad), "-o", s(&out), "--layout", "native"],
    );
    assert_eq!(code, 5, "{err}");
    assert_eq!(names(&out), vec!["notes.txt"]);
}

#[test]
fn an_output_directory_that_is_a_link_to_a_directory_is_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let rra = tmp.path().join("saxpy.rra");
    pack(&store, &saxpy(), &rra);
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    ok(&store, &["unpack", s(&rra), "-o", s(&link)]);
    assert_eq!(names(&real).len(), 5);
    // A link to a file where a directory is needed is refused.
    let file_link = tmp.path().join("file-link");
    symlink(&rra, &file_link).unwrap();
    let (code, err) = fails(&store, &["unpack", s(&rra), "-o", s(&file_link)]);
    assert_eq!(code, 7, "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
}

/// A saxpy-layout LLVM recording in `dir` whose snapshot is `size` bytes of
/// random data (incompressible: the archive is as big).
fn big_recording(dir: &Path, size: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for ext in ["image", "globals"] {
        let name = format!("{STEM}.{ext}");
        std::fs::copy(saxpy().join(&name), dir.join(&name)).unwrap();
    }
    let json = std::fs::read_to_string(saxpy().join(format!("{STEM}.json"))).unwrap();
    let json = json.replace(
        "\"DeviceMemorySize\":2097168",
        &format!("\"DeviceMemorySize\":{size}"),
    );
    std::fs::write(dir.join(format!("{STEM}.json")), json).unwrap();
    let data = rrstore_tests::XorShift::new(0x9e37_79b9_7f4a_7c15).words(size);
    std::fs::write(dir.join(format!("{STEM}.memory")), data).unwrap();
}

fn temporaries(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".rrstore-tmp-"))
        .collect()
}

use rrstore_tests::temp_name_host as host;

#[test]
fn the_next_unpack_or_export_removes_what_a_killed_one_left() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let rec = tmp.path().join("big");
    big_recording(&rec, 256 << 20);
    let rra = tmp.path().join("big.rra");
    pack(&store, &rec, &rra);
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();

    // SIGKILL an unpack once its temporary snapshot file has data in it.
    // The unpack runs at the lowest priority so that this thread sees the
    // file early; on a busy machine it can still finish first, so it is
    // tried again (from a clean directory) a few times.
    let has_data = |n: &String| std::fs::metadata(out.join(n)).is_ok_and(|m| m.len() > 0);
    let mut child = None;
    for _attempt in 0..8 {
        let mut c = std::process::Command::new("nice")
            .args(["-n", "19"])
            .arg(bin())
            .args(["--store", s(&store), "unpack", s(&rra), "-o", s(&out)])
            .env_remove("RRSTORE_DIR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let killed = loop {
            if temporaries(&out).iter().any(has_data) {
                c.kill().unwrap();
                break true;
            }
            if c.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        if killed {
            child = Some(c);
            break;
        }
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::create_dir(&out).unwrap();
    }
    let mut child = child.expect("every unpack ended before it could be killed");
    assert!(!child.wait().unwrap().success());
    let left = temporaries(&out);
    assert!(!left.is_empty(), "{:?}", names(&out));
    assert!(
        left.iter()
            .all(|n| n.contains(&format!("{}.{}.", host(), child.id()))),
        "{left:?}"
    );
    assert!(names(&out).iter().all(|n| n.starts_with(".rrstore-tmp-")));
    // Others' temporary files: another host's, and a live process's (this
    // test's), whose writers may still run.
    let other = out.join(".rrstore-tmp-elsewhere.77.0");
    let live = out.join(format!(".rrstore-tmp-{}.{}.0", host(), std::process::id()));
    std::fs::write(&other, b"theirs").unwrap();
    std::fs::write(&live, b"mine").unwrap();

    let o = run(&store, &["unpack", s(&rra), "-o", s(&out)]);
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("removed {} stale temporary file(s)", left.len())),
        "{err}"
    );
    let mut kept = temporaries(&out);
    kept.sort();
    let mut expected = vec![
        other.file_name().unwrap().to_string_lossy().into_owned(),
        live.file_name().unwrap().to_string_lossy().into_owned(),
    ];
    expected.sort();
    assert_eq!(kept, expected);
    let memory = format!("{STEM}.memory");
    assert_eq!(
        std::fs::metadata(out.join(&memory)).unwrap().len(),
        256 << 20
    );
    std::fs::remove_file(out.join(&memory)).unwrap();

    // export: a stale file of a process that is gone (pid above any
    // pid_max) is removed as well.
    ok(&store, &["import", s(&saxpy())]);
    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let dead = x.join(format!(".rrstore-tmp-{}.4194999.3", host()));
    std::fs::write(&dead, b"half a snapshot").unwrap();
    let o = run(&store, &["export", "d7e4", "-o", s(&x)]);
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("removed 1 stale temporary file(s)"), "{err}");
    assert!(temporaries(&x).is_empty(), "{:?}", names(&x));
    assert_eq!(names(&x).len(), 5, "{:?}", names(&x));
}
