//! Archives whose checksums and recording ID are right but whose manifest
//! describes an impossible recording: the reader refuses each on open with
//! [`FormatError::Inconsistent`] naming the file and the field, before any
//! replay, import or unpack trusts it.

mod archive_support;

use archive_support::*;
use rrstore_format::archive::layout::{reseal_both, reseal_with, Index, Manifest};
use rrstore_format::archive::{Reader, WriteOptions};
use rrstore_format::{FormatError, Global, PartRole};

/// `tiny()` plus a 256-byte globals part.
fn with_globals() -> Vec<u8> {
    let (_, src) = tiny();
    let mut parts = src.0;
    parts.insert(2, (PartRole::Globals, noise(256, 7)));
    let (mut rec, mut src) = synthetic("tiny_kernel", parts);
    rec.globals = vec![Global {
        name: "g".into(),
        size: 16,
        data_offset: 32,
    }];
    pack(&rec, &mut src, &WriteOptions::default())
}

fn tiny_archive() -> Vec<u8> {
    let (rec, mut src) = tiny();
    pack(&rec, &mut src, &WriteOptions::default())
}

/// Write `bytes` with its manifest edited and open it: the refusal's
/// field and message.
fn refused(bytes: &[u8], edit: impl FnOnce(&mut Manifest)) -> (String, String) {
    refused_both(bytes, |m, _| edit(m))
}

/// [`refused`] with the index edited alike (the index then agrees with the
/// manifest, so only the recording's consistency can refuse it).
fn refused_both(bytes: &[u8], edit: impl FnOnce(&mut Manifest, &mut Index)) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.rra");
    std::fs::write(&path, reseal_both(bytes, edit).unwrap()).unwrap();
    match Reader::open(&path) {
        Err(e @ FormatError::Inconsistent { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("edited.rra"), "{msg}");
            let FormatError::Inconsistent { source, .. } = e else {
                unreachable!()
            };
            (source.field, msg)
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("the reader accepted an inconsistent archive"),
    }
}

#[test]
fn an_unedited_reseal_still_opens() {
    for bytes in [tiny_archive(), with_globals()] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("same.rra");
        std::fs::write(&path, reseal_with(&bytes, |_| {}).unwrap()).unwrap();
        Reader::open(&path).unwrap();
    }
}

#[test]
fn more_args_than_arg_offsets() {
    let (field, msg) = refused(&tiny_archive(), |m| {
        m.recording.args = vec![0; 100_000];
    });
    assert_eq!(field, "args");
    assert!(msg.contains("100000 argument values but 2"), "{msg}");
}

#[test]
fn no_input_part() {
    let (field, msg) = refused_both(&tiny_archive(), |m, i| {
        m.recording.parts.retain(|p| p.role != PartRole::Input);
        i.parts.retain(|p| p.role != PartRole::Input);
    });
    assert_eq!(field, "parts");
    assert!(msg.contains("no input part"), "{msg}");
}

#[test]
fn duplicate_part_role() {
    let (field, msg) = refused_both(&tiny_archive(), |m, i| {
        let image = m.recording.part(PartRole::Image).unwrap().clone();
        m.recording.parts.push(image);
        let entry = i.parts.last().unwrap().clone();
        i.parts.push(entry);
    });
    assert_eq!(field, "parts");
    assert!(msg.contains("the image part is listed twice"), "{msg}");
}

#[test]
fn parts_out_of_order() {
    let (field, _) = refused_both(&tiny_archive(), |m, i| {
        m.recording.parts.swap(0, 1);
        i.parts.swap(0, 1);
    });
    assert_eq!(field, "parts");
}

/// (In an archive the index's chunk lengths refuse this first; a
/// recording from elsewhere meets this check.)
#[test]
fn output_of_another_size() {
    let (mut rec, _) = tiny();
    rec.parts[1].len += 1;
    let e = rec.validate().unwrap_err();
    assert_eq!(e.field, "parts");
    assert!(e.message.contains("the output part has 3073 bytes"), "{e}");
}

#[test]
fn global_past_the_end_of_the_globals_part() {
    let (field, msg) = refused(&with_globals(), |m| {
        m.recording.globals[0].data_offset = 250;
    });
    assert_eq!(field, "globals[0]");
    assert!(msg.contains("outside the 256-byte globals part"), "{msg}");
    let (_, msg) = refused(&with_globals(), |m| {
        m.recording.globals[0].size = u64::MAX;
    });
    assert!(msg.contains("outside"), "{msg}");
}

#[test]
fn global_without_a_globals_part() {
    let (field, msg) = refused(&tiny_archive(), |m| {
        m.recording.globals.push(Global {
            name: "g".into(),
            size: 4,
            data_offset: 0,
        });
    });
    assert_eq!(field, "globals[0]");
    assert!(msg.contains("no globals part"), "{msg}");
}

#[test]
fn arena_size_other_than_the_input() {
    let (field, _) = refused(&tiny_archive(), |m| m.recording.arena.size = 1 << 33);
    assert_eq!(field, "arena.size");
}

#[test]
fn descriptor_contradicting_the_manifest() {
    // The case: `unpack` would write a .json saying 64 bytes beside
    // a .memory of the real size.
    let (field, msg) = refused(&tiny_archive(), |m| {
        let d = String::from_utf8(m.recording.descriptor.clone()).unwrap();
        m.recording.descriptor = d
            .replace("\"DeviceMemorySize\":3072", "\"DeviceMemorySize\":64")
            .into_bytes();
    });
    assert_eq!(field, "descriptor.DeviceMemorySize");
    assert!(msg.contains("says 64 but the recording says 3072"), "{msg}");
    let (field, _) = refused(&tiny_archive(), |m| m.recording.kernel = "other".into());
    assert_eq!(field, "descriptor.Name");
    let (field, _) = refused(&tiny_archive(), |m| m.recording.args[1] = 8192);
    assert_eq!(field, "descriptor.ArgPtrs");
    let (field, _) = refused(&tiny_archive(), |m| {
        m.recording.descriptor = b"[1]".to_vec()
    });
    assert_eq!(field, "descriptor");
}

#[test]
fn every_fixture_is_consistent() {
    for json in fixtures() {
        let rec = rrstore_format::llvm::load_unhashed(&json)
            .unwrap()
            .recording;
        rec.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", json.display()));
    }
}

/// A stored launch environment ends up in the replay runner's
/// environment: an archive (checksums and ID resealed) that smuggles a
/// loader variable into it, or an unsorted one, is refused on open.
#[test]
fn an_environment_with_anything_but_launch_settings() {
    let (field, msg) = refused(&tiny_archive(), |m| {
        m.recording.environment = Some(vec![
            ("LD_PRELOAD".into(), "/tmp/evil.so".into()),
            ("OMP_NUM_THREADS".into(), "2".into()),
        ]);
    });
    assert_eq!(field, "environment");
    assert!(
        msg.contains("`LD_PRELOAD` is not an OpenMP launch setting"),
        "{msg}"
    );
    let (field, _) = refused(&tiny_archive(), |m| {
        m.recording.environment = Some(vec![
            ("OMP_SCHEDULE".into(), "static".into()),
            ("OMP_NUM_THREADS".into(), "2".into()),
        ]);
    });
    assert_eq!(field, "environment");
    // A valid one opens.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("env.rra");
    let bytes = reseal_with(&tiny_archive(), |m| {
        m.recording.environment = Some(vec![("OMP_NUM_THREADS".into(), "2".into())]);
    })
    .unwrap();
    std::fs::write(&path, bytes).unwrap();
    let r = Reader::open(&path).unwrap();
    assert_eq!(
        r.recording().environment,
        Some(vec![("OMP_NUM_THREADS".into(), "2".into())])
    );
}
